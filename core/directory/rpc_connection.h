// A client's control connection (PROTOCOL.md): connect, answer the greeting
// with an HMAC hello, then requests matched to replies by id, each with a
// reply timeout. Strand-confined: call every method on the strand given at
// Make; callbacks run there. Reconnects on the next call after a close.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "core/protocol/framed_conn.h"
#include "core/runtime/runtime.h"

namespace rcxl::directory {

using Json = nlohmann::json;

class RpcConnection : public std::enable_shared_from_this<RpcConnection> {
 public:
  struct Options {
    runtime::Address address;
    std::string secret;  // empty: no auth field (a peer started with --auth none)
    std::string client_name = "rcxl";
    runtime::Duration reply_timeout = std::chrono::seconds(1);
    std::uint32_t max_frame_bytes = protocol::kDefaultMaxFrameBytes;
  };
  // status: ok, a wire error (code from the reply) or a local one (timeout,
  // closed, unavailable). reply: the whole reply object (null when local).
  using ReplyHandler = std::function<void(const Status& status, const Json& reply)>;
  using ReadyHandler = std::function<void(const Status& status)>;
  using HelloHandler = std::function<void(const Json& hello_reply)>;
  // The reply of a call that timed out while the connection stayed open.
  using LateReplyHandler = std::function<void(const Json& reply)>;

  static std::shared_ptr<RpcConnection> Make(runtime::Runtime& rt, runtime::Strand& strand,
                                             Options options);
  ~RpcConnection();

  // Called with every successful hello reply (a reconnect brings a new one).
  void set_on_hello(HelloHandler handler) { on_hello_ = std::move(handler); }
  // Called as each connect starts: what the owner knew then is what its hello
  // reply can be compared with (news that came meanwhile may be newer).
  void set_on_connecting(std::function<void()> handler) { on_connecting_ = std::move(handler); }
  // Connects and says hello if not yet; `done` once ready or failed.
  void ensure_ready(ReadyHandler done);
  // Sends `request` (its id is set here) once ready. The reply must come
  // within reply_timeout + extra_timeout. If it comes later, `late` gets it
  // (a call that changed the peer's state can undo it there): on the same
  // connection, or on one given up for silence, which is kept that long
  // (kLateReplyGraceTimeouts reply timeouts) for late replies only. A closed
  // connection gets none.
  void call(Json request, ReplyHandler done, runtime::Duration extra_timeout = {},
            LateReplyHandler late = nullptr);
  bool ready() const { return state_ == State::kReady; }
  const Json& hello_reply() const { return hello_reply_; }
  // The challenge of the current connection's greeting (empty before one).
  const std::string& challenge() const { return challenge_; }
  const runtime::Address& address() const { return options_.address; }
  std::uint64_t calls_sent() const { return calls_sent_; }
  void close();
  // The peer no longer knows this connection (an RDMA connect with its proof
  // was refused: the peer restarted, or the path died unseen): the next call
  // connects anew. Calls out fail with `why`; their late replies are still read.
  void start_over(const Status& why);

 private:
  enum class State { kIdle, kConnecting, kReady };
  struct Pending {
    ReplyHandler done;
    LateReplyHandler late;
    runtime::TimerId timer = 0;
    std::uint64_t heard_before = 0;  // messages_heard_ when it was sent
  };
  struct Queued {
    Json request;
    ReplyHandler done;
    runtime::Duration extra;
    LateReplyHandler late;
  };
  // Late handlers kept per connection: a peer that answers nothing in time
  // must not grow this without bound (the oldest go first).
  static constexpr std::size_t kMaxLateCalls = 1024;
  // A connection given up for silence, kept only for its calls' late replies.
  struct Draining {
    std::shared_ptr<protocol::FramedConn> conn;
    std::map<std::uint64_t, LateReplyHandler> late;
    runtime::TimerId timer = 0;
  };
  // How long (in reply timeouts) and how many given-up connections are kept.
  static constexpr int kLateReplyGraceTimeouts = 10;
  static constexpr std::size_t kMaxDraining = 16;

  RpcConnection(runtime::Runtime& rt, runtime::Strand& strand, Options options)
      : rt_(rt), strand_(strand), options_(std::move(options)) {}
  void start_connect();
  void on_message(std::uint64_t generation, Json message);
  void on_greeting(const Json& message);
  void become_ready(const Json& hello);
  void fail_all(const Status& status);
  // fail_all for a silent peer: a connection with calls that want their late
  // replies is kept (reading only) instead of aborted.
  void give_up(const Status& status);
  void on_draining_message(std::uint64_t generation, const Json& message);
  void end_draining(std::uint64_t generation);
  void send_now(Json request, ReplyHandler done, runtime::Duration extra, LateReplyHandler late);

  runtime::Runtime& rt_;
  runtime::Strand& strand_;
  Options options_;
  State state_ = State::kIdle;
  std::uint64_t generation_ = 0;                     // events of an older connection are ignored
  std::optional<runtime::TimerId> handshake_timer_;  // until the hello reply
  std::shared_ptr<protocol::FramedConn> conn_;
  bool greeted_ = false;
  std::uint64_t hello_id_ = 0;
  Json hello_reply_;
  std::string challenge_;
  HelloHandler on_hello_;
  std::function<void()> on_connecting_;
  std::vector<ReadyHandler> waiters_;
  std::vector<Queued> queued_;
  std::map<std::uint64_t, Pending> pending_;
  std::map<std::uint64_t, LateReplyHandler> late_;  // timed out, this connection still open
  std::map<std::uint64_t, Draining> draining_;      // by the generation they had
  std::uint64_t next_id_ = 1;
  std::uint64_t calls_sent_ = 0;
  // Messages from the peer on this connection: a call that times out with
  // none since it was sent finds the peer silent, and the connection is
  // given up (a dead host leaves TCP open for many minutes).
  std::uint64_t messages_heard_ = 0;
};

// Turns a reply object into its Status (ok, or the wire error's code).
Status reply_status(const Json& reply);

}  // namespace rcxl::directory
