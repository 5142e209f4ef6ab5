// A Conn that speaks JSON frames: decodes, refuses bad frames with `bad_frame`
// and closes (PROTOCOL.md "Framing"), encodes replies.
#pragma once

#include <atomic>
#include <functional>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>

#include "core/protocol/frame_codec.h"
#include "core/runtime/status.h"
#include "core/runtime/strand.h"
#include "core/runtime/transport.h"

namespace rcxl::protocol {

using Json = nlohmann::json;

class FramedConn : public std::enable_shared_from_this<FramedConn> {
 public:
  using MessageHandler = std::function<void(Json message)>;
  using CloseHandler = std::function<void(const Status& reason)>;
  // Sees each frame's text first (on the strand); returns true when it took the
  // frame, so no JSON object is built for it (the agent's hot decode path).
  using FrameFilter = std::function<bool(std::string& frame)>;
  using BadFrameHandler = std::function<void(const Status& status)>;

  static std::shared_ptr<FramedConn> Make(std::shared_ptr<runtime::Conn> conn,
                                          std::uint32_t max_frame_bytes = kDefaultMaxFrameBytes);

  // Handlers run on `strand`. A bad frame is answered with `bad_frame`, the
  // connection closed, and on_close called with that status.
  void start(runtime::Strand& strand, MessageHandler on_message, CloseHandler on_close);
  // Optional; set before start().
  void set_frame_filter(FrameFilter filter) { frame_filter_ = std::move(filter); }
  // Optional; set before start(): a lower limit for the peer's first frame.
  void limit_first_frame(std::uint32_t max_bytes) { decoder_.limit_first_frame(max_bytes); }
  // Optional; set before start(). A bad frame stops reading and goes to this
  // handler instead of being answered at once: an owner still owing replies
  // sends them first, then the `bad_frame` reply, then closes (PROTOCOL.md:
  // every request is answered, in order).
  void set_bad_frame_handler(BadFrameHandler handler) { bad_frame_handler_ = std::move(handler); }
  void send(const Json& message);
  // On the strand. Paused, no frame is taken from the bytes read, and the
  // transport reads no more: what already arrived stays text until resumed.
  // (Pausing the transport alone let a chunk of tiny frames be parsed whole:
  // 4 MiB of `{}` frames held ~60 MB of requests.)
  void set_paused(bool paused);
  // A whole frame (or a bad length) read but not yet taken: paused, or behind
  // the one being delivered. An input end is not the end of requests then.
  bool holds_a_frame() const { return decoder_.holds_a_frame(); }
  // Close or abort: no frame read after it reaches on_message, or is parsed.
  void close();
  void abort();
  std::uint64_t id() const { return conn_->id(); }
  runtime::Address peer() const { return conn_->peer(); }
  runtime::Conn& raw() { return *conn_; }

 private:
  FramedConn(std::shared_ptr<runtime::Conn> conn, std::uint32_t max_frame_bytes)
      : conn_(std::move(conn)), decoder_(max_frame_bytes) {}
  void on_bytes(std::string_view bytes);
  void deliver_frames();
  void deliver(std::string& frame);
  void fail(const Status& status);

  std::shared_ptr<runtime::Conn> conn_;
  FrameDecoder decoder_;
  MessageHandler on_message_;
  CloseHandler on_close_;
  FrameFilter frame_filter_;
  BadFrameHandler bad_frame_handler_;
  bool failed_ = false;
  bool paused_ = false;
  bool delivering_ = false;  // deliver_frames() is on the stack
  // Closed or aborted by the owner, from any thread (the agent's destructor
  // aborts while a session strand may close): no more frames.
  std::atomic<bool> stopped_{false};
  Status close_reason_;
};

// {"id":…, "ok":false, "error":{"code":…, "message":…}}; id omitted when null.
Json error_reply(const Json& id, const Status& status);

}  // namespace rcxl::protocol
