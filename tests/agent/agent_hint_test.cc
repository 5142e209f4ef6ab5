// SPEC R3 (read hints), R4 (write hints, waits, promotes), R6.6 (connection close).
#include <stdexcept>

#include "tests/agent/agent_rig.h"

namespace rcxl::agent::testing {
namespace {

using ::testing::_;
using ::testing::NiceMock;
using ::testing::Return;

const Json kAllActions = {"read_hint", "read_hint_end", "write_hint", "read_promote", "write_wait"};

struct Mapped {
  std::unique_ptr<TestClient> client;
  TestClient::Alloc region;
};

Mapped mapped_client(AgentRig& rig, std::uint64_t size = 1 << 20) {
  Mapped m{rig.hello_client(), {}};
  m.region = m.client->alloc(size);
  EXPECT_EQ(code_of(m.client->map(m.region.region, m.region.handle)), "ok");
  return m;
}

// A write_wait for the first `length` bytes of m's region.
Json write_wait_request(const Mapped& m, int id, std::uint32_t timeout_ms,
                        std::uint64_t length = 4096) {
  return {{"op", "extension"},
          {"id", id},
          {"action", "write_wait"},
          {"token", "s" + std::to_string(id)},
          {"epoch", m.client->boot},
          {"ranges", Json::array({{m.region.region, 0, length}})},
          {"handles", {{std::to_string(m.region.region), m.region.handle}}},
          {"timeout_ms", timeout_ms}};
}

TEST(AgentHints, R3_1_ReadHintReachesTheExtensionWithPoolOffsets) {
  AgentRig rig;
  auto mock = std::make_unique<NiceMock<MockExtension>>();
  auto* ext = mock.get();
  ASSERT_TRUE(rig.start(std::move(mock)).ok());
  auto m = mapped_client(rig);
  auto other = m.client->alloc(1 << 20);  // a second region, higher in the pool
  ASSERT_EQ(code_of(m.client->map(other.region, other.read_handle)), "ok");
  ext::Hint seen;
  EXPECT_CALL(*ext, hint(_)).WillOnce([&](const ext::Hint& h) {
    seen = h;
    return Status();
  });
  Json reply = m.client->hint("read_hint", "q1",
                              Json::array({{other.region, 8192, 4096}, {m.region.region, 0, 100}}),
                              {{std::to_string(other.region), other.read_handle},
                               {std::to_string(m.region.region), m.region.handle}});
  EXPECT_EQ(code_of(reply), "ok") << reply.dump();
  EXPECT_EQ(seen.conn, m.client->conn);
  EXPECT_EQ(seen.action, "read_hint");
  EXPECT_EQ(seen.request, "q1");
  ASSERT_EQ(seen.ranges.size(), 2u);
  EXPECT_EQ(seen.ranges[0], (ext::Range{other.region, 8192, 4096, (1 << 20) + 8192}));
  EXPECT_EQ(seen.ranges[1], (ext::Range{m.region.region, 0, 100, 0}));
  EXPECT_EQ(rig.agent->open_hint_requests(m.client->conn), 1u);
}

// The scheduler hints regions its worker holds: a range needs some connection
// to hold its region, not the hinting one (PROTOCOL bad_range). Once the last
// holder lets go, the same hint is bad_range and opens nothing.
TEST(AgentHints, R3_1_AHintNeedsSomeHolderNotTheHintingConnection) {
  AgentRig rig;
  ASSERT_TRUE(rig.start(rig.recording({{"actions", kAllActions}})).ok());
  auto holder = mapped_client(rig);
  auto hinter = rig.hello_client();  // holds nothing
  EXPECT_EQ(code_of(hinter->read_hint("q", holder.region)), "ok");
  EXPECT_EQ(rig.agent->open_hint_requests(hinter->conn), 1u);
  EXPECT_EQ(code_of(hinter->read_hint_end("q")), "ok");
  Json release = holder.client->call({{"op", "release"},
                                      {"id", 5},
                                      {"region", holder.region.region},
                                      {"handle", holder.region.handle}});
  ASSERT_EQ(code_of(release), "ok") << release.dump();
  EXPECT_EQ(code_of(hinter->read_hint("q2", holder.region)), "bad_range");
  EXPECT_EQ(rig.agent->open_hint_requests(hinter->conn), 0u);
}

TEST(AgentHints, R3_1_RefusedHintsFollowTheCheckOrderAndChangeNothing) {
  AgentRig rig;
  auto mock = std::make_unique<NiceMock<MockExtension>>();
  auto* ext = mock.get();
  ON_CALL(*ext, hint_actions()).WillByDefault(Return(std::vector<std::string>{"read_hint"}));
  ASSERT_TRUE(rig.start(std::move(mock)).ok());
  EXPECT_CALL(*ext, hint(_)).Times(1);  // only the last, accepted one
  auto m = mapped_client(rig, 8192);
  auto unmapped = m.client->alloc(8192);
  const std::string r = std::to_string(m.region.region);
  const Json handles = {{r, m.region.handle}};
  auto send = [&](Json fields) {
    Json msg = {{"op", "extension"},       {"id", 4},
                {"action", "read_hint"},   {"request", "q"},
                {"epoch", m.client->boot}, {"ranges", Json::array({{m.region.region, 0, 4096}})},
                {"handles", handles}};
    for (auto& [k, v] : fields.items()) msg[k] = v;
    return m.client->call(msg);
  };
  // epoch before action before ranges
  Json stale = send({{"epoch", "old-boot"}, {"action", "write_hint"}, {"token", "t"}});
  EXPECT_EQ(code_of(stale), "stale_epoch");
  EXPECT_EQ(stale["boot"], m.client->boot);
  EXPECT_EQ(code_of(send({{"action", "write_hint"},
                          {"token", "t"},
                          {"ranges", Json::array({{999, 0, 1}})},
                          {"handles", {{"999", "x"}}}})),
            "not_advertised");
  EXPECT_EQ(code_of(send({{"ranges", Json::array({{999, 0, 1}})}, {"handles", {{"999", "x"}}}})),
            "bad_range");  // no such region
  EXPECT_EQ(code_of(send({{"ranges", Json::array({{unmapped.region, 0, 1}})},
                          {"handles", {{std::to_string(unmapped.region), unmapped.handle}}}})),
            "bad_range");  // allocated, not mapped
  EXPECT_EQ(code_of(send({{"handles", {{r, "feedfacefeedfacefeedfacefeedface"}}}})),
            "bad_range");  // wrong handle
  EXPECT_EQ(code_of(send({{"ranges", Json::array({{m.region.region, 4096, 4097}})}})),
            "bad_range");  // past the end
  EXPECT_EQ(code_of(send({{"ranges", Json::array({{m.region.region, 1, UINT64_MAX}})}})),
            "bad_range");  // offset + length overflows
  EXPECT_EQ(code_of(send({{"ranges", Json::array({{m.region.region, 8192, 1}})}})), "bad_range");
  EXPECT_EQ(code_of(send({{"ranges", Json::array({{m.region.region, 4096, 4096}})}})), "ok");
  EXPECT_EQ(rig.agent->metrics().hints_refused["bad_range"], 6u);
  EXPECT_EQ(rig.agent->metrics().hints_refused["stale_epoch"], 1u);
  EXPECT_EQ(rig.agent->metrics().hints_refused["not_advertised"], 1u);
}

TEST(AgentHints, R4_2_NoExtensionAdvertisesNothingAndRefusesEveryAction) {
  AgentRig rig;
  ASSERT_TRUE(rig.start(nullptr).ok());
  auto m = mapped_client(rig);
  EXPECT_EQ(code_of(m.client->read_hint("q", m.region)), "not_advertised");
  EXPECT_EQ(code_of(m.client->read_hint_end("q")), "not_advertised");
}

// The open requests of a connection keep their names: a name is at most
// kMaxNameBytes (1024), or the limit of 4096 requests could hold 4 GiB of
// names at the default frame size. Refused with nothing opened; the
// message quotes no more than 64 bytes of what the client sent.
TEST(AgentHints, R3_3_ANameLongerThan1024BytesIsBadRequest) {
  AgentRig rig;
  ASSERT_TRUE(rig.start(rig.recording({{"actions", kAllActions}})).ok());
  auto m = mapped_client(rig);
  EXPECT_EQ(code_of(m.client->read_hint(std::string(1024, 'q'), m.region)), "ok");
  const auto hints_before = rig.log_lines("hint").size();
  Json refused = m.client->read_hint(std::string(1025, 'q'), m.region);
  EXPECT_EQ(code_of(refused), "bad_request");
  EXPECT_EQ(refused["error"]["message"], "'request' is longer than 1024 bytes");
  const Json ranges = Json::array({{m.region.region, 0, 4096}});
  const Json handles = {{std::to_string(m.region.region), m.region.handle}};
  EXPECT_EQ(code_of(m.client->hint("write_hint", std::string(1025, 't'), ranges, handles)),
            "bad_request");
  EXPECT_EQ(rig.log_lines("hint").size(), hints_before);
  EXPECT_EQ(rig.agent->open_hint_requests(m.client->conn), 1u);
  // A stale epoch of 100 KiB is quoted by its first 64 bytes.
  Json stale = m.client->call({{"op", "extension"},
                               {"id", 7},
                               {"action", "write_hint"},
                               {"token", "t"},
                               {"epoch", std::string(100 * 1024, 'e')},
                               {"ranges", ranges},
                               {"handles", handles}});
  EXPECT_EQ(code_of(stale), "stale_epoch");
  EXPECT_LT(stale["error"]["message"].get<std::string>().size(), 200u);
}

// A name with a NUL is refused: a C extension (c_abi.h) reads names as C
// strings, so "q\0A" and "q\0B" were two requests to the agent and one, "q",
// to it (an end of one ended the other's hint there). Session-24 review.
TEST(AgentHints, R3_3_ANameWithANulCharacterIsBadRequest) {
  AgentRig rig;
  ASSERT_TRUE(rig.start(rig.recording({{"actions", kAllActions}})).ok());
  auto m = mapped_client(rig);
  const auto hints_before = rig.log_lines("hint").size();
  Json refused = m.client->read_hint(std::string("q\0A", 3), m.region);
  EXPECT_EQ(code_of(refused), "bad_request");
  EXPECT_NE(refused["error"]["message"].get<std::string>().find("NUL"), std::string::npos);
  EXPECT_EQ(code_of(m.client->read_hint_end(std::string("q\0B", 3))), "bad_request");
  EXPECT_EQ(rig.log_lines("hint").size(), hints_before);
  EXPECT_EQ(rig.agent->open_hint_requests(m.client->conn), 0u);
}

TEST(AgentHints, R3_3_PerConnectionHintLimit) {
  // The default SPEC R3.3 names (no other test pins it; session-33 audit).
  EXPECT_EQ(AgentConfig{}.max_hint_requests, 4096u);
  AgentRig rig;
  AgentConfig config = rig.config();
  config.max_hint_requests = 3;
  ASSERT_TRUE(rig.start(rig.recording(), config).ok());
  auto m = mapped_client(rig);
  for (const char* name : {"a", "b", "c"}) {
    EXPECT_EQ(code_of(m.client->read_hint(name, m.region)), "ok");
  }
  // A request already open takes more ranges without opening another.
  EXPECT_EQ(code_of(m.client->read_hint("b", m.region, 4096)), "ok");
  const auto hints_before = rig.log_lines("hint").size();
  Json refused = m.client->read_hint("d", m.region);
  EXPECT_EQ(code_of(refused), "too_many_hint_requests");
  EXPECT_NE(refused["error"]["message"].get<std::string>().find("max-hint-requests"),
            std::string::npos);
  EXPECT_EQ(rig.log_lines("hint").size(), hints_before);
  EXPECT_EQ(rig.agent->open_hint_requests(m.client->conn), 3u);
  // PROTOCOL's order: ranges are checked before the limit, so a bad range
  // at the limit is bad_range; neither refusal opens anything.
  EXPECT_EQ(code_of(m.client->read_hint("e", m.region, 1 << 20)), "bad_range");
  EXPECT_EQ(rig.agent->open_hint_requests(m.client->conn), 3u);
  // Another connection has a limit of its own.
  auto other = rig.hello_client();
  ASSERT_EQ(code_of(other->map(m.region.region, m.region.read_handle)), "ok");
  EXPECT_EQ(code_of(other->read_hint("d", {m.region.region, m.region.read_handle, ""})), "ok");
  // Ending one frees a slot.
  EXPECT_EQ(code_of(m.client->read_hint_end("a")), "ok");
  EXPECT_EQ(code_of(m.client->read_hint("d", m.region)), "ok");
  EXPECT_EQ(rig.agent->metrics().open_hint_requests, 4u);
}

TEST(AgentHints, R3_3_AHintTheExtensionFailsLeavesNoneOpen) {
  AgentRig rig;
  auto mock = std::make_unique<NiceMock<MockExtension>>();
  auto* ext = mock.get();
  ASSERT_TRUE(rig.start(std::move(mock)).ok());
  auto m = mapped_client(rig);
  EXPECT_CALL(*ext, hint(_))
      .WillOnce(Return(Error(ErrorCode::kInternal, "device busy")))
      .WillOnce([](const ext::Hint&) -> Status { throw std::runtime_error("boom"); })
      .WillRepeatedly(Return(Status()));
  EXPECT_EQ(code_of(m.client->read_hint("q", m.region)), "extension_failed");
  EXPECT_EQ(rig.agent->open_hint_requests(m.client->conn), 0u);
  EXPECT_EQ(code_of(m.client->read_hint("q", m.region)), "extension_failed");
  EXPECT_EQ(rig.agent->open_hint_requests(m.client->conn), 0u);
  EXPECT_EQ(code_of(m.client->read_hint("q", m.region)), "ok");
  EXPECT_EQ(rig.agent->open_hint_requests(m.client->conn), 1u);
}

// A request hinted in pieces (more than 4096 ranges) whose later piece fails
// is closed like any failed hint (nothing left open, PROTOCOL), and the
// extension is told to drop the pieces it took (a read_hint_end).
TEST(AgentHints, R3_3_AFailedLaterPieceClosesTheRequestAndEndsItInTheExtension) {
  AgentRig rig;
  auto mock = std::make_unique<NiceMock<MockExtension>>();
  auto* ext = mock.get();
  ASSERT_TRUE(rig.start(std::move(mock)).ok());
  auto m = mapped_client(rig);
  ::testing::InSequence order;
  EXPECT_CALL(*ext, hint(::testing::Field(&ext::Hint::action, "read_hint")))
      .WillOnce(Return(Status()))
      .WillOnce(Return(Error(ErrorCode::kInternal, "device busy")));
  EXPECT_CALL(*ext, hint(::testing::AllOf(::testing::Field(&ext::Hint::action, "read_hint_end"),
                                          ::testing::Field(&ext::Hint::request, "q"))))
      .WillOnce(Return(Status()));
  EXPECT_EQ(code_of(m.client->read_hint("q", m.region)), "ok");
  EXPECT_EQ(rig.agent->open_hint_requests(m.client->conn), 1u);
  EXPECT_EQ(code_of(m.client->read_hint("q", m.region)), "extension_failed");
  EXPECT_EQ(rig.agent->open_hint_requests(m.client->conn), 0u);
  // The client's own end finds nothing open: {} and no second end in the extension.
  EXPECT_EQ(code_of(m.client->read_hint_end("q")), "ok");
}

TEST(AgentHints, R3_3_ReadHintEndOfARequestNotOpenAnswersEmptyAndChangesNothing) {
  AgentRig rig;
  ASSERT_TRUE(rig.start(rig.recording()).ok());
  auto m = mapped_client(rig);
  ASSERT_EQ(code_of(m.client->read_hint("q", m.region)), "ok");
  Json reply = m.client->read_hint_end("never-opened");
  EXPECT_EQ(reply, (Json{{"id", 4}, {"ok", true}}));
  EXPECT_EQ(rig.agent->open_hint_requests(m.client->conn), 1u);
  EXPECT_EQ(rig.log_lines("hint").size(), 1u);  // the extension heard only the hint
  EXPECT_EQ(code_of(m.client->read_hint_end("q")), "ok");
  EXPECT_EQ(rig.agent->open_hint_requests(m.client->conn), 0u);
  auto lines = rig.log_lines("hint");
  ASSERT_EQ(lines.size(), 2u);
  EXPECT_EQ(lines[1], (Json{{"hook", "hint"},
                            {"conn", m.client->conn},
                            {"action", "read_hint_end"},
                            {"request", "q"},
                            {"ranges", Json::array()}}));
}

TEST(AgentHints, R3_3_RequestNamesArePerConnection) {
  AgentRig rig;
  ASSERT_TRUE(rig.start(rig.recording()).ok());
  auto a = mapped_client(rig);
  auto b = rig.hello_client();
  ASSERT_EQ(code_of(b->map(a.region.region, a.region.read_handle)), "ok");
  ASSERT_EQ(code_of(a.client->read_hint("q", a.region)), "ok");
  // b's end of "q" is not a's request.
  EXPECT_EQ(code_of(b->read_hint_end("q")), "ok");
  EXPECT_EQ(rig.agent->open_hint_requests(a.client->conn), 1u);
  EXPECT_EQ(rig.log_lines("hint").size(), 1u);
}

TEST(AgentHints, R4_5_ReadPromoteAndReadHintEndAreNeverRefusedForAStaleEpoch) {
  AgentRig rig;
  ASSERT_TRUE(rig.start(rig.recording({{"actions", kAllActions}})).ok());
  auto m = mapped_client(rig);
  ASSERT_EQ(code_of(m.client->read_hint("q", m.region)), "ok");
  m.client->boot = "a-boot-long-gone";
  EXPECT_EQ(code_of(m.client->hint("read_promote", "q", {}, {})), "ok");
  EXPECT_EQ(rig.agent->open_hint_requests(m.client->conn), 1u);  // opens and closes nothing
  EXPECT_EQ(code_of(m.client->read_hint_end("q")), "ok");
  EXPECT_EQ(rig.agent->open_hint_requests(m.client->conn), 0u);
  EXPECT_EQ(code_of(m.client->read_hint("r", m.region)), "stale_epoch");
  auto promotes = rig.log_lines("hint");
  ASSERT_EQ(promotes.size(), 3u);
  EXPECT_EQ(promotes[1]["action"], "read_promote");
}

TEST(AgentHints, R4_1_WriteHintOpensNoRequest) {
  AgentRig rig;
  ASSERT_TRUE(rig.start(rig.recording({{"actions", kAllActions}})).ok());
  auto m = mapped_client(rig);
  Json reply = m.client->hint("write_hint", "store-1", Json::array({{m.region.region, 4096, 8192}}),
                              {{std::to_string(m.region.region), m.region.handle}});
  EXPECT_EQ(code_of(reply), "ok");
  EXPECT_EQ(rig.agent->open_hint_requests(m.client->conn), 0u);
  auto lines = rig.log_lines("hint");
  ASSERT_EQ(lines.size(), 1u);
  EXPECT_EQ(lines[0]["token"], "store-1");
  EXPECT_EQ(lines[0]["ranges"], Json::array({{m.region.region, 4096, 8192}}));
}

TEST(AgentHints, R4_4_WriteWaitBlocksOnlyItsConnection) {
  AgentRig rig;
  ASSERT_TRUE(rig.start(rig.recording({{"actions", kAllActions},
                                       {"write_wait_result", Json::object({{"ready", true}})},
                                       {"write_wait_delay_ms", 500}}))
                  .ok());
  auto a = mapped_client(rig);
  auto b = rig.hello_client();
  const auto start = rig.world.loop().now();
  a.client->send(write_wait_request(a, 40, 1000));
  a.client->send({{"op", "alloc"}, {"id", 41}, {"size", 4096}});  // queues behind the wait
  // b proceeds meanwhile.
  EXPECT_EQ(code_of(b->call({{"op", "alloc"}, {"id", 50}, {"size", 4096}})), "ok");
  EXPECT_FALSE(a.client->has_reply());
  EXPECT_LT(rig.world.loop().now() - start, 100ms);
  Json answer = a.client->next();
  EXPECT_EQ(answer["id"], 40);
  EXPECT_EQ(answer["result"], (Json{{"ready", true}}));
  EXPECT_GE(rig.world.loop().now() - start, 500ms);
  EXPECT_EQ(a.client->next()["id"], 41);
  EXPECT_EQ(rig.agent->open_hint_requests(a.client->conn), 0u);
  auto lines = rig.log_lines("write_wait");
  ASSERT_EQ(lines.size(), 1u);
  EXPECT_EQ(lines[0]["timeout_ms"], 1000);
}

// A client whose write_wait (id 40) the recording extension answers 500 ms
// later: what it sends next queues behind it.
Mapped client_behind_a_held_wait(AgentRig& rig) {
  EXPECT_TRUE(
      rig.start(rig.recording({{"actions", kAllActions}, {"write_wait_delay_ms", 500}})).ok());
  auto a = mapped_client(rig);
  a.client->send(write_wait_request(a, 40, 1000));
  return a;
}

// Requests queued behind a held write_wait are bounded by what they hold
// parsed, not by their text: frames padded with `{}` parse to ~27 times their
// size, so reading stops after a few of them (8 MiB of text would have held
// ~220 MB); once the wait is answered every request is answered, in order.
TEST(AgentHints, R4_4_RequestsQueuedBehindAWaitAreBoundedByTheirParsedSize) {
  AgentRig rig;
  auto a = client_behind_a_held_wait(rig);
  Json pad = Json::array();
  for (int i = 0; i < 20000; ++i) pad.push_back(Json::object());  // 60 KB of text
  constexpr int kFrames = 200;                                    // 12 MB of text
  for (int i = 0; i < kFrames; ++i) {
    a.client->send(
        {{"op", "release"}, {"id", 100 + i}, {"region", 999999}, {"handle", "h"}, {"pad", pad}});
  }
  rig.run_for(100ms);
  EXPECT_FALSE(a.client->has_reply());
  const AgentMetrics held = rig.agent->metrics();
  EXPECT_GE(held.queued_requests, 1u);
  EXPECT_LE(held.queued_requests, 4u);  // by text: 8 MiB / 60 KB = 140
  EXPECT_LE(held.queued_request_bytes, std::uint64_t{16} << 20);
  EXPECT_EQ(a.client->next()["id"], 40);
  for (int i = 0; i < kFrames; ++i) {
    const Json reply = a.client->next();
    EXPECT_EQ(reply["id"], 100 + i);
    EXPECT_EQ(code_of(reply), "not_found") << reply.dump().substr(0, 200);
  }
  EXPECT_EQ(rig.agent->metrics().queued_requests, 0u);
  EXPECT_EQ(rig.agent->metrics().queued_request_bytes, 0u);
}

// The same bound for a chunk of tiny frames: pausing the transport let the
// frames already read all be parsed and queued (review, session 29: 7 MB of
// `{}` frames queued 174762 requests, 45 MB, from one connection). Paused,
// the rest stays text until the queue drains; then every one is answered.
TEST(AgentHints, R4_4_AChunkOfTinyFramesBehindAWaitQueuesOnlyUpToTheBound) {
  AgentRig rig;
  auto a = client_behind_a_held_wait(rig);
  constexpr int kFrames = 20000;
  std::string chunk;
  for (int i = 0; i < kFrames; ++i) {
    chunk += protocol::encode_frame(Json{{"op", "nope"}, {"id", 100 + i}}.dump());
  }
  a.client->send_raw(std::move(chunk));  // one write, one delivery
  rig.run_for(100ms);
  EXPECT_FALSE(a.client->has_reply());
  const AgentMetrics held = rig.agent->metrics();
  EXPECT_GE(held.queued_requests, 1u);
  EXPECT_LE(held.queued_requests, 256u);  // kPauseReadingAt; it was all 20000
  EXPECT_EQ(a.client->next()["id"], 40);
  for (int i = 0; i < kFrames; ++i) {
    const Json reply = a.client->next();
    ASSERT_EQ(reply["id"], 100 + i);
    EXPECT_EQ(code_of(reply), "bad_request");
  }
  EXPECT_EQ(rig.agent->metrics().queued_requests, 0u);
}

// PROTOCOL.md: every request is answered, in order; a bad frame after a
// write_wait still waiting is answered after it, then the connection closes.
TEST(AgentHints, R4_4_ABadFrameIsAnsweredAfterTheWaitBeforeIt) {
  AgentRig rig;
  auto a = client_behind_a_held_wait(rig);
  a.client->send_raw(std::string(4, '\0'));  // a zero-length frame
  const Json first = a.client->next();
  EXPECT_EQ(first["id"], 40) << first.dump();
  EXPECT_EQ(first["ok"], true) << first.dump();
  const Json second = a.client->next();
  EXPECT_EQ(code_of(second), "bad_frame") << second.dump();
  EXPECT_FALSE(second.contains("id"));
  EXPECT_TRUE(a.client->wait_closed());
}

// Keeps every write_wait's callback and answers none (until the test does).
class UnansweringWaitExtension : public ext::RegionExtension {
 public:
  std::string name() const override { return "unanswering"; }
  Status hint(const ext::Hint&) override { return {}; }
  std::vector<std::string> hint_actions() const override {
    return {"read_hint", "read_hint_end", "write_wait"};
  }
  void write_wait(const ext::WriteWait&, WriteWaitDone done) override {
    kept.push_back(std::move(done));
  }
  std::vector<WriteWaitDone> kept;
};

// R4.4 with an extension that never answers: the connection is not stuck; the
// wait fails timeout_ms plus a second of grace later, and a late answer is
// dropped (one reply per request).
TEST(AgentHints, R4_4_AWriteWaitTheExtensionNeverAnswersFailsAfterItsTimeout) {
  AgentRig rig;
  auto unanswering = std::make_unique<UnansweringWaitExtension>();
  auto* ext = unanswering.get();
  ASSERT_TRUE(rig.start(std::move(unanswering)).ok());
  auto m = mapped_client(rig);
  const auto start = rig.world.loop().now();
  Json reply = m.client->call(write_wait_request(m, 7, 200));
  EXPECT_EQ(code_of(reply), "extension_failed") << reply.dump();
  EXPECT_EQ(reply["id"], 7);
  const auto took = rig.world.loop().now() - start;
  EXPECT_GE(took, 1200ms);
  EXPECT_LT(took, 1300ms);
  ASSERT_EQ(ext->kept.size(), 1u);
  ext->kept[0](Json::object());  // too late
  Json next = m.client->call({{"op", "alloc"}, {"id", 8}, {"size", 4096}});
  EXPECT_EQ(next["id"], 8) << next.dump();
  EXPECT_EQ(code_of(next), "ok");
  EXPECT_FALSE(m.client->has_reply());
}

// An extension whose write_wait answers badly, in each way a plugin can.
class BadWaitExtension : public UnansweringWaitExtension {
 public:
  enum class Mode { kError, kArray, kThrow, kAnswerThenThrow, kGood };
  void write_wait(const ext::WriteWait&, WriteWaitDone done) override {
    switch (mode) {
      case Mode::kError:
        return done(Error(ErrorCode::kIoError, "the device is gone"));
      case Mode::kArray:
        return done(Json::array({1, 2}));
      case Mode::kThrow:
        throw std::runtime_error("boom");
      case Mode::kAnswerThenThrow:
        done(Json::object({{"ready", true}}));
        throw std::runtime_error("boom after answering");
      case Mode::kGood:
        return done(Json::object({{"ready", true}}));
    }
  }
  Mode mode = Mode::kGood;
};

// R4.4: a failed, malformed or raising write_wait answers extension_failed
// once, leaves nothing open and the connection usable; one that answered and
// then raised keeps its answer.
TEST(AgentHints, R4_4_AWriteWaitThatFailsOrAnswersBadlyIsExtensionFailedOnce) {
  AgentRig rig;
  auto bad = std::make_unique<BadWaitExtension>();
  auto* ext = bad.get();
  ASSERT_TRUE(rig.start(std::move(bad)).ok());
  auto m = mapped_client(rig);
  int id = 10;
  for (auto mode : {BadWaitExtension::Mode::kError, BadWaitExtension::Mode::kArray,
                    BadWaitExtension::Mode::kThrow}) {
    ext->mode = mode;
    Json reply = m.client->call(write_wait_request(m, ++id, 200));
    EXPECT_EQ(code_of(reply), "extension_failed") << reply.dump();
    EXPECT_EQ(reply["id"], id);
    rig.run_for(2s);  // past timeout + grace: no second reply comes
    EXPECT_FALSE(m.client->has_reply());
  }
  EXPECT_EQ(rig.agent->metrics().hints_refused["extension_failed"], 3u);
  EXPECT_EQ(rig.agent->metrics().open_hint_requests, 0u);
  ext->mode = BadWaitExtension::Mode::kAnswerThenThrow;
  Json answered = m.client->call(write_wait_request(m, ++id, 200));
  EXPECT_EQ(answered, (Json{{"id", id}, {"ok", true}, {"result", {{"ready", true}}}}));
  rig.run_for(2s);
  EXPECT_FALSE(m.client->has_reply());
  ext->mode = BadWaitExtension::Mode::kGood;
  EXPECT_EQ(code_of(m.client->call(write_wait_request(m, ++id, 200))), "ok");
}

TEST(AgentHints, R4_4_WriteWaitWithoutAResultAnswersNull) {
  AgentRig rig;
  ASSERT_TRUE(rig.start(rig.recording({{"actions", kAllActions}})).ok());
  auto m = mapped_client(rig);
  Json reply = m.client->hint("write_wait", "s", Json::array({{m.region.region, 0, 1}}),
                              {{std::to_string(m.region.region), m.region.handle}});
  // hint() sends no timeout_ms: that is bad_request; then a proper one.
  EXPECT_EQ(code_of(reply), "bad_request");
  reply = m.client->call(write_wait_request(m, 7, 10000, 1));
  EXPECT_EQ(reply, (Json{{"id", 7}, {"ok", true}, {"result", nullptr}}));
}

TEST(AgentHints, R6_6_ConnectionCloseDropsHoldsAndHintsThenTellsTheExtension) {
  AgentRig rig;
  ASSERT_TRUE(rig.start(rig.recording()).ok());
  auto m = mapped_client(rig);
  for (int i = 0; i < 5; ++i) {
    ASSERT_EQ(code_of(m.client->read_hint("q" + std::to_string(i), m.region)), "ok");
  }
  const std::uint64_t conn = m.client->conn;
  EXPECT_EQ(rig.agent->metrics().open_hint_requests, 5u);
  EXPECT_EQ(rig.agent->metrics().hint_requests_closed_by_disconnect, 0u);
  const std::uint64_t closed_before = rig.agent->metrics().connections_closed;
  m.client->close();
  ASSERT_TRUE(rig.world
                  .run_until([&] { return !rig.log_lines("connection_closed").empty(); },
                             rig.world.loop().now() + 1s)
                  .ok());
  EXPECT_EQ(rig.log_lines("connection_closed")[0],
            (Json{{"hook", "connection_closed"}, {"conn", conn}}));
  EXPECT_EQ(rig.agent->metrics().open_hint_requests, 0u);
  EXPECT_FALSE(rig.agent->holds(conn, m.region.region));
  EXPECT_EQ(rig.mem_nic.registrations(), 0u);
  EXPECT_EQ(rig.agent->metrics().connections, 0u);
  // The metrics say what the close did: one connection, five requests with it.
  EXPECT_EQ(rig.agent->metrics().connections_closed, closed_before + 1);
  EXPECT_EQ(rig.agent->metrics().hint_requests_closed_by_disconnect, 5u);
  EXPECT_NE(rig.agent->metrics_text().find("rcxl_agent_hint_requests_closed_by_disconnect_total 5"),
            std::string::npos);
}

// SPEC R6.6, the order: by the time connection_closed runs, the holds and the
// open hint requests are gone already (and the hook may call into the agent:
// it runs outside the lock).
TEST(AgentHints, R6_6_ConnectionClosedRunsAfterHoldsAndHintsAreDropped) {
  AgentRig rig;
  auto mock = std::make_unique<NiceMock<MockExtension>>();
  auto* ext = mock.get();
  ASSERT_TRUE(rig.start(std::move(mock)).ok());
  auto m = mapped_client(rig);
  ASSERT_EQ(code_of(m.client->read_hint("q", m.region)), "ok");
  const std::uint64_t conn = m.client->conn;
  ASSERT_TRUE(rig.agent->holds(conn, m.region.region));
  bool called = false;
  EXPECT_CALL(*ext, connection_closed(conn)).WillOnce([&](std::uint64_t c) -> Status {
    called = true;
    EXPECT_EQ(rig.agent->open_hint_requests(c), 0u);
    EXPECT_FALSE(rig.agent->holds(c, m.region.region));
    EXPECT_EQ(rig.agent->metrics().open_hint_requests, 0u);
    return {};
  });
  m.client->close();
  ASSERT_TRUE(rig.world.run_until([&] { return called; }, rig.world.loop().now() + 1s).ok());
}

// SPEC R2.4: a connection_closed that throws, or returns an error (no test
// had the second: session-33 audit), is counted and ignored.
TEST(AgentHints, R2_4_AConnectionClosedFailureIsLoggedAndIgnored) {
  for (const bool throws : {true, false}) {
    SCOPED_TRACE(throws ? "throws" : "returns an error");
    AgentRig rig;
    auto mock = std::make_unique<NiceMock<MockExtension>>();
    auto* ext = mock.get();
    ASSERT_TRUE(rig.start(std::move(mock)).ok());
    bool called = false;
    EXPECT_CALL(*ext, connection_closed(_)).WillOnce([&](std::uint64_t) -> Status {
      called = true;
      if (throws) throw std::runtime_error("extension bug");
      return Error(ErrorCode::kIoError, "device link down");
    });
    {
      auto m = mapped_client(rig);
      m.client->close();
      ASSERT_TRUE(rig.world.run_until([&] { return called; }, rig.world.loop().now() + 1s).ok());
    }
    EXPECT_EQ(rig.agent->metrics().extension_errors, 1u);
    auto next = mapped_client(rig);  // the agent goes on
    EXPECT_EQ(code_of(next.client->read_hint("q", next.region)), "ok");
  }
}

}  // namespace
}  // namespace rcxl::agent::testing
