// FramedConn over a scripted Conn: what reaches the owner, and what is parsed.
#include "core/protocol/framed_conn.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "backends/sim/sim_world.h"

namespace rcxl::protocol {
namespace {

// A Conn whose bytes the test hands in.
class ScriptedConn : public runtime::Conn {
 public:
  std::uint64_t id() const override { return 1; }
  runtime::Address peer() const override { return {"peer", 1}; }
  runtime::Address local() const override { return {"local", 1}; }
  void start(runtime::Strand&, DataHandler on_data, CloseHandler on_close) override {
    on_data_ = std::move(on_data);
    on_close_ = std::move(on_close);
  }
  void set_input_end_handler(InputEndHandler) override {}
  void send(std::string bytes) override { sent.push_back(std::move(bytes)); }
  void close() override { closed = true; }
  void abort() override { closed = true; }
  void set_reading(bool) override {}
  void deliver(const std::string& bytes) { on_data_(bytes); }

  std::vector<std::string> sent;
  bool closed = false;

 private:
  DataHandler on_data_;
  CloseHandler on_close_;
};

// SPEC R1.3: a refused first frame closes the connection, and the frames that
// came in the same read behind it are neither delivered nor parsed (a peer
// sent 8 bytes and then 1 MiB of `{}` in one write, so each refused
// connection still built a ~30 MB JSON tree).
TEST(FramedConn, R1_3_NoFrameIsParsedAfterTheOwnerClosed) {
  sim::SimWorld world(1);
  auto strand = world.add_node("n").make_strand("s");
  auto raw = std::make_shared<ScriptedConn>();
  auto conn = FramedConn::Make(raw);
  int delivered = 0;
  int parsed_after_close = 0;
  conn->set_frame_filter([&](std::string&) {
    if (raw->closed) ++parsed_after_close;
    return false;
  });
  conn->start(
      *strand,
      [&](Json) {
        ++delivered;
        conn->close();  // the owner refuses the first frame
      },
      [](const Status&) {});
  raw->deliver(encode_frame("{}") + encode_frame("{\"op\":\"x\"}") + encode_frame("{}"));
  EXPECT_EQ(delivered, 1);
  EXPECT_EQ(parsed_after_close, 0);
  raw->deliver(encode_frame("{}"));  // bytes read after the close, too
  EXPECT_EQ(delivered, 1);
  EXPECT_EQ(parsed_after_close, 0);
}

}  // namespace
}  // namespace rcxl::protocol
