#include "core/protocol/echo_service.h"

#include "core/protocol/reply_fields.h"

namespace rcxl::protocol {

EchoServer::~EchoServer() {
  stop();
}

Result<runtime::Address> EchoServer::start(const runtime::Address& address) {
  auto listener =
      rt_.transport().listen(address, strand_, [this](std::shared_ptr<runtime::Conn> raw) {
        auto conn = FramedConn::Make(std::move(raw));
        const std::uint64_t id = conn->id();
        conns_[id] = conn;
        std::weak_ptr<FramedConn> weak = conn;
        conn->start(
            strand_,
            [weak](Json message) {
              auto self = weak.lock();
              if (!self) return;
              const Json id = message.contains("id") ? message["id"] : Json();
              if (string_field(message, "op") != "ping") {
                self->send(error_reply(id, Error(ErrorCode::kBadRequest, "unknown op")));
                return;
              }
              self->send({{"id", id}, {"ok", true}, {"data", message.value("data", Json())}});
            },
            [this, id](const Status& reason) {
              if (reason.code() == ErrorCode::kBadFrame) ++bad_frames_;
              conns_.erase(id);
            });
      });
  if (!listener.ok()) return listener.status();
  listener_ = std::move(listener).value();
  return listener_->address();
}

void EchoServer::stop() {
  if (listener_) listener_->close();
  auto conns = std::move(conns_);
  conns_.clear();
  for (auto& [id, conn] : conns) conn->abort();
}

EchoClient::~EchoClient() {
  if (conn_) conn_->abort();
}

void EchoClient::run(const runtime::Address& server, int count, Done done) {
  count_ = count;
  done_ = std::move(done);
  rt_.transport().connect(server, strand_, [this](Result<std::shared_ptr<runtime::Conn>> raw) {
    if (!raw.ok()) return finish(raw.status());
    conn_ = FramedConn::Make(std::move(raw).value());
    conn_->start(
        strand_,
        [this](Json reply) {
          auto data = string_field(reply, "data");
          if (bool_field(reply, "ok") != true || !data) {
            return finish(Error(ErrorCode::kInternal, "ping refused: " + reply.dump()));
          }
          echoes_.push_back(std::move(*data));
          send_next();
        },
        [this](const Status& reason) {
          if (static_cast<int>(echoes_.size()) < count_) finish(reason);
        });
    send_next();
  });
}

void EchoClient::send_next() {
  const int n = static_cast<int>(echoes_.size());
  if (n == count_) {
    conn_->close();
    return finish(echoes_);
  }
  conn_->send({{"op", "ping"}, {"id", n}, {"data", "ping-" + std::to_string(n)}});
}

void EchoClient::finish(Result<std::vector<std::string>> result) {
  if (!done_) return;
  auto done = std::move(done_);
  done_ = nullptr;
  done(std::move(result));
}

}  // namespace rcxl::protocol
