// Reclaim: the directory keeps the locations of keys that left while their
// region and boot lived (evicted, or deleted with no lease left) and gives
// each back once to the region's owner, so a long-running writer reuses pages
// instead of growing its pool (docs/directory.md, Reclaim).
#include <gtest/gtest.h>

#include "core/directory/directory.h"

namespace rcxl::directory {
namespace {

using namespace std::chrono_literals;

Location at(std::string agent, std::string boot, std::uint64_t region, std::uint64_t offset,
            std::string read_handle = "rh") {
  return {std::move(agent), std::move(boot), region, std::move(read_handle), offset, 4096};
}

const RegionRef kRegion1{"x:1", 1, "rh"};

TEST(DirectoryReclaim, R1_1_AnEvictedKeysPageIsGivenBackOnceToItsRegion) {
  Directory d({.max_keys = 2});
  ASSERT_TRUE(d.register_key("a", at("x:1", "b", 1, 0)).ok());
  ASSERT_TRUE(d.register_key("b", at("x:1", "b", 1, 4096)).ok());
  ASSERT_TRUE(d.register_key("c", at("x:1", "b", 1, 8192)).ok());  // evicts a
  EXPECT_EQ(d.evictions(), 1u);
  EXPECT_EQ(d.reclaimable(), 1u);
  // Another region, or the same id under another read handle, gets nothing.
  EXPECT_TRUE(d.reclaim({{"x:1", 2, "rh"}, {"x:1", 1, "other"}, {"y:1", 1, "rh"}}, 8).empty());
  auto back = d.reclaim({kRegion1}, 8);
  ASSERT_EQ(back.size(), 1u);
  EXPECT_EQ(back[0], at("x:1", "b", 1, 0));
  EXPECT_TRUE(d.reclaim({kRegion1}, 8).empty());  // once
  EXPECT_EQ(d.reclaimable(), 0u);
}

TEST(DirectoryReclaim, R1_1_ADeletedKeysPageComesBackOnlyAfterItsLastLease) {
  Directory d;
  ASSERT_TRUE(d.register_key("a", at("x:1", "b", 1, 0)).ok());
  ASSERT_TRUE(d.register_key("b", at("x:1", "b", 1, 4096)).ok());
  auto lease = d.lookup({"a"}, runtime::Instant(0)).lease;
  EXPECT_EQ(d.erase({"a", "b"}), 2u);
  // b had no reader: back at once; a is still being read under its lease.
  auto first = d.reclaim({kRegion1}, 8);
  ASSERT_EQ(first.size(), 1u);
  EXPECT_EQ(first[0].offset, 4096u);
  ASSERT_TRUE(d.release(lease.id).ok());
  auto second = d.reclaim({kRegion1}, 8);
  ASSERT_EQ(second.size(), 1u);
  EXPECT_EQ(second[0].offset, 0u);
}

TEST(DirectoryReclaim, R1_1_AtMostMaxAreGivenAndTheRestStay) {
  Directory d;
  for (std::uint64_t i = 0; i < 5; ++i) {
    ASSERT_TRUE(d.register_key("k" + std::to_string(i), at("x:1", "b", 1, i * 4096)).ok());
  }
  EXPECT_EQ(d.erase({"k0", "k1", "k2", "k3", "k4"}), 5u);
  EXPECT_EQ(d.reclaim({kRegion1}, 2).size(), 2u);
  EXPECT_EQ(d.reclaimable(), 3u);
  EXPECT_EQ(d.reclaim({kRegion1}, 8).size(), 3u);
}

// A region that went back, or a boot that is gone, names memory its owner no
// longer has: its pages are never given out, also those still leased then.
TEST(DirectoryReclaim, R6_1_PagesOfADroppedRegionOrGoneBootAreNotGivenBack) {
  Directory d;
  ASSERT_TRUE(d.register_key("a", at("x:1", "b1", 1, 0)).ok());
  ASSERT_TRUE(d.register_key("b", at("x:1", "b1", 1, 4096)).ok());
  ASSERT_TRUE(d.register_key("c", at("x:1", "b1", 2, 0)).ok());
  ASSERT_TRUE(d.register_key("d", at("x:1", "b1", 2, 4096)).ok());
  auto lease = d.lookup({"b"}, runtime::Instant(0)).lease;
  EXPECT_EQ(d.erase({"a", "b"}), 2u);            // a kept for reclaim, b when its lease ends
  EXPECT_EQ(d.drop_region("x:1", 1, "rh"), 0u);  // both were deleted already
  ASSERT_TRUE(d.release(lease.id).ok());
  EXPECT_TRUE(d.reclaim({kRegion1}, 8).empty());

  auto lease_d = d.lookup({"d"}, runtime::Instant(0)).lease;
  EXPECT_EQ(d.erase({"c", "d"}), 2u);
  ASSERT_TRUE(d.boot_changed("x:1", "b2").ok());
  ASSERT_TRUE(d.release(lease_d.id).ok());
  EXPECT_TRUE(d.reclaim({{"x:1", 2, "rh"}}, 8).empty());
  EXPECT_EQ(d.reclaimable(), 0u);
}

// A key deleted while leased and registered again before its leases end
// passes them to the new entry. The old page comes back once the leases taken
// before the new register end (their readers may read it until then), not
// later leases of the new page; the new page only when it leaves in turn.
TEST(DirectoryReclaim, R1_1_AKeyRegisteredAgainWhileLeasedGivesItsOldPageBackAfterThoseLeases) {
  Directory d;
  ASSERT_TRUE(d.register_key("a", at("x:1", "b", 1, 0)).ok());
  auto first = d.lookup({"a"}, runtime::Instant(0)).lease;
  auto second = d.lookup({"a"}, runtime::Instant(0)).lease;
  EXPECT_EQ(d.erase({"a"}), 1u);
  ASSERT_TRUE(d.register_key("a", at("x:1", "b", 1, 4096)).ok());
  auto of_new_page = d.lookup({"a"}, runtime::Instant(0)).lease;
  ASSERT_TRUE(d.release(of_new_page.id).ok());  // it never read the old page
  ASSERT_TRUE(d.release(first.id).ok());
  EXPECT_TRUE(d.reclaim({kRegion1}, 8).empty());  // the second reader still reads it
  of_new_page = d.lookup({"a"}, runtime::Instant(0)).lease;
  ASSERT_TRUE(d.release(second.id).ok());
  auto old_page = d.reclaim({kRegion1}, 8);
  ASSERT_EQ(old_page.size(), 1u);
  EXPECT_EQ(old_page[0].offset, 0u);
  EXPECT_EQ(d.find("a"), at("x:1", "b", 1, 4096));
  ASSERT_TRUE(d.release(of_new_page.id).ok());
  EXPECT_TRUE(d.reclaim({kRegion1}, 8).empty());
  EXPECT_EQ(d.erase({"a"}), 1u);
  auto back = d.reclaim({kRegion1}, 8);
  ASSERT_EQ(back.size(), 1u);
  EXPECT_EQ(back[0].offset, 4096u);
}

// One key keeps at most max_old_pages_per_key old pages: a client cycling
// delete and register on a leased key made each release settle them in time
// quadratic in their number (review, session 30). Past the bound they are
// dropped, never given out: the lease's reader may still read them.
TEST(DirectoryReclaim, R1_1_OneKeyKeepsABoundedNumberOfOldPages) {
  Directory d({.max_old_pages_per_key = 3});
  ASSERT_TRUE(d.register_key("a", at("x:1", "b", 1, 0)).ok());
  auto lease = d.lookup({"a"}, runtime::Instant(0)).lease;
  for (std::uint64_t i = 1; i <= 5; ++i) {
    EXPECT_EQ(d.erase({"a"}), 1u);
    ASSERT_TRUE(d.register_key("a", at("x:1", "b", 1, i * 4096)).ok());
  }
  EXPECT_EQ(d.reclaimable_dropped(), 2u);         // the pages left 4th and 5th
  EXPECT_TRUE(d.reclaim({kRegion1}, 8).empty());  // all still read under the lease
  ASSERT_TRUE(d.release(lease.id).ok());
  auto back = d.reclaim({kRegion1}, 8);
  ASSERT_EQ(back.size(), 3u);
  EXPECT_EQ(back[0].offset, 0u);
  EXPECT_EQ(back[1].offset, 4096u);
  EXPECT_EQ(back[2].offset, 8192u);
  EXPECT_EQ(d.find("a"), at("x:1", "b", 1, 5 * 4096));
}

// Registered again in the very page it left, the page is the key's again: it
// is not given back while the key lives there. Deleted twice while leased,
// both old pages come back with the last lease.
TEST(DirectoryReclaim, R1_1_AnOldPageTheKeyTookAgainIsNotGivenBack) {
  Directory d;
  ASSERT_TRUE(d.register_key("a", at("x:1", "b", 1, 0)).ok());
  auto lease = d.lookup({"a"}, runtime::Instant(0)).lease;
  EXPECT_EQ(d.erase({"a"}), 1u);
  ASSERT_TRUE(d.register_key("a", at("x:1", "b", 1, 0)).ok());
  ASSERT_TRUE(d.release(lease.id).ok());
  EXPECT_TRUE(d.reclaim({kRegion1}, 8).empty());
  EXPECT_EQ(d.find("a"), at("x:1", "b", 1, 0));
  // Away and back while the same lease reads: the page it left first is the key's.
  lease = d.lookup({"a"}, runtime::Instant(0)).lease;
  EXPECT_EQ(d.erase({"a"}), 1u);
  ASSERT_TRUE(d.register_key("a", at("x:1", "b", 1, 4096)).ok());
  EXPECT_EQ(d.erase({"a"}), 1u);
  ASSERT_TRUE(d.register_key("a", at("x:1", "b", 1, 0)).ok());
  ASSERT_TRUE(d.release(lease.id).ok());
  auto left = d.reclaim({kRegion1}, 8);
  ASSERT_EQ(left.size(), 1u);
  EXPECT_EQ(left[0].offset, 4096u);

  ASSERT_TRUE(d.register_key("b", at("x:1", "b", 1, 8192)).ok());
  lease = d.lookup({"b"}, runtime::Instant(0)).lease;
  EXPECT_EQ(d.erase({"b"}), 1u);
  ASSERT_TRUE(d.register_key("b", at("x:1", "b", 1, 12288)).ok());
  EXPECT_EQ(d.erase({"b"}), 1u);
  ASSERT_TRUE(d.register_key("b", at("x:1", "b", 1, 16384)).ok());
  ASSERT_TRUE(d.release(lease.id).ok());
  auto back = d.reclaim({kRegion1}, 8);
  ASSERT_EQ(back.size(), 2u);
  EXPECT_EQ(back[0].offset, 8192u);
  EXPECT_EQ(back[1].offset, 12288u);
}

// A page the key left twice (away, back, away again) is one old page, read by
// every lease open at the last leaving: it comes back once, after the last of
// them (before, its first entry gave it back under a lease still reading it,
// and its second gave it again).
TEST(DirectoryReclaim, R1_1_APageLeftTwiceComesBackOnceAfterItsLastReader) {
  Directory d;
  ASSERT_TRUE(d.register_key("a", at("x:1", "b", 1, 0)).ok());
  auto first = d.lookup({"a"}, runtime::Instant(0)).lease;
  EXPECT_EQ(d.erase({"a"}), 1u);
  ASSERT_TRUE(d.register_key("a", at("x:1", "b", 1, 4096)).ok());
  EXPECT_EQ(d.erase({"a"}), 1u);
  ASSERT_TRUE(d.register_key("a", at("x:1", "b", 1, 0)).ok());  // back on page 0
  auto second = d.lookup({"a"}, runtime::Instant(0)).lease;     // reads page 0
  EXPECT_EQ(d.erase({"a"}), 1u);
  ASSERT_TRUE(d.register_key("a", at("x:1", "b", 1, 8192)).ok());
  ASSERT_TRUE(d.release(first.id).ok());
  auto early = d.reclaim({kRegion1}, 8);
  ASSERT_EQ(early.size(), 1u);  // page 4096 only: page 0 is still read
  EXPECT_EQ(early[0].offset, 4096u);
  ASSERT_TRUE(d.release(second.id).ok());
  auto late = d.reclaim({kRegion1}, 8);
  ASSERT_EQ(late.size(), 1u);
  EXPECT_EQ(late[0].offset, 0u);
  EXPECT_TRUE(d.reclaim({kRegion1}, 8).empty());
}

// An old page whose region went back, or whose boot is gone, is forgotten:
// the memory it names is not its owner's any more.
TEST(DirectoryReclaim, R6_1_AnOldPageOfADroppedRegionOrGoneBootIsNotGivenBack) {
  Directory d;
  ASSERT_TRUE(d.register_key("a", at("x:1", "b1", 1, 0)).ok());
  auto lease = d.lookup({"a"}, runtime::Instant(0)).lease;
  EXPECT_EQ(d.erase({"a"}), 1u);
  ASSERT_TRUE(d.register_key("a", at("x:1", "b1", 2, 0)).ok());  // another region
  EXPECT_EQ(d.drop_region("x:1", 1, "rh"), 0u);
  ASSERT_TRUE(d.release(lease.id).ok());
  EXPECT_TRUE(d.reclaim({kRegion1}, 8).empty());
  EXPECT_EQ(d.find("a"), at("x:1", "b1", 2, 0));

  ASSERT_TRUE(d.register_key("c", at("y:1", "b1", 1, 0)).ok());
  lease = d.lookup({"c"}, runtime::Instant(0)).lease;
  EXPECT_EQ(d.erase({"c"}), 1u);
  ASSERT_TRUE(d.register_key("c", at("z:1", "b1", 1, 0)).ok());  // another agent
  ASSERT_TRUE(d.boot_changed("y:1", "b2", "b1").ok());
  ASSERT_TRUE(d.release(lease.id).ok());
  EXPECT_TRUE(d.reclaim({{"y:1", 1, "rh"}}, 8).empty());
  EXPECT_EQ(d.reclaimable(), 0u);
  EXPECT_EQ(d.find("c"), at("z:1", "b1", 1, 0));
}

// Past the bound the oldest kept page is forgotten: an owner that never asks
// (one that exited) cannot stop the reuse of pages that leave later.
TEST(DirectoryReclaim, R1_1_KeptLocationsAreBoundedAndTheOldestGoFirst) {
  Directory d({.max_keys = 1, .max_reclaimable = 2});
  for (std::uint64_t i = 0; i < 5; ++i) {
    ASSERT_TRUE(d.register_key("k" + std::to_string(i), at("x:1", "b", 1, i * 4096)).ok());
  }
  EXPECT_EQ(d.evictions(), 4u);
  EXPECT_EQ(d.reclaimable(), 2u);
  EXPECT_EQ(d.reclaimable_dropped(), 2u);
  auto back = d.reclaim({kRegion1}, 8);
  ASSERT_EQ(back.size(), 2u);
  EXPECT_EQ(back[0].offset, 2u * 4096);  // k2 and k3, oldest first
  EXPECT_EQ(back[1].offset, 3u * 4096);
  EXPECT_EQ(d.reclaimable(), 0u);

  Directory none({.max_keys = 1, .max_reclaimable = 0});
  ASSERT_TRUE(none.register_key("a", at("x:1", "b", 1, 0)).ok());
  ASSERT_TRUE(none.register_key("b", at("x:1", "b", 1, 4096)).ok());
  EXPECT_EQ(none.reclaimable(), 0u);
  EXPECT_EQ(none.reclaimable_dropped(), 1u);
}

}  // namespace
}  // namespace rcxl::directory
