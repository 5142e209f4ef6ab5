#include "core/protocol/framed_conn.h"

#include <vector>

#include "core/protocol/frame_json.h"

namespace rcxl::protocol {

std::shared_ptr<FramedConn> FramedConn::Make(std::shared_ptr<runtime::Conn> conn,
                                             std::uint32_t max_frame_bytes) {
  return std::shared_ptr<FramedConn>(new FramedConn(std::move(conn), max_frame_bytes));
}

void FramedConn::start(runtime::Strand& strand, MessageHandler on_message, CloseHandler on_close) {
  on_message_ = std::move(on_message);
  on_close_ = std::move(on_close);
  std::weak_ptr<FramedConn> weak = weak_from_this();
  conn_->start(
      strand,
      [weak](std::string_view bytes) {
        if (auto self = weak.lock()) self->on_bytes(bytes);
      },
      [weak](const Status& reason) {
        auto self = weak.lock();
        if (!self || !self->on_close_) return;
        auto handler = std::move(self->on_close_);
        self->on_close_ = nullptr;
        handler(self->failed_ ? self->close_reason_ : reason);
      });
}

void FramedConn::send(const Json& message) {
  // Invalid UTF-8 in a string we echo must not throw: replace it.
  conn_->send(encode_frame(message.dump(-1, ' ', false, Json::error_handler_t::replace)));
}

void FramedConn::close() {
  stopped_.store(true, std::memory_order_relaxed);
  conn_->close();
}
void FramedConn::abort() {
  stopped_.store(true, std::memory_order_relaxed);
  conn_->abort();
}

void FramedConn::fail(const Status& status) {
  if (failed_) return;
  failed_ = true;
  close_reason_ = status;
  if (bad_frame_handler_) return bad_frame_handler_(status);
  send(error_reply(Json(), status));
  conn_->close();
}

void FramedConn::set_paused(bool paused) {
  if (paused_ == paused) return;
  paused_ = paused;
  if (paused) return conn_->set_reading(false);
  deliver_frames();  // what arrived while paused, until paused again
  if (!paused_) conn_->set_reading(true);
}

void FramedConn::on_bytes(std::string_view bytes) {
  if (failed_ || stopped_.load(std::memory_order_relaxed)) return;
  decoder_.append(bytes);
  deliver_frames();
}

void FramedConn::deliver_frames() {
  if (delivering_) return;  // a handler resumed: the loop below goes on
  delivering_ = true;
  std::string frame;
  // Closed by the owner (a refused hello): the frames behind are not even
  // parsed, so a peer cannot make a refused connection build JSON trees.
  while (!paused_ && !failed_ && !stopped_.load(std::memory_order_relaxed)) {
    auto got = decoder_.next(frame);
    if (!got.ok()) {
      fail(got.status());
      break;
    }
    if (!*got) break;
    deliver(frame);
  }
  delivering_ = false;
}

void FramedConn::deliver(std::string& frame) {
  if (frame_filter_ && frame_filter_(frame)) return;
  Json message = parse_json_text(frame);
  if (message.is_discarded()) return fail(Error(ErrorCode::kBadFrame, why_not_json(frame)));
  if (!message.is_object()) return fail(Error(ErrorCode::kBadFrame, "frame is not a JSON object"));
  if (on_message_) on_message_(std::move(message));
}

Json error_reply(const Json& id, const Status& status) {
  Json reply = Json::object();
  if (!id.is_null()) reply["id"] = id;
  reply["ok"] = false;
  reply["error"] = {{"code", std::string(error_code_name(status.code()))},
                    {"message", status.message()}};
  return reply;
}

}  // namespace rcxl::protocol
