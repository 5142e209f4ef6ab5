// The directory registry: first writer wins, prefix lookups under leases,
// probes that refresh last use, region and boot drops, LRU eviction.
#include "core/directory/directory.h"

#include <gtest/gtest.h>

#include "core/directory/request_batches.h"

namespace rcxl::directory {
namespace {

using namespace std::chrono_literals;

Location at(std::string agent, std::string boot, std::uint64_t region, std::uint64_t offset) {
  return {std::move(agent), std::move(boot), region, "rh", offset, 4096};
}

TEST(Directory, R1_1_FirstWriterWinsAndLaterRegistersSaySo) {
  Directory d;
  auto first = d.register_key("k", at("a:1", "b1", 1, 0));
  ASSERT_TRUE(first.ok());
  EXPECT_EQ(*first, RegisterOutcome::kRegistered);
  auto second = d.register_key("k", at("a:1", "b1", 2, 8192));
  ASSERT_TRUE(second.ok());
  EXPECT_EQ(*second, RegisterOutcome::kAlreadyPresent);
  EXPECT_EQ(d.find("k")->region, 1u);
}

TEST(Directory, R1_1_LookupStopsAtTheFirstMissAndLeasesTheHits) {
  Directory d;
  ASSERT_TRUE(d.register_key("a", at("x:1", "b", 1, 0)).ok());
  ASSERT_TRUE(d.register_key("b", at("x:1", "b", 1, 4096)).ok());
  ASSERT_TRUE(d.register_key("d", at("x:1", "b", 1, 8192)).ok());
  auto r = d.lookup({"a", "b", "c", "d"}, runtime::Instant(0));
  ASSERT_EQ(r.locations.size(), 2u);
  EXPECT_EQ(r.locations[1].offset, 4096u);
  EXPECT_NE(r.lease.id, 0u);
  EXPECT_EQ(d.open_leases(), 1u);
  EXPECT_EQ(d.lookup({"zz"}, runtime::Instant(0)).lease.id, 0u);
  EXPECT_TRUE(d.release(r.lease.id).ok());
  EXPECT_EQ(d.release(r.lease.id).code(), ErrorCode::kNotFound);
}

TEST(Directory, R1_1_LeaseKeepsKeysFromEvictionAndDeletionUntilReleased) {
  Directory d({.max_keys = 2, .lease_ttl = 10s});
  ASSERT_TRUE(d.register_key("a", at("x:1", "b", 1, 0)).ok());
  auto lease = d.lookup({"a"}, runtime::Instant(0)).lease;
  EXPECT_EQ(d.erase({"a"}), 1u);
  EXPECT_FALSE(d.find("a").has_value());  // no new reader sees it
  EXPECT_EQ(d.size(), 1u);                // but its entry stays while leased
  ASSERT_TRUE(d.release(lease.id).ok());
  EXPECT_EQ(d.size(), 0u);
}

TEST(Directory, R1_1_ExpiredLeasesEnd) {
  Directory d({.max_keys = 8, .lease_ttl = 1s});
  ASSERT_TRUE(d.register_key("a", at("x:1", "b", 1, 0)).ok());
  (void)d.lookup({"a"}, runtime::Instant(0));
  d.expire_leases(runtime::Instant(999ms));
  EXPECT_EQ(d.open_leases(), 1u);
  d.expire_leases(runtime::Instant(1s));
  EXPECT_EQ(d.open_leases(), 0u);
}

TEST(Directory, R3_4_ProbeRefreshesLastUseSoEvictionSparesTheKey) {
  Directory d({.max_keys = 2, .lease_ttl = 1s});
  ASSERT_TRUE(d.register_key("old", at("x:1", "b", 1, 0)).ok());
  ASSERT_TRUE(d.register_key("mid", at("x:1", "b", 1, 4096)).ok());
  auto probed = d.probe({"old"}, runtime::Instant(0));
  ASSERT_EQ(probed.size(), 1u);
  EXPECT_EQ(d.open_leases(), 0u);  // a probe takes no lease
  ASSERT_TRUE(d.register_key("new", at("x:1", "b", 1, 8192)).ok());
  EXPECT_TRUE(d.find("old").has_value());
  EXPECT_FALSE(d.find("mid").has_value());
  EXPECT_EQ(d.evictions(), 1u);
}

TEST(Directory, R1_1_LeasedKeysAreNotEvicted) {
  Directory d({.max_keys = 2, .lease_ttl = 1s});
  ASSERT_TRUE(d.register_key("a", at("x:1", "b", 1, 0)).ok());
  ASSERT_TRUE(d.register_key("b", at("x:1", "b", 1, 4096)).ok());
  auto lease = d.lookup({"a"}, runtime::Instant(0)).lease;
  (void)d.probe({"b"}, runtime::Instant(0));  // "a" is now the least recently used
  ASSERT_TRUE(d.register_key("c", at("x:1", "b", 1, 8192)).ok());
  EXPECT_TRUE(d.find("a").has_value());  // leased: skipped
  EXPECT_FALSE(d.find("b").has_value());
  EXPECT_TRUE(d.find("c").has_value());
  ASSERT_TRUE(d.release(lease.id).ok());
  EXPECT_EQ(d.size(), 2u);
}

// A key deleted while leased and registered again: the old lease's end must not
// take a lease count the new entry never had (it wrapped to 2^32-1, so the key
// could never be deleted or evicted again).
TEST(Directory, R1_1_ReRegisteringAKeyDeletedWhileLeasedKeepsItsLeaseCount) {
  Directory d({.max_keys = 1});
  ASSERT_TRUE(d.register_key("k", at("x:1", "b", 1, 0)).ok());
  auto lease = d.lookup({"k"}, runtime::Instant(0)).lease;
  EXPECT_EQ(d.erase({"k"}), 1u);  // doomed while leased
  EXPECT_EQ(d.doomed_keys(), 1u);
  ASSERT_EQ(*d.register_key("k", at("x:1", "b", 1, 4096)), RegisterOutcome::kRegistered);
  EXPECT_EQ(d.doomed_keys(), 0u);  // the new entry replaced the doomed one
  EXPECT_EQ(d.live_keys(), 1u);
  ASSERT_TRUE(d.release(lease.id).ok());
  EXPECT_EQ(d.erase({"k"}), 1u);  // no lease left: it goes now
  EXPECT_EQ(d.size(), 0u);
  ASSERT_TRUE(d.register_key("k", at("x:1", "b", 1, 0)).ok());
  ASSERT_TRUE(d.register_key("j", at("x:1", "b", 1, 4096)).ok());
  EXPECT_EQ(d.size(), 1u);  // and it is evictable again
}

// With every other key leased there is nothing to evict but the new key; a
// register that answers "registered" must leave a key that lookups find.
TEST(Directory, R1_1_ARegisterNeverEvictsTheKeyItRegistered) {
  Directory d({.max_keys = 1, .lease_ttl = 10s});
  ASSERT_TRUE(d.register_key("old", at("x:1", "b", 1, 0)).ok());
  auto lease = d.lookup({"old"}, runtime::Instant(0)).lease;
  ASSERT_EQ(*d.register_key("new", at("x:1", "b", 1, 4096)), RegisterOutcome::kRegistered);
  EXPECT_TRUE(d.find("new").has_value());
  EXPECT_TRUE(d.find("old").has_value());
  EXPECT_EQ(d.size(), 2u);  // over max_keys while the lease holds "old"
  EXPECT_EQ(d.evictions(), 0u);
  ASSERT_TRUE(d.release(lease.id).ok());
  EXPECT_EQ(d.size(), 1u);  // the lease's end brings it back to max_keys
  EXPECT_FALSE(d.find("old").has_value());
  EXPECT_TRUE(d.find("new").has_value());
  EXPECT_EQ(d.evictions(), 1u);
}

// ... nor one an earlier entry of the same register registered: the batch's
// keys are spared together (session-24 review: X of [X, Y] was evicted by Y's
// register and answered "registered" all the same).
TEST(Directory, R1_1_ARegisterOfSeveralKeysEvictsNoneOfThem) {
  Directory d({.max_keys = 2, .lease_ttl = 10s});
  ASSERT_TRUE(d.register_key("a", at("x:1", "b", 1, 0)).ok());
  ASSERT_TRUE(d.register_key("b", at("x:1", "b", 1, 4096)).ok());
  auto lease = d.lookup({"a", "b"}, runtime::Instant(0)).lease;
  const auto outcomes =
      d.register_keys({{"x", at("x:1", "b", 1, 8192)}, {"y", at("x:1", "b", 1, 12288)}});
  ASSERT_EQ(outcomes.size(), 2u);
  for (const auto& o : outcomes) EXPECT_EQ(*o, RegisterOutcome::kRegistered);
  EXPECT_TRUE(d.find("x").has_value());
  EXPECT_TRUE(d.find("y").has_value());
  EXPECT_EQ(d.size(), 4u);
  EXPECT_EQ(d.reclaimable(), 0u);
  ASSERT_TRUE(d.release(lease.id).ok());
  EXPECT_EQ(d.size(), 2u);  // the released ones go, least recently used first
  EXPECT_TRUE(d.find("x").has_value());
  EXPECT_TRUE(d.find("y").has_value());
}

// Eviction is least recently used among keys no lease holds; a key leased
// and released takes its place by its last use, not by its release.
TEST(Directory, R1_1_AReleasedKeyIsEvictedByItsLastUse) {
  Directory d({.max_keys = 3, .lease_ttl = 10s});
  ASSERT_TRUE(d.register_key("a", at("x:1", "b", 1, 0)).ok());
  ASSERT_TRUE(d.register_key("b", at("x:1", "b", 1, 4096)).ok());
  auto lease = d.lookup({"a"}, runtime::Instant(0)).lease;  // a: used after b
  ASSERT_TRUE(d.register_key("c", at("x:1", "b", 1, 8192)).ok());
  ASSERT_TRUE(d.release(lease.id).ok());
  ASSERT_TRUE(d.register_key("d", at("x:1", "b", 1, 12288)).ok());
  EXPECT_FALSE(d.find("b").has_value());  // the oldest use
  ASSERT_TRUE(d.register_key("e", at("x:1", "b", 1, 16384)).ok());
  EXPECT_FALSE(d.find("a").has_value());  // then a, used before c
  EXPECT_TRUE(d.find("c").has_value());
  EXPECT_EQ(d.evictions(), 2u);
}

TEST(Directory, R1_1_DropRegionDropsEveryKeyOfIt) {
  Directory d;
  ASSERT_TRUE(d.register_key("a", at("x:1", "b", 1, 0)).ok());
  ASSERT_TRUE(d.register_key("b", at("x:1", "b", 2, 0)).ok());
  ASSERT_TRUE(d.register_key("c", at("y:1", "b", 1, 0)).ok());
  EXPECT_EQ(d.drop_region("x:1", 1), 1u);
  EXPECT_FALSE(d.find("a"));
  EXPECT_TRUE(d.find("b"));
  EXPECT_TRUE(d.find("c"));
}

// A region id an agent gave out again (after a restart without its table)
// holds another owner's keys under another read handle: only the old go.
TEST(Directory, R6_1_DropRegionUnderAReadHandleKeepsAnotherOwnersKeys) {
  Directory d;
  Location old_owner = at("x:1", "b", 1, 0);
  old_owner.read_handle = "old";
  Location new_owner = at("x:1", "b", 1, 4096);
  new_owner.read_handle = "new";
  ASSERT_TRUE(d.register_key("a", old_owner).ok());
  ASSERT_TRUE(d.register_key("b", new_owner).ok());
  EXPECT_EQ(d.drop_region("x:1", 1, "old"), 1u);
  EXPECT_FALSE(d.find("a"));
  EXPECT_TRUE(d.find("b"));
  EXPECT_EQ(d.drop_region("x:1", 1, "none"), 0u);
  EXPECT_TRUE(d.find("b"));
}

TEST(Directory, R6_1_ANewBootDropsTheOldBootsKeysAndRetiresIt) {
  Directory d;
  ASSERT_TRUE(d.register_key("a", at("x:1", "b1", 1, 0)).ok());
  ASSERT_TRUE(d.register_key("o", at("y:1", "b1", 1, 0)).ok());
  auto dropped = d.boot_changed("x:1", "b2");
  ASSERT_TRUE(dropped.ok());
  EXPECT_EQ(*dropped, 1u);
  EXPECT_FALSE(d.find("a"));
  EXPECT_TRUE(d.find("o"));  // another agent's keys stay
  // A late writer under the retired boot is refused and changes nothing.
  auto late = d.register_key("a", at("x:1", "b1", 1, 0));
  EXPECT_EQ(late.status().code(), ErrorCode::kStaleEpoch);
  EXPECT_FALSE(d.find("a"));
  EXPECT_EQ(d.boot_changed("x:1", "b1").status().code(), ErrorCode::kStaleEpoch);
}

// The boots the directory remembers are bounded: a client reporting boots
// (or registering under them) for ever, for one agent or for many, grew its
// memory without end. The oldest are forgotten; the newest still refuse.
TEST(Directory, R6_1_RememberedBootsAreBoundedAndTheNewestStillRefuse) {
  DirectoryOptions options;
  options.max_boot_records = 8;
  Directory d(options);
  for (int i = 0; i < 100; ++i) {
    ASSERT_TRUE(d.register_key("k" + std::to_string(i), at("x:1", "b" + std::to_string(i), 1,
                                                           static_cast<std::uint64_t>(i) * 4096))
                    .ok());
    ASSERT_TRUE(d.boot_changed("x:1", "b" + std::to_string(i + 1), "b" + std::to_string(i)).ok());
    ASSERT_TRUE(d.boot_changed("agent" + std::to_string(i), "n1").ok());
    EXPECT_LE(d.boot_records(), 8u);
    EXPECT_LE(d.agents_with_boots(), 8u);
  }
  // Every key went with its boot; the newest retired boot is still refused.
  EXPECT_EQ(d.size(), 0u);
  EXPECT_EQ(d.register_key("late", at("x:1", "b99", 1, 0)).status().code(), ErrorCode::kStaleEpoch);
  // A boot long forgotten is taken again: its entry is stale, and a reader
  // finds that out from the agent's own boot (client.md), not from here.
  EXPECT_TRUE(d.register_key("ancient", at("x:1", "b0", 1, 0)).ok());
}

// The boot that was current is usually registered under too: it is retired
// once. Twice left an orphan record whose eviction forgot the retired boot
// early (a late writer under it was taken), found by the session-17 review.
TEST(Directory, R6_1_ACurrentBootRegisteredUnderIsRetiredOnce) {
  DirectoryOptions options;
  options.max_boot_records = 3;
  Directory d(options);
  ASSERT_TRUE(d.register_key("k", at("x:1", "A", 1, 0)).ok());
  ASSERT_TRUE(d.boot_changed("x:1", "A").ok());
  ASSERT_TRUE(d.boot_changed("x:1", "B").ok());
  EXPECT_EQ(d.boot_records(), 2u);  // A retired, B current
  ASSERT_TRUE(d.boot_changed("y:1", "n1").ok());
  EXPECT_EQ(d.register_key("late", at("x:1", "A", 1, 0)).status().code(), ErrorCode::kStaleEpoch);
}

// Reports that change nothing (from == boot, a retired from, the current boot
// again) or are refused leave no entry: one without records was never
// forgotten, so such reports for new agent names grew the directory.
TEST(Directory, R6_1_ReportsThatChangeNothingLeaveNoState) {
  DirectoryOptions options;
  options.max_boot_records = 8;
  Directory d(options);
  for (int i = 0; i < 1000; ++i) {
    ASSERT_TRUE(d.boot_changed("agent" + std::to_string(i), "b", "b").ok());
  }
  EXPECT_EQ(d.agents_with_boots(), 0u);
  EXPECT_EQ(d.boot_records(), 0u);
}

// Forgetting other agents' boots never touches the agent being changed.
TEST(Directory, R6_1_ABootChangeAtTheBoundKeepsItsOwnAgentsState) {
  DirectoryOptions options;
  options.max_boot_records = 2;
  Directory d(options);
  ASSERT_TRUE(d.register_key("a", at("x:1", "b1", 1, 0)).ok());
  ASSERT_TRUE(d.register_key("b", at("x:1", "b2", 2, 0)).ok());
  // Retiring b1 and b2 and setting b3 needs three records: the oldest go first.
  EXPECT_EQ(*d.boot_changed("x:1", "b3"), 2u);
  EXPECT_EQ(d.register_key("c", at("x:1", "b2", 3, 0)).status().code(), ErrorCode::kStaleEpoch);
  EXPECT_LE(d.boot_records(), 2u);
  EXPECT_EQ(*d.boot_changed("x:1", "b3"), 0u);  // still the current one
}

// A key deleted while leased was dropped once; a boot change that takes the
// rest of its boot's keys must not count it again.
TEST(Directory, R6_1_ABootChangeCountsOnlyKeysItDrops) {
  Directory d;
  ASSERT_TRUE(d.register_key("a", at("x:1", "b1", 1, 0)).ok());
  ASSERT_TRUE(d.register_key("b", at("x:1", "b1", 1, 4096)).ok());
  auto lease = d.lookup({"a"}, runtime::Instant(0)).lease;
  EXPECT_EQ(d.erase({"a"}), 1u);  // doomed, still leased
  auto dropped = d.boot_changed("x:1", "b2");
  ASSERT_TRUE(dropped.ok());
  EXPECT_EQ(*dropped, 1u);  // "b" only
  EXPECT_EQ(d.size(), 1u);  // "a" stays until its lease ends
  EXPECT_EQ(d.live_keys(), 0u);
  EXPECT_EQ(d.doomed_keys(), 1u);
  ASSERT_TRUE(d.release(lease.id).ok());
  EXPECT_EQ(d.size(), 0u);
  EXPECT_EQ(d.doomed_keys(), 0u);
}

// Which of two boots is newer only a client that saw one replace the other can
// tell: a register under a boot nobody reported gone drops nothing.
TEST(Directory, R6_1_ARegisterUnderAnotherBootDropsNoKeys) {
  Directory d;
  ASSERT_TRUE(d.register_key("a", at("x:1", "b1", 1, 0)).ok());
  ASSERT_TRUE(d.register_key("b", at("x:1", "b2", 5, 0)).ok());
  EXPECT_TRUE(d.find("a"));
  EXPECT_TRUE(d.find("b"));
  // The report without `from` still ends every other boot.
  EXPECT_EQ(*d.boot_changed("x:1", "b2"), 1u);
  EXPECT_FALSE(d.find("a"));
  EXPECT_EQ(d.register_key("c", at("x:1", "b1", 1, 4096)).status().code(), ErrorCode::kStaleEpoch);
}

// Two resets in a row (b5 -> b6 -> b7): one client saw b5 -> b7, another,
// later, b5 -> b6 and then b6 -> b7; a writer under b6 registers late. However
// the reports and registers interleave, b7's keys stay and b7 is never refused.
TEST(Directory, R6_1_BootReportsInAnyOrderNeverRetireALiveBoot) {
  Directory d;
  ASSERT_TRUE(d.register_key("old", at("x:1", "b5", 1, 0)).ok());
  EXPECT_EQ(*d.boot_changed("x:1", "b7", "b5"), 1u);  // B saw b5 -> b7
  EXPECT_FALSE(d.find("old"));
  ASSERT_TRUE(d.register_key("live", at("x:1", "b7", 2, 0)).ok());
  EXPECT_EQ(*d.boot_changed("x:1", "b6", "b5"), 0u);                // A's late report of b5 -> b6
  ASSERT_TRUE(d.register_key("late", at("x:1", "b6", 3, 0)).ok());  // a late writer
  EXPECT_TRUE(d.find("live"));
  EXPECT_EQ(*d.boot_changed("x:1", "b7", "b6"), 1u);  // A sees b6 -> b7: "late" goes
  EXPECT_FALSE(d.find("late"));
  EXPECT_TRUE(d.find("live"));
  EXPECT_EQ(d.register_key("late2", at("x:1", "b6", 3, 4096)).status().code(),
            ErrorCode::kStaleEpoch);
  ASSERT_TRUE(d.register_key("live2", at("x:1", "b7", 2, 4096)).ok());
  // An unknown period's boot reported late after the boot that followed it.
  EXPECT_EQ(*d.boot_changed("x:1", "b7~1", "b7"), 2u);
  ASSERT_TRUE(d.register_key("after", at("x:1", "b7~1", 4, 0)).ok());
  EXPECT_EQ(*d.boot_changed("x:1", "x:unknown", "b7"), 0u);  // late: b7 is gone already
  EXPECT_TRUE(d.find("after"));
  EXPECT_EQ(*d.boot_changed("x:1", "b7~1", "b7~1"), 0u);  // no change at all
  EXPECT_TRUE(d.find("after"));
}

TEST(Directory, R1_2_BadKeysAreRefused) {
  Directory d;
  EXPECT_EQ(d.register_key("", at("x:1", "b", 1, 0)).status().code(), ErrorCode::kBadRequest);
  EXPECT_EQ(d.size(), 0u);
}

}  // namespace
}  // namespace rcxl::directory

namespace rcxl::directory {
namespace {

// The cut of a big call: in order, within the byte budget and item cap, an
// oversize item alone, and the usual small call is one request.
TEST(RequestBatches, R1_1_CutsInOrderWithinBudgetAndCap) {
  auto size_of = [](const std::vector<std::size_t>& sizes) {
    return [&sizes](std::size_t i) { return sizes[i]; };
  };
  const std::vector<std::size_t> sizes = {40, 40, 40, 200, 10, 10, 10};
  using Cuts = std::vector<std::pair<std::size_t, std::size_t>>;
  EXPECT_EQ(request_batches(sizes.size(), 100, 100, size_of(sizes), size_of(sizes)),
            (Cuts{{0, 2}, {2, 3}, {3, 4}, {4, 7}}));
  EXPECT_EQ(request_batches(sizes.size(), 10000, 3, size_of(sizes), size_of(sizes)),
            (Cuts{{0, 3}, {3, 6}, {6, 7}}));
  EXPECT_EQ(request_batches(sizes.size(), 10000, 100, size_of(sizes), size_of(sizes)),
            (Cuts{{0, 7}}));
  EXPECT_EQ(request_batches(0, 100, 100, size_of(sizes), size_of(sizes)), (Cuts{{0, 0}}));
}

}  // namespace
}  // namespace rcxl::directory
