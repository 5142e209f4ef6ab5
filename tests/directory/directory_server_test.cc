// The directory as a service on the sim runtime: hello with HMAC, the ops over
// DirectoryClient, and refusals of bad input.
#include "core/directory/directory_server.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cstdio>
#include <tuple>

#include "backends/sim/sim_network.h"
#include "backends/sim/sim_world.h"
#include "core/directory/directory_client.h"
#include "core/protocol/auth.h"
#include "core/protocol/frame_codec.h"

namespace rcxl::directory {
namespace {

using namespace std::chrono_literals;

struct Rig {
  sim::SimWorld world{3};
  sim::SimNode& server_node = world.add_node("dir");
  sim::SimNode& client_node = world.add_node("gpu");
  std::unique_ptr<runtime::Strand> server_strand = server_node.make_strand("dir");
  std::unique_ptr<runtime::Strand> client_strand = client_node.make_strand("client");
  DirectoryServer server;
  std::unique_ptr<DirectoryClient> client;

  explicit Rig(std::string secret = "s3cret", std::size_t max_keys = 100,
               std::uint32_t max_frame_bytes = protocol::kDefaultMaxFrameBytes)
      : server(server_node, *server_strand,
               {.directory = {.max_keys = max_keys, .lease_ttl = 5s},
                .secret = "s3cret",
                .max_frame_bytes = max_frame_bytes}) {
    EXPECT_TRUE(server.start({"dir", 7000}).ok());
    client = std::make_unique<DirectoryClient>(
        client_node, *client_strand,
        RpcConnection::Options{.address = {"dir", 7000}, .secret = std::move(secret)});
  }
  template <typename T>
  T wait(std::optional<T>& slot) {
    EXPECT_TRUE(world.run_until([&] { return slot.has_value(); }).ok());
    return std::move(*slot);
  }
};

Location loc(std::uint64_t offset, std::string boot = "boot1") {
  return {"mem:9000", std::move(boot), 3, "readhandle", offset, 4096};
}

TEST(DirectoryServer, R1_1_RegisterLookupProbeReleaseOverTheWire) {
  Rig rig;
  std::optional<Result<std::vector<bool>>> reg;
  rig.client->register_keys({{"k0", loc(0)}, {"k1", loc(4096)}, {"k0", loc(8192)}},
                            [&](auto r) { reg = std::move(r); });
  auto registered = rig.wait(reg);
  ASSERT_TRUE(registered.ok()) << registered.status().ToString();
  EXPECT_EQ(*registered, (std::vector<bool>{true, true, false}));

  std::optional<Result<LookupReply>> look;
  rig.client->lookup({"k0", "k1", "k2"}, [&](auto r) { look = std::move(r); });
  auto hits = rig.wait(look);
  ASSERT_TRUE(hits.ok());
  ASSERT_EQ(hits->locations.size(), 2u);
  EXPECT_EQ(hits->locations[0], loc(0));
  ASSERT_EQ(hits->leases.size(), 1u);
  EXPECT_NE(hits->leases[0], 0u);
  EXPECT_EQ(rig.server.directory().open_leases(), 1u);

  std::optional<Result<ProbeReply>> probe;
  rig.client->probe({"k1", "k0"}, true, [&](auto r) { probe = std::move(r); });
  auto probed = rig.wait(probe);
  ASSERT_TRUE(probed.ok());
  EXPECT_EQ(probed->hits, 2u);
  EXPECT_EQ(probed->locations[0], loc(4096));
  EXPECT_EQ(rig.server.directory().open_leases(), 1u);  // probes take no lease

  std::optional<Status> released;
  rig.client->release(hits->leases[0], [&](Status s) { released = s; });
  EXPECT_TRUE(rig.wait(released).ok());
  EXPECT_EQ(rig.server.directory().open_leases(), 0u);
}

TEST(DirectoryServer, R6_1_BootChangeAndRegionDropOverTheWire) {
  Rig rig;
  std::optional<Result<std::vector<bool>>> reg;
  rig.client->register_keys({{"a", loc(0)}, {"b", loc(4096)}}, [&](auto r) { reg = std::move(r); });
  ASSERT_TRUE(rig.wait(reg).ok());
  std::optional<Result<std::size_t>> dropped;
  rig.client->boot_changed("mem:9000", "boot2", "", [&](auto r) { dropped = std::move(r); });
  auto n = rig.wait(dropped);
  ASSERT_TRUE(n.ok());
  EXPECT_EQ(*n, 2u);
  reg.reset();
  rig.client->register_keys({{"a", loc(0, "boot1")}, {"c", loc(0, "boot2")}},
                            [&](auto r) { reg = std::move(r); });
  EXPECT_EQ(*rig.wait(reg), (std::vector<bool>{false, true}));  // the retired boot is refused
  dropped.reset();
  rig.client->drop_region("mem:9000", 3, "", [&](auto r) { dropped = std::move(r); });
  EXPECT_EQ(*rig.wait(dropped), 1u);
  EXPECT_EQ(rig.server.directory().size(), 0u);
}

// Each entry's outcome says why a false is false, so a writer need not probe.
TEST(DirectoryServer, R6_1_ARegisterReplySaysWhyEachEntryWasRefused) {
  Rig rig;
  std::optional<Result<std::vector<bool>>> reg;
  rig.client->register_keys({{"a", loc(0)}}, [&](auto r) { reg = std::move(r); });
  ASSERT_TRUE(rig.wait(reg).ok());
  std::optional<Result<std::size_t>> dropped;
  rig.client->boot_changed("mem:9000", "boot2", "boot1", [&](auto r) { dropped = std::move(r); });
  ASSERT_TRUE(rig.wait(dropped).ok());
  reg.reset();
  rig.client->register_keys({{"b", loc(0, "boot2")}}, [&](auto r) { reg = std::move(r); });
  ASSERT_TRUE(rig.wait(reg).ok());
  std::optional<Result<std::vector<RegisterAnswer>>> answers;
  rig.client->register_keys_answered(
      {{"c", loc(4096, "boot2")}, {"b", loc(8192, "boot2")}, {"d", loc(0, "boot1")}},
      [&](auto r) { answers = std::move(r); });
  auto got = rig.wait(answers);
  ASSERT_TRUE(got.ok()) << got.status().ToString();
  EXPECT_EQ(*got, (std::vector<RegisterAnswer>{RegisterAnswer::kRegistered,
                                               RegisterAnswer::kAlreadyPresent,
                                               RegisterAnswer::kBootRetired}));
}

TEST(DirectoryServer, R1_3_WrongSecretIsRefused) {
  Rig rig("wrong");
  std::optional<Result<LookupReply>> look;
  rig.client->lookup({"k"}, [&](auto r) { look = std::move(r); });
  auto r = rig.wait(look);
  EXPECT_EQ(r.status().code(), ErrorCode::kAuthFailed);
  // The person reading it learns what to check.
  EXPECT_NE(r.status().message().find("same secret file as the service's --auth-secret-file"),
            std::string::npos)
      << r.status().ToString();
}

// Raw frames for the refusals a well-behaved client never sends.
struct RawClient {
  Rig& rig;
  std::shared_ptr<protocol::FramedConn> conn;
  std::shared_ptr<runtime::Conn> raw_conn;  // for bytes no Json can make
  std::vector<Json> got;
  bool closed = false;
  explicit RawClient(Rig& r) : rig(r) {
    rig.client_node.transport().connect(
        {"dir", 7000}, *rig.client_strand, [this](Result<std::shared_ptr<runtime::Conn>> c) {
          raw_conn = std::move(c).value();
          conn = protocol::FramedConn::Make(raw_conn);
          conn->start(
              *rig.client_strand, [this](Json m) { got.push_back(std::move(m)); },
              [this](const Status&) { closed = true; });
        });
    EXPECT_TRUE(rig.world.run_until([this] { return got.size() == 1; }).ok());
  }
  Json ask(Json m) {
    const std::size_t before = got.size();
    conn->send(m);
    EXPECT_TRUE(rig.world.run_until([&] { return got.size() > before || closed; }).ok());
    return got.size() > before ? got.back() : Json();
  }
  Json ask_raw(const std::string& text) {
    const std::size_t before = got.size();
    raw_conn->send(protocol::encode_frame(text));
    EXPECT_TRUE(rig.world.run_until([&] { return got.size() > before || closed; }).ok());
    return got.size() > before ? got.back() : Json();
  }
  void hello() {
    const std::string challenge = got[0]["challenge"];
    auto reply = ask({{"op", "hello"},
                      {"id", 1},
                      {"version", 1},
                      {"auth", protocol::hmac_sha256_hex("s3cret", challenge)}});
    ASSERT_TRUE(reply["ok"].get<bool>()) << reply.dump();
  }
};

// The directory bounds a key (kMaxKeyBytes): 2^20 keys of up to a frame each
// could hold half a terabyte. A longer one is bad_request and stores nothing
// (review, session 28); the client refuses it before sending.
TEST(DirectoryServer, R1_2_AKeyOverTheLimitIsBadRequestAndStoresNothing) {
  Rig rig;
  RawClient raw(rig);
  raw.hello();
  const std::string longest(kMaxKeyBytes, 'k');
  const std::string over(kMaxKeyBytes + 1, 'k');
  auto too_long = raw.ask({{"op", "register"},
                           {"id", 2},
                           {"entries", {{{"key", over}, {"location", to_json(loc(0))}}}}});
  EXPECT_EQ(too_long["error"]["code"], "bad_request") << too_long.dump().substr(0, 200);
  EXPECT_EQ(rig.server.directory().size(), 0u);
  auto lookup = raw.ask({{"op", "lookup"}, {"id", 3}, {"keys", {over}}});
  EXPECT_EQ(lookup["error"]["code"], "bad_request");
  auto fits = raw.ask({{"op", "register"},
                       {"id", 4},
                       {"entries", {{{"key", longest}, {"location", to_json(loc(0))}}}}});
  EXPECT_TRUE(fits.value("ok", false)) << fits.dump().substr(0, 200);
  EXPECT_EQ(rig.server.directory().size(), 1u);
}

// PROTOCOL.md: a stale_epoch reply carries the current boot beside the
// error; the directory's, for a report of a boot it retired, had none
// (review, session 28).
TEST(DirectoryServer, R6_1_AStaleEpochReplyCarriesTheCurrentBoot) {
  Rig rig;
  RawClient raw(rig);
  raw.hello();
  auto changed = raw.ask(
      {{"op", "boot_changed"}, {"id", 2}, {"agent", "mem:7000"}, {"boot", "b2"}, {"from", "b1"}});
  ASSERT_TRUE(changed.value("ok", false)) << changed.dump();
  auto stale = raw.ask({{"op", "boot_changed"}, {"id", 3}, {"agent", "mem:7000"}, {"boot", "b1"}});
  EXPECT_EQ(stale["error"]["code"], "stale_epoch") << stale.dump();
  EXPECT_EQ(stale.value("boot", ""), "b2") << stale.dump();
  EXPECT_EQ(stale["id"], 3);
}

// Before hello the first frame may be at most 64 KiB: an unauthenticated peer
// cannot make the directory parse 1 MiB of JSON. After it, the whole limit.
TEST(DirectoryServer, R1_3_AFirstFrameLargerThanAHelloIsRefusedBeforeItIsRead) {
  Rig rig;
  RawClient early(rig);
  early.raw_conn->send(std::string("\x00\x01\x00\x01", 4));  // 64 KiB + 1
  EXPECT_TRUE(rig.world.run_until([&] { return early.closed; }).ok());
  ASSERT_EQ(early.got.size(), 2u);
  EXPECT_EQ(early.got[1]["error"]["code"], "bad_frame");
  RawClient late(rig);
  late.hello();
  auto reply = late.ask({{"op", "stats"}, {"id", 2}, {"pad", std::string(200000, 'p')}});
  EXPECT_TRUE(reply.value("ok", false)) << reply.dump().substr(0, 200);
}

// A lookup or probe asking for more hits than one reply frame holds (a client
// that does not cut its calls) gets the prefix that fits, under a lease of
// its own: before, a 64 MB reply no client could read, built on the
// directory's one strand. Optional fields may be null, as at the agent; an
// unknown op is echoed cut.
TEST(DirectoryServer, R1_2_AReplyNeverOutgrowsAFrame) {
  Rig rig("s3cret", 10000);
  constexpr std::size_t kKeys = 3000;
  std::vector<std::string> keys;
  std::vector<std::pair<std::string, Location>> entries;
  for (std::size_t i = 0; i < kKeys; ++i) {
    keys.push_back("k" + std::to_string(i));
    entries.emplace_back(keys.back(),
                         Location{"mem:9000", "boot1", 3, std::string(800, 'h'), i * 4096, 4096});
  }
  std::optional<Result<std::vector<bool>>> reg;
  rig.client->register_keys(entries, [&](auto r) { reg = std::move(r); });
  ASSERT_TRUE(rig.wait(reg).ok());
  RawClient raw(rig);
  raw.hello();
  auto lookup = raw.ask({{"op", "lookup"}, {"id", 2}, {"keys", keys}});
  ASSERT_TRUE(lookup.value("ok", false)) << lookup.dump().substr(0, 200);
  const std::size_t hits = lookup["locations"].size();
  EXPECT_GT(hits, 1000u);
  EXPECT_LT(hits, kKeys);
  EXPECT_LE(lookup.dump().size() + 4, std::size_t{1} << 20);
  EXPECT_EQ(rig.server.directory().open_leases(), 1u);  // only the prefix's
  auto probe = raw.ask({{"op", "probe"}, {"id", 3}, {"keys", keys}, {"with_locations", true}});
  ASSERT_TRUE(probe.value("ok", false)) << probe.dump().substr(0, 200);
  EXPECT_EQ(probe["hits"], probe["locations"].size());
  EXPECT_LT(probe["locations"].size(), kKeys);
  auto counted = raw.ask({{"op", "probe"}, {"id", 4}, {"keys", keys}, {"with_locations", nullptr}});
  EXPECT_EQ(counted["hits"], kKeys) << counted.dump().substr(0, 200);
  EXPECT_FALSE(counted.contains("locations"));
  auto from_null = raw.ask(
      {{"op", "boot_changed"}, {"id", 5}, {"agent", "x:1"}, {"boot", "b2"}, {"from", nullptr}});
  EXPECT_TRUE(from_null.value("ok", false)) << from_null.dump();
  auto unknown = raw.ask({{"op", std::string(100000, 'z')}, {"id", 6}});
  EXPECT_EQ(unknown["error"]["code"], "bad_request");
  EXPECT_LT(unknown.dump().size(), 400u);
}

// The reply cap never cuts below PROTOCOL.md's default frame, which every
// client reads: a directory run with --max-frame-bytes 4096 still answers a
// 28-chunk load whole (the client takes a shorter answer for misses).
TEST(DirectoryServer, R1_2_ASmallFrameLimitDoesNotCutAConformingLookup) {
  Rig rig("s3cret", 100, 4096);
  std::vector<std::string> keys;
  for (std::size_t i = 0; i < 28; ++i) {
    keys.push_back("k" + std::to_string(i));
    // ~300 bytes a location: 28 of them are twice the directory's 4096.
    const Location l{"mem:9000", "boot1", 3, std::string(200, 'h'), i * 4096, 4096};
    std::optional<Result<std::vector<bool>>> reg;  // one by one: a register fits 4096
    rig.client->register_keys({{keys.back(), l}}, [&](auto r) { reg = std::move(r); });
    ASSERT_TRUE(rig.wait(reg).ok());
  }
  std::optional<Result<LookupReply>> look;
  rig.client->lookup(keys, [&](auto r) { look = std::move(r); });
  auto hits = rig.wait(look);
  ASSERT_TRUE(hits.ok()) << hits.status().ToString();
  EXPECT_EQ(hits->locations.size(), keys.size());
}

TEST(DirectoryServer, R1_3_OpsBeforeHelloAreRefusedAndTheConnectionClosed) {
  Rig rig;
  RawClient raw(rig);
  EXPECT_EQ(raw.got[0]["op"], "greeting");
  auto reply = raw.ask({{"op", "lookup"}, {"id", 1}, {"keys", {"a"}}});
  EXPECT_EQ(reply["error"]["code"], "unauthenticated");
  EXPECT_TRUE(rig.world.run_until([&] { return raw.closed; }).ok());
}

// SPEC R1.3: a peer that never says hello cannot keep its connection (an fd)
// for good; one that did is not timed out.
TEST(DirectoryServer, R1_3_AConnectionWithoutHelloIsClosedAfterTheHelloTimeout) {
  Rig rig;  // the default hello timeout, 10 s
  RawClient silent(rig);
  RawClient greeted(rig);
  greeted.hello();
  rig.world.run_for(std::chrono::milliseconds(9900));
  EXPECT_FALSE(silent.closed);
  rig.world.run_for(std::chrono::milliseconds(200));
  EXPECT_TRUE(silent.closed);
  EXPECT_EQ(silent.got.back()["error"]["code"], "unauthenticated");
  rig.world.run_for(std::chrono::seconds(30));
  EXPECT_FALSE(greeted.closed);
  EXPECT_EQ(rig.server.connections(), 1u);  // `greeted` (the Rig's client connects on use)
}

// SPEC R1.3, docs/directory.md: before a successful hello every refusal
// closes the connection, a malformed request as much as a well-formed one.
TEST(DirectoryServer, R1_3_AMalformedRequestBeforeHelloAlsoCloses) {
  Rig rig;
  for (Json bad :
       {Json{{"op", "lookup"}, {"id", "x"}, {"keys", {"a"}}}, Json{{"id", 1}, {"keys", {"a"}}},
        Json{{"op", "hello"}, {"id", 1}, {"version", 2}}}) {
    RawClient raw(rig);
    auto reply = raw.ask(bad);
    EXPECT_EQ(reply["error"]["code"], "bad_request") << bad.dump();
    EXPECT_TRUE(rig.world.run_until([&] { return raw.closed; }).ok()) << bad.dump();
  }
}

// A refusal that closes ends the connection for the frames behind it too,
// even those that came in the same read (a pipelined hello and register).
TEST(DirectoryServer, R1_3_FramesBehindAClosingRefusalAreNotServed) {
  Rig rig;
  RawClient raw(rig);
  const std::string challenge = raw.got[0]["challenge"];
  const Json hello = {{"op", "hello"},
                      {"id", 1},
                      {"version", 1},
                      {"auth", protocol::hmac_sha256_hex("s3cret", challenge)}};
  const Json reg = {
      {"op", "register"}, {"id", 2}, {"entries", {{{"key", "a"}, {"location", to_json(loc(0))}}}}};
  raw.raw_conn->send(protocol::encode_frame(Json{{"op", "lookup"}, {"id", 9}}.dump()) +
                     protocol::encode_frame(hello.dump()) + protocol::encode_frame(reg.dump()));
  EXPECT_TRUE(rig.world.run_until([&] { return raw.closed; }).ok());
  EXPECT_EQ(rig.server.directory().size(), 0u);
}

// As the agent (docs/agent.md): `version`, if present, must be 1; a hello
// without one is taken by both services alike.
TEST(DirectoryServer, R1_3_AHelloWithoutVersionIsTakenAsTheAgentTakesIt) {
  Rig rig;
  RawClient raw(rig);
  const std::string challenge = raw.got[0]["challenge"];
  auto reply = raw.ask(
      {{"op", "hello"}, {"id", 1}, {"auth", protocol::hmac_sha256_hex("s3cret", challenge)}});
  EXPECT_EQ(reply["ok"], true) << reply.dump();
  // A null version is an absent one (a Python client's None), as at the agent.
  RawClient null_version(rig);
  const std::string again = null_version.got[0]["challenge"];
  reply = null_version.ask({{"op", "hello"},
                            {"id", 1},
                            {"version", nullptr},
                            {"auth", protocol::hmac_sha256_hex("s3cret", again)}});
  EXPECT_EQ(reply["ok"], true) << reply.dump();
}

TEST(DirectoryServer, R1_2_MalformedRequestsAreBadRequestsAndChangeNothing) {
  Rig rig;
  RawClient raw(rig);
  const std::string challenge = raw.got[0]["challenge"];
  auto hello = raw.ask({{"op", "hello"},
                        {"id", 1},
                        {"version", 1},
                        {"auth", protocol::hmac_sha256_hex("s3cret", challenge)}});
  ASSERT_TRUE(hello["ok"].get<bool>()) << hello.dump();
  for (Json bad : {Json{{"op", "lookup"}, {"id", 2}, {"keys", "a"}},
                   Json{{"op", "lookup"}, {"id", 2}, {"keys", {1, 2}}},
                   Json{{"op", "register"}, {"id", 2}, {"entries", {{{"key", "a"}}}}},
                   Json{{"op", "register"},
                        {"id", 2},
                        {"entries", {{{"key", "a"}, {"location", to_json(loc(0))}}, 7}}},
                   Json{{"op", "probe"}, {"id", 2}, {"keys", {"a"}}, {"with_locations", 1}},
                   Json{{"op", "release"}, {"id", 2}, {"lease", -1}},
                   Json{{"op", "boot_changed"}, {"id", 2}, {"agent", "x"}},
                   Json{{"op", "frobnicate"}, {"id", 2}}}) {
    auto reply = raw.ask(bad);
    EXPECT_EQ(reply["error"]["code"], "bad_request") << bad.dump();
    EXPECT_EQ(reply["id"], 2);
  }
  EXPECT_EQ(rig.server.directory().size(), 0u);
  Json zero_length = to_json(loc(0));
  zero_length["length"] = 0;
  auto reply = raw.ask(
      {{"op", "register"}, {"id", 3}, {"entries", {{{"key", "a"}, {"location", zero_length}}}}});
  EXPECT_EQ(reply["error"]["code"], "bad_request");
  EXPECT_EQ(rig.server.directory().size(), 0u);
}

// PROTOCOL "Framing": invalid JSON is bad_frame and closes. nlohmann's lexer
// ends its input at a NUL, so the register before one used to be acted on.
TEST(DirectoryServer, R1_2_AFrameWithANulByteIsBadFrameAndRegistersNothing) {
  Rig rig;
  RawClient raw(rig);
  raw.hello();
  const Json entry = {{"key", "a"}, {"location", to_json(loc(0))}};
  const std::string text =
      Json{{"op", "register"}, {"id", 2}, {"entries", {entry}}}.dump() + std::string("\0x", 2);
  auto reply = raw.ask_raw(text);
  EXPECT_EQ(reply["error"]["code"], "bad_frame") << reply.dump();
  EXPECT_TRUE(rig.world.run_until([&] { return raw.closed; }).ok());
  EXPECT_EQ(rig.server.directory().size(), 0u);
}

// SPEC R1.2: the directory copied a request's `id` (and each entry's
// `location`) before checking it; a 300k-deep one overflowed the stack and
// killed the process (review, session 32). Such a frame is bad_frame now.
TEST(DirectoryServer, R1_2_AFrameNestedDeeperThanTheLimitIsBadFrameNotACrash) {
  Rig rig;
  const std::string deep = std::string(300000, '[') + std::string(300000, ']');
  for (const std::string& text :
       {R"({"op":"stats","id":)" + deep + "}",
        R"({"op":"register","id":2,"entries":[{"key":"a","location":)" + deep + "}]}"}) {
    RawClient raw(rig);
    raw.hello();
    auto reply = raw.ask_raw(text);
    EXPECT_EQ(reply["error"]["code"], "bad_frame") << reply.dump();
    EXPECT_TRUE(rig.world.run_until([&] { return raw.closed; }).ok());
  }
  EXPECT_EQ(rig.server.directory().size(), 0u);
  RawClient next(rig);
  next.hello();
  EXPECT_TRUE(next.ask({{"op", "stats"}, {"id", 3}}).value("ok", false));
}

// A call of more keys than one frame holds (long keys, a big load) is cut
// into requests that fit: before, one register of 4000 entries exceeded the
// directory's 1 MiB frame and the connection closed with bad_frame.
TEST(DirectoryServer, R1_1_CallsLargerThanAFrameAreCutIntoRequestsThatFit) {
  Rig rig("s3cret", 10000);
  DirectoryClient& client = *rig.client;
  DirectoryServer& server = rig.server;
  auto wait = [&](auto& slot) { return rig.wait(slot); };
  constexpr std::size_t kKeys = 4000;  // x ~310 bytes per entry: > 1 MiB
  std::vector<std::string> keys;
  std::vector<std::pair<std::string, Location>> entries;
  for (std::size_t i = 0; i < kKeys; ++i) {
    keys.push_back(std::string(200, 'k') + std::to_string(i));
    entries.emplace_back(keys.back(), loc(i * 4096));
  }
  std::optional<Result<std::vector<bool>>> reg;
  client.register_keys(entries, [&](auto r) { reg = std::move(r); });
  auto registered = wait(reg);
  ASSERT_TRUE(registered.ok()) << registered.status().ToString();
  EXPECT_EQ(registered->size(), kKeys);
  EXPECT_EQ(std::count(registered->begin(), registered->end(), true), std::ptrdiff_t(kKeys));
  EXPECT_GE(client.calls(), 3u);  // the hello is not counted: 3 requests of <= 512 KiB
  EXPECT_EQ(server.directory().size(), kKeys);

  // The leading hits over every request, with a lease from each.
  std::vector<std::string> asked = keys;
  asked.push_back("missing");
  asked.push_back(keys[0]);  // after a miss: not a leading hit
  std::optional<Result<LookupReply>> look;
  client.lookup(asked, [&](auto r) { look = std::move(r); });
  auto hits = wait(look);
  ASSERT_TRUE(hits.ok()) << hits.status().ToString();
  ASSERT_EQ(hits->locations.size(), kKeys);
  EXPECT_EQ(hits->locations[kKeys - 1], loc((kKeys - 1) * 4096));
  EXPECT_GT(hits->leases.size(), 1u);
  EXPECT_EQ(server.directory().open_leases(), hits->leases.size());

  std::optional<Result<ProbeReply>> probe;
  client.probe(asked, false, [&](auto r) { probe = std::move(r); });
  auto probed = wait(probe);
  ASSERT_TRUE(probed.ok());
  EXPECT_EQ(probed->hits, kKeys);

  // A miss in the first request ends the lookup there: no later request.
  std::vector<std::string> first_missing = keys;
  first_missing[0] = "missing";
  const auto before = client.calls();
  std::optional<Result<LookupReply>> none;
  client.lookup(first_missing, [&](auto r) { none = std::move(r); });
  auto no_hits = wait(none);
  ASSERT_TRUE(no_hits.ok());
  EXPECT_TRUE(no_hits->locations.empty());
  EXPECT_TRUE(no_hits->leases.empty());
  EXPECT_EQ(client.calls(), before + 1);

  std::optional<Result<std::size_t>> erased;
  client.erase(keys, [&](auto r) { erased = std::move(r); });
  auto deleted = wait(erased);
  ASSERT_TRUE(deleted.ok());
  EXPECT_EQ(*deleted, kKeys);
}

// A key no frame holds is refused by the client, nothing sent: before, it
// went as a request of its own, the directory closed the connection with
// bad_frame, and every call in flight on it failed (the hint thread and the
// scheduler share one client, SPEC R3.9). Session-24 review. Since session
// 28 a key past the directory's kMaxKeyBytes is refused first, the same way.
TEST(DirectoryServer, R1_2_AKeyNoFrameHoldsIsRefusedByTheClientAlone) {
  Rig rig;
  DirectoryClient& client = *rig.client;
  std::optional<Result<std::vector<bool>>> reg;
  client.register_keys({{"a", loc(0)}}, [&](auto r) { reg = std::move(r); });
  ASSERT_TRUE(rig.wait(reg).ok());
  const std::string huge(2u << 20, 'k');
  const auto calls = client.calls();
  std::optional<Result<ProbeReply>> big;
  std::optional<Result<ProbeReply>> small;
  client.probe({"a", huge}, false, [&](auto r) { big = std::move(r); });
  client.probe({"a"}, true, [&](auto r) { small = std::move(r); });
  auto refused = rig.wait(big);
  ASSERT_FALSE(refused.ok());
  EXPECT_EQ(refused.status().code(), ErrorCode::kBadRequest) << refused.status().ToString();
  EXPECT_NE(refused.status().message().find("takes keys of at most 1024"), std::string::npos)
      << refused.status().ToString();
  auto other = rig.wait(small);
  ASSERT_TRUE(other.ok()) << other.status().ToString();  // the connection lives on
  EXPECT_EQ(other->hits, 1u);
  reg.reset();
  client.register_keys({{"b", loc(4096)}, {huge, loc(8192)}}, [&](auto r) { reg = std::move(r); });
  ASSERT_FALSE(rig.wait(reg).ok());
  EXPECT_FALSE(rig.server.directory().find("b").has_value());  // nothing of it sent
  std::optional<Result<LookupReply>> look;
  client.lookup({huge}, [&](auto r) { look = std::move(r); });
  EXPECT_EQ(rig.wait(look).status().code(), ErrorCode::kBadRequest);
  std::optional<Result<std::size_t>> erased;
  client.erase({"a", huge}, [&](auto r) { erased = std::move(r); });
  EXPECT_EQ(rig.wait(erased).status().code(), ErrorCode::kBadRequest);
  EXPECT_TRUE(rig.server.directory().find("a").has_value());
  EXPECT_EQ(client.calls(), calls + 1);  // only the small probe went
}

// A lookup whose reply comes after the call timed out leaves a lease nobody
// will release: the client releases it when the late reply comes, instead of
// the lease holding its keys from eviction and deletion for its TTL.
TEST(DirectoryServer, R1_1_ALeaseThatCameTooLateIsReleased) {
  Rig rig;
  DirectoryClient& client = *rig.client;
  std::optional<Result<std::vector<bool>>> reg;
  client.register_keys({{"a", loc(0)}}, [&](auto r) { reg = std::move(r); });
  ASSERT_TRUE(rig.wait(reg).ok());
  rig.world.network().set_extra_delay("dir", 700ms);  // a round trip of 1.4 s > the 1 s timeout
  std::optional<Result<LookupReply>> look;
  client.lookup({"a"}, [&](auto r) { look = std::move(r); });
  EXPECT_EQ(rig.wait(look).status().code(), ErrorCode::kTimeout);
  rig.world.network().set_extra_delay("dir", {});
  rig.world.run_for(500ms);  // the reply comes at 1.4 s; the release goes at once
  EXPECT_EQ(rig.server.directory().open_leases(), 0u);  // not held for the 5 s TTL
  EXPECT_EQ(rig.server.directory().size(), 1u);
}

// boot_changed stored agent, boot and from of any length (the record bound
// counts boots, not bytes): 50 reports of 340 KiB grew the directory by
// 120 MB. A name no location can hold is refused, nothing retired (review, session 26).
TEST(DirectoryServer, R1_2_ABootReportNamingMoreThanALocationHoldsIsRefused) {
  Rig rig;
  const std::string huge(2000, 'b');
  for (const auto& [agent, boot, from] :
       std::vector<std::tuple<std::string, std::string, std::string>>{
           {"mem:9000", huge, "boot1"}, {"mem:9000", "boot2", huge}, {huge, "boot2", "boot1"}}) {
    std::optional<Result<std::size_t>> r;
    rig.client->boot_changed(agent, boot, from, [&](auto x) { r = std::move(x); });
    const auto st = rig.wait(r).status();
    EXPECT_EQ(st.code(), ErrorCode::kBadRequest) << st.ToString();
    EXPECT_NE(st.message().find("at most 1000 bytes"), std::string::npos) << st.message();
  }
  // Nothing was retired: a register under boot1 still goes.
  std::optional<Result<std::vector<bool>>> reg;
  rig.client->register_keys({{"k", loc(0, "boot1")}}, [&](auto x) { reg = std::move(x); });
  auto registered = rig.wait(reg);
  ASSERT_TRUE(registered.ok()) << registered.status().ToString();
  EXPECT_EQ(*registered, std::vector<bool>{true});
}

// Lease ids restarted at 1 in every directory process: a release a reader
// sent after a restart freed another reader's lease 1 of the new process (its
// keys evictable, their pages reclaimable while it read). The server draws
// the first id from its seeded stream (review, session 26).
TEST(DirectoryServer, R1_1_LeaseIdsDoNotRestartAtOne) {
  Rig rig;
  std::optional<Result<std::vector<bool>>> reg;
  rig.client->register_keys({{"k", loc(0)}}, [&](auto x) { reg = std::move(x); });
  ASSERT_TRUE(rig.wait(reg).ok());
  std::optional<Result<LookupReply>> look;
  rig.client->lookup({"k"}, [&](auto x) { look = std::move(x); });
  auto reply = rig.wait(look);
  ASSERT_TRUE(reply.ok()) << reply.status().ToString();
  ASSERT_EQ(reply->leases.size(), 1u);
  EXPECT_GT(reply->leases[0], 1u);
  // A directory of another first id refuses the release of this one's lease.
  Directory other({.first_lease = reply->leases[0] + 1000});
  EXPECT_EQ(other.release(reply->leases[0]).code(), ErrorCode::kNotFound);
}

// A connect that completes after the handshake timed out is aborted: the
// server kept each such session (greeted, never said hello to) until its
// hello timeout, counted against --max-connections (review, session 26).
TEST(DirectoryServer, R1_3_AConnectThatCameAfterItsTimeoutIsAborted) {
  Rig rig;
  rig.world.network().set_extra_delay("dir", 600ms);  // the connect takes 1.2 s > the 1 s timeout
  std::optional<Result<LookupReply>> look;
  rig.client->lookup({"a"}, [&](auto r) { look = std::move(r); });
  EXPECT_EQ(rig.wait(look).status().code(), ErrorCode::kTimeout);
  rig.world.network().set_extra_delay("dir", {});
  std::optional<Result<LookupReply>> again;
  rig.client->lookup({"a"}, [&](auto r) { again = std::move(r); });
  EXPECT_TRUE(rig.wait(again).ok());
  rig.world.run_for(1s);
  EXPECT_EQ(rig.server.connections(), 1u);
}

// The directory gives each reclaimed page out once: a reply that came after
// the call timed out was dropped, and its pages (up to a region's) were
// lost to their owner for good. They reach the late handler (review, session 26).
TEST(DirectoryServer, R1_1_PagesReclaimedTooLateStillReachTheOwner) {
  Rig rig;
  DirectoryClient& client = *rig.client;
  std::vector<std::pair<std::string, Location>> entries;
  std::vector<std::string> keys;
  for (int i = 0; i < 8; ++i) {
    keys.push_back("k" + std::to_string(i));
    entries.emplace_back(keys.back(), loc(4096 * static_cast<std::uint64_t>(i)));
  }
  std::optional<Result<std::vector<bool>>> reg;
  client.register_keys(entries, [&](auto r) { reg = std::move(r); });
  ASSERT_TRUE(rig.wait(reg).ok());
  std::optional<Result<std::size_t>> erased;
  client.erase(keys, [&](auto r) { erased = std::move(r); });
  ASSERT_TRUE(rig.wait(erased).ok());
  rig.world.network().set_extra_delay("dir", 700ms);  // a round trip of 1.4 s > the 1 s timeout
  std::optional<Result<std::vector<Location>>> back;
  std::vector<Location> late;
  client.reclaim(
      {{"mem:9000", 3, "readhandle"}}, 8, [&](auto r) { back = std::move(r); }, nullptr,
      [&](Result<std::vector<Location>> r) {
        if (r.ok()) late.insert(late.end(), r->begin(), r->end());
      });
  EXPECT_EQ(rig.wait(back).status().code(), ErrorCode::kTimeout);
  rig.world.network().set_extra_delay("dir", {});
  rig.world.run_for(2s);
  EXPECT_EQ(late.size(), 8u);
}

// Short keys make small requests but a location per hit comes back: a lookup
// of 8000 such keys was one request whose reply (1.4 MB) no frame held.
TEST(DirectoryServer, R1_1_ALookupIsCutSoThatItsReplyFitsAFrameToo) {
  Rig rig("s3cret", 10000);
  DirectoryClient& client = *rig.client;
  auto wait = [&](auto& slot) { return rig.wait(slot); };
  constexpr std::size_t kKeys = 8000;
  std::vector<std::string> keys;
  std::vector<std::pair<std::string, Location>> entries;
  for (std::size_t i = 0; i < kKeys; ++i) {
    char key[40];
    std::snprintf(key, sizeof key, "%032zx", i);
    keys.emplace_back(key);
    entries.emplace_back(
        keys.back(), Location{"mem0.rack7.example:17000", "0f1e2d3c-4b5a-6978-8796-a5b4c3d2e1f0:12",
                              3, "00112233445566778899aabbccddeeff", i * 4096, 4096});
  }
  std::optional<Result<std::vector<bool>>> reg;
  client.register_keys(entries, [&](auto r) { reg = std::move(r); });
  ASSERT_TRUE(wait(reg).ok());
  std::optional<Result<LookupReply>> look;
  client.lookup(keys, [&](auto r) { look = std::move(r); });
  auto hits = wait(look);
  ASSERT_TRUE(hits.ok()) << hits.status().ToString();
  EXPECT_EQ(hits->locations.size(), kKeys);
  std::optional<Result<ProbeReply>> probe;
  client.probe(keys, true, [&](auto r) { probe = std::move(r); });
  auto probed = wait(probe);
  ASSERT_TRUE(probed.ok()) << probed.status().ToString();
  EXPECT_EQ(probed->locations.size(), kKeys);

  // A key that is not UTF-8 in a call big enough to be measured key by key is
  // refused before anything is sent (the wire would have replaced its bytes),
  // never thrown on the caller's thread; the call erases nothing.
  std::vector<std::string> with_bad = keys;
  with_bad.push_back(std::string(40000, 'x') + "\xff\xfe");
  std::optional<Result<std::size_t>> erased;
  client.erase(with_bad, [&](auto r) { erased = std::move(r); });
  auto refused = wait(erased);
  ASSERT_FALSE(refused.ok());
  EXPECT_EQ(refused.status().code(), ErrorCode::kBadRequest);
  std::optional<Result<std::size_t>> erased_good;
  client.erase(keys, [&](auto r) { erased_good = std::move(r); });
  auto deleted = wait(erased_good);
  ASSERT_TRUE(deleted.ok()) << deleted.status().ToString();
  EXPECT_EQ(*deleted, kKeys);
}

// SPEC R1.2: two keys that are not UTF-8 and differ only in their invalid
// bytes reached the directory as one key (FramedConn replaces invalid bytes
// with U+FFFD), so the second store answered already_present and a reader of
// it got the first key's bytes. The client refuses such keys and sends
// nothing (review, session 28).
TEST(DirectoryServer, R1_2_AKeyThatIsNotUtf8IsRefusedByTheClient) {
  Rig rig;
  DirectoryClient& client = *rig.client;
  std::optional<Result<std::vector<bool>>> reg;
  client.register_keys({{"a\xff", loc(0)}}, [&](auto r) { reg = std::move(r); });
  auto refused = rig.wait(reg);
  ASSERT_FALSE(refused.ok());
  EXPECT_EQ(refused.status().code(), ErrorCode::kBadRequest);
  EXPECT_NE(refused.status().message().find("not valid UTF-8"), std::string::npos);
  std::optional<Result<LookupReply>> look;
  client.lookup({"a\xfe"}, [&](auto r) { look = std::move(r); });
  EXPECT_EQ(rig.wait(look).status().code(), ErrorCode::kBadRequest);
  EXPECT_EQ(client.calls(), 0u);
  EXPECT_EQ(rig.server.directory().size(), 0u);
}

// A peer that accepts and then says nothing (a hung or stopped process) fails
// the calls waiting on it after the reply timeout; before, they waited for good.
TEST(DirectoryServer, R1_2_APeerThatNeverGreetsFailsTheCallsInTime) {
  Rig rig;
  std::vector<std::shared_ptr<runtime::Conn>> held;
  auto mute = rig.server_node.transport().listen(
      {"dir", 7200}, *rig.server_strand, [&](std::shared_ptr<runtime::Conn> c) {
        c->start(
            *rig.server_strand, [](std::string_view) {}, [](const Status&) {});
        held.push_back(std::move(c));
      });
  ASSERT_TRUE(mute.ok());
  DirectoryClient client(rig.client_node, *rig.client_strand,
                         RpcConnection::Options{.address = {"dir", 7200}, .secret = "s3cret"});
  const auto t0 = rig.world.loop().now();
  std::optional<Result<LookupReply>> look;
  client.lookup({"k"}, [&](auto r) { look = std::move(r); });
  auto r = rig.wait(look);
  EXPECT_EQ(r.status().code(), ErrorCode::kTimeout) << r.status().ToString();
  EXPECT_LE(rig.world.loop().now() - t0, std::chrono::milliseconds(1100));
}

// An unreachable peer (partitioned, TCP connect timing out after 10 s as on
// Linux) fails the calls waiting on the connect after the reply timeout too:
// the connect, greeting and hello reply share one deadline.
TEST(DirectoryServer, R1_2_AnUnreachablePeerFailsTheCallsInTime) {
  Rig rig;
  rig.world.network().set_connect_timeout(std::chrono::seconds(10));
  rig.world.network().partition("dir");
  const auto t0 = rig.world.loop().now();
  std::optional<Result<LookupReply>> look;
  rig.client->lookup({"k"}, [&](auto r) { look = std::move(r); });
  auto r = rig.wait(look);
  EXPECT_EQ(r.status().code(), ErrorCode::kTimeout) << r.status().ToString();
  EXPECT_LE(rig.world.loop().now() - t0, std::chrono::milliseconds(1100));
  // Reachable again: the next call connects anew and is answered.
  rig.world.network().heal("dir");
  std::optional<Result<LookupReply>> again;
  rig.client->lookup({"k"}, [&](auto r2) { again = std::move(r2); });
  EXPECT_TRUE(rig.wait(again).ok());
}

// A server that greets, takes the hello, and answers the next request with a
// frame that is not JSON; it keeps every frame it gets.
struct GarblingServer {
  sim::SimWorld& world;
  std::unique_ptr<runtime::Listener> listener;
  std::shared_ptr<runtime::Conn> conn;
  protocol::FrameDecoder decoder;
  std::vector<std::string> frames;
  GarblingServer(sim::SimNode& node, runtime::Strand& strand, sim::SimWorld& w) : world(w) {
    listener = node.transport()
                   .listen({"dir", 7100}, strand,
                           [this, &strand](std::shared_ptr<runtime::Conn> c) {
                             conn = std::move(c);
                             conn->start(
                                 strand, [this](std::string_view bytes) { on_bytes(bytes); },
                                 [](const Status&) {});
                             send({{"op", "greeting"}, {"version", 1}, {"challenge", kChallenge}});
                           })
                   .value();
  }
  void send(const Json& m) { conn->send(protocol::encode_frame(m.dump())); }
  void on_bytes(std::string_view bytes) {
    const std::size_t before = frames.size();
    ASSERT_TRUE(decoder.feed(bytes, frames).ok());
    for (std::size_t i = before; i < frames.size(); ++i) {
      const Json m = Json::parse(frames[i]);
      if (i == 0) {
        send({{"id", m["id"]}, {"ok", true}, {"service", "rcxl-directory"}, {"version", 1}});
      } else if (i == 1 && raw_answer) {
        conn->send(protocol::encode_frame(R"({"id":)" + m["id"].dump() + "," + *raw_answer + "}"));
      } else if (i == 1 && answer) {
        Json reply = *answer;
        reply["id"] = m["id"];
        send(reply);
      } else if (i == 1) {
        conn->send(protocol::encode_frame("{not json"));
      }
    }
  }
  static constexpr char kChallenge[] =
      "00112233445566778899aabbccddeeff00112233445566778899aabbccddeeff";
  std::optional<Json> answer;             // the second request's reply instead of a bad frame
  std::optional<std::string> raw_answer;  // its fields after the id, as text
};

// SPEC R1.2: a client that gets a bad frame fails its calls and sends the
// server nothing back (an error object would read there as a request).
TEST(DirectoryServer, R1_2_AClientAnswersABadReplyFrameByClosingNotByReplying) {
  Rig rig;
  GarblingServer garbling(rig.server_node, *rig.server_strand, rig.world);
  DirectoryClient client(rig.client_node, *rig.client_strand,
                         RpcConnection::Options{.address = {"dir", 7100}, .secret = "s3cret"});
  std::optional<Result<LookupReply>> look;
  client.lookup({"k"}, [&](auto r) { look = std::move(r); });
  auto r = rig.wait(look);
  EXPECT_EQ(r.status().code(), ErrorCode::kClosed) << r.status().ToString();
  rig.world.run_for(std::chrono::milliseconds(10));
  EXPECT_EQ(garbling.frames.size(), 2u) << garbling.frames.back();  // hello, lookup: no more
}

// A reply is input too (R1.2): a 300k-deep `error` would have crashed the
// client copying it; the frame is refused and the call fails.
TEST(DirectoryServer, R1_2_AReplyNestedDeeperThanTheLimitFailsTheCall) {
  Rig rig;
  GarblingServer garbling(rig.server_node, *rig.server_strand, rig.world);
  garbling.raw_answer =
      R"("ok":false,"error":)" + std::string(300000, '[') + std::string(300000, ']');
  DirectoryClient client(rig.client_node, *rig.client_strand,
                         RpcConnection::Options{.address = {"dir", 7100}, .secret = "s3cret"});
  std::optional<Result<LookupReply>> look;
  client.lookup({"k"}, [&](auto r) { look = std::move(r); });
  auto r = rig.wait(look);
  EXPECT_EQ(r.status().code(), ErrorCode::kClosed) << r.status().ToString();
}

// A reply is input too (R1.2): a lookup or probe reply naming more hits than
// keys asked is an error of that call, not locations for keys nobody asked.
TEST(DirectoryServer, R1_2_AReplyWithMoreHitsThanKeysAskedFailsTheCall) {
  const Json two_locations = {
      {"ok", true}, {"lease", 1}, {"locations", {to_json(loc(0)), to_json(loc(4096))}}};
  const Json three_hits = {{"ok", true}, {"hits", 3}};
  for (const Json& answer : {two_locations, three_hits}) {
    SCOPED_TRACE(answer.dump());
    Rig rig;
    GarblingServer server(rig.server_node, *rig.server_strand, rig.world);
    server.answer = answer;
    DirectoryClient client(rig.client_node, *rig.client_strand,
                           RpcConnection::Options{.address = {"dir", 7100}, .secret = "s3cret"});
    Status status;
    if (answer.contains("locations")) {
      std::optional<Result<LookupReply>> look;
      client.lookup({"k"}, [&](auto r) { look = std::move(r); });
      status = rig.wait(look).status();
      // Its lease is released, not held until its TTL (review, session 28).
      rig.world.run_for(std::chrono::milliseconds(10));
      ASSERT_EQ(server.frames.size(), 3u);
      const Json release = Json::parse(server.frames[2]);
      EXPECT_EQ(release["op"], "release");
      EXPECT_EQ(release["lease"], 1);
    } else {
      std::optional<Result<ProbeReply>> probe;
      client.probe({"k"}, false, [&](auto r) { probe = std::move(r); });
      status = rig.wait(probe).status();
    }
    EXPECT_EQ(status.code(), ErrorCode::kInternal) << status.ToString();
  }
}

// A refusal coded "ok" is no code of the contract: release (and a hello)
// took it for success (review, session 26).
TEST(DirectoryServer, R1_2_ARefusalCodedOkIsNoSuccess) {
  Rig rig;
  GarblingServer server(rig.server_node, *rig.server_strand, rig.world);
  server.answer = {{"ok", false}, {"error", {{"code", "ok"}, {"message", "x"}}}};
  DirectoryClient client(rig.client_node, *rig.client_strand,
                         RpcConnection::Options{.address = {"dir", 7100}, .secret = "s3cret"});
  std::optional<Status> released;
  client.release(1, [&](const Status& s) { released = s; });
  EXPECT_EQ(rig.wait(released).code(), ErrorCode::kInternal);
}

// PROTOCOL.md's table is what a peer may send: a local code from the wire
// ("closed", "unavailable") read as this side's own failure, so a read_hint
// refused "closed" was forgotten and never ended (review, session 32).
TEST(DirectoryServer, R1_2_ALocalOnlyCodeFromAPeerIsInternal) {
  for (const char* local : {"closed", "unavailable", "timeout", "io_error", "remote_access"}) {
    SCOPED_TRACE(local);
    const Status st =
        reply_status({{"id", 1}, {"ok", false}, {"error", {{"code", local}, {"message", "m"}}}});
    EXPECT_EQ(st.code(), ErrorCode::kInternal) << st.ToString();
    EXPECT_NE(st.message().find(local), std::string::npos) << st.ToString();
  }
  EXPECT_EQ(
      reply_status({{"id", 1}, {"ok", false}, {"error", {{"code", "not_found"}, {"message", "m"}}}})
          .code(),
      ErrorCode::kNotFound);
}

// A register reply must answer each entry with a boolean: a short one (or a
// non-boolean answer) made the answers of later batches slide onto earlier
// keys, and a registered key's page could go back for reuse.
TEST(DirectoryServer, R1_2_ARegisterReplyThatDoesNotAnswerEachEntryFailsTheCall) {
  for (const Json& registered :
       {Json::array({true}), Json::array({true, true, true}), Json::array({true, 1}), Json(true)}) {
    SCOPED_TRACE(registered.dump());
    Rig rig;
    GarblingServer server(rig.server_node, *rig.server_strand, rig.world);
    server.answer = {{"ok", true}, {"registered", registered}};
    DirectoryClient client(rig.client_node, *rig.client_strand,
                           RpcConnection::Options{.address = {"dir", 7100}, .secret = "s3cret"});
    std::optional<Result<std::vector<bool>>> reg;
    client.register_keys({{"a", loc(0)}, {"b", loc(4096)}}, [&](auto r) { reg = std::move(r); });
    auto r = rig.wait(reg);
    EXPECT_EQ(r.status().code(), ErrorCode::kInternal) << r.status().ToString();
  }
}

// A location is at most 1000 bytes as JSON (escapes counted), so a lookup
// reply stays within what clients expect per location (a longer one failed
// every call on a reader's connection: its reply outgrew the frame limit).
// A boot id and a generation of 255 bytes each fit.
TEST(DirectoryServer, R1_2_ALocationOver1000BytesAsJsonIsBadRequest) {
  Rig rig;
  Location long_boot = loc(0);
  long_boot.boot = std::string(128, 'b') + ":" + std::string(255, 'g') + "~12";
  std::optional<Result<std::vector<bool>>> ok;
  rig.client->register_keys({{"long-boot", long_boot}}, [&](auto r) { ok = std::move(r); });
  ASSERT_TRUE(rig.wait(ok).ok());
  const std::size_t base = to_json(loc(0)).dump().size() - std::string("readhandle").size();
  for (std::size_t n : {1000 - base, 1001 - base}) {
    Location l = loc(0);
    l.read_handle = std::string(n, 'h');
    std::optional<Result<std::vector<bool>>> reg;
    rig.client->register_keys({{"k" + std::to_string(n), l}}, [&](auto r) { reg = std::move(r); });
    auto r = rig.wait(reg);
    if (n == 1000 - base) {
      ASSERT_TRUE(r.ok()) << r.status().ToString();
      EXPECT_EQ(*r, std::vector<bool>{true});
    } else {
      EXPECT_EQ(r.status().code(), ErrorCode::kBadRequest) << r.status().ToString();
      EXPECT_FALSE(rig.server.directory().find("k" + std::to_string(n)).has_value());
    }
  }
  // Escapes count: 200 control bytes are 1200 bytes on the wire.
  Location escaped = loc(0);
  escaped.read_handle = std::string(200, '\x01');
  std::optional<Result<std::vector<bool>>> refused;
  rig.client->register_keys({{"escaped", escaped}}, [&](auto r) { refused = std::move(r); });
  EXPECT_EQ(rig.wait(refused).status().code(), ErrorCode::kBadRequest);
}

// R7 (as the agent's --max-connections): a connection past the limit is
// closed at once, before a greeting; those already in are served.
TEST(DirectoryServer, R7_MaxConnectionsClosesTheNextConnection) {
  sim::SimWorld world{4};
  sim::SimNode& server_node = world.add_node("dir");
  sim::SimNode& client_node = world.add_node("gpu");
  auto server_strand = server_node.make_strand("dir");
  auto client_strand = client_node.make_strand("client");
  DirectoryServer server(server_node, *server_strand,
                         {.directory = {}, .secret = "s3cret", .max_connections = 1});
  ASSERT_TRUE(server.start({"dir", 7000}).ok());
  auto client = [&] {
    return std::make_unique<DirectoryClient>(
        client_node, *client_strand,
        RpcConnection::Options{.address = {"dir", 7000}, .secret = "s3cret"});
  };
  auto first = client();
  auto second = client();
  std::optional<Result<LookupReply>> one, two;
  first->lookup({"k"}, [&](auto r) { one = std::move(r); });
  ASSERT_TRUE(world.run_until([&] { return one.has_value(); }).ok());
  EXPECT_TRUE(one->ok()) << one->status().ToString();
  second->lookup({"k"}, [&](auto r) { two = std::move(r); });
  ASSERT_TRUE(world.run_until([&] { return two.has_value(); }).ok());
  EXPECT_FALSE(two->ok());
  EXPECT_EQ(server.connections(), 1u);
  std::optional<Result<LookupReply>> again;
  first->lookup({"k"}, [&](auto r) { again = std::move(r); });
  ASSERT_TRUE(world.run_until([&] { return again.has_value(); }).ok());
  EXPECT_TRUE(again->ok());
}

// A server that greets every connection and answers its hello, then never
// says another word (a hung process whose TCP stays up).
struct HangsAfterHello {
  struct Peer {
    std::shared_ptr<runtime::Conn> conn;
    protocol::FrameDecoder decoder;
  };
  std::unique_ptr<runtime::Listener> listener;
  std::vector<std::unique_ptr<Peer>> peers;
  HangsAfterHello(sim::SimNode& node, runtime::Strand& strand) {
    listener = node.transport()
                   .listen({"dir", 7300}, strand,
                           [this, &strand](std::shared_ptr<runtime::Conn> c) {
                             auto& p = *peers.emplace_back(std::make_unique<Peer>());
                             p.conn = std::move(c);
                             p.conn->start(
                                 strand, [this, &p](std::string_view bytes) { on_bytes(p, bytes); },
                                 [](const Status&) {});
                             send(p, {{"op", "greeting"},
                                      {"version", 1},
                                      {"challenge", GarblingServer::kChallenge}});
                           })
                   .value();
  }
  static void send(Peer& p, const Json& m) { p.conn->send(protocol::encode_frame(m.dump())); }
  void on_bytes(Peer& p, std::string_view bytes) {
    std::vector<std::string> frames;
    ASSERT_TRUE(p.decoder.feed(bytes, frames).ok());
    for (const auto& f : frames) {
      const Json m = Json::parse(f);
      if (m.value("op", "") == "hello") {
        send(p, {{"id", m["id"]}, {"ok", true}, {"service", "rcxl-directory"}, {"version", 1}});
      }
    }
  }
};

// A call that times out without a word from the peer since it went out gives
// the connection up: the next call connects anew (a host that died leaves TCP
// open for many minutes, and every call would time out on it meanwhile).
TEST(DirectoryServer, R1_2_ASilentPeerIsGivenUpAndTheNextCallReconnects) {
  Rig rig;
  HangsAfterHello hung(rig.server_node, *rig.server_strand);
  DirectoryClient client(rig.client_node, *rig.client_strand,
                         RpcConnection::Options{.address = {"dir", 7300}, .secret = "s3cret"});
  for (int call = 1; call <= 2; ++call) {
    std::optional<Result<LookupReply>> look;
    client.lookup({"k"}, [&](auto r) { look = std::move(r); });
    EXPECT_EQ(rig.wait(look).status().code(), ErrorCode::kTimeout);
    EXPECT_EQ(hung.peers.size(), static_cast<std::size_t>(call));  // one connection per call
  }
}

}  // namespace
}  // namespace rcxl::directory
