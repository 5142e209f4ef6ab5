// MemoryHints and the hint paths of Handler against the real agent with the
// recording extension (SPEC R1.4, R3.4-R3.7, R4.1, R4.5, R4.6).
#include <gtest/gtest.h>

#include "core/client/agent_hello.h"
#include "core/client/memory_hints.h"
#include "tests/client/client_rig.h"
#include "tests/client/silent_agent.h"

namespace rcxl::client::testing {

namespace {

const Json kAllActions = {"read_hint", "read_hint_end", "write_hint", "read_promote"};

Config hinting(const ClientRig& rig) {
  Config c = rig.config();
  c.read_hints = true;
  return c;
}

// Stores one key with `h` and names the first `pages` pages of its region at
// `mem` (under `handle`, or the region's read handle), for hints sent by ranges.
RangesByAgent stored_page(ClientRig& rig, Handler& h, const MemoryNode& mem,
                          const std::string& handle = "", std::uint64_t pages = 1) {
  EXPECT_EQ(rig.store(h, {item("k", "v")})->stored, 1u);
  const auto& region = h.regions().own_regions().begin()->second;
  RangesByAgent ranges;
  for (std::uint64_t i = 0; i < pages; ++i) {
    ranges[mem.key()].add({region.region, i * 4096, 4096},
                          handle.empty() ? region.read_handle : handle);
  }
  return ranges;
}

// A hinting handler with request `request` open at `mem` (one stored page hinted).
Handler& open_hint(ClientRig& rig, const MemoryNode& mem, const std::string& request) {
  Handler& h = rig.handler(hinting(rig));
  h.hints().read_hint_ranges(request, stored_page(rig, h, mem));
  rig.settle(h);
  return h;
}

TEST(AgentHello, R1_4_ActionsKeptOnlyFromAWellFormedVersion1Extension) {
  Json ok = {{"boot", "b"},
             {"region_extension",
              {{"version", 1}, {"actions", Json::array({"read_hint", "write_wait"})}}}};
  auto hello = parse_agent_hello(ok);
  EXPECT_EQ(hello.boot, "b");
  EXPECT_TRUE(hello.advertises("read_hint"));
  EXPECT_TRUE(hello.advertises("write_wait"));
  for (Json bad : {Json{{"boot", "b"}},
                   Json{{"region_extension", {{"version", 2}, {"actions", {"read_hint"}}}}},
                   Json{{"region_extension", {{"version", "1"}, {"actions", {"read_hint"}}}}},
                   Json{{"region_extension", {{"version", 1}, {"actions", "read_hint"}}}},
                   Json{{"region_extension", {{"version", 1}, {"actions", {"read_hint", 3}}}}},
                   Json{{"region_extension", {"read_hint"}}}}) {
    EXPECT_TRUE(parse_agent_hello(bad).actions.empty()) << bad.dump();
  }
}

// R6.4 through the hint connection: its hello, answered under b:2, comes
// after the client learnt b:3 from a map reply (two resets in one round
// trip). Before, the hint connection told b:2 as news that follows "" (its
// first hello) and the client took it: every live region freed, b:3 retired
// at the directory. Now a first hello is not taken over a belief, and a hello
// overtaken by news its own connection got keeps that news (review, session 25).
TEST(MemoryHints, R6_4_AHelloOvertakenByNewerBootNewsDoesNotTurnTheBootBack) {
  ClientRig rig;
  SilentAgent slow{rig, Json::array({"write_hint"}), "b:2", 50ms};
  const std::string agent = "silent:7000";
  Handler& h = rig.handler(hinting(rig));
  h.regions().observe_boot(agent, "b:1");
  RangesByAgent ranges;
  ranges[agent].add({1, 0, 4096}, "h");
  h.hints().write_hint("t1", ranges);
  rig.world.run_for(1ms);                  // the hint connection's hello is out
  h.regions().observe_boot(agent, "b:3");  // a map reply's news
  const auto changes = h.regions().boot_changes();
  h.hints().observe_boot(agent, "", "b:3");  // as if it had said hello already
  rig.world.run_for(200ms);
  EXPECT_EQ(h.regions().boot_changes(), changes);
  // The hint connection kept b:3 too: its next hint goes under it.
  h.hints().write_hint("t2", ranges);
  rig.world.run_for(10ms);
  ASSERT_FALSE(slow.received.empty());
  EXPECT_EQ(slow.received.back().value("token", ""), "t2") << slow.received.back().dump();
  EXPECT_EQ(slow.received.back().value("epoch", ""), "b:3");
}

// The map connection applies it too: its hello (b:2), overtaken by a hint's
// stale_epoch news (b:3), turned the boot back b:3 -> b:2, freeing every
// region and retiring the live boot at the directory (review, session 26).
TEST(RegionMapClient, R6_4_AHelloOvertakenByNewerBootNewsDoesNotTurnTheBootBack) {
  ClientRig rig;
  SilentAgent slow{rig, Json::array({"write_hint"}), "b:2", 50ms};
  const std::string agent = "silent:7000";
  Handler& h = rig.handler(hinting(rig));
  std::optional<Result<AgentHello>> hello;
  h.regions().hello(agent, [&](Result<AgentHello> r) { hello = std::move(r); });
  rig.world.run_for(1ms);                  // the map connection's hello is out
  h.regions().observe_boot(agent, "b:3");  // a hint's stale_epoch news
  ASSERT_TRUE(rig.wait(hello).ok());
  ASSERT_NE(h.regions().known(agent), nullptr);
  EXPECT_EQ(h.regions().known(agent)->boot, "b:3");
  EXPECT_EQ(h.regions().boot_changes(), 0u);
}

// The rule both side connections apply to a hello (R6.4).
TEST(AgentHello, R6_4_AHelloKeepsABeliefThatMovedSinceItsConnectBegan) {
  AgentHello held;
  held.boot = "b:1";
  AgentHello heard;
  heard.boot = "b:2";
  heard.actions = {"read_hint"};
  EXPECT_TRUE(take_hello(held, heard, "b:1"));  // follows: news to tell
  EXPECT_EQ(held.boot, "b:2");
  held.boot = "b:3";  // a map reply's news came while the next hello was out
  EXPECT_FALSE(take_hello(held, heard, "b:2"));
  EXPECT_EQ(held.boot, "b:3");
  EXPECT_TRUE(held.advertises("read_hint"));  // the rest of the hello is taken
}

TEST(MemoryHints, R3_4_ProbesTheDirectoryAndHintsOnlyAdvertisingAgents) {
  ClientRig rig;
  auto& takes = rig.add_memory("mem", {{"actions", kAllActions}});
  auto& plain = rig.add_memory("mem2", Json::object());  // default actions: read hints
  auto& none = rig.add_memory("mem3", {{"actions", Json::array()}});
  Config c = hinting(rig);
  c.region_size_bytes = 4096 * 2;  // two pages per region: pages spread over agents
  Handler& h = rig.handler(c);
  std::vector<StoreItem> items;
  std::vector<std::string> keys;
  for (int i = 0; i < 6; ++i) {
    keys.push_back("k" + std::to_string(i));
    items.push_back(item(keys.back(), "v"));
  }
  ASSERT_EQ(rig.store(h, items)->stored, 6u);
  const auto probes_before = rig.directory_server->directory().size();
  h.hint_read("req-1", keys);
  rig.settle(h);
  EXPECT_EQ(h.hints().stats().probes, 1u);
  ASSERT_EQ(takes.log("hint", "read_hint").size(), 1u);
  ASSERT_EQ(plain.log("hint", "read_hint").size(), 1u);
  EXPECT_TRUE(none.log("hint").empty());
  EXPECT_EQ(takes.log("hint", "read_hint")[0]["request"], "req-1");
  EXPECT_EQ(takes.log("hint", "read_hint")[0]["ranges"].size(), 2u);
  EXPECT_EQ(rig.directory_server->directory().open_leases(), 0u);  // probes take no lease
  EXPECT_EQ(rig.directory_server->directory().size(), probes_before);
  h.end_read_hint("req-1");
  rig.settle(h);
  EXPECT_EQ(takes.log("hint", "read_hint_end").size(), 1u);
  EXPECT_EQ(plain.log("hint", "read_hint_end").size(), 1u);
  EXPECT_TRUE(none.log("hint").empty());
  // An end for a request that is not open sends nothing.
  h.end_read_hint("never-hinted");
  rig.settle(h);
  EXPECT_EQ(takes.log("hint", "read_hint_end").size(), 1u);
}

// With only_pool_agents, a scheduler hint leaves out the locations on agents
// outside the pool and opens no connection to them.
TEST(MemoryHints, R3_4_AHintOfOnlyThePoolLeavesForeignAgentsOut) {
  ClientRig rig;
  auto& mem = rig.add_memory("mem", {{"actions", kAllActions}});
  auto& mem2 = rig.add_memory("mem2", {{"actions", kAllActions}});
  Config on_mem2 = hinting(rig);
  on_mem2.first_agent = 1;
  Handler& writer = rig.handler(on_mem2);
  ASSERT_EQ(rig.store(writer, {item("far", "v")})->stored, 1u);
  Config pool_only = hinting(rig);
  pool_only.agents = {mem.address()};
  pool_only.only_pool_agents = true;
  Handler& h = rig.handler(pool_only);
  ASSERT_EQ(rig.store(h, {item("near", "v")})->stored, 1u);
  h.hint_read("req-1", {"near", "far"});
  rig.settle(h);
  EXPECT_EQ(h.hints().stats().probes, 1u);
  ASSERT_EQ(mem.log("hint", "read_hint").size(), 1u);
  EXPECT_EQ(mem.log("hint", "read_hint")[0]["ranges"].size(), 1u);
  EXPECT_TRUE(mem2.log("hint", "read_hint").empty());
  // Only the hint's agents: the pool's own (for its store) and no other.
  h.hint_read("req-2", {"far"});
  rig.settle(h);
  EXPECT_TRUE(mem2.log("hint", "read_hint").empty());
}

TEST(MemoryHints, R3_4_AtMost4096RangesPerMessage) {
  ClientRig rig;
  auto& mem = rig.add_memory("mem", {{"actions", kAllActions}});
  Config c = hinting(rig);
  c.region_size_bytes = 64ull << 20;
  Handler& h = rig.handler(c);
  h.hints().read_hint_ranges("big", stored_page(rig, h, mem, "", 5000));
  const auto& region = h.regions().own_regions().begin()->second;
  rig.settle(h);
  auto hints = mem.log("hint", "read_hint");
  ASSERT_EQ(hints.size(), 2u);
  EXPECT_EQ(hints[0]["ranges"].size(), 4096u);
  EXPECT_EQ(hints[1]["ranges"].size(), 904u);
  EXPECT_EQ(hints[1]["ranges"][0], Json({region.region, 4096ull * 4096, 4096}));  // order kept
  EXPECT_EQ(h.hints().stats().max_ranges_in_message, 4096u);
  EXPECT_EQ(h.hints().stats().messages.at("read_hint"), 2u);
}

// A Config is code's to set: 0 ranges per message would split forever and
// more than 4096 would be refused by the agent, so both are clamped (R3.4).
TEST(MemoryHints, R3_4_RangesPerMessageIsClampedToOneThroughTheProtocolsMost) {
  Config c;
  c.max_ranges_per_message = 0;
  EXPECT_EQ(c.ranges_per_message(), 1u);
  c.max_ranges_per_message = 100000;
  EXPECT_EQ(c.ranges_per_message(), 4096u);
  RangeList list;
  for (std::uint64_t i = 0; i < 3; ++i) list.add({1, i * 4096, 4096}, "h");
  EXPECT_EQ(list.split(0).size(), 3u);
}

// R3.1: a message names one handle per region. A region id seen under a second
// handle (an agent that restarted without its region table gave it out again)
// is left out of that message rather than sent under the wrong handle, which
// would have the agent refuse the whole message and its good ranges with it.
TEST(MemoryHints, R3_1_ARangeUnderASecondHandleOfItsRegionIsLeftOut) {
  RangeList list;
  EXPECT_TRUE(list.add({1, 0, 4096}, "old"));
  EXPECT_TRUE(list.add({2, 0, 4096}, "other"));
  EXPECT_FALSE(list.add({1, 4096, 4096}, "new"));
  EXPECT_TRUE(list.add({1, 8192, 4096}, "old"));
  EXPECT_EQ(list.ranges, (std::vector<Range>{{1, 0, 4096}, {2, 0, 4096}, {1, 8192, 4096}}));
  EXPECT_EQ(list.handles.at(1), "old");
}

TEST(MemoryHints, R3_5_AtMost1024QueuedHintsAndEndsAreNeverDropped) {
  ClientRig rig;
  auto& mem = rig.add_memory("mem", {{"actions", kAllActions}});
  Handler& h = rig.handler(hinting(rig));
  ASSERT_EQ(rig.store(h, {item("k", "v")})->stored, 1u);
  rig.settle(h);
  const auto queued_before = h.hints().stats().queued;  // the store's write hint
  // All at once: the queue overflows while the first probe is out.
  for (int i = 0; i < 3000; ++i) h.hint_read("r" + std::to_string(i), {"k"});
  rig.settle(h);
  // Ends are not queued behind hints (R3.8): they go at once, never dropped.
  for (int i = 0; i < 3000; ++i) h.end_read_hint("r" + std::to_string(i));
  rig.settle(h);
  const auto stats = h.hints().stats();
  EXPECT_EQ(stats.queued - queued_before, 1025u);  // one in flight + 1024 waiting
  EXPECT_EQ(stats.dropped, 3000u - 1025u);
  EXPECT_LE(stats.max_queue_depth, 1024u);
  EXPECT_EQ(stats.max_queued_hints, 1024u);
  EXPECT_EQ(mem.log("hint", "read_hint").size(), 1025u);
  EXPECT_EQ(mem.log("hint", "read_hint_end").size(), 1025u);  // every sent hint ended
  EXPECT_EQ(stats.open_requests, 0u);
}

// R6.4: a location under a boot the agent left before this hint connection
// connected was hinted under that boot, refused (stale_epoch), and hinted
// again for every request naming it. The refused boot is now known as left,
// and later hints of those keys send nothing (review, session 28).
TEST(MemoryHints, R6_4_ABootRefusedOnceIsNotHintedAgain) {
  ClientRig rig;
  auto& mem = rig.add_memory("mem", {{"actions", kAllActions}});
  Handler& h = open_hint(rig, mem, "warm");  // the hint connection knows mem's boot
  std::optional<Result<std::vector<bool>>> reg;
  h.directory().register_keys({{"old-key", {mem.key(), "a-boot-left-long-ago", 1, "rh", 0, 4096}}},
                              [&](auto r) { reg = std::move(r); });
  ASSERT_TRUE(rig.wait(reg).ok());
  const auto sent = [&] { return h.hints().stats().messages["read_hint"]; };
  const auto before = sent();
  h.hint_read("first", {"old-key"});
  rig.settle(h);
  EXPECT_EQ(sent(), before + 1);  // asked once, refused
  h.hint_read("second", {"old-key"});
  h.hint_read("third", {"old-key"});
  rig.settle(h);
  EXPECT_EQ(sent(), before + 1);
  EXPECT_EQ(mem.agent->metrics().open_hint_requests, 1u);  // "warm" only
}

// SPEC R3.8: an end waited behind every queued hint, and a hint whose
// directory probe cannot be answered takes a reply timeout: with the
// directory partitioned, a finished request stayed open at the agent for
// ~20 s behind 20 queued hints (the seed's reason for ending at
// finished_recving: the memory side keeps its bytes accounted). The end goes
// at once now, and a queued hint whose end came first is never sent (review,
// session 28).
TEST(MemoryHints, R3_8_AnEndIsNotHeldBehindOtherRequestsHints) {
  ClientRig rig;
  auto& mem = rig.add_memory("mem", {{"actions", kAllActions}});
  Handler& h = open_hint(rig, mem, "live");
  ASSERT_EQ(mem.agent->metrics().open_hint_requests, 1u);
  rig.world.network().partition("dir");
  for (int i = 0; i < 20; ++i) h.hint_read("q" + std::to_string(i), {"k"});
  h.hint_read("gone", {"k"});
  h.end_read_hint("gone");  // its hint is still queued: it is never sent
  h.end_read_hint("live");
  rig.world.run_for(100ms);
  std::size_t live_ends = 0;
  for (const auto& end : mem.log("hint", "read_hint_end")) live_ends += end["request"] == "live";
  EXPECT_EQ(live_ends, 1u);
  EXPECT_EQ(mem.agent->metrics().open_hint_requests, 0u);
  EXPECT_EQ(h.hints().stats().ended_before_sent, 1u);
}

// SPEC R3.8: a promote opens nothing, yet its request's end waited for it
// like for a hint in flight: a promote connecting to an unreachable agent of
// the pool held the end, and the request stayed open at the agent that had it,
// for up to the connect's timeout (review, session 32).
TEST(MemoryHints, R3_8_AnEndIsNotHeldBehindAPromoteOfItsRequest) {
  ClientRig rig;
  auto& mem = rig.add_memory("mem", {{"actions", kAllActions}});
  rig.add_memory("mem2", {{"actions", kAllActions}});
  Handler& h = open_hint(rig, mem, "x");
  ASSERT_EQ(mem.agent->metrics().open_hint_requests, 1u);
  rig.world.network().partition("mem2");  // the promote's hello there waits
  h.promote_read("x");
  rig.world.run_for(1ms);
  h.end_read_hint("x");
  rig.world.run_for(50ms);
  EXPECT_EQ(mem.agent->metrics().open_hint_requests, 0u);
  EXPECT_EQ(mem.log("hint", "read_hint_end").size(), 1u);
}

TEST(MemoryHints, R3_6_AtMost4096HintedRequestsOpenTheOldestEnded) {
  ClientRig rig;
  auto& mem = rig.add_memory("mem", {{"actions", kAllActions}});
  Handler& h = rig.handler(hinting(rig));
  const RangesByAgent ranges = stored_page(rig, h, mem);
  for (int batch = 0; batch < 5; ++batch) {  // under the queue bound each time
    for (int i = 0; i < 1000; ++i) {
      h.hints().read_hint_ranges("r" + std::to_string(batch * 1000 + i), ranges);
    }
    rig.settle(h);
  }
  const auto stats = h.hints().stats();
  EXPECT_EQ(stats.dropped, 0u);
  EXPECT_EQ(stats.open_requests, 4096u);
  EXPECT_EQ(stats.max_open_requests, 4096u);  // the oldest ended before the next opened
  EXPECT_EQ(stats.forced_ends, 5000u - 4096u);
  auto ends = mem.log("hint", "read_hint_end");
  ASSERT_EQ(ends.size(), 904u);
  EXPECT_EQ(ends.front()["request"], "r0");  // the oldest first
  EXPECT_EQ(ends.back()["request"], "r903");
  EXPECT_EQ(mem.log("hint", "read_hint").size(), 5000u);
}

// A read_hint the agent refuses (here bad_range: a handle that is not the
// region's) opens nothing there, so it takes none of the client's R3.6 slots:
// before, two refused hints pushed the live request out (force-ended).
// The same for a hint split into pieces: every piece refused before the
// extension saw it opens nothing, yet it kept a slot (only one-message hints
// gave theirs back) and ended a live request at the bound (review, session 26).
void expect_refused_hints_take_no_slot(std::uint64_t pages) {
  SCOPED_TRACE(pages);
  ClientRig rig;
  auto& mem = rig.add_memory("mem", {{"actions", kAllActions}});
  Config c = hinting(rig);
  c.max_open_hint_requests = 2;
  c.region_size_bytes = 64ull << 20;
  Handler& h = rig.handler(c);
  const RangesByAgent good = stored_page(rig, h, mem);
  RangesByAgent bogus;
  const auto& region = h.regions().own_regions().begin()->second;
  for (std::uint64_t i = 0; i < pages; ++i) {
    bogus[mem.key()].add({region.region, i * 4096, 4096}, "not-the-handle");
  }
  h.hints().read_hint_ranges("live", good);
  rig.settle(h);
  for (int i = 0; i < 2; ++i) {
    h.hints().read_hint_ranges("refused" + std::to_string(i), bogus);
    rig.settle(h);
  }
  h.hints().read_hint_ranges("second", good);
  rig.settle(h);
  const auto stats = h.hints().stats();
  EXPECT_EQ(stats.forced_ends, 0u);
  EXPECT_EQ(stats.open_requests, 2u);  // live and second
  EXPECT_TRUE(mem.log("hint", "read_hint_end").empty());
}

TEST(MemoryHints, R3_6_ARefusedReadHintTakesNoOpenSlot) {
  expect_refused_hints_take_no_slot(1);     // one message
  expect_refused_hints_take_no_slot(5000);  // two pieces, both refused
}

// A hint that opens nothing (its agent is unreachable or takes no read hints)
// takes no slot, so it ends no live request: before, the oldest was ended
// before the hint learnt whether any agent would take it.
TEST(MemoryHints, R3_6_AHintThatOpensNothingNewEndsNoLiveRequest) {
  ClientRig rig;
  auto& mem = rig.add_memory("mem", {{"actions", kAllActions}});
  auto& plain = rig.add_memory("plain", {{"actions", Json::array()}});
  Config c = hinting(rig);
  c.max_open_hint_requests = 1;
  Handler& h = rig.handler(c);
  const RangesByAgent good = stored_page(rig, h, mem);
  h.hints().read_hint_ranges("live", good);
  rig.settle(h);
  RangesByAgent unreachable;
  unreachable["127.0.0.1:1"].add({1, 0, 4096}, "h");
  h.hints().read_hint_ranges("to-nobody", unreachable);
  rig.settle(h);
  RangesByAgent no_hints;
  no_hints[plain.key()].add({1, 0, 4096}, "h");
  h.hints().read_hint_ranges("to-plain", no_hints);
  rig.settle(h);
  const auto stats = h.hints().stats();
  EXPECT_EQ(stats.forced_ends, 0u);
  EXPECT_EQ(stats.open_requests, 1u);
  EXPECT_TRUE(mem.log("hint", "read_hint_end").empty());
  EXPECT_EQ(mem.log("hint", "read_hint").size(), 1u);
  // A new request that does open somewhere still ends the oldest first.
  h.hints().read_hint_ranges("next", good);
  rig.settle(h);
  EXPECT_EQ(h.hints().stats().forced_ends, 1u);
  ASSERT_EQ(mem.log("hint", "read_hint_end").size(), 1u);
  EXPECT_EQ(mem.log("hint", "read_hint_end")[0]["request"], "live");
}

// A request hinted to two agents takes one slot: the second agent's send
// finds it open and ends nothing (not the request itself).
TEST(MemoryHints, R3_6_ARequestAtTwoAgentsTakesOneSlot) {
  ClientRig rig;
  auto& mem = rig.add_memory("mem", {{"actions", kAllActions}});
  auto& mem2 = rig.add_memory("mem2", {{"actions", kAllActions}});
  Config c = hinting(rig);
  c.max_open_hint_requests = 1;
  Handler& h = rig.handler(c);
  RangesByAgent at_both = stored_page(rig, h, mem);
  h.hints().read_hint_ranges("old", at_both);
  rig.settle(h);
  Config c2 = hinting(rig);
  c2.first_agent = 1;
  Handler& writer = rig.handler(c2);
  ASSERT_EQ(rig.store(writer, {item("far", "v")})->stored, 1u);
  const auto& far = writer.regions().own_regions().begin()->second;
  at_both[mem2.key()].add({far.region, 0, 4096}, far.read_handle);
  h.hints().read_hint_ranges("two", at_both);
  rig.settle(h);
  const auto stats = h.hints().stats();
  EXPECT_EQ(stats.forced_ends, 1u);  // "old" only
  EXPECT_EQ(stats.open_requests, 1u);
  ASSERT_EQ(mem.log("hint", "read_hint_end").size(), 1u);
  EXPECT_EQ(mem.log("hint", "read_hint_end")[0]["request"], "old");
  EXPECT_TRUE(mem2.log("hint", "read_hint_end").empty());
  EXPECT_EQ(mem2.log("hint", "read_hint").size(), 1u);
}

// ... but a refused later piece of a hint sent as several messages may leave
// the request open at the agent: it keeps its slot, and its end still goes.
TEST(MemoryHints, R3_6_ARefusedLaterPieceKeepsTheRequestOpenUntilItsEnd) {
  ClientRig rig;
  auto& mem = rig.add_memory("mem", {{"actions", kAllActions}});
  Config c = hinting(rig);
  c.region_size_bytes = 64ull << 20;
  Handler& h = rig.handler(c);
  RangesByAgent ranges = stored_page(rig, h, mem, "", 4096);
  const auto& region = h.regions().own_regions().begin()->second;
  ranges[mem.key()].add({region.region + 1, 0, 4096}, "no-such-region");  // the second piece
  h.hints().read_hint_ranges("split", ranges);
  rig.settle(h);
  EXPECT_EQ(h.hints().stats().open_requests, 1u);
  h.hints().end_read_hint("split");
  rig.settle(h);
  EXPECT_EQ(mem.log("hint", "read_hint_end").size(), 1u);
  EXPECT_EQ(mem.agent->metrics().open_hint_requests, 0u);
}

// A split hint whose first piece the extension failed: the agent closed it,
// but the next piece opened it again. The client forgot it at the failure, so
// its end never went and the request stayed open at the agent, one of its
// 4096 slots, until the connection closed (review, session 26).
TEST(MemoryHints, R3_3_APieceAfterAFailedPieceIsStillEnded) {
  ClientRig rig;
  auto& mem = rig.add_memory(
      "mem", {{"actions", kAllActions}, {"fail_first_read_hint_of", Json::array({"split"})}});
  Config c = hinting(rig);
  c.region_size_bytes = 64ull << 20;
  Handler& h = rig.handler(c);
  RangesByAgent ranges = stored_page(rig, h, mem, "", 5000);  // two pieces
  h.hints().read_hint_ranges("split", ranges);
  rig.settle(h);
  ASSERT_EQ(mem.log("hint", "read_hint").size(), 2u);
  ASSERT_EQ(mem.agent->metrics().open_hint_requests, 1u);  // the second piece opened it
  h.hints().end_read_hint("split");
  rig.settle(h);
  EXPECT_EQ(mem.agent->metrics().open_hint_requests, 0u);
}

// An end after the hint connection dropped is not sent: the agent ended the
// request when the connection closed (R6.6), and sending it would only start
// a reconnect that later hints then wait on. It is forgotten here all the same.
TEST(MemoryHints, R6_6_NoEndOverAConnectionThatDropped) {
  ClientRig rig;
  auto& mem = rig.add_memory("mem", {{"actions", kAllActions}});
  Handler& h = open_hint(rig, mem, "r");
  ASSERT_EQ(h.hints().stats().open_requests, 1u);
  rig.world.network().drop_connections("mem");
  rig.world.run_for(10ms);
  const auto connections = mem.agent->metrics().connections;
  h.hints().end_read_hint("r");
  rig.settle(h);
  EXPECT_EQ(h.hints().stats().open_requests, 0u);
  EXPECT_TRUE(mem.log("hint", "read_hint_end").empty());
  EXPECT_EQ(mem.agent->metrics().connections, connections);  // no reconnect for it
}

TEST(Handler, R3_7_ALoadWithoutAnEngineHintHintsItselfAndEndsAfter) {
  ClientRig rig;
  auto& mem = rig.add_memory("mem", {{"actions", kAllActions}});
  Handler& h = rig.handler(hinting(rig));
  ASSERT_EQ(rig.store(h, {item("a", "1"), item("b", "2")})->stored, 2u);
  ASSERT_EQ(rig.load(h, {"a", "b"})->values.size(), 2u);
  rig.settle(h);
  auto hints = mem.log("hint", "read_hint");
  ASSERT_EQ(hints.size(), 1u);
  const std::string name = hints[0]["request"];
  EXPECT_NE(name.find("-load-"), std::string::npos);
  EXPECT_EQ(hints[0]["ranges"].size(), 2u);
  auto ends = mem.log("hint", "read_hint_end");
  ASSERT_EQ(ends.size(), 1u);
  EXPECT_EQ(ends[0]["request"], name);
  // A load the engine hinted does not hint again.
  ASSERT_EQ(rig.load(h, {"a"}, /*engine_hinted=*/true)->values.size(), 1u);
  rig.settle(h);
  EXPECT_EQ(mem.log("hint", "read_hint").size(), 1u);
  // With read hints off, no load hints.
  Config off = rig.config();
  Handler& quiet = rig.handler(off);
  ASSERT_EQ(rig.load(quiet, {"a"})->values.size(), 1u);
  rig.settle(quiet);
  EXPECT_EQ(mem.log("hint", "read_hint").size(), 1u);
}

TEST(Handler, R4_1_AStoreWriteHintsItsPagesInWriteOrderUnderItsToken) {
  ClientRig rig;
  auto& mem = rig.add_memory("mem", {{"actions", kAllActions}});
  Handler& h = rig.handler(hinting(rig));  // write_hints follow read_hints
  ASSERT_EQ(rig.store(h, {item("x", "1"), item("y", "22"), item("z", "333")})->stored, 3u);
  rig.settle(h);
  auto hints = mem.log("hint", "write_hint");
  ASSERT_EQ(hints.size(), 1u);
  const auto& r = hints[0]["ranges"];
  ASSERT_EQ(r.size(), 3u);
  EXPECT_EQ(r[0][2], 1);
  EXPECT_EQ(r[1][2], 2);
  EXPECT_EQ(r[2][2], 3);
  EXPECT_LT(r[0][1].get<std::uint64_t>(), r[1][1].get<std::uint64_t>());
  EXPECT_NE(hints[0]["token"].get<std::string>().find("-store-"), std::string::npos);
  EXPECT_TRUE(mem.log("hint", "read_hint_end").empty());  // no end for write hints
  // write_hints off: none.
  Config c = hinting(rig);
  c.write_hints = false;
  Handler& quiet = rig.handler(c);
  ASSERT_EQ(rig.store(quiet, {item("w", "1")})->stored, 1u);
  rig.settle(quiet);
  EXPECT_EQ(mem.log("hint", "write_hint").size(), 1u);
}

TEST(Handler, R4_5_PromoteGoesToEveryAgentOfThePoolThatTakesIt) {
  ClientRig rig;
  auto& a = rig.add_memory("mem", {{"actions", kAllActions}});
  auto& b = rig.add_memory("mem2", {{"actions", kAllActions}});
  auto& c = rig.add_memory("mem3", Json::object());  // no read_promote
  Handler& h = rig.handler(hinting(rig));
  h.promote_read("req-7");
  rig.settle(h);
  ASSERT_EQ(a.log("hint", "read_promote").size(), 1u);
  ASSERT_EQ(b.log("hint", "read_promote").size(), 1u);
  EXPECT_TRUE(c.log("hint", "read_promote").empty());
  EXPECT_EQ(a.log("hint", "read_promote")[0]["request"], "req-7");
  EXPECT_TRUE(a.log("hint", "read_promote")[0]["ranges"].empty());
  EXPECT_EQ(a.agent->open_hint_requests(a.log("hint", "read_promote")[0]["conn"]), 0u);
}

}  // namespace
}  // namespace rcxl::client::testing

namespace rcxl::client::testing {
namespace {

TEST(MemoryHints, R3_4_AnUnreachableAgentDoesNotStallTheHintQueue) {
  ClientRig rig;
  rig.add_memory("mem", {{"actions", {"read_hint", "read_hint_end"}}});
  Handler& h = rig.handler(hinting(rig));
  // Keys whose location is an agent nobody can reach.
  std::optional<Result<std::vector<bool>>> reg;
  h.directory().register_keys({{"dead-key", {"dead:7000", "b", 1, "rh", 0, 4096}}},
                              [&](auto r) { reg = std::move(r); });
  ASSERT_TRUE(rig.wait(reg).ok());
  const auto t0 = rig.world.loop().now();
  for (int i = 0; i < 20; ++i) h.hint_read("r" + std::to_string(i), {"dead-key"});
  rig.settle(h);
  // One connect attempt times out; the other hints skip the agent at once.
  EXPECT_EQ(h.hints().stats().skipped_unreachable, 19u);
  EXPECT_LT(rig.world.loop().now() - t0, 2s);
  // After the backoff the agent is probed in the background: the queue does
  // not wait on it again (it did, a connect attempt per backoff).
  rig.world.run_for(6s);
  const auto t1 = rig.world.loop().now();
  for (int i = 20; i < 40; ++i) h.hint_read("r" + std::to_string(i), {"dead-key"});
  rig.settle(h);
  EXPECT_EQ(h.hints().stats().skipped_unreachable, 39u);
  EXPECT_LT(rig.world.loop().now() - t1, 100ms);
}

// Stores until one succeeds: the first after a boot change may fail (its
// WRITE or map meets the new boot) and teaches the handler the boot.
void store_until_stored(ClientRig& rig, Handler& h, const std::string& key) {
  for (int attempt = 0; attempt < 3; ++attempt) {
    auto r = rig.store(h, {item(key, "v")});
    if (r.ok() && r->stored == 1) return;
    rig.world.run_for(50ms);
  }
  ADD_FAILURE() << "could not store " << key;
}

// SPEC R6.1, R3.4, R3.8: the scheduler never maps, so only the directory's
// locations tell it a device reset moved the agent's boot on. Its hints must
// go on under the new boot, not be filtered out for good.
TEST(MemoryHints, R6_1_SchedulerHintsResumeAfterABootChange) {
  ClientRig rig;
  auto& mem = rig.add_memory("mem", {{"actions", kAllActions}, {"generation_file", "/gen"}});
  Handler& worker = rig.handler(hinting(rig));
  Handler& scheduler = rig.handler(hinting(rig));
  store_until_stored(rig, worker, "k1");
  scheduler.hint_read("r1", {"k1"});
  rig.settle(scheduler);
  ASSERT_EQ(mem.log("hint", "read_hint").size(), 1u);

  mem.set_generation("2");  // a device reset
  rig.world.run_for(300ms);
  store_until_stored(rig, worker, "k2");
  for (const std::string request : {"r2", "r3"}) {
    scheduler.hint_read(request, {"k2"});
    rig.settle(scheduler);
  }
  auto hints = mem.log("hint", "read_hint");
  ASSERT_EQ(hints.size(), 3u);
  EXPECT_EQ(hints[1]["request"], "r2");
  EXPECT_EQ(hints[2]["request"], "r3");
  // The scheduler's view of the boot followed (R6.3: news reaches every path).
  EXPECT_EQ(scheduler.regions().boot_changes(), 1u);
}

// SPEC R4.2: the client sends only actions the agent advertises; an agent that
// takes read hints but not their end gets neither: a read_hint it could never
// be told the end of would stay open there (against its limit, R3.3) until
// the connection closed.
TEST(MemoryHints, R4_2_NoEndToAnAgentThatDoesNotAdvertiseIt) {
  ClientRig rig;
  auto& mem = rig.add_memory("mem", {{"actions", {"read_hint"}}});
  Handler& h = rig.handler(hinting(rig));
  ASSERT_EQ(rig.store(h, {item("k", "v")})->stored, 1u);
  h.hint_read("r", {"k"});
  rig.settle(h);
  EXPECT_EQ(mem.log("hint", "read_hint").size(), 0u);
  h.end_read_hint("r");
  rig.settle(h);
  EXPECT_EQ(h.hints().stats().messages.count("read_hint_end"), 0u);
  EXPECT_EQ(h.hints().stats().open_requests, 0u);  // ended here all the same
}

}  // namespace
}  // namespace rcxl::client::testing
