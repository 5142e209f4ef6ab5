// MemoryWaits (SPEC R4.3, R4.6) and the per-READ gate of the replaced design
// (PAPER P3), against the real agent with the recording extension.
#include <gtest/gtest.h>

#include "core/client/memory_waits.h"
#include "tests/client/client_rig.h"
#include "tests/client/silent_agent.h"

namespace rcxl::client::testing {
namespace {

const Json kWaits = {"read_hint", "read_hint_end", "write_hint", "write_wait"};

// A client with write waits (a write wait is a write hint that waits: read
// hints on, so write hints follow) and a budget of `wait_ms` per store.
Config waiting(const ClientRig& rig, std::uint32_t wait_ms) {
  Config c = rig.config();
  c.read_hints = true;
  c.write_wait_ms = wait_ms;
  return c;
}

TEST(Handler, R4_3_TheWaitsOfOneStoreShareWriteWaitMs) {
  ClientRig rig;
  auto& a = rig.add_memory("mem", {{"actions", kWaits}, {"write_wait_delay_ms", 40}});
  auto& b = rig.add_memory("mem2", {{"actions", kWaits}, {"write_wait_delay_ms", 40}});
  Config c = waiting(rig, 50);
  c.region_size_bytes = 2 * 4096;  // two pages per region: the store spans both agents
  Handler& h = rig.handler(c);
  const auto t0 = rig.world.loop().now();
  ASSERT_EQ(rig.store(h, {item("1", "a"), item("2", "b"), item("3", "c"), item("4", "d")})->stored,
            4u);
  // Setup (hello, alloc, map) is part of this first store; compare the waits.
  auto wa = a.log("write_wait");
  auto wb = b.log("write_wait");
  ASSERT_EQ(wa.size(), 1u);
  ASSERT_EQ(wb.size(), 1u);
  const auto ta = wa[0]["timeout_ms"].get<std::uint32_t>();
  const auto tb = wb[0]["timeout_ms"].get<std::uint32_t>();
  // The first asked with what the plan (connect, hello) left of the budget,
  // the second with what the first left.
  EXPECT_GE(std::max(ta, tb), 49u);
  EXPECT_LE(std::max(ta, tb), 50u);
  EXPECT_LE(std::min(ta, tb), 50u - 40u);
  EXPECT_GE(std::min(ta, tb), 1u);
  EXPECT_EQ(wa[0]["ranges"].size(), 2u);
  EXPECT_EQ(wa[0]["token"], wb[0]["token"]);         // one token per store
  EXPECT_TRUE(a.log("hint", "write_hint").empty());  // waited agents get no write hint
  EXPECT_EQ(h.waits().stats().waits_answered, 2u);
  // The second store (no setup) takes the budget, not two budgets.
  const auto t1 = rig.world.loop().now();
  ASSERT_EQ(rig.store(h, {item("5", "e"), item("6", "f"), item("7", "g"), item("8", "h")})->stored,
            4u);
  EXPECT_LT(rig.world.loop().now() - t1, 60ms);
  EXPECT_GE(rig.world.loop().now() - t1, 45ms);
  (void)t0;
}

// A boot the client learnt from a map reply (a device reset) is the epoch of
// its next write wait too: before, the wait went under the old boot, was
// refused (stale_epoch), and the agent got neither a wait nor a write hint.
TEST(Handler, R4_3_AWaitAfterAResetTheClientLearntGoesUnderTheNewBoot) {
  ClientRig rig;
  auto& mem = rig.add_memory(
      "mem", {{"actions", kWaits}, {"write_wait_delay_ms", 1}, {"generation_file", "/gen"}});
  Config c = waiting(rig, 50);
  Handler& writer = rig.handler(c);
  Handler& h = rig.handler(c);
  ASSERT_EQ(rig.store(writer, {item("a", "1")})->stored, 1u);
  ASSERT_EQ(rig.store(h, {item("x", "0")})->stored, 1u);  // h's waits connection, under :1
  ASSERT_EQ(mem.log("write_wait").size(), 2u);
  mem.set_generation("2");
  rig.world.run_for(300ms);  // the agent's poll sees it: a new boot
  // h maps the writer's region to read it: the stale_epoch reply tells the boot.
  auto loaded = rig.load(h, {"a"});
  ASSERT_TRUE(loaded.ok());
  EXPECT_TRUE(loaded->values.empty());
  auto stored = rig.store(h, {item("b", "2")});
  ASSERT_TRUE(stored.ok()) << stored.status().ToString();
  EXPECT_EQ(stored->stored, 1u) << stored->first_failure.ToString();
  EXPECT_EQ(mem.log("write_wait").size(), 3u);  // accepted: under the agent's boot
  EXPECT_EQ(h.waits().stats().waits_failed, 0u);
}

// R6.4: boot news from the waits connection is taken only if it follows what
// the client believes. A stale_epoch answer to a wait sent under an older boot
// (or a first hello) that is handled after a map reply told a newer boot
// turned the boot back: the client freed its regions and retired the live
// boot at the directory (session-17 review).
TEST(Handler, R6_4_BootNewsFromTheWaitsConnectionNeverTurnsTheBootBack) {
  ClientRig rig;
  auto& mem = rig.add_memory("mem", {{"actions", kWaits}, {"write_wait_delay_ms", 1}});
  Config c = waiting(rig, 50);
  Handler& h = rig.handler(c);
  ASSERT_EQ(rig.store(h, {item("x", "0")})->stored, 1u);
  const std::string agent = mem.key();
  const std::string now = h.regions().known(agent)->boot;
  ASSERT_FALSE(now.empty());
  ASSERT_EQ(h.regions().own_regions().size(), 1u);
  // Older news: a refusal of a wait sent under a boot the client has left.
  h.regions().observe_peer_boot(agent, "tboot:0", "tboot:unknown");
  // A first hello of another connection: it may be older than a map reply.
  h.regions().observe_peer_boot(agent, "", "tboot:unknown");
  EXPECT_EQ(h.regions().known(agent)->boot, now);
  EXPECT_EQ(h.regions().own_regions().size(), 1u);  // nothing given back
  // News that follows the belief is taken.
  h.regions().observe_peer_boot(agent, now, now + "~1");
  EXPECT_EQ(h.regions().known(agent)->boot, now + "~1");
  EXPECT_TRUE(h.regions().own_regions().empty());
}

// R6.4 through the waits connection itself: a wait refused with stale_epoch
// whose reply is handled after the client learnt a newer boot elsewhere (a map
// reply that overtook it) is older news. Before, the refusal was reported as
// following the newer boot and turned the boot back: every own region freed
// again, the live boot's keys dropped at the directory (review, session 24).
TEST(Handler, R6_4_ALateRefusalOfAWaitDoesNotTurnTheBootBack) {
  ClientRig rig;
  auto& mem = rig.add_memory(
      "mem", {{"actions", kWaits}, {"write_wait_delay_ms", 1}, {"generation_file", "/gen"}});
  Handler& h = rig.handler(waiting(rig, 50));
  ASSERT_EQ(rig.store(h, {item("x", "0")})->stored, 1u);
  const std::string agent = mem.key();
  mem.set_generation("2");
  rig.world.run_for(300ms);  // the agent is at a new boot this client has not seen
  std::optional<Result<StoreResult>> out;
  const auto sent_before = h.waits().stats().waits_sent;
  h.store({item("y", "1")}, [&](Result<StoreResult> r) { out = std::move(r); });
  ASSERT_TRUE(rig.world
                  .run_until([&] { return h.waits().stats().waits_sent > sent_before; },
                             rig.world.loop().now() + 10s)
                  .ok());
  // The wait is out under the old boot. A map reply of a later boot overtakes
  // its refusal (stood in for by the news that path gives).
  const std::string newer = "boot-of-mem:3";
  h.regions().observe_boot(agent, newer);
  const auto changes = h.regions().boot_changes();
  ASSERT_TRUE(rig.world
                  .run_until([&] { return h.waits().stats().waits_failed == 1; },
                             rig.world.loop().now() + 10s)
                  .ok());
  // Right after the refusal (later traffic of this test's stand-in may well
  // learn the agent's real boot, which is the older one here).
  EXPECT_EQ(h.regions().known(agent)->boot, newer);
  EXPECT_EQ(h.regions().boot_changes(), changes);
  (void)rig.wait(out);
}

// PROTOCOL: timeout_ms is 1..10000. A budget above that asks for 10000 (the
// agent would refuse more as bad_request) and the store still goes through.
TEST(Handler, R4_3_ABudgetAboveTenSecondsAsksForTheProtocolsMost) {
  ClientRig rig;
  auto& mem = rig.add_memory("mem", {{"actions", kWaits}, {"write_wait_delay_ms", 1}});
  Config c = waiting(rig, 60000);
  Handler& h = rig.handler(c);
  ASSERT_EQ(rig.store(h, {item("1", "a")})->stored, 1u);
  auto waits = mem.log("write_wait");
  ASSERT_EQ(waits.size(), 1u);
  EXPECT_EQ(waits[0]["timeout_ms"], 10000);
  EXPECT_EQ(h.waits().stats().waits_answered, 1u);
}

// SPEC R4.1, R4.3: a write wait is part of the write hints; with them off (by
// default, or explicitly with read hints on) a store asks nothing and waits for nothing.
TEST(Handler, R4_3_NoWriteWaitWithWriteHintsOff) {
  for (const bool read_hints : {false, true}) {
    SCOPED_TRACE(read_hints ? "read hints on, write hints off" : "hints off");
    ClientRig rig;
    auto& a = rig.add_memory("mem", {{"actions", kWaits}, {"write_wait_delay_ms", 40}});
    Config c = rig.config();
    c.read_hints = read_hints;
    c.write_hints = false;
    c.write_wait_ms = 50;
    Handler& h = rig.handler(c);
    ASSERT_EQ(rig.store(h, {item("1", "a")})->stored, 1u);
    rig.settle(h);
    EXPECT_TRUE(a.log("write_wait").empty());
    EXPECT_TRUE(a.log("hint", "write_hint").empty());
    EXPECT_EQ(h.waits().stats().waits_sent, 0u);
  }
}

TEST(Handler, R4_3_ZeroNeverWaitsAndAgentsWithoutWriteWaitGetAWriteHint) {
  ClientRig rig;
  auto& a = rig.add_memory("mem", {{"actions", kWaits}});
  auto& b = rig.add_memory("mem2", {{"actions", {"read_hint", "read_hint_end", "write_hint"}}});
  Config c = rig.config();
  c.read_hints = true;
  c.region_size_bytes = 4096;
  Handler& h = rig.handler(c);
  ASSERT_EQ(rig.store(h, {item("1", "a"), item("2", "b")})->stored, 2u);
  rig.settle(h);
  EXPECT_EQ(a.log("write_wait").size(), 1u);
  EXPECT_TRUE(a.log("hint", "write_hint").empty());
  EXPECT_TRUE(b.log("write_wait").empty());
  EXPECT_EQ(b.log("hint", "write_hint").size(), 1u);
  c.write_wait_ms = 0;
  Handler& never = rig.handler(c);
  ASSERT_EQ(rig.store(never, {item("3", "a"), item("4", "b")})->stored, 2u);
  rig.settle(never);
  EXPECT_EQ(a.log("write_wait").size(), 1u);  // unchanged
  EXPECT_EQ(a.log("hint", "write_hint").size(), 1u);
  EXPECT_EQ(b.log("hint", "write_hint").size(), 2u);
}

TEST(Handler, R4_6_WaitsUseAConnectionOfTheirOwn) {
  ClientRig rig;
  auto& a = rig.add_memory("mem", {{"actions", kWaits}});
  Config c = rig.config();
  c.read_hints = true;
  Handler& h = rig.handler(c);
  ASSERT_EQ(rig.store(h, {item("1", "a")})->stored, 1u);
  h.hint_read("q", {"1"});
  rig.settle(h);
  const auto wait_conn = a.log("write_wait").at(0)["conn"].get<std::uint64_t>();
  const auto hint_conn = a.log("hint", "read_hint").at(0)["conn"].get<std::uint64_t>();
  const auto region = h.regions().own_regions().begin()->first.second;
  EXPECT_NE(wait_conn, hint_conn);
  EXPECT_FALSE(a.agent->holds(wait_conn, region));  // the map connection holds it
  EXPECT_FALSE(a.agent->holds(hint_conn, region));
}

// MemoryWaits (reply timeout 1 s) whose plan took the SilentAgent; wait()
// asks it for one page within `budget` and says who was not asked.
struct PlannedSilentWaits {
  ClientRig rig;
  SilentAgent silent{rig};
  Config config = [this] {
    Config c = rig.config();
    c.reply_timeout = 1s;
    return c;
  }();
  std::unique_ptr<runtime::Strand> strand = rig.gpu.make_strand("store");
  MemoryWaits waits{rig.gpu, *strand, config};

  std::set<std::string> plan() {
    std::optional<std::set<std::string>> takes;
    strand->post([&] {
      waits.plan({"silent:7000"}, rig.world.loop().now() + 1h, [&](auto t) { takes = t; });
    });
    return rig.wait(takes);
  }
  std::set<std::string> wait(runtime::Duration budget) {
    RangesByAgent ranges;
    ranges["silent:7000"].add({1, 0, 4096}, "h");
    std::optional<std::set<std::string>> not_asked;
    strand->post([&] {
      waits.wait("tok", ranges, rig.world.loop().now() + budget, [&](auto n) { not_asked = n; });
    });
    return rig.wait(not_asked);
  }
};

// ... once: a hung agent is as good as unreachable, so the next stores do not
// ask it for 5 s (they would each be held the whole budget). Its extension
// got the wait, so no write hint follows.
TEST(MemoryWaits, R4_3_AnAgentThatDoesNotAnswerCostsTheReplyTimeoutOnTopOnce) {
  PlannedSilentWaits w;
  ASSERT_EQ(w.plan().count("silent:7000"), 1u);
  const auto t0 = w.rig.world.loop().now();
  EXPECT_TRUE(w.wait(50ms).empty());
  const auto took = w.rig.world.loop().now() - t0;
  EXPECT_GE(took, 1050ms);
  EXPECT_LT(took, 1060ms);
  EXPECT_EQ(w.waits.stats().waits_failed, 1u);
  EXPECT_TRUE(w.plan().empty());
  EXPECT_EQ(w.waits.stats().skipped_backoff, 1u);
  w.rig.world.run_for(5s);
  EXPECT_EQ(w.plan().count("silent:7000"), 1u);  // asked again after the backoff
}

// A wait whose budget runs out behind another call of its agent is not sent:
// the store goes at its deadline and the agent gets a write hint (R4.1).
// Before, both waits went out at once to an agent that answers nothing, and
// the second store was held its budget plus the reply timeout too.
TEST(MemoryWaits, R4_3_AWaitWhoseBudgetRunsOutInTheQueueIsNotAsked) {
  PlannedSilentWaits w;
  ASSERT_EQ(w.plan().count("silent:7000"), 1u);
  RangesByAgent ranges;
  ranges["silent:7000"].add({1, 0, 4096}, "h");
  std::optional<std::set<std::string>> first, second;
  const auto t0 = w.rig.world.loop().now();
  std::optional<runtime::Duration> second_took;
  w.strand->post([&] {
    w.waits.wait("tok1", ranges, t0 + 50ms, [&](auto n) { first = n; });
    w.waits.wait("tok2", ranges, t0 + 60ms, [&](auto n) {
      second = n;
      second_took = w.rig.world.loop().now() - t0;
    });
  });
  EXPECT_EQ(w.rig.wait(second).count("silent:7000"), 1u);  // not asked: a write hint
  EXPECT_EQ(*second_took, 60ms);
  EXPECT_TRUE(w.rig.wait(first).empty());  // asked: its extension may have it
  EXPECT_EQ(w.waits.stats().waits_sent, 1u);
  EXPECT_EQ(w.waits.stats().waits_failed, 1u);
  EXPECT_EQ(w.silent.received.size(), 2u);  // the hello and one write_wait
}

// SPEC R4.3: a wait's budget bounds the store. An agent whose connection
// dropped after the plan is not asked: the wait would queue behind a
// reconnect (here 5 s into a partition) that no budget counts.
// R6.4: a hello answered under boot b:2 whose reply comes after the client
// learnt b:3 elsewhere (the agent reset twice within one round trip, and a map
// reply overtook the hello) is older news: the waits connection keeps b:3 and
// tells nobody of b:2. Before, it reported b:3 -> b:2, which the map client
// took (b:2 was never in its past boots): every live region freed, the live
// boot retired at the directory (review, session 25).
TEST(MemoryWaits, R6_4_AHelloOvertakenByNewerBootNewsDoesNotTurnTheBootBack) {
  ClientRig rig;
  SilentAgent slow{rig, Json::array({"write_wait"}), "b:2", 50ms};
  Config config = rig.config();
  config.reply_timeout = 1s;
  auto strand = rig.gpu.make_strand("store");
  MemoryWaits waits{rig.gpu, *strand, config};
  std::vector<std::pair<std::string, std::string>> told;
  waits.set_boot_observer([&](const std::string&, const std::string& from, const std::string& to) {
    told.emplace_back(from, to);
  });
  std::optional<std::set<std::string>> takes;
  strand->post([&] {
    waits.plan({"silent:7000"}, rig.world.loop().now() + 1h, [&](auto t) { takes = t; });
  });
  rig.world.run_for(1ms);  // the hello is out
  ASSERT_FALSE(takes.has_value());
  strand->post([&] { waits.observe_boot("silent:7000", "b:3"); });
  EXPECT_EQ(rig.wait(takes).count("silent:7000"), 1u);
  EXPECT_TRUE(told.empty()) << told.front().first << " -> " << told.front().second;
  // Its next wait goes under b:3.
  RangesByAgent ranges;
  ranges["silent:7000"].add({1, 0, 4096}, "h");
  std::optional<std::set<std::string>> not_asked;
  strand->post([&] {
    waits.wait("tok", ranges, rig.world.loop().now() + 50ms, [&](auto n) { not_asked = n; });
  });
  rig.wait(not_asked);
  ASSERT_FALSE(slow.received.empty());
  EXPECT_EQ(slow.received.back().value("action", ""), "write_wait");
  EXPECT_EQ(slow.received.back().value("epoch", ""), "b:3");
}

TEST(MemoryWaits, R4_3_AnAgentWhoseConnectionDroppedSinceThePlanIsNotAsked) {
  PlannedSilentWaits w;
  ASSERT_EQ(w.plan().count("silent:7000"), 1u);
  w.rig.world.network().set_connect_timeout(5s);
  w.rig.world.network().drop_connections("silent");
  w.rig.world.network().partition("silent");
  w.rig.world.run_for(1ms);
  const auto t0 = w.rig.world.loop().now();
  EXPECT_EQ(w.wait(50ms).count("silent:7000"), 1u);
  EXPECT_LT(w.rig.world.loop().now() - t0, 1050ms);
}

TEST(MemoryWaits, R4_3_AnUnreachableAgentIsNotAskedFor5s) {
  ClientRig rig;
  Config c = rig.config();
  auto strand = rig.gpu.make_strand("store");
  MemoryWaits waits(rig.gpu, *strand, c);
  auto plan = [&] {
    std::optional<std::set<std::string>> takes;
    strand->post([&] {
      waits.plan({"nowhere:7000"}, rig.world.loop().now() + 1h, [&](auto t) { takes = t; });
    });
    return rig.wait(takes);
  };
  EXPECT_TRUE(plan().empty());
  EXPECT_EQ(waits.stats().skipped_backoff, 0u);
  rig.world.run_for(1s);
  EXPECT_TRUE(plan().empty());
  EXPECT_EQ(waits.stats().skipped_backoff, 1u);  // not asked: no connect at all
  rig.world.run_for(3s);
  EXPECT_TRUE(plan().empty());
  EXPECT_EQ(waits.stats().skipped_backoff, 2u);
  rig.world.run_for(2s);  // past 5 s since the failure
  EXPECT_TRUE(plan().empty());
  EXPECT_EQ(waits.stats().skipped_backoff, 2u);  // asked again
}

// P3's gate shares the waits connection: a load's gate sent behind a store's
// held wait heard nothing within its reply timeout, so the connection was
// given up, failing the wait as well, and the agent went into the backoff.
// It now goes when the wait is answered.
TEST(Handler, P3_AGateBehindAHeldWaitIsNotTimedOutByIt) {
  ClientRig rig;
  auto& a = rig.add_memory("mem", {{"actions", kWaits}, {"write_wait_delay_ms", 250}});
  Config c = waiting(rig, 300);
  c.reply_timeout = 100ms;
  c.gate_reads = true;
  Handler& h = rig.handler(c);
  ASSERT_EQ(rig.store(h, {item("0", "z")})->stored, 1u);
  std::optional<Result<StoreResult>> stored;
  std::optional<Result<LoadResult>> loaded;
  h.store({item("1", "a")}, [&](Result<StoreResult> r) { stored = std::move(r); });
  ASSERT_TRUE(rig.world.run_until([&] { return a.log("write_wait").size() == 2; }).ok());
  h.load({"0"}, [&](Result<LoadResult> r) { loaded = std::move(r); });
  ASSERT_TRUE(rig.world.run_until([&] { return stored && loaded; }).ok());
  EXPECT_EQ((*stored)->stored, 1u);
  // The gate went, after the held wait.
  EXPECT_EQ(h.waits().stats().gates, 1u);
  std::size_t gates = 0;  // beside the load's own read hint (R3.7)
  for (const auto& hint : a.log("hint", "read_hint")) {
    gates += hint["request"].get<std::string>().find("-gate-") != std::string::npos ? 1 : 0;
  }
  EXPECT_EQ(gates, 1u);
  ASSERT_EQ((*loaded)->values.size(), 1u);
  EXPECT_EQ(text_of((*loaded)->values[0]), "z");
  EXPECT_EQ(h.waits().stats().waits_failed, 0u);
  EXPECT_EQ(h.waits().stats().gates_failed, 0u);
  ASSERT_EQ(rig.store(h, {item("2", "b")})->stored, 1u);
  EXPECT_EQ(h.waits().stats().skipped_backoff, 0u);
}

// A store's later pieces for an agent keep its place: another store's wait
// queued meanwhile goes after them, so the first store's second piece is not
// asked with the little the other left of its budget.
TEST(Handler, R4_3_AStoresLaterPiecesKeepItsPlaceInTheQueue) {
  ClientRig rig;
  auto& a = rig.add_memory("mem", {{"actions", kWaits}, {"write_wait_delay_ms", 40}});
  Config c = waiting(rig, 100);
  c.max_ranges_per_message = 1;
  Handler& h = rig.handler(c);
  ASSERT_EQ(rig.store(h, {item("0", "z")})->stored, 1u);
  std::optional<Result<StoreResult>> first, second;
  h.store({item("1", "a"), item("2", "b")}, [&](Result<StoreResult> r) { first = std::move(r); });
  ASSERT_TRUE(rig.world.run_until([&] { return a.log("write_wait").size() == 2; }).ok());
  h.store({item("3", "c")}, [&](Result<StoreResult> r) { second = std::move(r); });
  ASSERT_TRUE(rig.world.run_until([&] { return first && second; }).ok());
  auto waits = a.log("write_wait");
  ASSERT_EQ(waits.size(), 4u);
  EXPECT_EQ(waits[2]["token"], waits[1]["token"]);  // the first store's second piece
  EXPECT_GE(waits[2]["timeout_ms"].get<std::uint32_t>(), 59u);
  EXPECT_LE(waits[2]["timeout_ms"].get<std::uint32_t>(), 60u);
  EXPECT_NE(waits[3]["token"], waits[1]["token"]);
}

// A gate whose turn comes after the wait before it timed out does not connect
// again to an agent now in its backoff: the READ goes at once.
TEST(MemoryWaits, P3_AGateBehindAWaitThatTimedOutDoesNotAskTheAgentAgain) {
  ClientRig rig;
  SilentAgent silent{rig, Json::array({"write_wait", "read_hint", "read_hint_end"})};
  Config c = rig.config();
  c.reply_timeout = 1s;
  auto strand = rig.gpu.make_strand("store");
  MemoryWaits waits(rig.gpu, *strand, c);
  std::optional<std::set<std::string>> takes;
  strand->post([&] {
    waits.plan({"silent:7000"}, rig.world.loop().now() + 1h, [&](auto t) { takes = t; });
  });
  ASSERT_EQ(rig.wait(takes).count("silent:7000"), 1u);
  RangesByAgent ranges;
  ranges["silent:7000"].add({1, 0, 4096}, "h");
  RangeList read;
  read.add({1, 0, 4096}, "h");
  std::optional<std::set<std::string>> not_asked;
  std::optional<runtime::Duration> gate_took;
  const auto t0 = rig.world.loop().now();
  strand->post([&] {
    waits.wait("tok", ranges, t0 + 50ms, [&](auto n) { not_asked = n; });
    waits.gate("silent:7000", "gate", read, [&] { gate_took = rig.world.loop().now() - t0; });
  });
  rig.wait(gate_took);
  EXPECT_LT(*gate_took, 1060ms);  // the wait's budget and reply timeout, once
  EXPECT_EQ(silent.conns.size(), 1u);
  EXPECT_EQ(waits.stats().skipped_backoff, 1u);
  EXPECT_EQ(silent.received.size(), 2u);  // the hello and the wait
}

// SPEC R4.3/R4.6: the agent serves a connection's requests one at a time, so
// a second store's wait sent at once sat in its queue behind the first's
// (250 ms) and timed out on the client (100 ms reply timeout + its 300 ms)
// although the agent answered in time: the healthy agent then went into the
// 5 s backoff. A wait now goes when the one before it is answered, asking
// for what is left of its budget (review, session 28).
TEST(Handler, R4_3_AWaitBehindAnotherOnItsConnectionIsNotTimedOutByIt) {
  ClientRig rig;
  auto& a = rig.add_memory("mem", {{"actions", kWaits}, {"write_wait_delay_ms", 250}});
  Config c = waiting(rig, 300);
  c.reply_timeout = 100ms;
  Handler& h = rig.handler(c);
  ASSERT_EQ(rig.store(h, {item("0", "z")})->stored, 1u);  // connects, maps
  ASSERT_EQ(h.waits().stats().waits_answered, 1u);
  std::optional<Result<StoreResult>> first, second;
  const auto t0 = rig.world.loop().now();
  h.store({item("1", "a")}, [&](Result<StoreResult> r) { first = std::move(r); });
  h.store({item("2", "b")}, [&](Result<StoreResult> r) { second = std::move(r); });
  ASSERT_TRUE(rig.world.run_until([&] { return first && second; }).ok());
  EXPECT_EQ((*first)->stored, 1u);
  EXPECT_EQ((*second)->stored, 1u);
  EXPECT_LE(rig.world.loop().now() - t0, 301ms);  // within the second store's budget
  EXPECT_EQ(h.waits().stats().waits_failed, 0u);
  EXPECT_EQ(h.waits().stats().waits_answered, 3u);
  auto waits = a.log("write_wait");
  ASSERT_EQ(waits.size(), 3u);
  // The second was asked with what the first left of its 300 ms.
  EXPECT_LE(waits[2]["timeout_ms"].get<std::uint32_t>(), 50u);
  EXPECT_GE(waits[2]["timeout_ms"].get<std::uint32_t>(), 49u);
  // The agent is asked again at once: no backoff.
  ASSERT_EQ(rig.store(h, {item("3", "c")})->stored, 1u);
  EXPECT_EQ(h.waits().stats().skipped_backoff, 0u);
  EXPECT_EQ(a.log("write_wait").size(), 4u);
}

// SPEC R4.3 with several agents: the plan asks them all at once and ends at
// the store's deadline, so agents that cannot be reached cost one budget, not
// one connect timeout each, and are then left alone for 5 s.
TEST(MemoryWaits, R4_3_ThePlanAsksEveryAgentAtOnceWithinTheBudget) {
  ClientRig rig;
  for (const char* m : {"m1", "m2", "m3"}) {
    rig.add_memory(m, {{"actions", kWaits}});
    rig.world.network().partition(m);
  }
  Config c = rig.config();
  auto strand = rig.gpu.make_strand("store");
  MemoryWaits waits(rig.gpu, *strand, c);
  std::optional<std::set<std::string>> takes;
  const auto t0 = rig.world.loop().now();
  strand->post([&] {
    waits.plan({"m1:7000", "m2:7000", "m3:7000"}, t0 + 50ms, [&](auto t) { takes = t; });
  });
  EXPECT_TRUE(rig.wait(takes).empty());
  EXPECT_LE(rig.world.loop().now() - t0, 51ms);
  // A reachable agent is planned as before, whatever the others do.
  rig.world.network().heal("m2");
  // The partitioned connects give up after 1 s, then 5 s of backoff pass.
  rig.world.run_for(c.unreachable_backoff + 2s);
  std::optional<std::set<std::string>> again;
  strand->post([&] {
    waits.plan({"m1:7000", "m2:7000", "m3:7000"}, rig.world.loop().now() + 1h,
               [&](auto t) { again = t; });
  });
  const auto planned = rig.wait(again);
  EXPECT_EQ(planned, (std::set<std::string>{"m2:7000"}));
}

// The seed's READ is a load's batch for one peer: one gate for the batch.
TEST(Handler, P3_EachReadBatchWaitsForOneRoundTrip) {
  ClientRig rig;
  auto& a = rig.add_memory("mem", {{"actions", {"read_hint", "read_hint_end", "write_wait"}}});
  Config c = rig.config();
  Handler& writer = rig.handler(c);
  ASSERT_EQ(rig.store(writer, {item("1", "a"), item("2", "b")})->stored, 2u);
  const auto hints_before = a.log("hint", "read_hint").size();
  const auto waits_before = a.log("write_wait").size();
  c.gate_reads = true;
  Handler& gated = rig.handler(c);
  auto loaded = rig.load(gated, {"1", "2"});
  ASSERT_EQ(loaded->values.size(), 2u);
  EXPECT_EQ(text_of(loaded->values[1]), "b");
  // One read_hint for the batch, naming both READs' ranges, then ended.
  auto gates = a.log("hint", "read_hint");
  ASSERT_EQ(gates.size(), hints_before + 1);
  EXPECT_NE(gates.back()["request"].get<std::string>().find("-gate-"), std::string::npos);
  ASSERT_EQ(gates.back()["ranges"].size(), 2u);
  EXPECT_EQ(gated.waits().stats().gates, 1u);
  rig.world.run_for(10ms);
  EXPECT_EQ(a.agent->metrics().open_hint_requests, 0u);
  // A read gate never asks for a write wait (R4.1: no leave to change pages).
  EXPECT_EQ(a.log("write_wait").size(), waits_before);
  // Without the option: no round trip.
  Handler& plain = rig.handler(rig.config());
  ASSERT_EQ(rig.load(plain, {"1", "2"})->values.size(), 2u);
  EXPECT_EQ(a.log("hint", "read_hint").size(), hints_before + 1);
}

// A batch of more ranges than a message may carry is gated by one read_hint per
// piece under one request name (R3.5's 4096 bound, here 1).
TEST(Handler, P3_GateOfALargeBatchSendsEveryPiece) {
  ClientRig rig;
  auto& a = rig.add_memory("mem", {{"actions", {"read_hint", "read_hint_end"}}});
  Config c = rig.config();
  Handler& writer = rig.handler(c);
  ASSERT_EQ(rig.store(writer, {item("1", "a"), item("2", "b"), item("3", "c")})->stored, 3u);
  const auto hints_before = a.log("hint", "read_hint").size();
  c.gate_reads = true;
  c.max_ranges_per_message = 1;
  Handler& gated = rig.handler(c);
  auto loaded = rig.load(gated, {"1", "2", "3"});
  ASSERT_EQ(loaded->values.size(), 3u);
  EXPECT_EQ(text_of(loaded->values[2]), "c");
  auto gates = a.log("hint", "read_hint");
  ASSERT_EQ(gates.size(), hints_before + 3);
  for (std::size_t i = hints_before; i < gates.size(); ++i) {
    EXPECT_EQ(gates[i]["ranges"].size(), 1u);
    EXPECT_EQ(gates[i]["request"], gates[hints_before]["request"]);
  }
  rig.world.run_for(10ms);
  EXPECT_EQ(a.agent->metrics().open_hint_requests, 0u);
}

// A gate is a round trip the READ waits for, not one it depends on: an agent
// that does not answer costs the reply timeout once (not once per piece of a
// large batch), and the next loads' gates skip it for the backoff (5 s).
TEST(MemoryWaits, P3_AGateTheAgentDoesNotAnswerCostsTheReplyTimeoutOnce) {
  ClientRig rig;
  SilentAgent silent{rig, Json::array({"read_hint", "read_hint_end"})};
  Config c = rig.config();
  c.reply_timeout = 1s;
  c.max_ranges_per_message = 1;
  auto strand = rig.gpu.make_strand("load");
  MemoryWaits waits(rig.gpu, *strand, c);
  int gates = 0;
  auto gate = [&] {
    RangeList ranges;
    for (std::uint64_t page = 0; page < 3; ++page) ranges.add({1, page * 4096, 4096}, "h");
    std::optional<bool> done;
    const auto t0 = rig.world.loop().now();
    const std::string token = "tok" + std::to_string(++gates);
    strand->post([&] { waits.gate("silent:7000", token, ranges, [&] { done = true; }); });
    rig.wait(done);
    return rig.world.loop().now() - t0;
  };
  const auto first = gate();
  EXPECT_GE(first, 1s);
  EXPECT_LT(first, 1100ms);  // three pieces: one timeout, then the READ goes
  EXPECT_EQ(waits.stats().gates_failed, 1u);
  EXPECT_LT(gate(), 1ms);  // in the backoff: not asked
  EXPECT_EQ(waits.stats().skipped_backoff, 1u);
  // Nor is it sent an end for the gate it never saw (a connect and hello to
  // the hung agent, in the backoff).
  const std::size_t connections = silent.conns.size();
  strand->post([&] { waits.end_gate("silent:7000", "tok2"); });
  rig.world.run_for(100ms);
  EXPECT_EQ(silent.conns.size(), connections);
  // Nor the first gate's end: the timeout gave its connection up, and the
  // agent closed the request with it (R6.6); a new connect only to end it was
  // a connect and hello to a hung agent in the backoff (review, session 25).
  strand->post([&] { waits.end_gate("silent:7000", "tok1"); });
  rig.world.run_for(100ms);
  EXPECT_EQ(silent.conns.size(), connections);
  rig.world.run_for(c.unreachable_backoff);
  EXPECT_GE(gate(), 1s);  // asked again after it
  EXPECT_EQ(waits.stats().gates_failed, 2u);
  EXPECT_EQ(waits.stats().gates, 3u);
}

}  // namespace
}  // namespace rcxl::client::testing
