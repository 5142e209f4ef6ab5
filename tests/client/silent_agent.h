// An agent at silent:7000 that answers hellos only (under a given boot, as
// late as asked) and keeps every message it got: hung agents, slow hellos.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "core/protocol/framed_conn.h"
#include "tests/client/client_rig.h"

namespace rcxl::client::testing {

struct SilentAgent {
  // It answers hellos only (under `boot`, `hello_delay` late) and keeps what it got.
  SilentAgent(ClientRig& rig, Json actions = Json::array({"write_wait"}), std::string boot = "b",
              runtime::Duration hello_delay = {})
      : node(rig.world.add_node("silent")), strand(node.make_strand("s")) {
    auto l = node.transport().listen(
        {"silent", 7000}, *strand, [this, actions, boot, hello_delay](auto raw) {
          auto conn = protocol::FramedConn::Make(std::move(raw));
          conns.push_back(conn);
          // A weak capture: the handler lives in the conn (a shared_ptr would leak both).
          conn->start(
              *strand,
              [this, weak = std::weak_ptr<protocol::FramedConn>(conn), actions, boot,
               hello_delay](Json m) {
                received.push_back(m);
                if (m.value("op", "") != "hello") return;  // silence
                Json reply = {{"id", m["id"]},
                              {"ok", true},
                              {"boot", boot},
                              {"conn", 1},
                              {"region_extension", {{"version", 1}, {"actions", actions}}}};
                strand->post_after(hello_delay, [weak, reply] {
                  if (auto conn = weak.lock()) conn->send(reply);
                });
              },
              [](const Status&) {});
          conn->send({{"op", "greeting"}, {"version", 1}, {"challenge", std::string(64, 'a')}});
        });
    listener = std::move(l).value();
  }
  sim::SimNode& node;
  std::unique_ptr<runtime::Strand> strand;
  std::unique_ptr<runtime::Listener> listener;
  std::vector<std::shared_ptr<protocol::FramedConn>> conns;
  std::vector<Json> received;
};

}  // namespace rcxl::client::testing
