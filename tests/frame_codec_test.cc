#include "core/protocol/frame_codec.h"

#include <gtest/gtest.h>

namespace rcxl::protocol {
namespace {

TEST(FrameCodec, R1_2_RoundTripsFramesSplitAnywhere) {
  const std::string stream = encode_frame("{\"a\":1}") + encode_frame("{}") + encode_frame("xyz");
  for (std::size_t cut = 0; cut <= stream.size(); ++cut) {
    FrameDecoder decoder;
    std::vector<std::string> frames;
    ASSERT_TRUE(decoder.feed(stream.substr(0, cut), frames).ok());
    ASSERT_TRUE(decoder.feed(stream.substr(cut), frames).ok());
    ASSERT_EQ(frames, (std::vector<std::string>{"{\"a\":1}", "{}", "xyz"})) << "cut " << cut;
    EXPECT_EQ(decoder.pending_bytes(), 0u);
  }
}

TEST(FrameCodec, R1_2_ZeroLengthIsBadFrame) {
  FrameDecoder decoder;
  std::vector<std::string> frames;
  const Status s = decoder.feed(std::string("\0\0\0\0", 4), frames);
  EXPECT_EQ(s.code(), ErrorCode::kBadFrame);
  // Stays failed: later bytes are not parsed.
  EXPECT_EQ(decoder.feed(encode_frame("{}"), frames).code(), ErrorCode::kBadFrame);
  EXPECT_TRUE(frames.empty());
}

TEST(FrameCodec, R1_2_OversizeIsBadFrameBeforeTheBodyArrives) {
  FrameDecoder decoder(/*max_frame_bytes=*/16);
  std::vector<std::string> frames;
  ASSERT_TRUE(decoder.feed(encode_frame(std::string(16, 'x')), frames).ok());
  EXPECT_EQ(frames.size(), 1u);
  // Only the header of a 17-byte frame: refused at once.
  EXPECT_EQ(decoder.feed(std::string("\0\0\0\x11", 4), frames).code(), ErrorCode::kBadFrame);
}

// A server limits the first frame (the hello) lower: an unauthenticated peer
// cannot make it take 1 MiB of JSON. Later frames have the whole limit.
TEST(FrameCodec, R1_3_AFirstFrameLimitHoldsForTheFirstFrameOnly) {
  FrameDecoder decoder(/*max_frame_bytes=*/64);
  decoder.limit_first_frame(16);
  std::vector<std::string> frames;
  ASSERT_TRUE(decoder.feed(encode_frame(std::string(16, 'h')), frames).ok());
  ASSERT_TRUE(decoder.feed(encode_frame(std::string(64, 'x')), frames).ok());
  EXPECT_EQ(frames.size(), 2u);
  FrameDecoder first(/*max_frame_bytes=*/64);
  first.limit_first_frame(16);
  const Status refused = first.feed(std::string("\0\0\0\x11", 4), frames);
  EXPECT_EQ(refused.code(), ErrorCode::kBadFrame);
  EXPECT_NE(refused.message().find("for a connection's hello"), std::string::npos);
  // Both in one read: the second frame is measured against the whole limit.
  FrameDecoder pipelined(/*max_frame_bytes=*/64);
  pipelined.limit_first_frame(16);
  frames.clear();
  ASSERT_TRUE(
      pipelined.feed(encode_frame(std::string(8, 'h')) + encode_frame(std::string(60, 'x')), frames)
          .ok());
  EXPECT_EQ(frames.size(), 2u);
}

TEST(FrameCodec, DefaultMaximumIsOneMiB) {
  FrameDecoder decoder;
  std::vector<std::string> frames;
  EXPECT_TRUE(decoder.feed(std::string("\0\x10\0\0", 4), frames).ok());  // exactly 1 MiB: waits
  FrameDecoder decoder2;
  EXPECT_EQ(decoder2.feed(std::string("\0\x10\0\x01", 4), frames).code(), ErrorCode::kBadFrame);
}

TEST(FrameCodec, TruncatedFrameStaysPending) {
  FrameDecoder decoder;
  std::vector<std::string> frames;
  const std::string frame = encode_frame("{\"op\":\"hello\"}");
  ASSERT_TRUE(decoder.feed(frame.substr(0, frame.size() - 3), frames).ok());
  EXPECT_TRUE(frames.empty());
  EXPECT_EQ(decoder.pending_bytes(), frame.size() - 3);
}

}  // namespace
}  // namespace rcxl::protocol
