// The directory as a network service (docs/directory.md): PROTOCOL.md framing,
// greeting + HMAC hello and error shape, the ops of Directory. One strand.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <string>

#include "core/directory/directory.h"
#include "core/protocol/framed_conn.h"
#include "core/runtime/logger.h"
#include "core/runtime/random.h"
#include "core/runtime/runtime.h"

namespace rcxl::directory {

inline constexpr std::size_t kMaxKeysPerRequest = 65536;

struct DirectoryServerOptions {
  DirectoryOptions directory;
  std::optional<std::string> secret;  // nullopt: --auth none (any or no auth)
  std::uint32_t max_frame_bytes = protocol::kDefaultMaxFrameBytes;
  // A connection without a successful hello by then is closed (zero: never).
  runtime::Duration hello_timeout = std::chrono::seconds(10);
  // More connections than this are closed at once (0 = no limit), so a flood
  // cannot use up the process's file descriptors (R7, as the agent).
  std::uint32_t max_connections = 0;
  // Answer a register with `registered` only, as directories before session
  // 19 did (tests of a writer's fallback: it then probes refused keys).
  bool booleans_only_register_reply = false;
};

class DirectoryServer {
 public:
  DirectoryServer(runtime::Runtime& rt, runtime::Strand& strand, DirectoryServerOptions options);
  ~DirectoryServer();
  Result<runtime::Address> start(const runtime::Address& address);
  void stop();

  Directory& directory() { return directory_; }
  std::size_t connections() const { return conns_.size(); }
  // What the `stats` op answers (keys, leases, evictions, reclaimable pages).
  protocol::Json stats() const;

 private:
  struct Session {
    std::shared_ptr<protocol::FramedConn> conn;
    std::string challenge;
    bool authenticated = false;
    bool closing = false;  // closed by us: later frames are not served
    std::optional<runtime::TimerId> hello_deadline;
  };
  void end_session(std::uint64_t conn_id);
  void close_session(Session& session);
  void on_accept(std::shared_ptr<runtime::Conn> raw);
  void on_message(std::uint64_t conn_id, const protocol::Json& message);
  void handle_hello(Session& session, const protocol::Json& message);
  Result<protocol::Json> handle_op(const std::string& op, const protocol::Json& message);
  // How many of `keys` a lookup or probe may take so that its hits, a
  // location each, fit one reply frame.
  std::size_t keys_whose_hits_fit(const std::vector<std::string>& keys) const;

  runtime::Runtime& rt_;
  runtime::Strand& strand_;
  DirectoryServerOptions options_;
  Directory directory_;
  std::unique_ptr<runtime::RandomSource> random_;
  std::unique_ptr<runtime::Listener> listener_;
  std::map<std::uint64_t, Session> conns_;
  runtime::Logger log_;
};

}  // namespace rcxl::directory
