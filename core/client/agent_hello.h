// What a client keeps from an agent's hello (SPEC R1.4): its boot and the
// advertised hint actions. A region_extension that is absent, of another
// version or malformed means no actions: no hints to that agent.
#pragma once

#include <nlohmann/json.hpp>
#include <set>
#include <string>

namespace rcxl::client {

struct AgentHello {
  std::string boot;
  std::set<std::string> actions;
  // The agent keeps alloc tokens (an optional hello field rcxl adds to v1).
  bool alloc_tokens = false;
  // The agent takes a queue pair only with a connect proof (--rdma-auth proof):
  // then the proof of this hello's control connection, made from its challenge.
  bool rdma_connect_proof = false;
  std::string connect_proof;
  bool advertises(const std::string& action) const { return actions.count(action) > 0; }
};

AgentHello parse_agent_hello(const nlohmann::json& reply);

}  // namespace rcxl::client
