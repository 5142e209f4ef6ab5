// The device model's data structures kept fast without changing its results:
// the page table's LRU against a plain list, the flash die mapping on any
// geometry, and evictions that skip the flash byte store when it holds nothing.
#include "devices/cxl_ssd_model/page_table.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cstring>
#include <list>
#include <random>
#include <vector>

#include "backends/sim/event_loop.h"
#include "devices/cxl_ssd_model/cxl_ssd_device.h"
#include "devices/cxl_ssd_model/flash_array.h"

namespace rcxl::device {
namespace {

using namespace std::chrono_literals;
using Page = PageTable::Page;

// The reference: a list, front = most recently used, with the same rules.
struct ReferenceLru {
  std::list<Page> order;
  std::vector<int> pins;
  std::vector<bool> resident;
  explicit ReferenceLru(std::size_t pages) : pins(pages, 0), resident(pages, false) {}
  bool on(Page p) const { return std::find(order.begin(), order.end(), p) != order.end(); }
  void push_front(Page p) {
    if (!on(p)) order.push_front(p);
  }
  void remove(Page p) { order.remove(p); }
};

// Pages spread over several 32768-page chunks, some far apart, so the links
// cross chunks the way a 64 GiB pool's do.
Page page_at(std::mt19937& rng, std::size_t slots) {
  const Page slot = static_cast<Page>(rng() % slots);
  return (slot % 4) * 40000 + slot / 4;
}

TEST(PageTable, LruOrderMatchesAListOnRandomOperations) {
  constexpr std::size_t kSlots = 64;
  std::mt19937 rng(20261130);
  PageTable table(200000);
  ReferenceLru ref(200000);
  for (int step = 0; step < 20000; ++step) {
    const Page p = page_at(rng, kSlots);
    switch (rng() % 6) {
      case 0:  // a fill: resident, on the LRU unless pinned
        table.flags_mut(p) |= PageTable::kResident;
        ref.resident[p] = true;
        if (table.pins(p) == 0) table.lru_push_front(p);
        if (ref.pins[p] == 0) ref.push_front(p);
        break;
      case 1:  // an access
        if (table.flags(p) & PageTable::kInLru) table.lru_touch(p);
        if (ref.on(p)) {
          ref.remove(p);
          ref.push_front(p);
        }
        break;
      case 2:
        table.pin(p);
        ++ref.pins[p];
        ref.remove(p);
        break;
      case 3:
        table.unpin(p);
        if (ref.pins[p] > 0 && --ref.pins[p] == 0 && ref.resident[p]) ref.push_front(p);
        break;
      case 4: {  // an eviction from the back
        const Page victim = table.lru_back();
        if (ref.order.empty()) {
          ASSERT_EQ(victim, PageTable::kNone);
          break;
        }
        ASSERT_EQ(victim, ref.order.back());
        table.lru_remove(victim);
        table.flags_mut(victim) &= static_cast<PageTable::Flags>(~PageTable::kResident);
        ref.order.pop_back();
        ref.resident[victim] = false;
        break;
      }
      default:  // a trim of a page
        table.lru_remove(p);
        ref.remove(p);
        break;
    }
    ASSERT_EQ(table.pins(p), ref.pins[p]) << "step " << step;
    ASSERT_EQ((table.flags(p) & PageTable::kInLru) != 0, ref.on(p)) << "step " << step;
  }
  // The whole order, drained from the back.
  while (!ref.order.empty()) {
    ASSERT_EQ(table.lru_back(), ref.order.back());
    table.lru_remove(ref.order.back());
    ref.order.pop_back();
  }
  EXPECT_EQ(table.lru_back(), PageTable::kNone);
}

// True when first..last are on the reference list as one segment, last nearest the front.
bool is_segment(const ReferenceLru& ref, Page first, Page last) {
  auto it = std::find(ref.order.begin(), ref.order.end(), last);
  for (Page p = last;; --p) {
    if (it == ref.order.end() || *it != p) return false;
    if (p == first) return true;
    ++it;
  }
}

// Touching a run in one splice leaves the order lru_touch(p) for p ascending
// leaves, and refuses (changing nothing) whenever the pages are not one segment.
// Ranges of neighbouring pages, also across a chunk boundary, fill in page order.
TEST(PageTable, LruTouchRunMatchesPerPageTouchesOnRandomOperations) {
  std::mt19937 rng(20261201);
  PageTable table(200000);
  ReferenceLru ref(200000);
  // Two windows of neighbouring pages; the second crosses the 32768-page chunk edge.
  auto window_page = [](Page i) { return i < 32 ? i : Page{32768 - 16} + (i - 32); };
  int runs_touched = 0;
  for (int step = 0; step < 20000; ++step) {
    // Ranges within 4-page blocks (the second window's blocks 7 and 8 straddle
    // the chunk edge), mostly whole blocks or their tails, so segments recur.
    const Page block = 4 * static_cast<Page>(rng() % 16);
    const Page i = block + (rng() % 2 ? 0 : static_cast<Page>(rng() % 4));
    const Page end = rng() % 2 ? block + 4 : i + 1 + static_cast<Page>(rng() % (block + 4 - i));
    const Page first = window_page(i);
    const Page last = window_page(end - 1);
    switch (rng() % 12) {
      case 0:  // a range trimmed, then filled in page order
      case 1:
      case 2:
        for (Page p = first;; ++p) {
          table.lru_remove(p);
          ref.remove(p);
          if (p == last) break;
        }
        for (Page p = first;; ++p) {
          table.flags_mut(p) |= PageTable::kResident;
          ref.resident[p] = true;
          if (table.pins(p) == 0) table.lru_push_front(p);
          if (ref.pins[p] == 0) ref.push_front(p);
          if (p == last) break;
        }
        break;
      case 3:  // a range accessed: one splice when it is a segment
      case 4:
      case 5: {
        const bool segment = is_segment(ref, first, last);
        const bool spliced = table.lru_touch_run(first, last);
        ASSERT_EQ(spliced, segment) << "step " << step;
        runs_touched += spliced && first != last;
        if (!segment) break;
        for (Page p = first;; ++p) {
          ref.remove(p);
          ref.push_front(p);
          if (p == last) break;
        }
        break;
      }
      case 6:
        table.pin(first);
        ++ref.pins[first];
        ref.remove(first);
        break;
      case 7:  // unpins outnumber pins, so most pages end up unpinned
      case 8:
        table.unpin(first);
        if (ref.pins[first] > 0 && --ref.pins[first] == 0 && ref.resident[first]) {
          ref.push_front(first);
        }
        break;
      case 9:  // an eviction from the back
      case 10: {
        const Page victim = table.lru_back();
        if (ref.order.empty()) {
          ASSERT_EQ(victim, PageTable::kNone);
          break;
        }
        ASSERT_EQ(victim, ref.order.back()) << "step " << step;
        table.lru_remove(victim);
        table.flags_mut(victim) &= static_cast<PageTable::Flags>(~PageTable::kResident);
        ref.order.pop_back();
        ref.resident[victim] = false;
        break;
      }
      default:  // a single page accessed
        if (table.flags(first) & PageTable::kInLru) table.lru_touch(first);
        if (ref.on(first)) {
          ref.remove(first);
          ref.push_front(first);
        }
        break;
    }
    ASSERT_EQ(table.lru_back(), ref.order.empty() ? PageTable::kNone : ref.order.back())
        << "step " << step;
    for (Page p = first;; ++p) {
      ASSERT_EQ((table.flags(p) & PageTable::kInLru) != 0, ref.on(p)) << "step " << step;
      if (p == last) break;
    }
  }
  EXPECT_GT(runs_touched, 100);  // multi-page splices really ran
  while (!ref.order.empty()) {
    ASSERT_EQ(table.lru_back(), ref.order.back());
    table.lru_remove(ref.order.back());
    ref.order.pop_back();
  }
  EXPECT_EQ(table.lru_back(), PageTable::kNone);
}

// pin_range / unpin_range equal pin / unpin page by page (and count the pages
// they pin or unpin), and pages that join the LRU in page order share one list
// node however many they are.
TEST(PageTable, RangePinsMatchPerPagePinsAndRunsMerge) {
  std::mt19937 rng(20261130);
  PageTable table(200000);
  ReferenceLru ref(200000);
  for (Page p = 32000; p < 34000; ++p) {  // across the 32768-page chunk edge
    table.flags_mut(p) |= PageTable::kResident;
    ref.resident[p] = true;
    table.lru_push_front(p);
    ref.push_front(p);
  }
  EXPECT_EQ(table.lru_runs(), 1u);
  for (int step = 0; step < 3000; ++step) {
    const Page first = 32000 + static_cast<Page>(rng() % 2000);
    const Page end = std::min<Page>(34000, first + 1 + static_cast<Page>(rng() % 300));
    std::uint64_t changed = 0;  // pages that went between pinned and unpinned
    if (rng() % 2) {
      ASSERT_EQ(table.unpinned_pages(first, end),
                static_cast<std::uint64_t>(
                    std::count(ref.pins.begin() + first, ref.pins.begin() + end, 0)));
      const std::uint64_t newly_pinned = table.pin_range(first, end);
      for (Page p = first; p < end; ++p) {
        changed += ref.pins[p]++ == 0;
        ref.remove(p);
      }
      ASSERT_EQ(newly_pinned, changed) << "step " << step;
    } else {
      const std::uint64_t unpinned = table.unpin_range(first, end);
      for (Page p = first; p < end; ++p) {
        if (ref.pins[p] > 0 && --ref.pins[p] == 0) {
          ++changed;
          if (ref.resident[p]) ref.push_front(p);
        }
      }
      ASSERT_EQ(unpinned, changed) << "step " << step;
    }
    ASSERT_EQ(table.lru_back(), ref.order.empty() ? PageTable::kNone : ref.order.back())
        << "step " << step;
  }
  for (Page p = 32000; p < 34000; ++p) ASSERT_EQ(table.pins(p), ref.pins[p]);
  while (!ref.order.empty()) {
    ASSERT_EQ(table.lru_back(), ref.order.back());
    table.lru_remove(ref.order.back());
    ref.order.pop_back();
  }
  EXPECT_EQ(table.lru_back(), PageTable::kNone);
  EXPECT_EQ(table.lru_runs(), 0u);
  // Unpinned in page order, 2000 pages are one node again.
  table.pin_range(32000, 34000);  // every page has a pin now; leave exactly one
  for (Page p = 32000; p < 34000; ++p) {
    while (table.pins(p) > 1) table.unpin(p);
  }
  table.unpin_range(32000, 34000);
  EXPECT_EQ(table.lru_runs(), 1u);
  EXPECT_EQ(table.lru_back(), 32000u);
}

// The largest table a profile may ask for (2^32 - 1 pages, e.g. 512-byte
// pages of a 2 TiB device): range loops in its last chunk ended at a chunk
// boundary computed in 32 bits, which wrapped to 0, and never ended.
TEST(PageTable, RangesInTheLastChunkOfA2To32PageTableEnd) {
  const PageTable::Page last_chunk = 0xffff8000u;
  const PageTable::Page end = 0xffffffffu;
  PageTable table(end);
  EXPECT_EQ(table.pin_range(last_chunk, last_chunk + 2), 2u);
  EXPECT_EQ(table.unpinned_pages(last_chunk, end), (end - last_chunk) - 2);
  EXPECT_EQ(table.pin_range(end - 1, end), 1u);
  EXPECT_EQ(table.unpin_range(last_chunk, last_chunk + 2), 2u);
  EXPECT_EQ(table.unpin_range(end - 1, end), 1u);
  EXPECT_EQ(table.unpinned_pages(last_chunk, end), end - last_chunk);
}

// A page's pin count is 16 bits; a page held by more hints than that stayed
// at 65535 and left the pins on the 65535th unpin, with hints still holding
// it (docs/device-model.md, gap 3). It stays pinned until the last one ends.
TEST(PageTable, R3_APageUnderMoreThan65535PinsStaysPinnedUntilTheLast) {
  PageTable table(100);
  constexpr int kPins = 70000;
  table.flags_mut(7) |= PageTable::kResident;
  EXPECT_EQ(table.pin_range(7, 9), 2u);  // page 8 is pinned once, beside it
  for (int i = 1; i < kPins; ++i) EXPECT_EQ(table.pin_range(7, 8), 0u);
  EXPECT_EQ(table.pins(7), UINT16_MAX);
  for (int i = 1; i < kPins; ++i) ASSERT_EQ(table.unpin_range(7, 9), i == 1 ? 1u : 0u) << i;
  EXPECT_EQ(table.pins(7), 1);
  EXPECT_EQ(table.lru_back(), PageTable::kNone);  // still pinned: not evictable
  EXPECT_EQ(table.unpin_range(7, 8), 1u);
  EXPECT_EQ(table.lru_back(), 7u);
  // A reset drops the pins past 65535 with the rest.
  for (int i = 0; i < kPins; ++i) table.pin(7);
  table.drop_all_frames(/*poison_dirty=*/false);
  table.flags_mut(7) |= PageTable::kResident;
  EXPECT_EQ(table.pin_range(7, 8), 1u);
  EXPECT_EQ(table.unpin_range(7, 8), 1u);
  EXPECT_EQ(table.lru_back(), 7u);
}

TEST(PageTable, ResetKeepsOnlyFlashState) {
  PageTable table(100000);
  table.flags_mut(70000) |=
      PageTable::kResident | PageTable::kDirty | PageTable::kTrimmed | PageTable::kFlashBytes;
  table.pin(70000);
  table.set_ready_at(70000, 42);
  table.flags_mut(70001) |= PageTable::kResident | PageTable::kFlashBytes;  // clean
  table.drop_all_frames(/*poison_dirty=*/true);
  // The dirty page's only copy was in DRAM: it is poisoned; the clean one is not.
  EXPECT_EQ(table.flags(70000),
            PageTable::kTrimmed | PageTable::kFlashBytes | PageTable::kPoisoned);
  EXPECT_EQ(table.flags(70001), PageTable::kFlashBytes);
  EXPECT_EQ(table.pins(70000), 0);
  EXPECT_EQ(table.ready_at(70000), 0);
  EXPECT_EQ(table.lru_back(), PageTable::kNone);
}

// SPEC R6: a device without poison handling (poison_lost_pages false) drops
// the same frame state, but the dirty page falls back to its flash copy.
TEST(PageTable, R6_ResetWithoutPoisonMarksNoPage) {
  PageTable table(100000);
  table.flags_mut(70000) |=
      PageTable::kResident | PageTable::kDirty | PageTable::kTrimmed | PageTable::kFlashBytes;
  table.pin(70000);
  table.flags_mut(70001) |= PageTable::kResident | PageTable::kDirty | PageTable::kHasBytes;
  table.lru_push_front(70001);
  table.drop_all_frames(/*poison_dirty=*/false);
  EXPECT_EQ(table.flags(70000), PageTable::kTrimmed | PageTable::kFlashBytes);
  EXPECT_EQ(table.flags(70001), 0);
  EXPECT_EQ(table.pins(70000), 0);
  EXPECT_EQ(table.lru_back(), PageTable::kNone);
}

// Page p lives on channel p mod channels, way (p / channels) mod ways, for
// power-of-two geometries (shifts) and others (division) alike.
void expect_die_mapping(std::uint32_t channels, std::uint32_t ways) {
  CxlSsdParams params;
  params.channels = channels;
  params.ways = ways;
  params.internal_bytes_per_second = 1e15;  // the backend never binds here
  const std::uint64_t dies = std::uint64_t{channels} * ways;
  for (std::uint64_t page : {std::uint64_t{0}, std::uint64_t{5}, std::uint64_t{1000003}}) {
    const std::uint64_t channel = page % channels;
    const std::uint64_t way = (page / channels) % ways;
    FlashArray same_die(params);
    const Instant first = same_die.read_page(page, Instant{0});
    // The next page on that die waits for the whole first read.
    const std::uint64_t next_on_die = page + dies;
    EXPECT_EQ(same_die.read_page(next_on_die, Instant{0}), first + same_die.uncontended_read())
        << channels << "x" << ways << " page " << page;
    // A page on another die of the same channel senses in parallel and only
    // waits for the channel's transfer.
    if (ways > 1) {
      FlashArray other_way(params);
      (void)other_way.read_page(page, Instant{0});
      const std::uint64_t next_way = page + channels;
      ASSERT_EQ(next_way % channels, channel);
      ASSERT_NE((next_way / channels) % ways, way);
      EXPECT_EQ(other_way.read_page(next_way, Instant{0}), first + other_way.page_transfer());
    }
    // The die's next read is booked on that die only.
    EXPECT_EQ(same_die.die_free_at(page), same_die.die_free_at(next_on_die));
    EXPECT_NE(same_die.die_free_at(page + 1), same_die.die_free_at(page));
  }
}

TEST(FlashArray, PagesInterleaveOverChannelsThenWaysOnAnyGeometry) {
  expect_die_mapping(16, 4);  // the default profile: shifts and masks
  expect_die_mapping(8, 1);
  expect_die_mapping(3, 2);  // not powers of two: division
  expect_die_mapping(5, 3);
}

CxlSsdParams two_frame_params() {
  CxlSsdParams p;
  p.capacity_bytes = 1 << 20;
  p.dram_cache_bytes = 2 * 4096;
  p.dram_access = 0ns;
  return p;
}

std::string read_string(const CxlSsdDevice& d, std::uint64_t offset, std::size_t n) {
  std::vector<std::byte> out(n);
  EXPECT_TRUE(d.read(offset, out).ok());
  return std::string(reinterpret_cast<const char*>(out.data()), n);
}

// A page dirty without stored bytes (payload-sampled WRITE) reads as zeros once
// evicted, also when flash held bytes of it from before a reset.
TEST(CxlSsdDevice, SampledDirtyPageEvictionDropsOlderFlashBytes) {
  sim::EventLoop loop;
  CxlSsdDevice d(loop, two_frame_params());
  const char old_bytes[] = "old";
  ASSERT_TRUE(d.write_flash(0, std::as_bytes(std::span(old_bytes, 3))).ok());
  d.reset();  // flash keeps its bytes across a reset
  EXPECT_EQ(read_string(d, 0, 3), "old");
  (void)d.access_ready(0, 4096, true, Instant{0});
  d.accessed(0, 4096, true, Instant{0});  // dirty, no bytes kept
  for (std::uint64_t page = 1; page <= 2; ++page) {
    (void)d.access_ready(page * 4096, 4096, false, Instant{0});
  }
  EXPECT_FALSE(d.page_state(0).resident);
  EXPECT_EQ(d.counters().write_backs, 1u);
  EXPECT_EQ(read_string(d, 0, 3), std::string(3, '\0'));
}

// Bytes written back by an eviction are read from flash afterwards, and a later
// sampled write-back of the same page drops them.
TEST(CxlSsdDevice, WrittenBackBytesSurviveUntilASampledWriteBack) {
  sim::EventLoop loop;
  CxlSsdDevice d(loop, two_frame_params());
  const char bytes[] = "kv";
  ASSERT_TRUE(d.write(4096, std::as_bytes(std::span(bytes, 2))).ok());
  for (std::uint64_t page = 2; page <= 3; ++page) {
    (void)d.access_ready(page * 4096, 4096, false, Instant{0});
  }
  EXPECT_FALSE(d.page_state(4096).resident);
  EXPECT_EQ(read_string(d, 4096, 2), "kv");
  (void)d.access_ready(4096, 4096, true, Instant{0});
  d.accessed(4096, 4096, true, Instant{0});
  for (std::uint64_t page = 4; page <= 5; ++page) {
    (void)d.access_ready(page * 4096, 4096, false, Instant{0});
  }
  EXPECT_FALSE(d.page_state(4096).resident);
  EXPECT_EQ(read_string(d, 4096, 2), std::string(2, '\0'));
}

}  // namespace
}  // namespace rcxl::device
