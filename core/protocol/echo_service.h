// A tiny ping protocol written once against the ports and run on both runtimes:
// the proof that core code does not care which ground it stands on.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "core/protocol/framed_conn.h"
#include "core/runtime/runtime.h"

namespace rcxl::protocol {

// Answers {"op":"ping","id":N,"data":X} with {"id":N,"ok":true,"data":X};
// anything else with bad_request. Bad frames get bad_frame and a close.
class EchoServer {
 public:
  EchoServer(runtime::Runtime& rt, runtime::Strand& strand) : rt_(rt), strand_(strand) {}
  ~EchoServer();
  Result<runtime::Address> start(const runtime::Address& address);
  void stop();
  std::size_t connections() const { return conns_.size(); }
  std::uint64_t closed_with_bad_frame() const { return bad_frames_; }

 private:
  runtime::Runtime& rt_;
  runtime::Strand& strand_;
  std::unique_ptr<runtime::Listener> listener_;
  std::map<std::uint64_t, std::shared_ptr<FramedConn>> conns_;
  std::uint64_t bad_frames_ = 0;
};

// Sends `count` pings one after another and reports the echoed payloads.
class EchoClient {
 public:
  using Done = std::function<void(Result<std::vector<std::string>> echoes)>;
  EchoClient(runtime::Runtime& rt, runtime::Strand& strand) : rt_(rt), strand_(strand) {}
  ~EchoClient();
  void run(const runtime::Address& server, int count, Done done);

 private:
  void send_next();
  void finish(Result<std::vector<std::string>> result);

  runtime::Runtime& rt_;
  runtime::Strand& strand_;
  std::shared_ptr<FramedConn> conn_;
  int count_ = 0;
  std::vector<std::string> echoes_;
  Done done_;
};

}  // namespace rcxl::protocol
