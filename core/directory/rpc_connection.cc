#include "core/directory/rpc_connection.h"

#include <utility>

#include "core/protocol/auth.h"
#include "core/protocol/reply_fields.h"

namespace rcxl::directory {

std::shared_ptr<RpcConnection> RpcConnection::Make(runtime::Runtime& rt, runtime::Strand& strand,
                                                   Options options) {
  return std::shared_ptr<RpcConnection>(new RpcConnection(rt, strand, std::move(options)));
}

RpcConnection::~RpcConnection() {
  if (conn_) conn_->abort();
  for (auto& [generation, d] : draining_) d.conn->abort();
}

Status reply_status(const Json& reply) {
  if (!reply.is_object()) return Error(ErrorCode::kInternal, "reply is not an object");
  if (protocol::bool_field(reply, "ok").value_or(false)) return {};
  const Json error = reply.contains("error") ? reply["error"] : Json::object();
  const std::string name = protocol::string_field(error, "code").value_or("");
  const std::string message = protocol::string_field(error, "message").value_or("");
  auto code = error_code_from_name(name);
  // A refusal coded "ok" is no refusal the contract knows: never a success.
  if (!code || *code == ErrorCode::kOk) {
    return Error(ErrorCode::kInternal,
                 "reply neither ok nor a coded error: " + reply.dump().substr(0, 200));
  }
  // A local code (closed, unavailable, ...) from a peer would read as this
  // side's own failure: a hint refused "closed" was forgotten, never ended.
  if (!is_wire_code(*code)) {
    return Error(ErrorCode::kInternal,
                 "reply coded '" + name + "', which PROTOCOL.md has no peer send: " + message);
  }
  return Error(*code, message.empty() ? name : message);
}

void RpcConnection::ensure_ready(ReadyHandler done) {
  if (state_ == State::kReady) return done(Status{});
  waiters_.push_back(std::move(done));
  if (state_ == State::kIdle) start_connect();
}

void RpcConnection::call(Json request, ReplyHandler done, runtime::Duration extra_timeout,
                         LateReplyHandler late) {
  if (state_ == State::kReady) {
    return send_now(std::move(request), std::move(done), extra_timeout, std::move(late));
  }
  queued_.push_back({std::move(request), std::move(done), extra_timeout, std::move(late)});
  if (state_ == State::kIdle) start_connect();
}

void RpcConnection::start_connect() {
  state_ = State::kConnecting;
  if (on_connecting_) on_connecting_();
  greeted_ = false;
  const std::uint64_t generation = ++generation_;
  std::weak_ptr<RpcConnection> weak = weak_from_this();
  // Connect, greeting and hello reply come in time, or every call waiting on
  // them fails: a peer that is unreachable (a TCP connect may take far longer)
  // or accepts and says nothing (hung, stopped) must not hold calls for good.
  handshake_timer_ = strand_.post_after(options_.reply_timeout, [weak, generation] {
    auto s = weak.lock();
    if (!s || generation != s->generation_ || s->state_ != State::kConnecting) return;
    s->handshake_timer_.reset();
    s->fail_all(Error(ErrorCode::kTimeout, "no connection, greeting and hello reply from " +
                                               s->options_.address.ToString() + " in time"));
  });
  rt_.transport().connect(
      options_.address, strand_, [weak, generation](Result<std::shared_ptr<runtime::Conn>> raw) {
        auto self = weak.lock();
        if (!self || generation != self->generation_) {
          // Given up on (timed out, closed): the peer must not keep it open.
          if (raw.ok()) (*raw)->abort();
          return;
        }
        if (!raw.ok()) {
          return self->fail_all(Error(
              ErrorCode::kUnavailable,
              "cannot reach " + self->options_.address.ToString() + ": " + raw.status().message()));
        }
        self->conn_ =
            protocol::FramedConn::Make(std::move(raw).value(), self->options_.max_frame_bytes);
        // A bad frame from the server is not answered: an error object sent back
        // would read there as a request without `op`.
        self->conn_->set_bad_frame_handler([weak, generation](const Status& reason) {
          auto s = weak.lock();
          if (!s) return;
          if (generation != s->generation_) return s->end_draining(generation);
          s->fail_all(Error(ErrorCode::kClosed, "bad reply frame: " + reason.message()));
        });
        self->conn_->start(
            self->strand_,
            [weak, generation](Json message) {
              if (auto s = weak.lock()) s->on_message(generation, std::move(message));
            },
            [weak, generation](const Status& reason) {
              auto s = weak.lock();
              if (!s) return;
              if (generation != s->generation_) return s->end_draining(generation);
              s->fail_all(Error(ErrorCode::kClosed, "connection closed: " + reason.message()));
            });
      });
}

void RpcConnection::on_message(std::uint64_t generation, Json message) {
  if (generation != generation_) return on_draining_message(generation, message);
  ++messages_heard_;
  if (!greeted_) return on_greeting(message);
  if (!message.contains("id") || !message["id"].is_number_unsigned()) {
    // A bad_frame reply has no id: the peer closes next.
    return fail_all(reply_status(message).ok() ? Error(ErrorCode::kInternal, "reply without id")
                                               : reply_status(message));
  }
  const std::uint64_t id = message["id"].get<std::uint64_t>();
  if (state_ == State::kConnecting && id == hello_id_) {
    const Status status = reply_status(message);
    if (!status.ok()) return fail_all(status);
    return become_ready(message);
  }
  auto it = pending_.find(id);
  if (it == pending_.end()) {
    // Timed out earlier; its caller may still want to undo what it did.
    auto late = late_.find(id);
    if (late == late_.end()) return;
    LateReplyHandler handler = std::move(late->second);
    late_.erase(late);
    return handler(message);
  }
  Pending pending = std::move(it->second);
  pending_.erase(it);
  strand_.cancel(pending.timer);
  pending.done(reply_status(message), message);
}

void RpcConnection::on_greeting(const Json& message) {
  if (protocol::string_field(message, "op") != "greeting" ||
      !protocol::string_field(message, "challenge")) {
    return fail_all(Error(ErrorCode::kBadFrame, "expected a greeting, got " + message.dump()));
  }
  greeted_ = true;
  challenge_ = message["challenge"].get<std::string>();
  hello_id_ = next_id_++;
  Json hello = {
      {"op", "hello"}, {"id", hello_id_}, {"version", 1}, {"client", options_.client_name}};
  if (!options_.secret.empty()) {
    hello["auth"] =
        protocol::hmac_sha256_hex(options_.secret, message["challenge"].get<std::string>());
  }
  conn_->send(hello);
}

void RpcConnection::become_ready(const Json& hello) {
  state_ = State::kReady;
  if (handshake_timer_) strand_.cancel(*std::exchange(handshake_timer_, std::nullopt));
  hello_reply_ = hello;
  if (on_hello_) on_hello_(hello);
  auto waiters = std::move(waiters_);
  waiters_.clear();
  auto queued = std::move(queued_);
  queued_.clear();
  for (auto& q : queued) {
    send_now(std::move(q.request), std::move(q.done), q.extra, std::move(q.late));
  }
  for (auto& w : waiters) w(Status{});
}

void RpcConnection::send_now(Json request, ReplyHandler done, runtime::Duration extra,
                             LateReplyHandler late) {
  const std::uint64_t id = next_id_++;
  request["id"] = id;
  std::weak_ptr<RpcConnection> weak = weak_from_this();
  Pending pending{std::move(done), std::move(late), 0, messages_heard_};
  pending.timer = strand_.post_after(options_.reply_timeout + extra, [weak, id] {
    auto self = weak.lock();
    if (!self) return;
    auto it = self->pending_.find(id);
    if (it == self->pending_.end()) return;
    auto handler = std::move(it->second.done);
    auto late = std::move(it->second.late);
    const bool silent = it->second.heard_before == self->messages_heard_;
    self->pending_.erase(it);
    if (late) {
      if (self->late_.size() >= kMaxLateCalls) self->late_.erase(self->late_.begin());
      self->late_[id] = std::move(late);
    }
    const std::string peer = self->options_.address.ToString();
    // Not a word since this call went out: the peer is gone or hung. The
    // connection goes, and the next call connects anew.
    if (silent) {
      self->give_up(
          Error(ErrorCode::kTimeout, "no word from " + peer + " in time: connection given up"));
    }
    handler(Error(ErrorCode::kTimeout, "no reply from " + peer), Json());
  });
  pending_[id] = std::move(pending);
  ++calls_sent_;
  conn_->send(request);
}

void RpcConnection::fail_all(const Status& status) {
  ++generation_;
  if (handshake_timer_) strand_.cancel(*std::exchange(handshake_timer_, std::nullopt));
  state_ = State::kIdle;
  if (conn_) conn_->abort();
  conn_.reset();
  auto pending = std::move(pending_);
  pending_.clear();
  late_.clear();  // their replies can no longer come
  auto queued = std::move(queued_);
  queued_.clear();
  auto waiters = std::move(waiters_);
  waiters_.clear();
  for (auto& [id, p] : pending) {
    strand_.cancel(p.timer);
    p.done(status, Json());
  }
  for (auto& q : queued) q.done(status, Json());
  for (auto& w : waiters) w(status);
}

void RpcConnection::give_up(const Status& status) {
  // The calls still pending are failed below; their late replies are wanted too.
  for (auto& [id, p] : pending_) {
    if (p.late && late_.size() < kMaxLateCalls) late_[id] = std::move(p.late);
  }
  if (conn_ && !late_.empty()) {
    if (draining_.size() >= kMaxDraining) end_draining(draining_.begin()->first);
    const std::uint64_t generation = generation_;
    std::weak_ptr<RpcConnection> weak = weak_from_this();
    Draining& d = draining_[generation];
    d.conn = std::move(conn_);
    d.late = std::move(late_);
    late_.clear();
    d.timer =
        strand_.post_after(options_.reply_timeout * kLateReplyGraceTimeouts, [weak, generation] {
          if (auto s = weak.lock()) s->end_draining(generation);
        });
  }
  fail_all(status);
}

void RpcConnection::on_draining_message(std::uint64_t generation, const Json& message) {
  auto d = draining_.find(generation);
  if (d == draining_.end()) return;
  if (!message.contains("id") || !message["id"].is_number_unsigned()) return;
  auto late = d->second.late.find(message["id"].get<std::uint64_t>());
  if (late == d->second.late.end()) return;
  LateReplyHandler handler = std::move(late->second);
  d->second.late.erase(late);
  if (d->second.late.empty()) end_draining(generation);
  handler(message);
}

void RpcConnection::end_draining(std::uint64_t generation) {
  auto d = draining_.find(generation);
  if (d == draining_.end()) return;
  Draining ended = std::move(d->second);
  draining_.erase(d);  // first: the abort may report the close here again
  strand_.cancel(ended.timer);
  ended.conn->abort();
}

void RpcConnection::start_over(const Status& why) {
  if (state_ == State::kReady) give_up(why);
}

void RpcConnection::close() {
  while (!draining_.empty()) end_draining(draining_.begin()->first);
  fail_all(Error(ErrorCode::kClosed, "closed by the client"));
}

}  // namespace rcxl::directory
