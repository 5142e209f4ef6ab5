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

// Takes a hello reply into `held`, the hello its connection kept. R6.4: boot
// news that came while the hello was out (a map reply; two resets in one
// round trip) may be newer than the hello's, so a belief that moved since the
// connect began (`boot_at_connect`) stays. True when the hello's boot is news
// that follows that belief, to be told to the rest of the client.
bool take_hello(AgentHello& held, AgentHello heard, const std::string& boot_at_connect);

}  // namespace rcxl::client
