#include "core/client/agent_hello.h"

namespace rcxl::client {

AgentHello parse_agent_hello(const nlohmann::json& reply) {
  AgentHello hello;
  if (reply.contains("boot") && reply["boot"].is_string()) hello.boot = reply["boot"];
  if (auto t = reply.find("alloc_tokens"); t != reply.end() && t->is_boolean()) {
    hello.alloc_tokens = t->get<bool>();
  }
  if (auto p = reply.find("rdma_connect_proof"); p != reply.end() && p->is_boolean()) {
    hello.rdma_connect_proof = p->get<bool>();
  }
  if (!reply.contains("region_extension")) return hello;
  const auto& ext = reply["region_extension"];
  if (!ext.is_object() || !ext.contains("version") || !ext["version"].is_number_integer() ||
      ext["version"].get<std::int64_t>() != 1 || !ext.contains("actions") ||
      !ext["actions"].is_array()) {
    return hello;
  }
  std::set<std::string> actions;
  for (const auto& a : ext["actions"]) {
    if (!a.is_string()) return hello;  // malformed: no hints at all
    actions.insert(a.get<std::string>());
  }
  hello.actions = std::move(actions);
  return hello;
}

bool take_hello(AgentHello& held, AgentHello heard, const std::string& boot_at_connect) {
  const bool moved = held.boot != boot_at_connect;
  if (moved) heard.boot = held.boot;
  held = std::move(heard);
  return !moved;
}

}  // namespace rcxl::client
