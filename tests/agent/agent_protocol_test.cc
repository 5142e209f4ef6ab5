// SPEC R1: the wire protocol as the agent speaks it (PROTOCOL.md), each refusal
// checked to leave state as it was.
#include <cstring>
#include <system_error>

#include "tests/agent/agent_rig.h"
#include "tests/forwarding_runtime.h"

namespace rcxl::agent::testing {
namespace {

using ::testing::NiceMock;

TEST(AgentProtocol, R1_3_GreetingCarriesA64HexChallenge) {
  AgentRig rig;
  ASSERT_TRUE(rig.start(nullptr).ok());
  auto c = rig.client();
  EXPECT_EQ(c->greeting["op"], "greeting");
  EXPECT_EQ(c->greeting["version"], 1);
  const std::string challenge = c->greeting["challenge"];
  EXPECT_EQ(challenge.size(), 64u);
  EXPECT_EQ(challenge.find_first_not_of("0123456789abcdef"), std::string::npos);
  auto other = rig.client();
  EXPECT_NE(other->greeting["challenge"], c->greeting["challenge"]);
}

TEST(AgentProtocol, R1_3_UnauthenticatedOpIsRefusedAndTheConnectionClosed) {
  AgentRig rig;
  ASSERT_TRUE(rig.start(nullptr).ok());
  auto c = rig.client();
  const auto free_before = rig.agent->free_bytes();
  Json reply = c->call({{"op", "alloc"}, {"id", 9}, {"size", 4096}});
  EXPECT_EQ(code_of(reply), "unauthenticated");
  EXPECT_EQ(reply["id"], 9);
  EXPECT_TRUE(c->wait_closed());
  EXPECT_EQ(rig.agent->free_bytes(), free_before);
}

// A malformed request before hello is refused with the code the check order
// gives (fields first), and closes the connection all the same: junk must not
// hold a connection slot.
TEST(AgentProtocol, R1_3_AMalformedRequestBeforeHelloClosesTheConnection) {
  AgentRig rig;
  ASSERT_TRUE(rig.start(nullptr).ok());
  for (const Json& request : {Json{{"op", "dance"}, {"id", 1}}, Json{{"op", "alloc"}, {"id", 2}},
                              Json{{"op", "hello"}, {"id", "three"}},
                              Json{{"op", "hello"}, {"id", 4}, {"version", "1"}}}) {
    auto c = rig.client();
    Json reply = c->call(request);
    EXPECT_EQ(code_of(reply), "bad_request") << request.dump();
    EXPECT_TRUE(c->wait_closed()) << request.dump();
  }
}

// SPEC R1.2 (an optional field sent as null is absent): a hello whose
// version is null is a hello without one; it was refused and closed.
TEST(AgentProtocol, R1_3_AHelloWithANullVersionIsTakenAsWithout) {
  AgentRig rig;
  ASSERT_TRUE(rig.start(nullptr).ok());
  auto c = rig.client();
  Json reply = c->call(
      {{"op", "hello"}, {"id", 1}, {"version", nullptr}, {"client", nullptr}, {"auth", c->auth()}});
  EXPECT_EQ(code_of(reply), "ok") << reply.dump();
  EXPECT_EQ(code_of(c->call({{"op", "alloc"}, {"id", 2}, {"size", 4096}})), "ok");
}

// SPEC R1.3: a peer that never says hello cannot keep a connection (a thread
// and a --max-connections slot) for good; one that did is not timed out.
TEST(AgentProtocol, R1_3_AConnectionWithoutHelloIsClosedAfterTheHelloTimeout) {
  AgentRig rig;
  AgentConfig config = rig.config();
  config.hello_timeout = std::chrono::seconds(2);
  ASSERT_TRUE(rig.start(nullptr, config).ok());
  auto silent = rig.client();
  auto greeted = rig.hello_client();
  rig.run_for(std::chrono::milliseconds(1900));
  EXPECT_FALSE(silent->closed());
  rig.run_for(std::chrono::milliseconds(200));
  EXPECT_TRUE(silent->wait_closed());
  EXPECT_EQ(code_of(silent->next()), "unauthenticated");
  rig.run_for(std::chrono::seconds(10));
  EXPECT_FALSE(greeted->closed());
  EXPECT_EQ(code_of(greeted->call({{"op", "alloc"}, {"id", 2}, {"size", 4096}})), "ok");
  EXPECT_EQ(rig.agent->metrics().connections, 1u);
}

// The thread runtime's make_strand throws when the process is out of threads:
// that connection is refused, the agent lives on and serves the others.
class StrandLimitRuntime final : public rcxl::testing::ForwardingRuntime {
 public:
  StrandLimitRuntime(runtime::Runtime& inner, int strands)
      : ForwardingRuntime(inner), left_(strands) {}
  std::unique_ptr<runtime::Strand> make_strand(std::string name) override {
    if (left_-- <= 0)
      throw std::system_error(std::make_error_code(std::errc::resource_unavailable_try_again));
    return ForwardingRuntime::make_strand(std::move(name));
  }
  void allow(int strands) { left_ = strands; }

 private:
  int left_;
};

TEST(AgentProtocol, R1_3_AConnectionWhoseStrandCannotStartIsRefusedAndTheAgentServesOn) {
  AgentRig rig;
  StrandLimitRuntime limited(rig.mem, 1000);
  rig.agent = std::make_unique<Agent>(limited, rig.pool, rig.mem_nic, nullptr, rig.config());
  ASSERT_TRUE(rig.agent->start().ok());
  auto first = rig.hello_client();
  limited.allow(0);
  auto refused = rig.client();
  EXPECT_TRUE(refused->wait_closed());
  EXPECT_EQ(rig.agent->metrics().connections, 1u);
  EXPECT_EQ(code_of(first->call({{"op", "alloc"}, {"id", 2}, {"size", 4096}})), "ok");
  limited.allow(1000);
  auto later = rig.hello_client();
  EXPECT_EQ(rig.agent->metrics().connections, 2u);
}

TEST(AgentProtocol, R1_3_WrongAuthIsAuthFailedAndTheConnectionClosed) {
  AgentRig rig;
  ASSERT_TRUE(rig.start(nullptr).ok());
  auto c = rig.client();
  Json reply = c->call({{"op", "hello"}, {"id", 1}, {"auth", c->auth("wrong")}});
  EXPECT_EQ(code_of(reply), "auth_failed");
  EXPECT_TRUE(c->wait_closed());
  auto missing = rig.client();
  EXPECT_EQ(code_of(missing->call({{"op", "hello"}, {"id", 1}})), "auth_failed");
  auto number = rig.client();  // as the directory answers it
  EXPECT_EQ(code_of(number->call({{"op", "hello"}, {"id", 1}, {"auth", 5}})), "auth_failed");
  EXPECT_TRUE(number->wait_closed());
}

TEST(AgentProtocol, R1_3_UppercaseHexAuthIsAccepted) {
  AgentRig rig;
  ASSERT_TRUE(rig.start(nullptr).ok());
  auto c = rig.client();
  std::string auth = c->auth();
  for (char& ch : auth) ch = static_cast<char>(std::toupper(static_cast<unsigned char>(ch)));
  EXPECT_EQ(code_of(c->call({{"op", "hello"}, {"id", 1}, {"auth", auth}})), "ok");
}

TEST(AgentProtocol, R7_AuthNoneOnlyWithLoopbackListeners) {
  AgentRig rig;
  AgentConfig config = rig.config();
  config.auth_secret.reset();
  Status st = rig.start(nullptr, config);
  EXPECT_EQ(st.code(), ErrorCode::kBadRequest) << st.ToString();

  AgentRig loopback;
  config = loopback.config();
  config.auth_secret.reset();
  config.listen = {{"127.0.0.1", 7000}};
  ASSERT_TRUE(loopback.start(nullptr, config).ok());
  // Clients on the memory node itself: another host cannot reach 127.0.0.1.
  auto local = [&] {
    return std::make_unique<TestClient>(loopback.world, loopback.mem,
                                        runtime::Address{"127.0.0.1", 7000});
  };
  auto c = local();
  EXPECT_EQ(code_of(c->call({{"op", "hello"}, {"id", 1}})), "ok");
  auto any = local();
  EXPECT_EQ(code_of(any->call({{"op", "hello"}, {"id", 1}, {"auth", "anything"}})), "ok");
  // PROTOCOL: "accepts a missing or any auth" -- not only strings.
  auto number = local();
  EXPECT_EQ(code_of(number->call({{"op", "hello"}, {"id", 1}, {"auth", 7}})), "ok");
  auto remote = loopback.client();  // from the GPU node
  EXPECT_TRUE(remote->closed());
}

TEST(AgentProtocol, R1_4_HelloWithoutExtensionHasNoRegionExtension) {
  AgentRig rig;
  ASSERT_TRUE(rig.start(nullptr).ok());
  auto c = rig.client();
  Json reply = c->hello();
  EXPECT_EQ(reply["id"], 1);
  EXPECT_EQ(reply["boot"], kBootId);
  EXPECT_TRUE(reply["conn"].is_number_unsigned());
  EXPECT_FALSE(reply.contains("region_extension"));
}

TEST(AgentProtocol, R1_4_HelloAdvertisesTheExtensionsActions) {
  AgentRig rig;
  // A plugin may list an action this agent does not know: not advertised.
  auto mock = std::make_unique<::testing::NiceMock<MockExtension>>();
  ON_CALL(*mock, hint_actions())
      .WillByDefault(
          ::testing::Return(std::vector<std::string>{"read_hint", "write_wait", "bogus"}));
  ASSERT_TRUE(rig.start(std::move(mock)).ok());
  auto c = rig.client();
  Json reply = c->hello();
  EXPECT_EQ(reply["region_extension"]["version"], 1);
  EXPECT_EQ(reply["region_extension"]["actions"], Json::array({"read_hint", "write_wait"}));
}

TEST(AgentProtocol, R1_2_MalformedRequestsAreBadRequestAndChangeNothing) {
  AgentRig rig;
  ASSERT_TRUE(
      rig.start(rig.recording({{"actions", {"read_hint", "read_hint_end", "write_wait"}}})).ok());
  auto c = rig.hello_client();
  auto a = c->alloc(8192);
  ASSERT_TRUE(c->map(a.region, a.handle).value("ok", false));
  const auto free_before = rig.agent->free_bytes();
  const auto log_before = rig.log_lines().size();
  const std::string region = std::to_string(a.region);
  const Json handles = {{region, a.handle}};
  auto ext = [&](Json fields) {
    Json m = {{"op", "extension"}, {"id", 5}, {"epoch", c->boot}};
    for (auto& [k, v] : fields.items()) m[k] = v;
    return m;
  };
  std::vector<Json> bad = {
      {{"id", 5}},                                                  // no op
      {{"op", 3}, {"id", 5}},                                       // op not a string
      {{"op", "dance"}, {"id", 5}},                                 // unknown op
      {{"op", "alloc"}, {"id", 5}},                                 // no size
      {{"op", "alloc"}, {"id", 5}, {"size", 100}},                  // not a multiple of 4096
      {{"op", "alloc"}, {"id", 5}, {"size", 0}},                    // zero
      {{"op", "alloc"}, {"id", 5}, {"size", -4096}},                // negative
      {{"op", "alloc"}, {"id", 5}, {"size", "4096"}},               // string
      {{"op", "alloc"}, {"id", 5}, {"size", 4096}, {"token", ""}},  // empty token
      {{"op", "alloc"}, {"id", 5}, {"size", 4096}, {"token", std::string(129, 't')}},
      {{"op", "alloc"}, {"id", 5}, {"size", 4096}, {"token", 7}},         // token not a string
      {{"op", "alloc"}, {"id", 5}, {"size", 4096}, {"made_only", true}},  // made_only, no token
      {{"op", "alloc"}, {"id", 5}, {"size", 4096}, {"token", "t"}, {"made_only", 1}},
      {{"op", "map"}, {"id", 5}, {"region", a.region}, {"handle", a.handle}},  // no epoch
      {{"op", "map"}, {"id", 5}, {"region", a.region}, {"handle", 7}, {"epoch", c->boot}},
      {{"op", "map"},
       {"id", 5},
       {"region", a.region},
       {"handle", a.handle},
       {"epoch", c->boot},
       {"fresh", "yes"}},
      {{"op", "free"}, {"id", 5}, {"region", -1}, {"handle", a.handle}},
      {{"op", "release"}, {"id", 5}, {"region", a.region}},
      ext({{"action", "fly"}, {"request", "q"}}),  // unknown action
      ext({{"action", "read_hint"},
           {"ranges", Json::array({{a.region, 0, 4096}})},
           {"handles", handles}}),                                             // no request
      ext({{"action", "read_hint"}, {"request", "q"}, {"handles", handles}}),  // no ranges
      ext({{"action", "read_hint"},
           {"request", "q"},
           {"ranges", Json::array({{a.region, 0}})},
           {"handles", handles}}),  // range of two
      ext({{"action", "read_hint"},
           {"request", "q"},
           {"ranges", Json::array({{a.region, 0, 0}})},
           {"handles", handles}}),  // zero length
      ext({{"action", "read_hint"},
           {"request", "q"},
           {"ranges", Json::array({{a.region, -1, 10}})},
           {"handles", handles}}),
      ext({{"action", "read_hint"},
           {"request", "q"},
           {"ranges", Json::array({{a.region, 1.5, 10}})},
           {"handles", handles}}),
      ext({{"action", "read_hint"},
           {"request", "q"},
           {"ranges", Json::array({{a.region, 0, 1}})},
           {"handles", Json::object()}}),  // no handle for region
      ext({{"action", "read_hint"},
           {"request", "q"},
           {"ranges", Json::array({{a.region, 0, 1}})},
           {"handles", {{"x", a.handle}}}}),  // key not decimal
      ext({{"action", "write_wait"},
           {"token", "t"},
           {"ranges", Json::array({{a.region, 0, 1}})},
           {"handles", handles}}),  // no timeout
      ext({{"action", "write_wait"},
           {"token", "t"},
           {"ranges", Json::array({{a.region, 0, 1}})},
           {"handles", handles},
           {"timeout_ms", 0}}),
      ext({{"action", "write_wait"},
           {"token", "t"},
           {"ranges", Json::array({{a.region, 0, 1}})},
           {"handles", handles},
           {"timeout_ms", 10001}}),
  };
  Json too_many = Json::array();
  for (int i = 0; i < 4097; ++i) too_many.push_back({a.region, 0, 1});
  bad.push_back(
      ext({{"action", "read_hint"}, {"request", "q"}, {"ranges", too_many}, {"handles", handles}}));
  for (const Json& m : bad) {
    Json reply = c->call(m);
    EXPECT_EQ(code_of(reply), "bad_request") << m.dump().substr(0, 200) << " -> " << reply.dump();
    EXPECT_EQ(reply["id"], 5);
  }
  // A bad id is itself bad_request, answered without one.
  Json reply = c->call({{"op", "alloc"}, {"id", "x"}, {"size", 4096}});
  EXPECT_EQ(code_of(reply), "bad_request");
  EXPECT_FALSE(reply.contains("id"));
  EXPECT_FALSE(c->closed());
  EXPECT_EQ(rig.agent->free_bytes(), free_before);
  EXPECT_EQ(rig.agent->open_hint_requests(c->conn), 0u);
  EXPECT_EQ(rig.log_lines().size(), log_before);  // the extension heard nothing
}

// Before hello the first frame may be at most 64 KiB (a hello is well under
// 1 KiB): 20 peers each sending 1 MiB of `{}` before hello took the agent
// from 10 to 630 MB. After hello the whole --max-frame-bytes holds.
TEST(AgentProtocol, R1_3_AFirstFrameLargerThanAHelloIsRefusedBeforeItIsRead) {
  AgentRig rig;
  ASSERT_TRUE(rig.start(nullptr).ok());
  auto c = rig.client();
  c->send_raw(std::string("\x00\x01\x00\x01", 4));  // 64 KiB + 1
  Json reply = c->next();
  EXPECT_EQ(code_of(reply), "bad_frame") << reply.dump();
  EXPECT_TRUE(c->wait_closed());
  auto after = rig.hello_client();
  Json big = {{"op", "alloc"}, {"id", 7}, {"size", 4096}, {"pad", std::string(200000, 'p')}};
  Json answered = after->call(big);
  EXPECT_TRUE(answered.value("ok", false)) << answered.dump().substr(0, 200);
}

TEST(AgentProtocol, R1_2_BadFrameIsAnsweredWithoutIdAndCloses) {
  AgentRig rig;
  ASSERT_TRUE(rig.start(nullptr).ok());
  auto c = rig.hello_client();
  c->send_raw(protocol::encode_frame("{not json"));
  Json reply = c->next();
  EXPECT_EQ(code_of(reply), "bad_frame");
  EXPECT_FALSE(reply.contains("id"));
  EXPECT_TRUE(c->wait_closed());
  auto oversize = rig.hello_client();
  oversize->send_raw(std::string("\x00\x20\x00\x01", 4));  // 2 MiB + 1 > 1 MiB
  EXPECT_EQ(code_of(oversize->next()), "bad_frame");
  EXPECT_TRUE(oversize->wait_closed());
  auto array = rig.hello_client();
  array->send_raw(protocol::encode_frame("[1,2]"));
  Json not_object = array->next();
  EXPECT_EQ(code_of(not_object), "bad_frame");
  EXPECT_FALSE(not_object.contains("id"));
  EXPECT_TRUE(array->wait_closed());
}

// PROTOCOL "Framing": invalid JSON is bad_frame. nlohmann's lexer ends its
// input at a NUL, so the valid alloc before one used to be acted on.
TEST(AgentProtocol, R1_2_AFrameWithANulByteIsBadFrameAndChangesNothing) {
  AgentRig rig;
  ASSERT_TRUE(rig.start(nullptr).ok());
  const auto free_before = rig.agent->free_bytes();
  auto c = rig.hello_client();
  const std::string alloc = "{\"op\":\"alloc\",\"id\":1,\"size\":4096}";
  c->send_raw(protocol::encode_frame(alloc + std::string("\0\xff\xfe", 3)));
  Json reply = c->next();
  EXPECT_EQ(code_of(reply), "bad_frame") << reply.dump();
  EXPECT_TRUE(c->wait_closed());
  EXPECT_EQ(rig.agent->free_bytes(), free_before);
  EXPECT_FALSE(protocol::reference_decode(alloc + std::string("\0", 1)).ok());
  EXPECT_EQ(protocol::reference_decode(alloc + std::string("\0", 1)).status().code(),
            ErrorCode::kBadFrame);
}

TEST(AgentProtocol, R1_2_RepliesComeInOrderWithIdsEchoed) {
  AgentRig rig;
  ASSERT_TRUE(rig.start(nullptr).ok());
  auto c = rig.hello_client();
  for (int i = 10; i < 20; ++i) c->send({{"op", "alloc"}, {"id", i}, {"size", 4096}});
  c->send({{"op", "alloc"}, {"size", 4096}});
  for (int i = 10; i < 20; ++i) EXPECT_EQ(c->next()["id"], i);
  Json last = c->next();
  EXPECT_EQ(code_of(last), "ok");
  EXPECT_FALSE(last.contains("id"));
}

TEST(AgentProtocol, R1_5_AllocMapReleaseFreeLifecycle) {
  AgentRig rig;
  ASSERT_TRUE(rig.start(nullptr).ok());
  auto c = rig.hello_client();
  const auto total = rig.agent->free_bytes();
  auto a = c->alloc(1 << 20);
  EXPECT_GE(a.handle.size(), 32u);  // >= 128 bits of hex
  EXPECT_GE(a.read_handle.size(), 32u);
  EXPECT_NE(a.handle, a.read_handle);
  EXPECT_EQ(rig.agent->free_bytes(), total - (1 << 20));
  // PROTOCOL alloc reply: region, size (as asked), handle, read_handle.
  Json raw = c->call({{"op", "alloc"}, {"id", 7}, {"size", 8192}});
  ASSERT_EQ(code_of(raw), "ok") << raw.dump();
  EXPECT_EQ(raw["size"], 8192);
  EXPECT_TRUE(raw["region"].is_number_unsigned());
  EXPECT_NE(raw["region"], a.region);
  EXPECT_TRUE(raw["handle"].is_string());
  EXPECT_TRUE(raw["read_handle"].is_string());
  EXPECT_EQ(rig.agent->free_bytes(), total - (1 << 20) - 8192);
  Json freed =
      c->call({{"op", "free"}, {"id", 8}, {"region", raw["region"]}, {"handle", raw["handle"]}});
  ASSERT_EQ(code_of(freed), "ok") << freed.dump();
  rig.run_for(2s);  // the sweep retires it (never mapped: retire agrees)
  EXPECT_EQ(rig.agent->free_bytes(), total - (1 << 20));

  Json map = c->map(a.region, a.handle);
  ASSERT_EQ(code_of(map), "ok") << map.dump();
  EXPECT_EQ(map["boot"], c->boot);
  EXPECT_EQ(map["size"], 1 << 20);
  EXPECT_TRUE(map["addr"].is_number_unsigned());
  EXPECT_TRUE(map["rkey"].is_number_unsigned());
  EXPECT_TRUE(rig.agent->holds(c->conn, a.region));
  EXPECT_EQ(rig.mem_nic.registrations(), 1u);

  Json release =
      c->call({{"op", "release"}, {"id", 6}, {"region", a.region}, {"handle", a.read_handle}});
  EXPECT_EQ(code_of(release), "ok");
  EXPECT_FALSE(rig.agent->holds(c->conn, a.region));
  EXPECT_EQ(rig.mem_nic.registrations(), 0u);  // unheld memory is not exposed

  // free needs the owner handle
  Json by_reader =
      c->call({{"op", "free"}, {"id", 7}, {"region", a.region}, {"handle", a.read_handle}});
  EXPECT_EQ(code_of(by_reader), "bad_range");
  EXPECT_EQ(rig.agent->free_bytes(), total - (1 << 20));
  EXPECT_EQ(code_of(c->free(a)), "ok");
  EXPECT_EQ(rig.agent->free_bytes(), total);
  // Gone for clients from now on.
  EXPECT_EQ(code_of(c->map(a.region, a.handle)), "not_found");
  EXPECT_EQ(code_of(c->free(a)), "not_found");
  EXPECT_EQ(code_of(c->call({{"op", "release"}, {"id", 7}, {"region", 999}, {"handle", "x"}})),
            "not_found");
}

TEST(AgentProtocol, R1_5_AllocBeyondThePoolIsNoSpaceAndChangesNothing) {
  AgentRig rig;
  ASSERT_TRUE(rig.start(nullptr).ok());
  auto c = rig.hello_client();
  auto a = c->alloc(32ull << 20);
  const auto free_before = rig.agent->free_bytes();
  Json reply = c->call({{"op", "alloc"}, {"id", 8}, {"size", 48ull << 20}});
  EXPECT_EQ(code_of(reply), "no_space");
  EXPECT_EQ(rig.agent->free_bytes(), free_before);
  auto b = c->alloc(32ull << 20);  // first fit still finds the rest
  EXPECT_NE(a.region, b.region);
}

TEST(AgentProtocol, R1_5_MapWithAWrongHandleIsBadRangeAndHoldsNothing) {
  AgentRig rig;
  ASSERT_TRUE(rig.start(nullptr).ok());
  auto c = rig.hello_client();
  auto a = c->alloc();
  EXPECT_EQ(code_of(c->map(a.region, "0123456789abcdef0123456789abcdef")), "bad_range");
  EXPECT_FALSE(rig.agent->holds(c->conn, a.region));
  EXPECT_EQ(rig.mem_nic.registrations(), 0u);
}

TEST(AgentProtocol, R1_6_RdmaThroughADroppedRegistrationFails) {
  AgentRig rig;
  ASSERT_TRUE(rig.start(nullptr).ok());
  auto c = rig.hello_client();
  auto a = c->alloc(8192);
  Json map = c->map(a.region, a.handle);
  ASSERT_EQ(code_of(map), "ok");
  std::shared_ptr<runtime::QueuePair> qp;
  auto strand = rig.gpu.make_strand("rdma");
  rig.gpu_nic.connect("mem", *strand, [&](Result<std::shared_ptr<runtime::QueuePair>> r) {
    ASSERT_TRUE(r.ok());
    qp = *r;
  });
  ASSERT_TRUE(rig.world.run_until([&] { return qp != nullptr; }, rig.world.loop().now() + 1s).ok());
  auto post = [&](runtime::RdmaOp::Kind kind, std::vector<std::byte>& buf) {
    std::optional<std::vector<Status>> out;
    qp->post({{kind, buf, map["addr"].get<std::uint64_t>(), map["rkey"].get<std::uint32_t>()}},
             [&](std::vector<Status> s) { out = std::move(s); });
    EXPECT_TRUE(
        rig.world.run_until([&] { return out.has_value(); }, rig.world.loop().now() + 1s).ok());
    return out ? (*out)[0] : Status(ErrorCode::kInternal, "no completion");
  };
  std::vector<std::byte> data(64, std::byte{0x5a});
  EXPECT_TRUE(post(runtime::RdmaOp::Kind::kWrite, data).ok());
  ASSERT_EQ(
      code_of(c->call({{"op", "release"}, {"id", 6}, {"region", a.region}, {"handle", a.handle}})),
      "ok");
  std::vector<std::byte> back(64);
  EXPECT_EQ(post(runtime::RdmaOp::Kind::kRead, back).code(), ErrorCode::kRemoteAccess);
}

TEST(AgentProtocol, R7_MaxConnectionsRefusesTheNextConnection) {
  AgentRig rig;
  AgentConfig config = rig.config();
  config.max_connections = 1;
  ASSERT_TRUE(rig.start(nullptr, config).ok());
  auto first = rig.hello_client();
  TestClient second(rig.world, rig.gpu, {"mem", 7000});
  EXPECT_TRUE(second.wait_closed());
  EXPECT_TRUE(second.greeting.is_null());
  EXPECT_EQ(rig.agent->metrics().connections, 1u);
}

TEST(AgentProtocol, R1_2_MetricsTextNamesTheCounters) {
  AgentRig rig;
  ASSERT_TRUE(rig.start(nullptr).ok());
  auto c = rig.hello_client();
  auto a = c->alloc();
  ASSERT_EQ(code_of(c->map(a.region, a.handle)), "ok");
  const std::string text = rig.agent->metrics_text();
  EXPECT_NE(text.find("rcxl_agent_maps_total 1"), std::string::npos) << text;
  EXPECT_NE(text.find("rcxl_agent_registrations 1"), std::string::npos);
  EXPECT_NE(text.find("rcxl_agent_connections 1"), std::string::npos);
}

}  // namespace
}  // namespace rcxl::agent::testing

namespace rcxl::agent::testing {
namespace {

// DESIGN.md: same seed, same run. Handles and challenges come from seeded streams.
std::string scripted_run(std::uint64_t seed) {
  AgentRig rig(seed);
  rig.set_generation("1");
  EXPECT_TRUE(rig.start(rig.recording({{"generation_file", "/gen"}})).ok());
  auto a = rig.hello_client();
  auto b = rig.hello_client();
  auto r = a->alloc();
  EXPECT_EQ(code_of(a->map(r.region, r.handle, true)), "ok");
  EXPECT_EQ(code_of(b->map(r.region, r.read_handle)), "ok");
  EXPECT_EQ(code_of(a->read_hint("q", r)), "ok");
  rig.set_generation("2");
  rig.run_for(300ms);
  a->close();
  rig.run_for(1500ms);
  return rig.world.trace().hash_hex();
}

// The trace hashes frame bytes: another seed's handles and challenges change it.
TEST(AgentProtocol, R1_1_SameSeedSameTrace) {
  EXPECT_EQ(scripted_run(42), scripted_run(42));
  EXPECT_NE(scripted_run(42), scripted_run(43));
}

}  // namespace
}  // namespace rcxl::agent::testing
