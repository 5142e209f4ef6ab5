// Framed JSON (PROTOCOL.md) over a plain blocking TCP socket, for tests that
// drive a real agent (a process, or an Agent on the thread runtime).
#pragma once

#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "core/protocol/frame_codec.h"

namespace rcxl::testing {

using Json = nlohmann::json;

// Framed JSON over a plain TCP socket.
class Wire {
 public:
  explicit Wire(int port) {
    fd_ = socket(AF_INET, SOCK_STREAM, 0);
    sockaddr_in addr{};
    addr.sin_family = AF_INET;
    addr.sin_port = htons(static_cast<std::uint16_t>(port));
    addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    connected_ = connect(fd_, reinterpret_cast<sockaddr*>(&addr), sizeof addr) == 0;
  }
  ~Wire() { close(fd_); }
  bool connected() const { return connected_; }
  int fd() const { return fd_; }
  void send(const Json& m) {
    const std::string frame = rcxl::protocol::encode_frame(m.dump());
    ASSERT_EQ(::send(fd_, frame.data(), frame.size(), MSG_NOSIGNAL),
              static_cast<ssize_t>(frame.size()));
  }
  Json next() {
    while (frames_.empty()) {
      pollfd p{fd_, POLLIN, 0};
      if (poll(&p, 1, 10000) <= 0) return Json();
      char buf[65536];
      const ssize_t n = recv(fd_, buf, sizeof buf, 0);
      if (n <= 0) return Json();
      if (!decoder_.feed(std::string_view(buf, n), frames_).ok()) return Json();
    }
    Json m = Json::parse(frames_.front());
    frames_.erase(frames_.begin());
    return m;
  }
  Json call(const Json& m) {
    send(m);
    return next();
  }
  // Ends this side's sending (TCP FIN) and keeps reading: a half-close.
  void half_close() { ::shutdown(fd_, SHUT_WR); }
  // True when the server ended the stream (EOF) with no frame left unread.
  bool at_end() {
    if (!frames_.empty()) return false;
    pollfd p{fd_, POLLIN, 0};
    if (poll(&p, 1, 10000) <= 0) return false;
    char buf[256];
    return recv(fd_, buf, sizeof buf, 0) == 0;
  }

 private:
  int fd_ = -1;
  bool connected_ = false;
  rcxl::protocol::FrameDecoder decoder_;
  std::vector<std::string> frames_;
};

}  // namespace rcxl::testing
