// FramedConn over a scripted Conn: what reaches the owner, and what is parsed.
#include "core/protocol/framed_conn.h"

#include <gtest/gtest.h>

#include <memory>
#include <string>
#include <vector>

#include "backends/sim/sim_world.h"
#include "core/protocol/frame_codec.h"
#include "core/protocol/frame_json.h"

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
  void set_reading(bool on) override { reading = on; }
  void deliver(const std::string& bytes) { on_data_(bytes); }

  std::vector<std::string> sent;
  bool closed = false;
  bool reading = true;

 private:
  DataHandler on_data_;
  CloseHandler on_close_;
};

// A FramedConn over a ScriptedConn, on a strand of its own.
struct Rig {
  sim::SimWorld world{1};
  std::unique_ptr<runtime::Strand> strand = world.add_node("n").make_strand("s");
  std::shared_ptr<ScriptedConn> raw = std::make_shared<ScriptedConn>();
  std::shared_ptr<FramedConn> conn = FramedConn::Make(raw);
};

// SPEC R1.3: a refused first frame closes the connection, and the frames that
// came in the same read behind it are neither delivered nor parsed (a peer
// sent 8 bytes and then 1 MiB of `{}` in one write, so each refused
// connection still built a ~30 MB JSON tree).
TEST(FramedConn, R1_3_NoFrameIsParsedAfterTheOwnerClosed) {
  Rig rig;
  auto& raw = rig.raw;
  auto& conn = rig.conn;
  int delivered = 0;
  int parsed_after_close = 0;
  conn->set_frame_filter([&](std::string&) {
    if (raw->closed) ++parsed_after_close;
    return false;
  });
  conn->start(
      *rig.strand,
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

// SPEC R4.4's bound on requests queued behind a wait: a paused owner gets no
// frame, parsed or not, from bytes already read, and the transport reads no
// more; resumed, it gets them in order until it pauses again.
TEST(FramedConn, R4_4_APausedOwnerGetsNoFrameUntilItResumes) {
  Rig rig;
  auto& raw = rig.raw;
  auto& conn = rig.conn;
  int parsed = 0;
  conn->set_frame_filter([&](std::string&) {
    ++parsed;
    return false;
  });
  std::vector<int> got;
  conn->start(
      *rig.strand,
      [&](Json m) {
        got.push_back(m["id"].get<int>());
        if (got.size() == 2) conn->set_paused(true);  // the queue is full
      },
      [](const Status&) {});
  std::string bytes;
  for (int id = 1; id <= 5; ++id) bytes += encode_frame("{\"id\":" + std::to_string(id) + "}");
  raw->deliver(bytes.substr(0, bytes.size() - 3));  // the last frame arrives in two reads
  EXPECT_EQ(got, (std::vector<int>{1, 2}));
  EXPECT_EQ(parsed, 2);
  EXPECT_FALSE(raw->reading);
  raw->deliver(bytes.substr(bytes.size() - 3));  // read before the pause took effect
  EXPECT_EQ(parsed, 2);
  conn->set_paused(false);
  EXPECT_EQ(got, (std::vector<int>{1, 2, 3, 4, 5}));
  EXPECT_TRUE(raw->reading);
}

std::string nested(std::size_t depth) {
  return std::string(depth, '[') + std::string(depth, ']');
}

// SPEC R1.2, bad input never crashes: nlohmann copies and dumps a value with
// one call per level, so an owner copying a 300k-deep value (600 KB, under
// the frame limit) overflowed its stack (the directory copied `id` first
// thing). Past kMaxJsonDepth a frame is bad_frame and never delivered;
// brackets inside strings do not count.
TEST(FramedConn, R1_2_AFrameNestedPastTheLimitIsABadFrame) {
  Rig rig;
  std::vector<Json> got;
  rig.conn->start(
      *rig.strand, [&](Json m) { got.push_back(std::move(m)); }, [](const Status&) {});
  // The outer object is one level: kMaxJsonDepth levels in all.
  const std::string at_limit = "{\"x\":" + nested(kMaxJsonDepth - 1) + ",\"s\":\"[[[[\\\"[[\"}";
  rig.raw->deliver(encode_frame(at_limit));
  ASSERT_EQ(got.size(), 1u);
  const Json copy = got[0];  // what an owner does with it
  EXPECT_EQ(copy["s"], "[[[[\"[[");
  EXPECT_FALSE(rig.raw->closed);
  rig.raw->deliver(encode_frame("{\"id\":" + nested(300000) + "}"));
  EXPECT_EQ(got.size(), 1u);
  EXPECT_TRUE(rig.raw->closed);
  ASSERT_EQ(rig.raw->sent.size(), 1u);
  const std::string& error = rig.raw->sent[0];  // the bad_frame reply
  EXPECT_NE(error.find("bad_frame"), std::string::npos) << error;
  EXPECT_NE(error.find("deeper than 256"), std::string::npos) << error;
}

TEST(FrameJson, R1_2_OneLevelPastTheLimitIsRefused) {
  EXPECT_FALSE(parse_json_text("{\"x\":" + nested(kMaxJsonDepth - 1) + "}").is_discarded());
  EXPECT_TRUE(parse_json_text("{\"x\":" + nested(kMaxJsonDepth) + "}").is_discarded());
  EXPECT_FALSE(parse_json_text("{\"x\":\"" + std::string(1000, '{') + "\"}").is_discarded());
  EXPECT_EQ(why_not_json("{\"x\":[}"), "frame is not valid UTF-8 JSON");
}

}  // namespace
}  // namespace rcxl::protocol
