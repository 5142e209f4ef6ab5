// Extension requests through the agent's two decode paths (simdjson for valid
// `extension` frames, nlohmann for the rest): same replies either way
// (PROTOCOL.md "Requests and replies", "Framing"; SPEC R3.1).
#include "core/protocol/frame_codec.h"
#include "tests/agent/agent_rig.h"

namespace rcxl::agent::testing {
namespace {

struct DecodeRig : AgentRig {
  DecodeRig() {
    EXPECT_TRUE(start(recording({{"actions", {"read_hint", "read_hint_end", "write_hint"}}})).ok());
    client = hello_client();
    region = client->alloc(16ull << 20);
    EXPECT_EQ(code_of(client->map(region.region, region.handle)), "ok");
  }
  std::string hint_text(std::size_t n, const std::string& extra = "") {
    std::string ranges = "[";
    for (std::size_t i = 0; i < n; ++i) {
      if (i) ranges += ",";
      ranges += "[" + std::to_string(region.region) + "," + std::to_string(i * 4096) + ",4096]";
    }
    ranges += "]";
    return R"({"op":"extension","id":77,"action":"read_hint","epoch":")" + client->boot +
           R"(","request":"big","ranges":)" + ranges + R"(,"handles":{")" +
           std::to_string(region.region) + R"(":")" + region.read_handle + "\"}" + extra + "}";
  }
  Json send_text(const std::string& text) {
    client->send_raw(protocol::encode_frame(text));
    return client->next();
  }
  std::unique_ptr<TestClient> client;
  TestClient::Alloc region;
};

TEST(AgentDecode, R3_1_A4096RangeReadHintReachesTheExtensionWhole) {
  DecodeRig rig;
  const auto fast_before = rig.agent->metrics().fast_decoded;
  Json reply = rig.send_text(rig.hint_text(4096));
  EXPECT_EQ(code_of(reply), "ok") << reply.dump();
  EXPECT_EQ(rig.agent->metrics().fast_decoded, fast_before + 1);  // no DOM for it
  EXPECT_EQ(reply["id"], 77);
  auto hints = rig.log_lines("hint");
  ASSERT_EQ(hints.size(), 1u);
  ASSERT_EQ(hints[0]["ranges"].size(), 4096u);
  EXPECT_EQ(hints[0]["ranges"][4095][1], 4095 * 4096);
}

TEST(AgentDecode, R3_1_MoreThan4096RangesIsBadRequest) {
  DecodeRig rig;
  const auto fast_before = rig.agent->metrics().fast_decoded;
  Json reply = rig.send_text(rig.hint_text(4097));
  EXPECT_EQ(code_of(reply), "bad_request");
  EXPECT_EQ(rig.agent->metrics().fast_decoded, fast_before);  // errors come from nlohmann
  EXPECT_EQ(reply["error"]["message"], "more than 4096 ranges");
  EXPECT_EQ(reply["id"], 77);
}

TEST(AgentDecode, R3_1_OffsetPlusLengthOverflowIsBadRange) {
  DecodeRig rig;
  Json reply = rig.client->hint("read_hint", "r",
                                Json::array({{rig.region.region, 4096, 18446744073709547520ull}}),
                                {{std::to_string(rig.region.region), rig.region.handle}});
  EXPECT_EQ(code_of(reply), "bad_range") << reply.dump();
  EXPECT_TRUE(rig.log_lines("hint").empty());
}

TEST(AgentDecode, R3_1_DuplicateKeysKeepTheLastAsBefore) {
  DecodeRig rig;
  // nlohmann keeps the last "ranges": the bad first one does not count.
  Json reply = rig.send_text(
      rig.hint_text(2, R"(,"ranges":[[)" + std::to_string(rig.region.region) + ",0,4096]]"));
  EXPECT_EQ(code_of(reply), "ok") << reply.dump();
  auto hints = rig.log_lines("hint");
  ASSERT_EQ(hints.size(), 1u);
  EXPECT_EQ(hints[0]["ranges"].size(), 1u);
}

TEST(AgentDecode, R3_1_NumbersThatAreNotU64AreBadRequest) {
  DecodeRig rig;
  const std::string r = std::to_string(rig.region.region);
  for (const std::string& range : {"[" + r + ",0,1.0]", "[" + r + ",-0,1]", "[" + r + ",-1,1]",
                                   "[" + r + ",0,18446744073709551616]", "[" + r + ",0,1e3]"}) {
    std::string text = rig.hint_text(1);
    const std::string first = "[" + r + ",0,4096]";
    text.replace(text.find(first), first.size(), range);
    Json reply = rig.send_text(text);
    EXPECT_EQ(code_of(reply), "bad_request") << range << " " << reply.dump();
    EXPECT_EQ(reply["error"]["message"],
              "a range must be [region, offset, length] of unsigned integers");
  }
}

TEST(AgentDecode, R3_1_InvalidUtf8IsBadFrameAndCloses) {
  DecodeRig rig;
  Json reply = rig.send_text(rig.hint_text(4, ",\"note\":\"\xff\xfe\""));
  EXPECT_EQ(code_of(reply), "bad_frame");
  EXPECT_FALSE(reply.contains("id"));
  EXPECT_TRUE(rig.client->wait_closed());
  EXPECT_TRUE(rig.log_lines("hint").empty());
}

TEST(AgentDecode, R3_1_AValidHintBeforeHelloIsUnauthenticated) {
  DecodeRig rig;
  auto stranger = rig.AgentRig::client();
  const std::string text = rig.hint_text(1);
  stranger->send_raw(protocol::encode_frame(text));
  Json reply = stranger->next();
  EXPECT_EQ(code_of(reply), "unauthenticated");
  EXPECT_EQ(reply["id"], 77);
  EXPECT_TRUE(stranger->wait_closed());
}

}  // namespace
}  // namespace rcxl::agent::testing
