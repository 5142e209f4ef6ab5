// A peer's reply is input too (SPEC R1.2: bad input never crashes or hangs).
// A scripted agent answers one op with a malformed reply; the client's call
// must end (an error or a miss) and the process live on.
#include <gtest/gtest.h>

#include <algorithm>
#include <functional>
#include <utility>

#include "core/protocol/framed_conn.h"
#include "tests/client/client_rig.h"

namespace rcxl::client::testing {
namespace {

// An agent that speaks the handshake and answers each op as told: the default
// is a well-formed reply, `override_op` gets `reply` (its "id" filled in).
class ScriptedAgent {
 public:
  ScriptedAgent(ClientRig& rig, Json greeting, std::string override_op, Json reply, Json actions)
      : nic_(rig.fabric.add_nic("scripted")),
        node_(rig.world.add_node("scripted")),
        strand_(node_.make_strand("s")),
        greeting_(std::move(greeting)),
        override_op_(std::move(override_op)),
        reply_(std::move(reply)),
        actions_(std::move(actions)) {
    // Real memory behind the well-formed maps: stores land, so loads and
    // read hints of stored keys run too.
    auto reg = nic_.register_memory(pool_, 0, pool_.size(),
                                    runtime::kAccessRemoteRead | runtime::kAccessRemoteWrite);
    EXPECT_TRUE(reg.ok());
    registration_ = *reg;
    auto l =
        node_.transport().listen({"scripted", 7000}, *strand_, [this, alive = alive_](auto raw) {
          if (!*alive) return;
          auto conn = protocol::FramedConn::Make(std::move(raw));
          conns_.push_back(conn);
          conn->start(
              *strand_,
              [this, alive, weak = std::weak_ptr<protocol::FramedConn>(conn)](Json m) {
                if (!*alive) return;  // the rig may still deliver frames after this is gone
                requests_.push_back(m);
                Json reply = answer(m);
                if (m.value("op", "") == delayed_op_) {
                  strand_->post_after(delay_, [alive, weak, reply = std::move(reply)] {
                    if (!*alive) return;
                    if (auto c = weak.lock()) c->send(reply);
                  });
                } else if (auto c = weak.lock()) {
                  c->send(reply);
                }
              },
              [](const Status&) {});
          conn->send(greeting_);
        });
    listener_ = std::move(l).value();
  }

  ~ScriptedAgent() {
    *alive_ = false;
    for (auto& c : conns_) c->abort();
    (void)nic_.deregister(registration_);  // before pool_ goes
  }

  static runtime::Address address() { return {"scripted", 7000}; }
  // Every alloc answers region 1 with new handles, as an agent restarted
  // without its region table issues ids anew.
  void reissue_region_ids() { reissue_ = true; }
  // From now on allocs get new ids again (the restarted agent moved past them).
  void issue_new_region_ids() { reissue_ = false; }
  // The hello says the agent takes alloc tokens (it still ignores them).
  void advertise_alloc_tokens() { alloc_tokens_ = true; }
  // How many requests got the malformed reply (a case that sends none tests nothing).
  int overridden() const { return overridden_; }
  // Replies to `op` leave `delay` after their request came (others at once).
  void delay_replies(std::string op, runtime::Duration delay) {
    delayed_op_ = std::move(op);
    delay_ = delay;
  }
  const std::vector<Json>& requests() const { return requests_; }
  // The next map answers boot_changed (the boot moved while it ran, R6.5) and
  // the agent's boot is `next` from then on: a map under another epoch gets
  // stale_epoch naming it, as PROTOCOL.md's agent answers.
  void change_boot_at_next_map(std::string next) { next_boot_ = std::move(next); }
  // From now on `op` gets `reply` (the ones before were well formed).
  void override_from_now(std::string op, Json reply) {
    override_op_ = std::move(op);
    reply_ = std::move(reply);
  }

 private:
  Json answer(const Json& request) {
    const std::string op = request.value("op", "");
    Json reply = {{"ok", true}};
    if (op == override_op_ || (op == "extension" && override_op_ == request.value("action", ""))) {
      reply = reply_;
      ++overridden_;
    } else if (op == "map" && !next_boot_.empty()) {
      boot_ = std::exchange(next_boot_, "");
      reply = {{"ok", false}, {"error", {{"code", "boot_changed"}, {"message", "m"}}}};
    } else if (op == "map" && request.value("epoch", boot_) != boot_) {
      reply = {
          {"ok", false}, {"error", {{"code", "stale_epoch"}, {"message", "m"}}}, {"boot", boot_}};
    } else if (op == "hello") {
      reply.update({{"boot", boot_},
                    {"conn", 1},
                    {"region_extension", {{"version", 1}, {"actions", actions_}}}});
      if (alloc_tokens_) reply["alloc_tokens"] = true;
    } else if (op == "alloc") {
      ++regions_;
      const std::string n = reissue_ ? std::to_string(regions_) : "";
      reply.update({{"region", reissue_ ? 1 : regions_},
                    {"size", request.value("size", 0)},
                    {"handle", "own" + n},
                    {"read_handle", "read" + n}});
    } else if (op == "map") {
      reply.update({{"boot", boot_},
                    {"addr", registration_.addr},
                    {"rkey", registration_.rkey},
                    {"size", registration_.length}});
    }
    // (The client's own bad_frame reply to a malformed frame has no id.)
    if (reply.is_object() && !reply.contains("id") && request.contains("id")) {
      reply["id"] = request.at("id");
    }
    return reply;
  }

  sim::SimNic& nic_;
  sim::SimNode& node_;
  sim::SimMemoryPool pool_{1 << 20};  // one region's worth, every region maps it
  runtime::Registration registration_;
  std::unique_ptr<runtime::Strand> strand_;
  std::unique_ptr<runtime::Listener> listener_;
  std::vector<std::shared_ptr<protocol::FramedConn>> conns_;
  Json greeting_;
  std::string override_op_;
  Json reply_;
  Json actions_;
  std::uint64_t regions_ = 0;
  bool reissue_ = false;
  std::string boot_ = "b1";
  std::string next_boot_;
  bool alloc_tokens_ = false;
  int overridden_ = 0;
  std::string delayed_op_;
  runtime::Duration delay_{};
  std::vector<Json> requests_;
  std::shared_ptr<bool> alive_ = std::make_shared<bool>(true);
};

const Json kGreeting = {{"op", "greeting"}, {"version", 1}, {"challenge", std::string(64, 'a')}};
const Json kAllActions = {"read_hint", "read_hint_end", "write_hint", "read_promote", "write_wait"};

// A client whose one agent is a scripted agent answering well-formed replies.
struct ScriptedRig {
  static Config scripted_config(const ClientRig& rig) {
    Config c = rig.config();
    c.agents = {ScriptedAgent::address()};
    return c;
  }
  ClientRig rig;
  ScriptedAgent agent{rig, kGreeting, "", {}, kAllActions};
  Config config = scripted_config(rig);
  Handler& h = rig.handler(config);
};

struct Case {
  const char* name;
  Json greeting;
  std::string op;  // "" = none overridden
  Json reply;
  Json actions = kAllActions;  // advertised in the hello
};

std::vector<Case> cases() {
  const Json stale_error = {{"code", "stale_epoch"}, {"message", "m"}};
  return {
      {"greeting op not a string", {{"op", 5}, {"challenge", std::string(64, 'a')}}, "", {}},
      {"greeting challenge not a string", {{"op", "greeting"}, {"challenge", 7}}, "", {}},
      {"hello ok not a boolean", kGreeting, "hello", {{"ok", "yes"}, {"boot", "b1"}}},
      {"hello error not an object", kGreeting, "hello", {{"ok", false}, {"error", "x"}}},
      {"hello error code not a string",
       kGreeting,
       "hello",
       {{"ok", false}, {"error", {{"code", 5}, {"message", {1}}}}}},
      {"hello boot not a string", kGreeting, "hello", {{"ok", true}, {"boot", 5}}},
      {"alloc region a string",
       kGreeting,
       "alloc",
       {{"ok", true}, {"region", "1"}, {"handle", "h"}, {"read_handle", "r"}}},
      {"alloc handle a number",
       kGreeting,
       "alloc",
       {{"ok", true}, {"region", 1}, {"handle", 3}, {"read_handle", "r"}}},
      {"alloc without fields", kGreeting, "alloc", {{"ok", true}}},
      {"alloc size zero",
       kGreeting,
       "alloc",
       {{"ok", true}, {"region", 1}, {"size", 0}, {"handle", "h"}, {"read_handle", "r"}}},
      {"alloc size 2^63",
       kGreeting,
       "alloc",
       {{"ok", true}, {"region", 1}, {"size", 1ull << 63}, {"handle", "h"}, {"read_handle", "r"}}},
      {"map boot a number",
       kGreeting,
       "map",
       {{"ok", true}, {"boot", 5}, {"addr", 0}, {"rkey", 1}, {"size", 4096}}},
      {"map rkey negative",
       kGreeting,
       "map",
       {{"ok", true}, {"boot", "b1"}, {"addr", 0}, {"rkey", -1}, {"size", 4096}}},
      {"map rkey over 32 bits",
       kGreeting,
       "map",
       {{"ok", true}, {"boot", "b1"}, {"addr", 0}, {"rkey", 1ull << 40}, {"size", 4096}}},
      {"map addr a string",
       kGreeting,
       "map",
       {{"ok", true}, {"boot", "b1"}, {"addr", "x"}, {"rkey", 1}, {"size", "big"}}},
      {"map stale boot a number",
       kGreeting,
       "map",
       {{"ok", false}, {"error", stale_error}, {"boot", 5}}},
      {"write_wait stale boot an object",
       kGreeting,
       "write_wait",
       {{"ok", false}, {"error", stale_error}, {"boot", {{"a", 1}}}}},
      {"write_hint stale boot a number",
       kGreeting,
       "write_hint",
       {{"ok", false}, {"error", stale_error}, {"boot", 5}},
       {"read_hint", "read_hint_end", "write_hint"}},  // no write_wait: stores write-hint
      {"read_hint stale boot an array",
       kGreeting,
       "read_hint",
       {{"ok", false}, {"error", stale_error}, {"boot", {1, 2}}}},
      {"reply id a string", kGreeting, "alloc", {{"ok", true}, {"id", "one"}}},
      {"read_hint_end reply an error without code",
       kGreeting,
       "read_hint_end",
       {{"ok", false}, {"error", {{"message", 5}}}}},
      {"reply not an object", kGreeting, "map", Json::array({1, 2})},
  };
}

TEST(MalformedReply, R1_2_AMalformedAgentReplyEndsTheCallAndCrashesNothing) {
  for (const auto& c : cases()) {
    SCOPED_TRACE(c.name);
    ClientRig rig;
    ScriptedAgent agent(rig, c.greeting, c.op, c.reply, c.actions);
    Config config = rig.config();
    config.agents = {ScriptedAgent::address()};
    config.read_hints = true;
    config.reply_timeout = 200ms;
    Handler& h = rig.handler(config);
    // Every call ends; what it ends with depends on which reply was bad.
    auto stored = rig.store(h, {item("k", "value")});
    if (stored.ok()) {
      EXPECT_EQ(stored->stored + stored->failed, 1u);
    }
    h.hint_read("r", {"k"});
    rig.settle(h);
    h.end_read_hint("r");
    rig.settle(h);
    auto loaded = rig.load(h, {"k"});
    ASSERT_TRUE(loaded.ok()) << loaded.status().ToString();
    // A miss, or the bytes stored: never others.
    if (!loaded->values.empty()) {
      EXPECT_EQ(text_of(loaded->values[0]), "value");
    }
    // Hints and waits are advice: a bad answer to one changes no store or load.
    if (c.op == "write_wait" || c.op == "write_hint" || c.op == "read_hint" ||
        c.op == "read_hint_end") {
      EXPECT_TRUE(stored.ok() && stored->stored == 1) << stored.status().ToString();
      EXPECT_EQ(loaded->values.size(), 1u);
    }
    if (!c.op.empty()) {
      EXPECT_GT(agent.overridden(), 0);
    }
  }
}

// A store against an agent whose `op` reply is `reply`: it stores nothing,
// and the region is freed (the free requests that name `region`, 0 any) and
// not held.
void expect_a_store_frees_the_region(const std::string& op, const Json& reply,
                                     std::uint64_t region = 0, const std::string& handle = "") {
  SCOPED_TRACE(reply.dump());
  ClientRig rig;
  ScriptedAgent agent(rig, kGreeting, op, reply, kAllActions);
  Config config = rig.config();
  config.agents = {ScriptedAgent::address()};
  config.reply_timeout = 200ms;
  Handler& h = rig.handler(config);
  auto stored = rig.store(h, {item("k", "value")});
  EXPECT_TRUE(!stored.ok() || stored->stored == 0u);
  rig.world.run_for(50ms);
  int frees = 0;
  for (const auto& r : agent.requests()) {
    frees += r.value("op", "") == "free" && (region == 0 || r.value("region", 0u) == region) &&
             (handle.empty() || r.value("handle", "") == handle);
  }
  EXPECT_GE(frees, 1);
  EXPECT_TRUE(h.regions().own_regions().empty());
}

// An alloc reply the client cannot use (another size, no read handle) still
// names a region the agent made for it, and only this client has its handle:
// it is freed, as a late alloc reply is (R1.5). It was left at the agent.
TEST(MalformedReply, R1_5_AnAllocReplyTheClientCannotUseFreesItsRegion) {
  for (const Json& reply :
       {Json{{"ok", true}, {"region", 7}, {"size", 0}, {"handle", "h7"}, {"read_handle", "r"}},
        Json{{"ok", true}, {"region", 7}, {"handle", "h7"}}}) {
    expect_a_store_frees_the_region("alloc", reply, 7, "h7");
  }
}

// PROTOCOL.md: a map reply's size is the region's. One of less, or none,
// was taken as it came: WRITEs past it failed, mapped again the same way for
// every store, and a read mapping of size 0 missed every load in silence. The
// client gives such a region up (review, session 26).
TEST(MalformedReply, R1_2_AMapReplySmallerThanItsRegionGivesTheRegionUp) {
  for (const Json& reply :
       {Json{{"ok", true}, {"boot", "b1"}, {"addr", 0}, {"rkey", 1}, {"size", 4096}},
        Json{{"ok", true}, {"boot", "b1"}, {"addr", 0}, {"rkey", 1}}}) {
    expect_a_store_frees_the_region("map", reply);
  }
}

// The same for a region mapped before: a map again (a recheck after an RDMA
// error, a reconnect) answered short gives the region up, handle and all.
TEST(MalformedReply, R1_2_AShortMapReplyToAMappedRegionGivesItUp) {
  ClientRig rig;
  ScriptedAgent agent(rig, kGreeting, "", {}, kAllActions);
  Config config = rig.config();
  config.agents = {ScriptedAgent::address()};
  config.reply_timeout = 200ms;
  Handler& h = rig.handler(config);
  ASSERT_EQ(rig.store(h, {item("k", "value")})->stored, 1u);
  ASSERT_EQ(h.regions().own_regions().size(), 1u);
  const OwnRegion own = h.regions().own_regions().begin()->second;
  agent.override_from_now("map",
                          {{"ok", true}, {"boot", "b1"}, {"addr", 0}, {"rkey", 1}, {"size", 4096}});
  h.regions().recheck(ScriptedAgent::address().ToString(), own.region);
  rig.world.run_for(50ms);
  EXPECT_TRUE(h.regions().own_regions().empty());
  int frees = 0;
  for (const auto& r : agent.requests()) {
    frees += r.value("op", "") == "free" && r.value("region", 0u) == own.region &&
             r.value("handle", "") == own.handle;
  }
  EXPECT_EQ(frees, 1);
}

std::vector<StoreItem> items(const std::string& prefix, int n) {
  std::vector<StoreItem> out;
  for (int i = 0; i < n; ++i) out.push_back(item(prefix + std::to_string(i), prefix + "-bytes"));
  return out;
}

// An alloc reply naming a region the client already holds under the same
// handle: the agent gave one region out twice. Taking its pages again would
// put two keys in each; the alloc is refused and the held keys keep their bytes.
TEST(MalformedReply, R1_2_AnAllocReplyNamingAHeldRegionAgainIsRefused) {
  ClientRig rig;
  const Json same_region = {
      {"ok", true}, {"region", 1}, {"size", 1 << 20}, {"handle", "h"}, {"read_handle", "r"}};
  ScriptedAgent agent(rig, kGreeting, "alloc", same_region, kAllActions);
  Config config = rig.config();
  config.agents = {ScriptedAgent::address()};
  Handler& h = rig.handler(config);
  ASSERT_EQ(rig.store(h, items("a", 256))->stored, 256u);  // the region's every page
  auto more = rig.store(h, {item("b", "b-bytes")});
  EXPECT_FALSE(more.ok() && more->stored > 0);
  EXPECT_EQ(agent.overridden(), 2);
  EXPECT_EQ(h.free_pages(), 0u);
  EXPECT_EQ(h.regions().own_regions().size(), 1u);
  auto loaded = rig.load(h, {"a0", "a255"});
  ASSERT_EQ(loaded->values.size(), 2u);
  EXPECT_EQ(text_of(loaded->values[0]), "a-bytes");
  EXPECT_EQ(text_of(loaded->values[1]), "a-bytes");
}

// SPEC R6.1: an alloc reply naming a held region id under a new handle means
// the agent issued the id anew (it restarted without its region table): the
// region held under it is gone there. It is given up like one a map finds
// gone: its keys leave the directory and its pages take no store.
TEST(MalformedReply, R6_1_AnAllocReplyReissuingAHeldRegionIdGivesTheOldRegionUp) {
  ScriptedRig scripted;
  auto& [rig, agent, config, h] = scripted;
  agent.reissue_region_ids();
  ASSERT_EQ(rig.store(h, {item("old", "old-bytes")})->stored, 1u);
  ASSERT_EQ(h.free_pages(), 255u);
  // 255 free pages are not enough: a second alloc, answered with region 1 again.
  auto r = rig.store(h, items("n", 256));
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(h.regions().regions_lost(), 1u);
  EXPECT_EQ(h.stats().regions_allocated, 2u);
  EXPECT_EQ(r->stored, 256u);  // all in the new region: the old one's pages went with it
  EXPECT_EQ(h.free_pages(), 0u);
  EXPECT_EQ(h.regions().own_regions().at({ScriptedAgent::address().ToString(), 1}).handle, "own2");
  EXPECT_FALSE(rig.directory_server->directory().find("old").has_value());
  auto loaded = rig.load(h, {"n0", "n255"});
  ASSERT_EQ(loaded->values.size(), 2u);
  EXPECT_EQ(text_of(loaded->values[1]), "n-bytes");
}

// SPEC R1.5 / R6.1 (review, session 30): an alloc whose first map is retried
// must not take over a region an alloc of the same id made meanwhile (an
// agent that restarted without its region table issues ids anew). The retry
// mapped whatever region then sat under the id, and both allocs answered it:
// two keys per page.
TEST(MalformedReply, R6_1_AMapRetryNeverTakesARegionAnotherAllocGotUnderItsId) {
  ScriptedRig scripted;
  auto& [rig, agent, config, h] = scripted;
  agent.reissue_region_ids();
  ASSERT_TRUE(rig.store(h, {item("hello", "x")}).ok());  // connected; region 1 "own1"
  // The next map fails with a code the client retries (after map_retry_delay).
  agent.override_from_now(
      "map", {{"ok", false}, {"error", {{"code", "extension_failed"}, {"message", "m"}}}});
  const std::string address = ScriptedAgent::address().ToString();
  std::optional<Result<OwnRegion>> first, second;
  h.strand().post([&] {
    h.regions().allocate(address, 1 << 20, [&](Result<OwnRegion> r) { first = std::move(r); });
  });
  rig.world.run_for(5ms);  // its alloc answered (region 1, "own2"), its map refused
  ASSERT_FALSE(first.has_value());
  agent.override_from_now("", {});
  h.strand().post([&] {
    h.regions().allocate(address, 1 << 20, [&](Result<OwnRegion> r) { second = std::move(r); });
  });
  const Result<OwnRegion> b = rig.wait(second);  // region 1, "own3"
  ASSERT_TRUE(b.ok()) << b.status().ToString();
  EXPECT_EQ(b->handle, "own3");
  agent.issue_new_region_ids();
  const Result<OwnRegion> a = rig.wait(first);
  // The first alloc's region went with the id's reissue: it gets a region of
  // its own, never the second alloc's, and frees nothing of it.
  ASSERT_TRUE(a.ok()) << a.status().ToString();
  EXPECT_NE(a->handle, "own3");
  EXPECT_NE(a->region, 1u);
  EXPECT_EQ(h.regions().own_regions().at({address, 1}).handle, "own3");
  for (const Json& m : agent.requests()) {
    EXPECT_FALSE(m.value("op", "") == "free" && m.value("handle", "") == "own3") << m.dump();
  }
}

// R6.5: a new region's first map answered boot_changed names no boot, so the
// retry's map went out under the old epoch, met stale_epoch, and that used up
// the one retry: the store failed with no_space against a healthy agent
// (review, session 32). The alloc may retry twice on boot news.
TEST(MalformedReply, R6_5_AFirstMapAnsweredBootChangedStillStores) {
  ScriptedRig scripted;
  auto& [rig, agent, config, h] = scripted;
  agent.change_boot_at_next_map("b2");
  auto r = rig.store(h, {item("k", "v")});
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(r->stored, 1u);
  std::vector<std::string> ops;
  for (const Json& m : agent.requests()) ops.push_back(m.value("op", ""));
  // The first two regions are given back; the third holds the page.
  EXPECT_EQ(std::count(ops.begin(), ops.end(), "alloc"), 3);
  EXPECT_EQ(std::count(ops.begin(), ops.end(), "free"), 2);
  EXPECT_EQ(text_of(rig.load(h, {"k"})->values.at(0)), "v");
}

// R5.1: a region's own maps carry `fresh` until the first reply, never after.
// The agent ignores a later one (R5.2), so its extension's log cannot tell;
// a client that sent fresh on every map passed the counter-based test
// (session-33 audit). The wire can tell.
TEST(MalformedReply, R5_1_AMapAfterTheFirstReplyCarriesNoFreshOnTheWire) {
  ScriptedRig scripted;
  auto& [rig, agent, config, h] = scripted;
  ASSERT_TRUE(rig.store(h, {item("k", "v")}).ok());
  // After a reconnect the client maps its regions again.
  rig.world.network().drop_connections("scripted");
  rig.world.run_for(10ms);
  std::optional<Result<AgentHello>> hello;
  h.strand().post([&] {
    h.regions().hello(ScriptedAgent::address().ToString(), [&](auto r) { hello = std::move(r); });
  });
  ASSERT_TRUE(rig.wait(hello).ok());
  rig.world.run_for(10ms);
  std::vector<Json> maps;
  for (const Json& m : agent.requests()) {
    if (m.value("op", "") == "map") maps.push_back(m);
  }
  ASSERT_GE(maps.size(), 2u);  // the first, and the one after the reconnect
  EXPECT_EQ(maps.front().value("fresh", false), true) << maps.front().dump();
  for (std::size_t i = 1; i < maps.size(); ++i) {
    EXPECT_FALSE(maps[i].value("fresh", false)) << maps[i].dump();
    EXPECT_EQ(maps[i].value("region", 0), maps.front().value("region", 0)) << maps[i].dump();
  }
}

// An alloc whose reply comes after the call timed out made a region nobody
// holds: its handle is only in that reply. While the connection stays open
// (the agent answered something else meanwhile) the client frees it.
TEST(MalformedReply, R1_5_AnAllocReplyAfterItsTimeoutFreesTheRegion) {
  ScriptedRig scripted;
  auto& [rig, agent, config, h] = scripted;
  ASSERT_EQ(rig.store(h, {item("a", "a-bytes")})->stored, 1u);  // region 1, on time
  const std::string at = ScriptedAgent::address().ToString();
  agent.delay_replies("alloc", config.reply_timeout + std::chrono::milliseconds(300));
  std::optional<Result<OwnRegion>> allocated;
  h.regions().allocate(at, 1 << 20, [&](Result<OwnRegion> r) { allocated = std::move(r); });
  rig.world.run_for(std::chrono::milliseconds(100));
  // A reply in between: the agent is alive, the connection is kept.
  std::optional<Result<Mapping>> mapped;
  h.regions().map_for_read(at, 99, "read99", [&](Result<Mapping> r) { mapped = std::move(r); });
  rig.world.run_for(config.reply_timeout);
  ASSERT_TRUE(allocated.has_value());
  EXPECT_EQ(allocated->status().code(), ErrorCode::kTimeout) << allocated->status().ToString();
  ASSERT_TRUE(mapped.has_value() && mapped->ok());
  rig.world.run_for(std::chrono::milliseconds(500));
  EXPECT_EQ(h.regions().late_allocs_freed(), 1u);
  const Json& last = agent.requests().back();
  EXPECT_EQ(last.value("op", ""), "free");
  EXPECT_EQ(last.value("region", 0), 2);
  EXPECT_EQ(last.value("handle", ""), "own");
  EXPECT_EQ(h.regions().own_regions().size(), 1u);  // region 1 only
  EXPECT_EQ(text_of(rig.load(h, {"a"})->values.at(0)), "a-bytes");
}

// The agent said nothing until the alloc timed out (an fsync of its state
// file stalled): the connection is given up for new calls but kept a while
// for late replies, so the region is still freed, over a new connection,
// and the alloc is no longer kept to be asked again. Past that grace the old
// connection is gone and its reply frees nothing: the alloc stays kept, for
// the next alloc to ask again with its token
// (Handler.R1_5_AnAllocWhoseReplyWasLostIsAskedAgainAndItsRegionFreed).
TEST(MalformedReply, R1_5_AnAllocReplyAfterASilentTimeoutFreesTheRegionWithinTheGrace) {
  for (const auto& [delay, freed] : {std::pair{std::chrono::milliseconds(1300), 1u},
                                     std::pair{std::chrono::milliseconds(12000), 0u}}) {
    ScriptedRig scripted;
    auto& [rig, agent, config, h] = scripted;
    agent.advertise_alloc_tokens();
    ASSERT_EQ(rig.store(h, {item("a", "a-bytes")})->stored, 1u);
    agent.delay_replies("alloc", delay);
    std::optional<Result<OwnRegion>> allocated;
    h.regions().allocate(ScriptedAgent::address().ToString(), 1 << 20,
                         [&](Result<OwnRegion> r) { allocated = std::move(r); });
    rig.world.run_for(std::chrono::seconds(15));
    ASSERT_TRUE(allocated.has_value());
    EXPECT_EQ(allocated->status().code(), ErrorCode::kTimeout) << allocated->status().ToString();
    EXPECT_EQ(h.regions().late_allocs_freed(), freed) << delay.count() << " ms";
    EXPECT_EQ(h.regions().unanswered_allocs(), 1u - freed) << delay.count() << " ms";
    const Json& last = agent.requests().back();
    EXPECT_EQ(last.value("op", "") == "free", freed == 1u) << last.dump();
    EXPECT_EQ(text_of(rig.load(h, {"a"})->values.at(0)), "a-bytes");  // the client goes on
  }
}

// An agent that never answers allocs: each unanswered alloc is asked again
// (made_only, with its own token) before later allocs, backing off: before
// the 1st, 2nd, 4th and 8th alloc after it, so a hung agent is not asked
// about every alloc on every alloc.
TEST(MalformedReply, R1_5_AnAllocNeverAnsweredIsAskedAgainLessAndLessOften) {
  ScriptedRig scripted;
  auto& [rig, agent, config, h] = scripted;
  agent.advertise_alloc_tokens();
  agent.delay_replies("alloc", std::chrono::hours(1));
  const std::string at = ScriptedAgent::address().ToString();
  for (int round = 1; round <= 9; ++round) {
    std::optional<Result<OwnRegion>> allocated;
    h.regions().allocate(at, 1 << 20, [&](Result<OwnRegion> r) { allocated = std::move(r); });
    ASSERT_EQ(rig.wait(allocated).status().code(), ErrorCode::kTimeout) << round;
    rig.world.run_for(config.reply_timeout);  // the asks sent with it time out too
  }
  EXPECT_EQ(h.regions().unanswered_allocs(), 9u);
  std::vector<std::string> order;   // tokens, first sent first
  std::map<std::string, int> sent;  // alloc requests per token
  for (const Json& r : agent.requests()) {
    if (r.value("op", "") != "alloc") continue;
    ASSERT_TRUE(r.contains("token")) << r.dump();
    const std::string token = r["token"].get<std::string>();
    const int n = ++sent[token];
    if (n == 1) order.push_back(token);
    // Asked again, an alloc only asks what was made: it never allocates.
    EXPECT_EQ(r.value("made_only", false), n > 1) << r.dump();
  }
  std::vector<int> per_token;
  for (const auto& token : order) per_token.push_back(sent[token]);
  // The k-th alloc is asked again in rounds k+1, k+2, k+4 and k+8 (of 9).
  EXPECT_EQ(per_token, (std::vector<int>{5, 4, 4, 4, 4, 3, 3, 2, 1}));
  EXPECT_EQ(h.regions().unanswered_asks_sent(), 21u);
}

// At most kMaxUnansweredAllocs are kept per agent: past that the oldest is
// forgotten. An agent that does not say it takes tokens gets none.
TEST(MalformedReply, R1_5_AtMost64UnansweredAllocsAreKeptPerAgent) {
  for (const bool advertised : {true, false}) {
    ScriptedRig scripted;
    auto& [rig, agent, config, h] = scripted;
    if (advertised) agent.advertise_alloc_tokens();
    agent.delay_replies("alloc", std::chrono::hours(1));
    const std::string at = ScriptedAgent::address().ToString();
    const int rounds = static_cast<int>(RegionMapClient::kMaxUnansweredAllocs) + 1;
    for (int round = 1; round <= rounds; ++round) {
      std::optional<Result<OwnRegion>> allocated;
      h.regions().allocate(at, 1 << 20, [&](Result<OwnRegion> r) { allocated = std::move(r); });
      ASSERT_EQ(rig.wait(allocated).status().code(), ErrorCode::kTimeout) << round;
      rig.world.run_for(config.reply_timeout);
    }
    EXPECT_EQ(h.regions().unanswered_allocs(),
              advertised ? RegionMapClient::kMaxUnansweredAllocs : 0u);
    EXPECT_EQ(h.regions().unanswered_allocs_forgotten(), advertised ? 1u : 0u);
    for (const Json& r : agent.requests()) {
      if (r.value("op", "") != "alloc") continue;
      EXPECT_EQ(r.contains("token"), advertised) << r.dump();
    }
  }
}

}  // namespace
}  // namespace rcxl::client::testing
