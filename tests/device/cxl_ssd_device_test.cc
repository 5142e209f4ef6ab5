// The CXL-SSD model: page-exact cache state, flash timing, write-allocate,
// write-back, preparation queue, resets and unknown periods.
#include "devices/cxl_ssd_model/cxl_ssd_device.h"

#include <gtest/gtest.h>

#include <cstring>

#include "backends/sim/sim_nic.h"
#include "backends/sim/sim_world.h"

namespace rcxl::device {
namespace {

using namespace std::chrono_literals;
constexpr std::uint64_t kPage = 4096;

CxlSsdParams small_params() {
  CxlSsdParams p;
  p.capacity_bytes = 1 << 20;  // 256 pages
  p.dram_cache_bytes = 4 * kPage;
  p.dram_access = 0ns;
  p.flash_read = 3000ns;
  p.channels = 8;
  p.ways = 1;
  p.channel_bytes_per_second = 1.2e9;
  p.internal_bytes_per_second = 13e9;
  p.write_allocate_depth = 2;
  p.hinted_bytes_cap = 64 * kPage;
  return p;
}

// The same device writing dirty pages back in idle channel time.
CxlSsdParams eager_params() {
  CxlSsdParams p = small_params();
  p.idle_write_back = true;
  return p;
}

std::vector<std::byte> bytes_of(std::string_view s) {
  std::vector<std::byte> out(s.size());
  std::memcpy(out.data(), s.data(), s.size());
  return out;
}

std::string read_string(const CxlSsdDevice& d, std::uint64_t offset, std::size_t n) {
  std::vector<std::byte> out(n);
  EXPECT_TRUE(d.read(offset, out).ok());
  return std::string(reinterpret_cast<const char*>(out.data()), n);
}

TEST(CxlSsdDevice, MissFillsFromFlashThenHits) {
  sim::EventLoop loop;
  CxlSsdDevice d(loop, small_params());
  const Instant fill = 3000ns + d.flash().page_transfer();
  EXPECT_EQ(d.access_ready(0, 100, false, Instant{0}), fill);
  EXPECT_EQ(d.counters().misses, 1u);
  EXPECT_EQ(d.counters().fills, 1u);
  EXPECT_TRUE(d.page_state(0).resident);
  EXPECT_EQ(d.access_ready(0, 100, false, Instant{20us}), Instant{20us});
  EXPECT_EQ(d.counters().hits, 1u);
  EXPECT_EQ(d.counters().fills, 1u);
}

TEST(CxlSsdDevice, ConcurrentMissesOnAPageMergeIntoOneFill) {
  sim::EventLoop loop;
  CxlSsdDevice d(loop, small_params());
  const Instant first = d.access_ready(kPage, 64, false, Instant{0});
  const Instant second = d.access_ready(kPage + 128, 64, false, Instant{100ns});
  EXPECT_EQ(first, second);
  EXPECT_EQ(d.counters().fills, 1u);
  EXPECT_EQ(d.counters().merged_misses, 1u);
}

TEST(CxlSsdDevice, PagesOnOneDieFillInTurnPagesOnOthersInParallel) {
  sim::EventLoop loop;
  CxlSsdDevice d(loop, small_params());
  const Instant one = 3000ns + d.flash().page_transfer();
  // Pages 0 and 1 sit on channels 0 and 1; page 8 shares page 0's die.
  EXPECT_EQ(d.access_ready(0, 2 * kPage, false, Instant{0}), one);
  EXPECT_GT(d.access_ready(8 * kPage, kPage, false, Instant{0}), one + 3000ns);
}

// Flash work takes the first gap it fits: a fill booked ahead (a later page on
// a busy die, a chained miss waiting for its slot) leaves the time before it
// to others. Busy-until timelines served bookings in call order: the backend
// held an idle die's fill to 10.0 us, a chained WRITE's later fill held an
// idle die's READ to 32.1 us (session-33 device review).
TEST(CxlSsdDevice, R8_AFillOnAnIdleDieDoesNotWaitBehindWorkBookedAhead) {
  sim::EventLoop loop;
  CxlSsdDevice d(loop, small_params());  // 8 dies, one per channel
  const Instant one = 3000ns + d.flash().page_transfer();
  EXPECT_EQ(d.access_ready(0, kPage, false, Instant{0}), one);
  EXPECT_EQ(d.access_ready(8 * kPage, kPage, false, Instant{0}), 2 * one);  // page 0's die
  EXPECT_EQ(d.access_ready(kPage, kPage, false, Instant{0}), one);          // an idle die

  sim::EventLoop loop2;
  CxlSsdDevice w(loop2, small_params());
  // Write-allocate, two fills in flight: page 7's fill is booked at 3 fills.
  EXPECT_EQ(w.access_ready(16 * kPage, 8 * kPage, true, Instant{0}), 4 * one);
  // Page 15 shares page 7's die, idle until then.
  EXPECT_EQ(w.access_ready(15 * kPage, kPage, false, Instant{0}), one);
}

// Out of range: page_state past the end read past the page table, and a
// device of 2^32 pages or more aliased page numbers (32-bit) without a word
// (session-33 device review; profiles were already refused).
TEST(CxlSsdDevice, R8_APageStatePastTheEndIsNoPageAndTooManyPagesStopLoudly) {
  sim::EventLoop loop;
  CxlSsdDevice d(loop, small_params());
  ASSERT_TRUE(d.write(d.size() - kPage, bytes_of("last")).ok());
  EXPECT_TRUE(d.page_state(d.size() - 1).resident);
  const PageState past = d.page_state(d.size());
  EXPECT_FALSE(past.resident || past.dirty || past.trimmed || past.poisoned || past.no_contents);
  auto huge = small_params();
  huge.capacity_bytes = (std::uint64_t{1} << 32) * kPage;
  EXPECT_DEATH(CxlSsdDevice(loop, huge), "fewer than 2\\^32 pages");
}

TEST(CxlSsdDevice, EvictsTheLeastRecentlyUsedPage) {
  sim::EventLoop loop;
  CxlSsdDevice d(loop, small_params());  // 4 frames
  for (std::uint64_t p = 0; p < 4; ++p) (void)d.access_ready(p * kPage, kPage, false, Instant{0});
  (void)d.access_ready(0, kPage, false, Instant{100us});  // page 0 is now most recent
  (void)d.access_ready(4 * kPage, kPage, false, Instant{100us});
  EXPECT_EQ(d.counters().evictions, 1u);
  EXPECT_TRUE(d.page_state(0).resident);
  EXPECT_FALSE(d.page_state(kPage).resident);
  EXPECT_TRUE(d.page_state(2 * kPage).resident);
  EXPECT_EQ(d.resident_pages(), 4u);
}

TEST(CxlSsdDevice, DirtyPagesAreWrittenBackOnEviction) {
  sim::EventLoop loop;
  CxlSsdDevice d(loop, small_params());
  ASSERT_TRUE(d.write(0, bytes_of("dirty-bytes")).ok());
  EXPECT_TRUE(d.page_state(0).dirty);
  for (std::uint64_t p = 1; p <= 4; ++p) (void)d.access_ready(p * kPage, kPage, false, Instant{0});
  EXPECT_EQ(d.counters().write_backs, 1u);
  EXPECT_FALSE(d.page_state(0).resident);
  loop.run_for(1ms);
  // The write-back reached flash: a reset (DRAM lost) still reads them.
  d.reset();
  EXPECT_EQ(read_string(d, 0, 11), "dirty-bytes");
}

// An evicted dirty page's bytes stay in DRAM until its write-back has moved
// them to the die: a reset before then loses them, as it does a dirty
// frame's (poisoned). Before, they counted as on flash the moment the
// eviction was decided (session 27 review).
// Page 0 dirty with `bytes`, evicted by four other pages at t=0 (4 frames):
// its write-back has not left DRAM when the reset that follows comes.
void reset_with_page0_leaving_dram(CxlSsdDevice& d, std::string_view bytes) {
  ASSERT_TRUE(d.write(0, bytes_of(bytes)).ok());
  for (std::uint64_t p = 1; p <= 4; ++p) (void)d.access_ready(p * kPage, kPage, false, Instant{0});
  ASSERT_EQ(d.counters().write_backs, 1u);
  ASSERT_FALSE(d.page_state(0).resident);
  d.reset();  // at t=0: the write-back's transfer ends later
}

TEST(CxlSsdDevice, R6_AResetBeforeAnEvictedPagesWriteBackLeftDramPoisonsIt) {
  sim::EventLoop loop;
  CxlSsdDevice d(loop, small_params());
  reset_with_page0_leaving_dram(d, "dirty-bytes");
  EXPECT_TRUE(d.page_state(0).poisoned);
  std::vector<std::byte> out(11);
  EXPECT_FALSE(d.read(0, out).ok());
}

// Without poison a lost page reads as its older flash copy: an evicted page
// whose write-back had not left DRAM read its newest bytes after the reset
// (the write-back copied them to flash at once; session-33 device review).
TEST(CxlSsdDevice, R6_WithoutPoisonAResetBeforeAWriteBackLeftDramLeavesTheOlderCopy) {
  sim::EventLoop loop;
  auto params = small_params();
  params.poison_lost_pages = false;
  CxlSsdDevice d(loop, params);
  ASSERT_TRUE(d.write_flash(0, bytes_of("older-copy!")).ok());
  reset_with_page0_leaving_dram(d, "dirty-bytes");
  EXPECT_FALSE(d.page_state(0).poisoned);
  EXPECT_EQ(read_string(d, 0, 11), "older-copy!");
  // A write-back that finished before the reset keeps the newest bytes.
  ASSERT_TRUE(d.write(0, bytes_of("newer-bytes")).ok());
  for (std::uint64_t p = 5; p <= 8; ++p) (void)d.access_ready(p * kPage, kPage, false, loop.now());
  loop.run_for(10ms);
  d.reset();
  EXPECT_EQ(read_string(d, 0, 11), "newer-bytes");
}

// Evictions are held to the dies' program throughput: a dirty victim's frame
// is free only once its die's page buffer takes the page (one program unit
// beyond the one programming). Before, tPROG changed no eviction's timing:
// 10 ms and 100 us gave the same ready times (session 27 review).
TEST(CxlSsdDevice, R8_DirtyEvictionsAreHeldToTheProgramThroughput) {
  std::vector<Instant> last_ready;
  for (const auto t_prog : {std::chrono::nanoseconds(100us), std::chrono::nanoseconds(10ms)}) {
    sim::EventLoop loop;
    auto params = small_params();  // 4 frames, 8 dies
    params.flash_program = t_prog;
    CxlSsdDevice d(loop, params);
    Instant ready{0};
    for (std::uint64_t p = 0; p < 64; ++p) {
      ready = std::max(ready, d.access_ready(p * kPage, kPage, true, Instant{0}));
      d.accessed(p * kPage, kPage, true, Instant{0});
    }
    EXPECT_EQ(d.counters().write_backs, 60u);
    last_ready.push_back(ready);
  }
  // 60 write-backs on 8 dies, 4 pages per program unit: ~7 pages a die, of
  // which all but one unit's wait for the programs before them.
  EXPECT_GT(last_ready[1], Instant(10ms / 4 * 3));
  EXPECT_LT(last_ready[0], Instant(1ms));
}

// A write-back occupies its die for its share of tPROG, but a read on that die
// suspends the program (ONFI program suspend) instead of waiting behind it.
TEST(CxlSsdDevice, WriteBackIsSuspendedByAReadOnItsDie) {
  sim::EventLoop loop;
  auto params = small_params();
  params.dram_cache_bytes = kPage;
  CxlSsdDevice d(loop, params);
  ASSERT_TRUE(d.write(0, bytes_of("x")).ok());
  // Page 8 shares page 0's die: its fill evicts page 0 and does not wait for the program.
  const Instant ready = d.access_ready(8 * kPage, kPage, false, Instant{0});
  EXPECT_EQ(d.counters().write_backs, 1u);
  EXPECT_LT(ready, Instant(params.flash_program / 4));
  // The program finishes later by the time the read held the die.
  const auto transfer = d.flash().page_transfer();
  EXPECT_GE(d.flash().program_done_at(0),
            Instant(transfer + params.flash_program / 4) + (ready - Instant{0}) - transfer);
}

// Eager write-back (Lee, Tyson & Farrens, MICRO '00): dirty pages go to flash
// while their channel is idle, so a later eviction finds them clean.
TEST(CxlSsdDevice, IdleWriteBackCleansDirtyPagesSoEvictionWritesNothing) {
  sim::EventLoop loop;
  auto params = eager_params();
  CxlSsdDevice d(loop, params);
  ASSERT_TRUE(d.write(0, bytes_of("dirty-bytes")).ok());
  loop.run_for(100us);
  (void)d.access_ready(kPage, kPage, false, loop.now());  // the device looks at its queues
  EXPECT_EQ(d.counters().idle_write_backs, 1u);
  EXPECT_TRUE(d.page_state(0).resident);
  EXPECT_FALSE(d.page_state(0).dirty);
  EXPECT_EQ(read_string(d, 0, 11), "dirty-bytes");
  for (std::uint64_t p = 2; p <= 4; ++p) (void)d.access_ready(p * kPage, kPage, false, loop.now());
  (void)d.access_ready(5 * kPage, kPage, false, loop.now());
  EXPECT_FALSE(d.page_state(0).resident);
  EXPECT_EQ(d.counters().write_backs, 0u);
  d.reset();  // flash kept the bytes
  EXPECT_EQ(read_string(d, 0, 11), "dirty-bytes");
}

TEST(CxlSsdDevice, IdleWriteBackIsOffUnlessTheProfileTurnsItOn) {
  sim::EventLoop loop;
  CxlSsdDevice d(loop, small_params());
  ASSERT_TRUE(d.write(0, bytes_of("x")).ok());
  loop.run_for(1ms);
  (void)d.access_ready(kPage, kPage, false, loop.now());
  EXPECT_TRUE(d.page_state(0).dirty);
  EXPECT_EQ(d.counters().idle_write_backs, 0u);
}

// It only fills channel time already past: a fill issued now is never later for it.
TEST(CxlSsdDevice, IdleWriteBackNeverDelaysAFill) {
  for (const auto wait : {8us, 12us, 50us}) {
    Instant ready[2];
    for (const bool eager : {false, true}) {
      sim::EventLoop loop;
      auto params = eager ? eager_params() : small_params();
      CxlSsdDevice d(loop, params);
      ASSERT_TRUE(d.write(0, bytes_of("x")).ok());  // fills page 0 first: 6.41 us
      loop.run_for(wait);
      // Page 8 shares page 0's channel and die (8 channels, 1 way).
      ready[eager] = d.access_ready(8 * kPage, kPage, false, loop.now());
      // The write-back needs the channel for 3.41 us after the fill: not idle long enough at 8 us.
      const auto fill_then_write_back = 3000ns + 2 * d.flash().page_transfer();
      EXPECT_EQ(d.counters().idle_write_backs, eager && wait >= fill_then_write_back ? 1u : 0u)
          << wait.count();
    }
    EXPECT_EQ(ready[0], ready[1]) << wait.count();
  }
}

// A write-back does not start before the write that dirtied the page landed.
TEST(CxlSsdDevice, IdleWriteBackStartsAfterTheWriteLanded) {
  sim::EventLoop loop;
  auto params = eager_params();
  CxlSsdDevice d(loop, params);
  (void)d.access_ready(0, kPage, true, loop.now());  // a write-allocate fill
  loop.run_for(40us);
  d.accessed(0, kPage, true, loop.now());  // the WRITE lands at 40 us
  loop.run_for(2us);
  (void)d.access_ready(kPage, kPage, false, loop.now());
  EXPECT_TRUE(d.page_state(0).dirty);  // 40 + 3.41 us > 42 us
  loop.run_for(2us);
  (void)d.access_ready(kPage, kPage, false, loop.now());
  EXPECT_FALSE(d.page_state(0).dirty);
  EXPECT_EQ(d.counters().idle_write_backs, 1u);
}

// A page evicted while it waited in the idle write-back queue leaves it: dirtied
// again, it queues behind the pages dirtied meanwhile, at its new time (the
// old entry used to keep its place, device-model.md's gap 2).
TEST(CxlSsdDevice, AnEvictedPageDirtiedAgainQueuesForIdleWriteBackAnew) {
  sim::EventLoop loop;
  auto params = eager_params();
  params.dram_cache_bytes = 8 * kPage;
  CxlSsdDevice d(loop, params);
  ASSERT_TRUE(d.trim(0, params.capacity_bytes).ok());        // frames without flash reads
  const std::uint64_t z = 16 * kPage, p = 0, q = 8 * kPage;  // one channel, one die
  ASSERT_TRUE(d.write(z, bytes_of("z")).ok());
  ASSERT_TRUE(d.write(p, bytes_of("p")).ok());  // queued behind z
  (void)d.access_ready(z, kPage, false, loop.now());
  for (std::uint64_t page = 1; page <= 7; ++page) {  // other channels: the last evicts p
    (void)d.access_ready(page * kPage, kPage, false, loop.now());
  }
  ASSERT_FALSE(d.page_state(p).resident);
  EXPECT_EQ(d.counters().write_backs, 1u);  // p, on the channel until 3.41 us
  (void)d.access_ready(z, kPage, false, loop.now());
  loop.run_for(1us);
  ASSERT_TRUE(d.write(q, bytes_of("q")).ok());  // z cannot go yet: q queues behind it
  loop.run_for(4us);
  ASSERT_TRUE(d.write(p, bytes_of("P")).ok());  // p dirty again, after q
  ASSERT_TRUE(d.page_state(z).dirty);
  // p's fill from flash held the channel until 11.41 us: time for two
  // write-backs by 19 us (z, then one more by 18.23 us), and it is q's.
  loop.run_for(14us);
  (void)d.access_ready(z, kPage, false, loop.now());
  EXPECT_EQ(d.counters().idle_write_backs, 2u);
  EXPECT_FALSE(d.page_state(z).dirty);
  EXPECT_FALSE(d.page_state(q).dirty);
  EXPECT_TRUE(d.page_state(p).dirty);
  loop.run_for(1ms);
  (void)d.access_ready(z, kPage, false, loop.now());
  EXPECT_FALSE(d.page_state(p).dirty);
  EXPECT_EQ(d.counters().idle_write_backs, 3u);
  EXPECT_EQ(read_string(d, p, 1), "P");
}

// The same for a queued page trimmed (its KV dropped) and written again.
TEST(CxlSsdDevice, ATrimmedPageWrittenAgainQueuesForIdleWriteBackAnew) {
  sim::EventLoop loop;
  CxlSsdDevice d(loop, eager_params());
  ASSERT_TRUE(d.trim(0, eager_params().capacity_bytes).ok());
  const std::uint64_t z = 16 * kPage, p = 0, q = 8 * kPage;  // one channel, one die
  ASSERT_TRUE(d.write(z, bytes_of("z")).ok());
  ASSERT_TRUE(d.write(p, bytes_of("p")).ok());
  ASSERT_TRUE(d.trim(p, kPage).ok());
  loop.run_for(1us);
  ASSERT_TRUE(d.write(q, bytes_of("q")).ok());
  loop.run_for(1us);
  ASSERT_TRUE(d.write(p, bytes_of("P")).ok());  // z cannot go before 3.41 us
  loop.run_for(6us);                            // by 8 us: z, then q (3.41 to 6.82 us)
  (void)d.access_ready(z, kPage, false, loop.now());
  EXPECT_EQ(d.counters().idle_write_backs, 2u);
  EXPECT_FALSE(d.page_state(q).dirty);
  EXPECT_TRUE(d.page_state(p).dirty);
}

// A die takes at most one program unit ahead: eager write-back is bound by
// program throughput (tPROG per unit), not by the channel.
TEST(CxlSsdDevice, IdleWriteBackIsBoundByProgramThroughput) {
  sim::EventLoop loop;
  auto params = eager_params();
  params.capacity_bytes = 1024 * kPage;
  params.dram_cache_bytes = 256 * kPage;
  CxlSsdDevice d(loop, params);
  ASSERT_TRUE(d.trim(0, params.capacity_bytes).ok());  // frames without flash reads
  for (std::uint64_t i = 0; i < 128; ++i) {            // pages 0, 8, 16, ...: one die
    ASSERT_TRUE(d.write(i * 8 * kPage, bytes_of("y")).ok());
  }
  loop.run_for(1ms);
  (void)d.access_ready(kPage, kPage, false, loop.now());
  const auto per_page = params.flash_program * static_cast<std::int64_t>(kPage) /
                        static_cast<std::int64_t>(params.program_unit_bytes);  // 25 us
  const auto bound = static_cast<std::uint64_t>((1ms + params.flash_program) / per_page) + 1;
  EXPECT_LE(d.counters().idle_write_backs, bound);
  EXPECT_GE(d.counters().idle_write_backs, bound - 2);
  loop.run_for(10ms);
  (void)d.access_ready(kPage, kPage, false, loop.now());
  EXPECT_EQ(d.counters().idle_write_backs, 128u);
}

// A reset drops the queue with DRAM; pages written back before it keep their bytes.
TEST(CxlSsdDevice, R6_ResetKeepsWhatIdleWriteBackWroteAndDropsTheRest) {
  sim::EventLoop loop;
  auto params = eager_params();
  CxlSsdDevice d(loop, params);
  ASSERT_TRUE(d.write(0, bytes_of("early")).ok());
  loop.run_for(100us);
  ASSERT_TRUE(d.write(kPage, bytes_of("late!")).ok());  // no idle time before the reset
  d.reset();
  EXPECT_EQ(read_string(d, 0, 5), "early");
  EXPECT_FALSE(d.page_state(0).poisoned);
  EXPECT_TRUE(d.page_state(kPage).poisoned);  // its bytes were only in DRAM
  loop.run_for(1ms);
  (void)d.access_ready(2 * kPage, kPage, false, loop.now());
  EXPECT_EQ(d.counters().idle_write_backs, 1u);
}

TEST(FlashArray, ProgramsOnOneDieSerialize) {
  auto params = small_params();
  FlashArray flash(params);
  (void)flash.program_page(0, Instant{0});
  const Instant first = flash.program_done_at(0);
  (void)flash.program_page(8, Instant{0});  // same die
  const Instant second = flash.program_done_at(8);
  EXPECT_GE(second - first, params.flash_program / 4);
  // Reads of that die are not held behind the programs.
  EXPECT_LT(flash.read_page(16, Instant{0}), first);
}

// A read suspends a program for the time it needs the die (tR and its
// transfer), not for its wait for the channel: that wait is the channel's,
// and was charged to every waiting die's programs too (session 27 review:
// 10.24 us pushed where the read needs 6.41).
TEST(FlashArray, AReadSuspendsAProgramOnlyForItsOwnDieTime) {
  auto params = small_params();
  params.channels = 1;
  params.ways = 2;
  FlashArray flash(params);
  (void)flash.program_page(0, Instant{0});
  (void)flash.read_page(1, Instant{0});  // the other die: holds the channel
  const Instant before = flash.program_done_at(0);
  (void)flash.read_page(0, Instant{0});  // waits for the channel
  EXPECT_EQ(flash.program_done_at(0) - before, flash.uncontended_read());
}

// The prefetcher commits a fill only when the frame it takes is free within
// its horizon: behind dirty victims whose write-backs wait for their dies,
// fills were committed tens of ms ahead, holding channels and dies from
// demand misses (session 27 review).
TEST(CxlSsdDevice, R8_PrefetchWaitsForAFrameInsteadOfCommittingFarAhead) {
  sim::EventLoop loop;
  auto params = small_params();  // 8 dies
  params.dram_cache_bytes = 16 * kPage;
  params.flash_program = 10ms;  // 2.5 ms of program per page
  CxlSsdDevice d(loop, params);
  const std::vector<std::byte> page(kPage, std::byte{1});
  for (std::uint64_t p = 0; p < 80; ++p) ASSERT_TRUE(d.write(p * kPage, page).ok());
  EXPECT_EQ(d.counters().write_backs, 64u);  // 8 a die: ~20 ms of programs queued
  loop.run_for(1ms);                         // the dies' reads are done; their programs are not
  const PoolRange r{100 * kPage, 8 * kPage};
  ASSERT_TRUE(d.prefetch(1, std::span(&r, 1), true).ok());
  EXPECT_EQ(d.fill_queue_pages(), 8u);  // none committed yet: no frame is free in time
  for (std::uint64_t p = 100; p < 108; ++p) {
    const PageState st = d.page_state(p * kPage);
    if (st.resident) {
      EXPECT_LE(st.ready_at, loop.now() + 1ms) << p;
    }
  }
  // They come as frames free: each within a horizon of its frame.
  loop.run_for(200ms);
  for (std::uint64_t p = 100; p < 108; ++p) {
    EXPECT_TRUE(d.page_state(p * kPage).resident) << p;
    EXPECT_LE(d.page_state(p * kPage).ready_at, loop.now()) << p;
  }
  d.release(1);
}

// A capacity that is not whole pages (a scenario's pool_bytes) has a last
// partial page: its bytes were past the page table, an out-of-bounds access
// that `make asan` reports (a release build may pass it by luck).
TEST(CxlSsdDevice, R8_ACapacityOfPartPagesServesItsLastBytes) {
  sim::EventLoop loop;
  auto params = small_params();
  params.capacity_bytes = (1 << 20) + 100;  // 256 pages and 100 bytes
  CxlSsdDevice d(loop, params);
  ASSERT_TRUE(d.write(1 << 20, bytes_of("tail")).ok());
  (void)d.access_ready(1 << 20, 100, false, Instant{0});
  d.accessed(1 << 20, 100, true, Instant{0});
  EXPECT_EQ(read_string(d, 1 << 20, 4), "tail");
  EXPECT_TRUE(d.page_state(1 << 20).resident);
  std::vector<std::byte> past(8);
  EXPECT_FALSE(d.read((1 << 20) + 96, past).ok());  // past the capacity
}

TEST(CxlSsdDevice, PinnedPagesAreNeverEvicted) {
  sim::EventLoop loop;
  CxlSsdDevice d(loop, small_params());
  const PoolRange r{0, kPage};
  ASSERT_TRUE(d.prefetch(1, std::span(&r, 1), true).ok());
  for (std::uint64_t p = 1; p < 12; ++p) (void)d.access_ready(p * kPage, kPage, false, Instant{0});
  EXPECT_TRUE(d.page_state(0).resident);
  EXPECT_EQ(d.page_state(0).pins, 1);
  d.release(1);
  EXPECT_EQ(d.page_state(0).pins, 0);
  EXPECT_EQ(d.pinned_bytes(), 0u);
}

TEST(CxlSsdDevice, R6_ResetLosesDirtyDataAndBumpsTheGeneration) {
  sim::EventLoop loop;
  CxlSsdDevice d(loop, small_params());
  ASSERT_TRUE(d.write_flash(0, bytes_of("old")).ok());
  ASSERT_TRUE(d.write(0, bytes_of("new")).ok());
  EXPECT_EQ(read_string(d, 0, 3), "new");
  EXPECT_EQ(d.generation(), 1u);
  d.reset();
  EXPECT_EQ(d.generation(), 2u);
  EXPECT_EQ(d.observed_generation(), std::optional<std::uint64_t>(2));
  // The newest bytes were only in DRAM: the page is poisoned, a read fails
  // rather than answer the older flash bytes as if they were current.
  std::string out(3, '\0');
  EXPECT_EQ(d.read(0, std::as_writable_bytes(std::span(out))).code(), ErrorCode::kIoError);
  EXPECT_TRUE(d.page_state(0).poisoned);
  EXPECT_TRUE(d.lost(0, 3));
  EXPECT_FALSE(d.page_state(0).resident);
  EXPECT_EQ(d.resident_pages(), 0u);
  EXPECT_EQ(d.counters().resets, 1u);
}

TEST(CxlSsdDevice, R6_AResetPoisonsOnlyPagesWhoseBytesItLostUntilWrittenOrTrimmed) {
  sim::EventLoop loop;
  CxlSsdDevice d(loop, small_params());
  const std::uint64_t page = small_params().page_bytes;
  ASSERT_TRUE(d.write_flash(page, bytes_of("on flash")).ok());  // clean: flash holds it
  ASSERT_TRUE(d.write(2 * page, bytes_of("dirty")).ok());
  ASSERT_TRUE(d.write(3 * page, bytes_of("dirty too")).ok());
  EXPECT_FALSE(d.lost(0, 4 * page));  // nothing is lost before a reset
  d.reset();
  EXPECT_EQ(read_string(d, page, 8), "on flash");  // a clean page keeps its bytes
  EXPECT_FALSE(d.lost(page, page));
  EXPECT_TRUE(d.lost(0, 3 * page));  // a range is lost if any page of it is
  EXPECT_TRUE(d.page_state(2 * page).poisoned);
  // A write of the whole page ends the poison (its page now holds what was written).
  std::string again(page, '.');
  again.replace(0, 5, "again");
  ASSERT_TRUE(d.write(2 * page, bytes_of(again)).ok());
  EXPECT_FALSE(d.page_state(2 * page).poisoned);
  EXPECT_EQ(read_string(d, 2 * page, 5), "again");
  // Bytes past a sampled payload (accessed) end it too; so does a trim.
  d.accessed(3 * page, page, true, loop.now());
  EXPECT_FALSE(d.page_state(3 * page).poisoned);
  d.reset();
  EXPECT_TRUE(d.page_state(3 * page).poisoned);
  ASSERT_TRUE(d.trim(3 * page, page).ok());
  EXPECT_FALSE(d.page_state(3 * page).poisoned);
  EXPECT_FALSE(d.lost(3 * page, page));
  EXPECT_TRUE(d.lost(2 * page, page));  // written again before the second reset
}

// R6: a write of part of a poisoned page (a key packed beside a lost one)
// leaves it poisoned: the rest of the page would read as its flash copy from
// before the reset, or as zeros past a sampled WRITE, as if current. Before,
// any write ended the whole page's poison (session-24 review).
TEST(CxlSsdDevice, R6_APartialWriteLeavesAPoisonedPagePoisoned) {
  sim::EventLoop loop;
  CxlSsdDevice d(loop, small_params());
  const std::uint64_t page = small_params().page_bytes;
  ASSERT_TRUE(d.write_flash(0, bytes_of(std::string(2 * page, 'o'))).ok());  // older bytes
  ASSERT_TRUE(d.write(0, bytes_of(std::string(2 * page, 'A'))).ok());        // only in DRAM
  d.reset();
  ASSERT_TRUE(d.write(page / 2, bytes_of(std::string(page / 2, 'C'))).ok());  // beside the lost
  EXPECT_TRUE(d.page_state(0).poisoned);
  EXPECT_TRUE(d.lost(0, page / 2));
  std::string out(page / 2, '\0');
  EXPECT_EQ(d.read(0, std::as_writable_bytes(std::span(out))).code(), ErrorCode::kIoError);
  // A WRITE the device is only told of (sampled payload) over part of page 1.
  d.accessed(page + 100, 200, true, loop.now());
  EXPECT_TRUE(d.page_state(page).poisoned);
  EXPECT_TRUE(d.lost(page, 100));
  // Evicted and read back from flash, the page is still poisoned.
  for (std::uint64_t p = 2; p < 2 + small_params().dram_cache_bytes / page + 2; ++p) {
    ASSERT_TRUE(d.write(p * page, bytes_of("x")).ok());
  }
  EXPECT_FALSE(d.page_state(0).resident);
  EXPECT_TRUE(d.lost(0, page));
  // Whole again, it is current.
  ASSERT_TRUE(d.write(0, bytes_of(std::string(page, 'D'))).ok());
  EXPECT_FALSE(d.lost(0, page));
  EXPECT_EQ(read_string(d, 0, 3), "DDD");
}

// SPEC R4.1 (no flash read a WRITE does not need): pages that lost their
// frames between access_ready and the landing (a DRAM smaller than the WRITE)
// get frames again; those it covers whole were read from flash a second time,
// and a READ of the bytes just written waited for that read.
TEST(CxlSsdDevice, R4_1_AWriteLandingOnLostFramesBooksNoSecondFlashRead) {
  sim::EventLoop loop;
  auto params = small_params();
  params.dram_cache_bytes = 8 * kPage;
  CxlSsdDevice d(loop, params);
  const std::uint64_t length = 16 * kPage;
  const Instant ready = d.access_ready(0, length, true, loop.now());
  loop.run_for(ready - loop.now());
  EXPECT_EQ(d.counters().fills, 16u);  // write-allocate, page by page
  EXPECT_FALSE(d.page_state(0).resident);
  // The WRITE lands as the sim RNIC lands a sampled one: 64 bytes kept.
  ASSERT_TRUE(d.land_write(0, length, bytes_of(std::string(64, 'W')), loop.now()));
  EXPECT_EQ(d.counters().fills, 16u);
  EXPECT_EQ(read_string(d, 0, 3), "WWW");
  // A reset between access_ready and the landing: the frames come back at
  // once, without a flash read, so a READ of the bytes just written never
  // waits for one.
  loop.run_for(d.access_ready(0, 4 * kPage, true, loop.now()) - loop.now());
  const std::uint64_t fills = d.counters().fills;
  d.reset();
  ASSERT_TRUE(d.land_write(0, 4 * kPage, bytes_of(std::string(64, 'V')), loop.now()));
  EXPECT_EQ(d.counters().fills, fills);
  for (std::uint64_t p = 0; p < 4; ++p) {
    EXPECT_TRUE(d.page_state(p * kPage).resident) << p;
    EXPECT_LE(d.page_state(p * kPage).ready_at, loop.now()) << p;
  }
  EXPECT_EQ(read_string(d, 0, 3), "VVV");
}

// SPEC R6 (never older bytes as a hit, yet a page written whole is current):
// a WRITE covering a poisoned page whole ends its poison, also when its
// sampled payload ends inside that page (the serving rig keeps 64 bytes).
TEST(CxlSsdDevice, R6_AWholePageWriteWithASampledPayloadEndsThePoison) {
  sim::EventLoop loop;
  CxlSsdDevice d(loop, small_params());
  ASSERT_TRUE(d.write(0, bytes_of(std::string(2 * kPage, 'A'))).ok());  // only in DRAM
  d.reset();
  ASSERT_TRUE(d.lost(0, 2 * kPage));
  loop.run_for(d.access_ready(0, 2 * kPage, true, loop.now()) - loop.now());
  ASSERT_TRUE(d.land_write(0, 2 * kPage, bytes_of(std::string(64, 'B')), loop.now()));
  EXPECT_FALSE(d.lost(0, 2 * kPage));
  // Part of a page is not the page: a WRITE of 100 bytes keeps its poison.
  ASSERT_TRUE(d.write(2 * kPage, bytes_of(std::string(kPage, 'C'))).ok());
  d.reset();
  ASSERT_TRUE(d.land_write(2 * kPage + 8, 100, bytes_of("x"), loop.now()));
  EXPECT_TRUE(d.lost(2 * kPage, kPage));
}

// --- poison_lost_pages: a device without poison handling (what-if runs and
// tests that plant a stale-bytes bug) returns the older flash copy instead.

CxlSsdParams params_poisoning(bool poison) {
  CxlSsdParams p = small_params();
  p.poison_lost_pages = poison;
  return p;
}

// Writes "old bytes" to page 0 and lets eviction write it back to flash, then
// overwrites it with "new bytes" (dirty in DRAM only) and resets the device.
void write_back_overwrite_and_reset(sim::EventLoop& loop, CxlSsdDevice& d) {
  ASSERT_TRUE(d.write(0, bytes_of("old bytes")).ok());
  // Four other pages fill the 4-page cache: page 0 is evicted, written back
  // (its transfer done before the reset: one in flight leaves what flash held).
  for (std::uint64_t p = 1; p <= 4; ++p) (void)d.access_ready(p * kPage, kPage, false, d.now());
  ASSERT_FALSE(d.page_state(0).resident);
  ASSERT_EQ(d.counters().write_backs, 1u);
  loop.run_for(10ms);
  ASSERT_TRUE(d.write(0, bytes_of("new bytes")).ok());
  ASSERT_EQ(read_string(d, 0, 9), "new bytes");
  ASSERT_TRUE(d.page_state(0).dirty);
  d.reset();
}

// SPEC R6: with poison_lost_pages false the lost page silently reads as the
// older flash copy, with no error: the stale bytes a test can plant.
TEST(CxlSsdDevice, R6_WithoutPoisonAResetLeavesThePagesOlderFlashBytes) {
  sim::EventLoop loop;
  CxlSsdDevice d(loop, params_poisoning(false));
  write_back_overwrite_and_reset(loop, d);
  std::string out(9, '\0');
  ASSERT_TRUE(d.read(0, std::as_writable_bytes(std::span(out))).ok());
  EXPECT_EQ(out, "old bytes");
  EXPECT_FALSE(d.page_state(0).poisoned);
  EXPECT_FALSE(d.page_state(0).dirty);
  EXPECT_FALSE(d.page_state(0).resident);
  EXPECT_FALSE(d.lost(0, 8 * kPage));
  EXPECT_EQ(d.generation(), 2u);
  EXPECT_EQ(d.counters().resets, 1u);
}

// SPEC R6: the same sequence on the default device (CXL poison) fails the read.
TEST(CxlSsdDevice, R6_WithPoisonTheSameSequenceFailsTheRead) {
  sim::EventLoop loop;
  CxlSsdDevice d(loop, params_poisoning(true));
  EXPECT_TRUE(CxlSsdParams{}.poison_lost_pages);  // poison is the default
  write_back_overwrite_and_reset(loop, d);
  std::string out(9, '\0');
  EXPECT_EQ(d.read(0, std::as_writable_bytes(std::span(out))).code(), ErrorCode::kIoError);
  EXPECT_TRUE(d.page_state(0).poisoned);
  EXPECT_TRUE(d.lost(0, kPage));
  EXPECT_EQ(d.generation(), 2u);
}

// SPEC R6: without poison, "the flash copy" is whatever flash holds: bytes
// written there directly, zeros after a trim, zeros for a page never stored.
TEST(CxlSsdDevice, R6_WithoutPoisonALostPageReadsWhateverFlashHolds) {
  sim::EventLoop loop;
  CxlSsdDevice d(loop, params_poisoning(false));
  ASSERT_TRUE(d.write_flash(0, bytes_of("flash")).ok());
  ASSERT_TRUE(d.write(0, bytes_of("dram!")).ok());
  ASSERT_TRUE(d.write_flash(kPage, bytes_of("trimmed")).ok());
  ASSERT_TRUE(d.trim(kPage, kPage).ok());
  ASSERT_TRUE(d.write(kPage, bytes_of("written")).ok());
  ASSERT_TRUE(d.write(2 * kPage, bytes_of("dram only!!!")).ok());
  d.reset();
  EXPECT_EQ(read_string(d, 0, 5), "flash");
  EXPECT_EQ(read_string(d, kPage, 7), std::string(7, '\0'));
  EXPECT_EQ(read_string(d, 2 * kPage, 12), std::string(12, '\0'));
  EXPECT_FALSE(d.lost(0, 3 * kPage));
  // Written again, a page reads the new bytes over its flash copy, as always.
  ASSERT_TRUE(d.write(0, bytes_of("D")).ok());
  EXPECT_EQ(read_string(d, 0, 5), "Dlash");
}

// SPEC R6: the bit changes only what a lost page reads as; the reset drops
// DRAM, dirt, queues and pins and bumps the generation exactly as with poison,
// and the timing that follows is the same.
TEST(CxlSsdDevice, R6_WithoutPoisonAResetDropsTheSameState) {
  sim::EventLoop loop;
  CxlSsdDevice with(loop, params_poisoning(true));
  CxlSsdDevice without(loop, params_poisoning(false));
  for (CxlSsdDevice* d : {&with, &without}) {
    const PoolRange pinned{0, 2 * kPage};
    const PoolRange queued{16 * kPage, 64 * kPage};
    ASSERT_TRUE(d->prefetch(1, std::span(&pinned, 1), true).ok());
    ASSERT_TRUE(d->prefetch(2, std::span(&queued, 1), false).ok());
    ASSERT_TRUE(d->write(3 * kPage, bytes_of("dirty")).ok());
    d->reset();
  }
  EXPECT_EQ(with.generation(), without.generation());
  EXPECT_EQ(without.resident_pages(), 0u);
  EXPECT_EQ(without.pinned_bytes(), 0u);
  EXPECT_EQ(without.fill_queue_pages(), 0u);
  EXPECT_EQ(without.waiting_bytes(), 0u);
  for (std::uint64_t p = 0; p < 80; ++p) {
    const PageState a = with.page_state(p * kPage);
    const PageState b = without.page_state(p * kPage);
    EXPECT_EQ(a.resident, b.resident) << p;
    EXPECT_EQ(a.dirty, b.dirty) << p;
    EXPECT_EQ(a.trimmed, b.trimmed) << p;
    EXPECT_EQ(a.pins, b.pins) << p;
    EXPECT_EQ(a.poisoned, p == 3) << p;  // only the dirty page, only with poison
    EXPECT_FALSE(b.poisoned) << p;
  }
  for (std::uint64_t p : {0, 3, 20}) {
    EXPECT_EQ(with.access_ready(p * kPage, kPage, false, loop.now()),
              without.access_ready(p * kPage, kPage, false, loop.now()))
        << p;
  }
}

// A GPU node and the device's memory node on the sim RNIC, and a QP between them.
struct RnicRig {
  explicit RnicRig(std::uint64_t seed) : world(seed) {}
  std::shared_ptr<runtime::QueuePair> connect() {
    std::shared_ptr<runtime::QueuePair> qp;
    gpu_nic.connect("mem", *strand, [&](auto r) { qp = r.value(); });
    EXPECT_TRUE(world.run_until([&] { return qp != nullptr; }).ok());
    return qp;
  }
  sim::SimWorld world;
  sim::SimFabric fabric{world};
  sim::SimNode& mem = world.add_node("mem");
  sim::SimNode& gpu = world.add_node("gpu");
  sim::SimNic& mem_nic = fabric.add_nic("mem");
  sim::SimNic& gpu_nic = fabric.add_nic("gpu");
  std::unique_ptr<runtime::Strand> strand = gpu.make_strand("rdma");
};

// One READ of page 0 through the sim RNIC after a WRITE of "new bytes" over a
// flash copy "old bytes" and a reset of the device (the registration stays:
// the agent has not yet seen the new generation, as R6.2 allows).
Status read_through_rnic_after_reset(bool poison, std::string& got) {
  RnicRig rig(5);
  auto& world = rig.world;
  CxlSsdDevice d(world.loop(), params_poisoning(poison));
  EXPECT_TRUE(d.write_flash(0, bytes_of("old bytes")).ok());
  auto reg = rig.mem_nic
                 .register_memory(d, 0, 8 * kPage,
                                  runtime::kAccessRemoteRead | runtime::kAccessRemoteWrite)
                 .value();
  auto qp = rig.connect();
  auto run = [&](runtime::RdmaOp op) {
    std::optional<std::vector<Status>> done;
    qp->post({op}, [&](std::vector<Status> s) { done = s; });
    EXPECT_TRUE(world.run_until([&] { return done.has_value(); }).ok());
    return (*done)[0];
  };
  auto fresh = bytes_of("new bytes");
  EXPECT_TRUE(run({runtime::RdmaOp::Kind::kWrite, fresh, reg.addr, reg.rkey}).ok());
  EXPECT_EQ(read_string(d, 0, 9), "new bytes");
  d.reset();
  std::vector<std::byte> back(9);
  const Status s = run({runtime::RdmaOp::Kind::kRead, back, reg.addr, reg.rkey});
  got.assign(reinterpret_cast<const char*>(back.data()), back.size());
  return s;
}

// SPEC R6: without poison the READ completes with the older bytes (the stale
// bytes an agent must not hand out as the key's); with poison it fails.
TEST(CxlSsdDevice, R6_WithoutPoisonAReadThroughTheRnicGetsTheOlderBytes) {
  std::string got;
  const Status without = read_through_rnic_after_reset(false, got);
  ASSERT_TRUE(without.ok()) << without.ToString();
  EXPECT_EQ(got, "old bytes");
  const Status with = read_through_rnic_after_reset(true, got);
  EXPECT_EQ(with.code(), ErrorCode::kRemoteAccess) << with.ToString();
}

TEST(CxlSsdDevice, R6_4_ScriptedUnknownPeriodHidesTheGeneration) {
  sim::EventLoop loop;
  CxlSsdDevice d(loop, small_params());
  d.script_unknown_period(Instant{1ms}, Instant{2ms});
  EXPECT_EQ(d.observed_generation(), std::optional<std::uint64_t>(1));
  loop.run_for(1500us);
  EXPECT_EQ(d.observed_generation(), std::nullopt);
  loop.run_for(500us);
  EXPECT_EQ(d.observed_generation(), std::optional<std::uint64_t>(1));
}

TEST(CxlSsdDevice, P4_WritesToUnpreparedPagesFillPageByPage) {
  sim::EventLoop loop;
  CxlSsdDevice d(loop, small_params());
  const Instant fill = 3000ns + d.flash().page_transfer();
  // 8 pages on 8 channels: a READ fills them in parallel ...
  EXPECT_EQ(d.access_ready(0, 8 * kPage, false, Instant{0}), fill);
  // ... a WRITE to 8 other pages fills two at a time (write_allocate_depth 2).
  CxlSsdDevice w(loop, small_params());
  EXPECT_EQ(w.access_ready(0, 8 * kPage, true, Instant{0}), 4 * fill);
  EXPECT_EQ(w.counters().write_allocate_fills, 8u);
}

TEST(CxlSsdDevice, DemandReadMissesAreBoundByTheReadWindow) {
  sim::EventLoop loop;
  auto params = small_params();
  params.channels = 16;
  params.dram_cache_bytes = 64 * kPage;
  params.read_miss_depth = 4;
  CxlSsdDevice d(loop, params);
  const Instant fill = 3000ns + d.flash().page_transfer();
  // 16 pages on 16 dies, 4 misses in flight: four rounds of fills.
  EXPECT_EQ(d.access_ready(0, 16 * kPage, false, Instant{0}), 4 * fill);
  EXPECT_EQ(d.counters().demand_read_fills, 16u);
  // A prefetch of the next 16 is not bound by the window: one round (plus backend).
  const PoolRange r{16 * kPage, 16 * kPage};
  loop.run_for(std::chrono::milliseconds(1));
  ASSERT_TRUE(d.prefetch(1, std::span(&r, 1), false).ok());
  auto in = d.range_ready_at(16 * kPage, 16 * kPage);
  ASSERT_TRUE(in.has_value());
  EXPECT_LT(*in - loop.now(), 2 * fill);
}

TEST(CxlSsdDevice, R5_2_TrimmedPagesNeedNoFillAndReadZeros) {
  sim::EventLoop loop;
  CxlSsdDevice d(loop, small_params());
  ASSERT_TRUE(d.write_flash(0, bytes_of("stale")).ok());
  ASSERT_TRUE(d.trim(0, 4 * kPage).ok());
  EXPECT_EQ(read_string(d, 0, 5), std::string(5, '\0'));
  EXPECT_EQ(d.access_ready(0, 4 * kPage, true, Instant{1us}), Instant{1us});
  EXPECT_EQ(d.counters().fills, 0u);
  EXPECT_EQ(d.counters().zero_fills, 4u);
}

TEST(CxlSsdDevice, R4_1_PreparedWholePagesNeedNoFlashRead) {
  sim::EventLoop loop;
  CxlSsdDevice d(loop, small_params());
  const PoolRange r{0, 2 * kPage + 100};  // two whole pages and the head of a third
  ASSERT_TRUE(d.prepare_write(7, std::span(&r, 1)).ok());
  EXPECT_TRUE(d.page_state(0).resident);
  EXPECT_TRUE(d.page_state(kPage).resident);
  EXPECT_EQ(d.access_ready(0, 2 * kPage, true, Instant{0}), Instant{0});
  // The partial page keeps bytes the write does not cover: it is filled.
  EXPECT_EQ(d.counters().fills, 1u);
  EXPECT_TRUE(d.page_state(2 * kPage).resident);
  EXPECT_EQ(d.counters().hinted_bytes_prepared, 3 * kPage);
}

// R4.1: a write hint gives no leave to change the pages. Its frame has no
// contents until written, so a READ before the WRITE pays the flash read (it
// was a DRAM hit) and gets the old bytes.
TEST(CxlSsdDevice, R4_1_AReadOfAWriteHintsFrameBeforeItsWriteReadsFlashFirst) {
  sim::EventLoop loop;
  CxlSsdDevice d(loop, small_params());
  ASSERT_TRUE(d.write_flash(kPage, bytes_of("old")).ok());
  const PoolRange r{0, 2 * kPage};
  ASSERT_TRUE(d.prepare_write(7, std::span(&r, 1)).ok());
  EXPECT_TRUE(d.page_state(kPage).no_contents);
  EXPECT_EQ(d.frames_without_contents(), 2u);
  const std::uint64_t resident = d.resident_pages();
  const Instant fill = 3000ns + d.flash().page_transfer();
  EXPECT_EQ(d.access_ready(kPage, 100, false, Instant{0}), fill);
  EXPECT_EQ(d.counters().demand_read_fills, 1u);
  EXPECT_EQ(d.counters().hits, 0u);
  EXPECT_FALSE(d.page_state(kPage).no_contents);
  EXPECT_EQ(d.resident_pages(), resident);  // the same frame, filled
  EXPECT_EQ(read_string(d, kPage, 3), "old");
  // Once filled it is an ordinary resident page.
  EXPECT_EQ(d.access_ready(kPage, 100, false, Instant{20us}), Instant{20us});
  EXPECT_EQ(d.counters().fills, 1u);
  // The other frame, read again through the in-order path (on the LRU in page
  // order), is a miss too.
  EXPECT_EQ(d.access_ready(0, 2 * kPage, false, Instant{30us}), Instant{30us} + fill);
  EXPECT_EQ(d.counters().fills, 2u);
  EXPECT_EQ(d.frames_without_contents(), 0u);
}

// The pump commits a hinted fill only when its frame is free within the
// horizon, and a dirty victim's frame is free one page transfer later at the
// earliest: profiles refuse a shorter horizon (device_profile.cc), with which
// no hinted fill behind a dirty victim ever started. The shortest allowed works.
TEST(CxlSsdDevice, R8_AHorizonOfOnePageTransferStillFillsBehindDirtyVictims) {
  for (const auto horizon : {std::chrono::nanoseconds(1000), std::chrono::nanoseconds(3414)}) {
    sim::EventLoop loop;
    auto params = small_params();  // 4 frames; a page crosses a channel in 3413.3 ns
    params.prefetch_horizon = horizon;
    CxlSsdDevice d(loop, params);
    ASSERT_EQ(d.flash().page_transfer(), 3414ns);
    for (std::uint64_t p = 0; p < 4; ++p) {
      (void)d.access_ready(p * kPage, kPage, true, Instant{0});
      d.accessed(p * kPage, kPage, true, Instant{0});
    }
    const PoolRange r{100 * kPage, 2 * kPage};
    ASSERT_TRUE(d.prefetch(1, std::span(&r, 1), false).ok());
    loop.run_for(1ms);
    EXPECT_EQ(d.fill_queue_pages(), horizon < 3414ns ? 2u : 0u) << horizon.count() << " ns";
  }
}

// SPEC R3 (prefetch runs ahead of the READs): a pump stopped for a frame
// that frees only after a long program wakes then; a later pump that stops on
// a busy die must still wake within half a horizon, not at that far wake.
TEST(CxlSsdDevice, R3_PrefetchResumesWithinAHorizonOnceAFrameIsFree) {
  sim::EventLoop loop;
  auto params = small_params();  // 4 frames
  params.channels = 1;           // one die: every fill and program in turn
  params.flash_program = 100ms;
  params.program_unit_bytes = kPage;
  params.prefetch_horizon = 5us;  // under two flash reads: a pump stops on the busy die
  CxlSsdDevice d(loop, params);
  const std::vector<std::byte> page(kPage, std::byte{1});
  for (std::uint64_t p = 0; p < 6; ++p) ASSERT_TRUE(d.write(p * kPage, page).ok());
  EXPECT_EQ(d.counters().write_backs, 2u);  // 100 ms programs; pages 2..5 dirty in DRAM
  loop.run_for(1ms);                        // channel and die idle; the programs run on
  const PoolRange early{10 * kPage, kPage};
  ASSERT_TRUE(d.prefetch(1, std::span(&early, 1), false).ok());
  EXPECT_EQ(d.fill_queue_pages(), 1u);  // its frame's victim leaves DRAM only after ~100 ms
  ASSERT_TRUE(d.trim(2 * kPage, 4 * kPage).ok());  // four frames free now
  const PoolRange later{20 * kPage, 3 * kPage};
  ASSERT_TRUE(d.prefetch(2, std::span(&later, 1), false).ok());
  loop.run_for(1ms);  // a fill takes ~7 us on the one die
  EXPECT_EQ(d.fill_queue_pages(), 0u);
  for (std::uint64_t p : {10u, 20u, 21u, 22u}) {
    EXPECT_TRUE(d.page_state(p * kPage).resident) << p;
    EXPECT_LE(d.page_state(p * kPage).ready_at, loop.now()) << p;
  }
  d.release(1);
  d.release(2);
}

// SPEC R8 (a profile the validation accepts runs at event cost per fill,
// not per horizon): a pump stopped on a busy die wakes when the die frees.
// It polled every half horizon: a 100 ns horizon over a 1 ms flash read was
// ~20000 events a page (session-31 review).
TEST(CxlSsdDevice, R8_APumpBlockedOnABusyDieWakesWhenItFrees) {
  sim::EventLoop loop;
  auto params = small_params();
  params.channels = 1;
  params.flash_read = 1ms;
  params.channel_bytes_per_second = 1e11;
  params.prefetch_horizon = 100ns;
  CxlSsdDevice d(loop, params);
  const PoolRange r{0, 4 * kPage};
  ASSERT_TRUE(d.prefetch(1, std::span(&r, 1), false).ok());
  loop.run_for(10ms);
  EXPECT_EQ(d.fill_queue_pages(), 0u);
  for (std::uint64_t p = 0; p < 4; ++p) EXPECT_TRUE(d.page_state(p * kPage).resident) << p;
  EXPECT_LT(loop.executed(), 100u);
  d.release(1);
}

// A trim frees the frames a queue waits for (a dirty victim's write-back
// behind long programs): the queue moves within half a horizon, not at the
// wake it set for the write-back (session-31 diff review of the wake above).
TEST(CxlSsdDevice, R3_ATrimThatFreesFramesLetsTheQueueMoveOn) {
  sim::EventLoop loop;
  auto params = small_params();  // 4 frames
  params.channels = 1;
  params.flash_program = 100ms;
  params.program_unit_bytes = kPage;
  CxlSsdDevice d(loop, params);
  const std::vector<std::byte> page(kPage, std::byte{1});
  for (std::uint64_t p = 0; p < 6; ++p) ASSERT_TRUE(d.write(p * kPage, page).ok());
  loop.run_for(1ms);
  const PoolRange r{10 * kPage, kPage};
  ASSERT_TRUE(d.prefetch(1, std::span(&r, 1), false).ok());
  ASSERT_EQ(d.fill_queue_pages(), 1u);  // its frame's dirty victim leaves DRAM after ~100 ms
  ASSERT_TRUE(d.trim(2 * kPage, 4 * kPage).ok());
  loop.run_for(1ms);
  EXPECT_EQ(d.fill_queue_pages(), 0u);
  EXPECT_TRUE(d.page_state(10 * kPage).resident);
  d.release(1);
}

// A write hint's frame is free only once its dirty victim is written back (at
// the program rate). Filling its contents for a partial WRITE or a READ set
// the page ready at the flash read's end, before the frame existed.
TEST(CxlSsdDevice, R4_1_AWriteHintsFrameFilledLaterIsNotReadyBeforeItIsFree) {
  sim::EventLoop loop;
  auto params = small_params();  // 4 frames, 8 dies
  params.flash_program = 10ms;
  CxlSsdDevice d(loop, params);
  for (std::uint64_t p = 0; p < 64; ++p) {
    (void)d.access_ready(p * kPage, kPage, true, Instant{0});
    d.accessed(p * kPage, kPage, true, Instant{0});
  }
  for (const std::uint64_t page : {100, 101}) {
    const PoolRange r{page * kPage, kPage};
    ASSERT_TRUE(d.prepare_write(7, std::span(&r, 1)).ok());
    ASSERT_TRUE(d.page_state(page * kPage).no_contents);
  }
  const Instant frame_free = d.page_state(100 * kPage).ready_at;
  ASSERT_GT(frame_free, Instant(1ms));  // behind the die's earlier programs
  EXPECT_GE(d.access_ready(100 * kPage + 8, 16, true, Instant{0}), frame_free);
  EXPECT_GE(d.page_state(100 * kPage).ready_at, frame_free);
  const Instant read_frame_free = d.page_state(101 * kPage).ready_at;
  EXPECT_GE(d.access_ready(101 * kPage, 100, false, Instant{0}), read_frame_free);
}

// Written whole, the frame holds the page: no flash read, and a READ after it hits.
// Written in part, the rest of the page must come from flash first.
TEST(CxlSsdDevice, R4_1_AWriteHintsFrameWrittenWholeNeedsNoFillWrittenInPartDoes) {
  sim::EventLoop loop;
  CxlSsdDevice d(loop, small_params());
  const PoolRange r{0, 2 * kPage};
  ASSERT_TRUE(d.prepare_write(7, std::span(&r, 1)).ok());
  EXPECT_EQ(d.access_ready(0, kPage, true, Instant{0}), Instant{0});
  d.accessed(0, kPage, true, Instant{0});
  EXPECT_FALSE(d.page_state(0).no_contents);
  EXPECT_EQ(d.access_ready(0, kPage, false, Instant{1us}), Instant{1us});
  EXPECT_EQ(d.counters().fills, 0u);
  const Instant fill = 3000ns + d.flash().page_transfer();
  EXPECT_EQ(d.access_ready(kPage + 8, 16, true, Instant{2us}), Instant{2us} + fill);
  EXPECT_EQ(d.counters().write_allocate_fills, 1u);
  EXPECT_FALSE(d.page_state(kPage).no_contents);
  EXPECT_EQ(d.frames_without_contents(), 0u);
  // Evicted, trimmed or reset, a frame without contents is no longer counted.
  const PoolRange more{8 * kPage, 3 * kPage};
  ASSERT_TRUE(d.prepare_write(8, std::span(&more, 1)).ok());
  EXPECT_EQ(d.frames_without_contents(), 3u);
  ASSERT_TRUE(d.trim(8 * kPage, kPage).ok());
  EXPECT_EQ(d.frames_without_contents(), 2u);
  for (std::uint64_t page = 20; page < 30; ++page) {  // four frames: evicts the rest
    (void)d.access_ready(page * kPage, kPage, false, Instant{10us});
  }
  EXPECT_EQ(d.frames_without_contents(), 0u);
  EXPECT_FALSE(d.page_state(9 * kPage).resident);
  ASSERT_TRUE(d.prepare_write(9, std::span(&more, 1)).ok());
  d.reset();
  EXPECT_EQ(d.frames_without_contents(), 0u);
}

// A read hint over a write hint's frame brings its contents in.
TEST(CxlSsdDevice, R4_1_AReadHintFillsAWriteHintsFrame) {
  sim::EventLoop loop;
  CxlSsdDevice d(loop, small_params());
  const PoolRange r{0, kPage};
  ASSERT_TRUE(d.prepare_write(7, std::span(&r, 1)).ok());
  ASSERT_TRUE(d.prefetch(8, std::span(&r, 1), true).ok());
  loop.run_until([] { return false; });
  EXPECT_EQ(d.counters().fills, 1u);
  EXPECT_FALSE(d.page_state(0).no_contents);
  EXPECT_EQ(d.counters().hinted_bytes_prepared, kPage);  // the frame, counted once
  EXPECT_EQ(d.access_ready(0, kPage, false, Instant{20us}), Instant{20us});
  EXPECT_EQ(d.counters().fills, 1u);
}

TEST(CxlSsdDevice, R3_PrefetchRunsInHintOrderAndPromoteMovesARequestToTheFront) {
  sim::EventLoop loop;
  auto params = small_params();
  params.channels = 1;  // one die: fills strictly in turn
  params.dram_cache_bytes = 64 * kPage;
  params.prefetch_horizon = 100ns;
  CxlSsdDevice d(loop, params);
  const PoolRange a{0, 8 * kPage};
  const PoolRange b{32 * kPage, 4 * kPage};
  ASSERT_TRUE(d.prefetch(1, std::span(&a, 1), true).ok());
  ASSERT_TRUE(d.prefetch(2, std::span(&b, 1), true).ok());
  EXPECT_GT(d.fill_queue_pages(), 0u);
  d.promote(2);
  loop.run_until([] { return false; });
  EXPECT_EQ(d.fill_queue_pages(), 0u);
  // Page 0 was already issued; b's pages come before a's remaining ones.
  EXPECT_LT(d.page_state(0).ready_at, d.page_state(32 * kPage).ready_at);
  EXPECT_LT(d.page_state(35 * kPage).ready_at, d.page_state(2 * kPage).ready_at);
  EXPECT_EQ(d.counters().hinted_bytes_prepared, 12 * kPage);
}

// SPEC R4.5: requests promoted one after another load in that order (a QP's
// READs are served in order): a later promote does not jump an earlier one.
TEST(CxlSsdDevice, R4_5_PromotedRequestsArePrefetchedInPromoteOrder) {
  sim::EventLoop loop;
  auto params = small_params();
  params.channels = 1;  // one die: fills strictly in turn
  params.dram_cache_bytes = 64 * kPage;
  params.prefetch_horizon = 100ns;
  CxlSsdDevice d(loop, params);
  const PoolRange a{0, 4 * kPage};
  const PoolRange b{16 * kPage, 4 * kPage};
  const PoolRange c{32 * kPage, 4 * kPage};
  ASSERT_TRUE(d.prefetch(1, std::span(&a, 1), true).ok());
  ASSERT_TRUE(d.prefetch(2, std::span(&b, 1), true).ok());
  ASSERT_TRUE(d.prefetch(3, std::span(&c, 1), true).ok());
  d.promote(2);
  d.promote(3);
  d.promote(2);  // again: keeps its place
  loop.run_until([] { return false; });
  EXPECT_EQ(d.fill_queue_pages(), 0u);
  EXPECT_LT(d.page_state(19 * kPage).ready_at, d.page_state(32 * kPage).ready_at);
  EXPECT_LT(d.page_state(35 * kPage).ready_at, d.page_state(1 * kPage).ready_at);
}

// SPEC R4.5: a promote moves the request's ranges to the front in their hint
// order, also the ones still waiting under the hinted-bytes cap: admitted
// later, such a range still follows the ranges hinted before it. A range
// hinted for the request after its promote joins it at the front.
TEST(CxlSsdDevice, R4_5_APromoteKeepsTheHintOrderOfQueuedAndWaitingRanges) {
  sim::EventLoop loop;
  auto params = small_params();
  params.channels = 1;  // one die: fills strictly in turn
  params.dram_cache_bytes = 64 * kPage;
  params.prefetch_horizon = 100ns;
  params.hinted_bytes_cap = 12 * kPage;
  CxlSsdDevice d(loop, params);
  const PoolRange x{0, 8 * kPage};           // request 1: the die is busy with it
  const PoolRange a{16 * kPage, 4 * kPage};  // request 2, fits under the cap
  const PoolRange b{32 * kPage, 4 * kPage};  // request 2, waits for the cap
  const PoolRange y{48 * kPage, 4 * kPage};  // request 3, hinted before c
  const PoolRange c{40 * kPage, 2 * kPage};  // request 2 again, after its promote
  ASSERT_TRUE(d.prefetch(1, std::span(&x, 1), true).ok());
  ASSERT_TRUE(d.prefetch(2, std::span(&a, 1), true).ok());
  ASSERT_TRUE(d.prefetch(2, std::span(&b, 1), true).ok());
  EXPECT_EQ(d.waiting_bytes(), 4 * kPage);  // b waits
  d.promote(2);
  d.release(1);  // x's pins go: b is admitted, its key decides its place
  EXPECT_EQ(d.waiting_bytes(), 0u);
  ASSERT_TRUE(d.prefetch(3, std::span(&y, 1), false).ok());
  ASSERT_TRUE(d.prefetch(2, std::span(&c, 1), false).ok());
  loop.run_until([] { return false; });
  EXPECT_EQ(d.fill_queue_pages(), 0u);
  auto ready = [&](std::uint64_t page) { return d.page_state(page * kPage).ready_at; };
  EXPECT_TRUE(d.page_state(16 * kPage).resident);
  EXPECT_LT(ready(19), ready(32));  // a before b: hint order
  EXPECT_LT(ready(35), ready(40));  // then c, hinted after the promote...
  EXPECT_LT(ready(41), ready(48));  // ...ahead of request 3, never promoted
}

// A READ of the request being prefetched rides the prefetch stream; one queued
// behind other hints waits as demand misses, unless it was promoted (SPEC R4.5).
TEST(CxlSsdDevice, R4_5_ReadOfAPromotedRequestRidesThePrefetchStream) {
  auto params = small_params();
  params.channels = 16;
  params.dram_cache_bytes = 256 * kPage;
  params.read_miss_depth = 1;
  params.hinted_bytes_cap = 256 * kPage;
  const PoolRange a{0, 64 * kPage};
  const PoolRange b{128 * kPage, 64 * kPage};
  auto read_b = [&](bool promote) {
    sim::EventLoop loop;
    CxlSsdDevice d(loop, params);
    EXPECT_TRUE(d.prefetch(1, std::span(&a, 1), true).ok());
    EXPECT_TRUE(d.prefetch(2, std::span(&b, 1), true).ok());
    if (promote) d.promote(2);
    return d.access_ready(b.offset, b.length, false, Instant{0});
  };
  const Instant queued_behind = read_b(false);
  const Instant promoted = read_b(true);
  const auto fill = 3000ns + std::chrono::nanoseconds(3414);
  EXPECT_GE(queued_behind, 32 * fill);  // window of one: mostly one page at a time
  EXPECT_LT(promoted, 8 * fill);        // 16 dies in parallel
}

// Pins hold DRAM frames: a cap above the DRAM (a sweep to a smaller DRAM
// keeps the profile's 4 GiB cap) let hints pin more pages than the device has
// frames, and every one past them was granted as an overflow (review, session 26).
TEST(CxlSsdDevice, R3_HintsNeverPinMoreThanTheDramHolds) {
  sim::EventLoop loop;
  auto params = small_params();  // 4 pages of DRAM, a cap of 64
  CxlSsdDevice d(loop, params);
  const PoolRange a{0, 3 * kPage};
  const PoolRange b{16 * kPage, 3 * kPage};
  ASSERT_TRUE(d.prefetch(1, std::span(&a, 1), true).ok());
  ASSERT_TRUE(d.prefetch(2, std::span(&b, 1), true).ok());
  EXPECT_EQ(d.pinned_bytes(), 3 * kPage);
  EXPECT_EQ(d.waiting_bytes(), 3 * kPage);  // b waits for a's frames
  loop.run_until([] { return false; });
  EXPECT_EQ(d.counters().overflows, 0u);
  d.release(1);
  loop.run_until([] { return false; });
  EXPECT_TRUE(d.page_state(16 * kPage).resident);
  EXPECT_EQ(d.counters().overflows, 0u);
}

TEST(CxlSsdDevice, R3_HintedBytesCapHoldsAndWaitingRangesFollowReleases) {
  sim::EventLoop loop;
  auto params = small_params();
  params.dram_cache_bytes = 64 * kPage;
  params.hinted_bytes_cap = 2 * kPage;
  CxlSsdDevice d(loop, params);
  const PoolRange a{0, 2 * kPage};
  const PoolRange b{16 * kPage, 2 * kPage};
  ASSERT_TRUE(d.prefetch(1, std::span(&a, 1), true).ok());
  ASSERT_TRUE(d.prefetch(2, std::span(&b, 1), true).ok());
  EXPECT_EQ(d.pinned_bytes(), 2 * kPage);
  EXPECT_EQ(d.waiting_bytes(), 2 * kPage);
  EXPECT_EQ(d.page_state(16 * kPage).pins, 0);
  d.release(1);
  EXPECT_EQ(d.pinned_bytes(), 2 * kPage);
  EXPECT_EQ(d.waiting_bytes(), 0u);
  EXPECT_EQ(d.page_state(16 * kPage).pins, 1);
}

// The cap is on pinned DRAM: hints sharing pages (a common prefix) pin them once.
TEST(CxlSsdDevice, R3_HintedBytesCapCountsPagesSharedByHintsOnce) {
  sim::EventLoop loop;
  auto params = small_params();
  params.dram_cache_bytes = 64 * kPage;
  params.hinted_bytes_cap = 4 * kPage;
  CxlSsdDevice d(loop, params);
  const PoolRange shared{0, 4 * kPage};
  const PoolRange overlapping{2 * kPage, 4 * kPage};  // 2 pages not pinned yet
  ASSERT_TRUE(d.prefetch(1, std::span(&shared, 1), true).ok());
  ASSERT_TRUE(d.prefetch(2, std::span(&shared, 1), true).ok());
  EXPECT_EQ(d.pinned_bytes(), 4 * kPage);
  EXPECT_EQ(d.waiting_bytes(), 0u);
  EXPECT_EQ(d.page_state(0).pins, 2);
  ASSERT_TRUE(d.prefetch(3, std::span(&overlapping, 1), true).ok());
  EXPECT_EQ(d.waiting_bytes(), 4 * kPage);  // 4 + 2 new pages > the cap
  d.release(1);
  EXPECT_EQ(d.pinned_bytes(), 4 * kPage);  // tag 2 still holds every page
  EXPECT_EQ(d.waiting_bytes(), 4 * kPage);
  d.release(2);
  EXPECT_EQ(d.pinned_bytes(), 4 * kPage);  // tag 3's range, admitted
  EXPECT_EQ(d.waiting_bytes(), 0u);
  EXPECT_EQ(d.page_state(0).pins, 0);
  EXPECT_EQ(d.page_state(5 * kPage).pins, 1);
  d.release(3);
  EXPECT_EQ(d.pinned_bytes(), 0u);
}

// ... also while a span larger than the cap, admitted alone, holds more than
// the cap: a hint of pages it pins adds nothing and does not wait (it waited
// for the oversized one's end; session-24 review).
TEST(CxlSsdDevice, R3_AHintOfPagesPinnedAlreadyNeverWaitsForTheCap) {
  sim::EventLoop loop;
  auto params = small_params();
  params.dram_cache_bytes = 64 * kPage;
  params.hinted_bytes_cap = 4 * kPage;
  CxlSsdDevice d(loop, params);
  const PoolRange big{0, 8 * kPage};
  const PoolRange inside{2 * kPage, 4 * kPage};
  ASSERT_TRUE(d.prefetch(1, std::span(&big, 1), true).ok());
  EXPECT_EQ(d.pinned_bytes(), 8 * kPage);  // alone, over the cap
  ASSERT_TRUE(d.prefetch(2, std::span(&big, 1), true).ok());
  ASSERT_TRUE(d.prefetch(3, std::span(&inside, 1), true).ok());
  EXPECT_EQ(d.waiting_bytes(), 0u);
  EXPECT_EQ(d.pinned_bytes(), 8 * kPage);
  EXPECT_EQ(d.page_state(3 * kPage).pins, 3);
  const PoolRange outside{16 * kPage, kPage};
  ASSERT_TRUE(d.prefetch(4, std::span(&outside, 1), true).ok());
  EXPECT_EQ(d.waiting_bytes(), kPage);  // a new page still waits
}

// A range hinted for a request after its promote (its next hint message)
// joins its own promoted ranges, ahead of a request promoted after it: the QP
// reads the first promoted request first. It went behind every later promote
// (session-24 review).
TEST(CxlSsdDevice, R4_5_ALaterRangeOfAPromotedRequestStaysAheadOfLaterPromotes) {
  sim::EventLoop loop;
  auto params = small_params();
  params.capacity_bytes = 4096 * kPage;
  params.dram_cache_bytes = 2048 * kPage;
  params.hinted_bytes_cap = 2048 * kPage;
  params.channels = 1;
  CxlSsdDevice d(loop, params);
  const PoolRange a1{0, 100 * kPage};
  const PoolRange b{1000 * kPage, 100 * kPage};
  const PoolRange a2{2000 * kPage, 4 * kPage};
  ASSERT_TRUE(d.prefetch(1, std::span(&a1, 1), true).ok());
  d.promote(1);
  ASSERT_TRUE(d.prefetch(2, std::span(&b, 1), true).ok());
  d.promote(2);
  ASSERT_TRUE(d.prefetch(1, std::span(&a2, 1), true).ok());  // A's next message
  loop.run_for(20ms);
  ASSERT_TRUE(d.page_state(b.offset + 99 * kPage).resident);
  EXPECT_LT(d.page_state(a2.offset + 3 * kPage).ready_at, d.page_state(b.offset).ready_at + 20us);
  EXPECT_LT(d.page_state(a2.offset + 3 * kPage).ready_at,
            d.page_state(b.offset + 99 * kPage).ready_at);
  EXPECT_GT(d.page_state(a2.offset).ready_at, d.page_state(a1.offset + 99 * kPage).ready_at);
}

TEST(CxlSsdDevice, BadRangesAreRefusedWithoutChange) {
  sim::EventLoop loop;
  CxlSsdDevice d(loop, small_params());
  const PoolRange bad{d.size() - 10, 20};
  EXPECT_EQ(d.prefetch(1, std::span(&bad, 1), true).code(), ErrorCode::kBadRange);
  EXPECT_EQ(d.prepare_write(1, std::span(&bad, 1)).code(), ErrorCode::kBadRange);
  EXPECT_EQ(d.trim(d.size(), 1).code(), ErrorCode::kBadRange);
  std::vector<std::byte> buf(20);
  EXPECT_EQ(d.read(d.size() - 10, buf).code(), ErrorCode::kBadRange);
  EXPECT_EQ(d.pinned_bytes(), 0u);
  EXPECT_EQ(d.fill_queue_pages(), 0u);
}

TEST(CxlSsdDevice, AllResidentDeviceNeverFills) {
  sim::EventLoop loop;
  auto params = small_params();
  params.all_resident = true;
  params.dram_access = 200ns;
  CxlSsdDevice d(loop, params);
  EXPECT_EQ(d.access_ready(0, 64 * kPage, true, Instant{1us}), Instant{1200ns});
  EXPECT_EQ(d.counters().fills, 0u);
  EXPECT_EQ(d.counters().hits, 64u);
}

// A READ that arrives before its range is in is held, not failed (PAPER P6).
TEST(CxlSsdDevice, P6_EarlyReadThroughTheRnicGetsTheRightBytesAfterTheFill) {
  RnicRig rig(3);
  auto& world = rig.world;
  auto& fabric = rig.fabric;
  auto params = small_params();
  params.channels = 1;
  CxlSsdDevice d(world.loop(), params);
  std::vector<std::byte> flash(8 * kPage);
  for (std::size_t i = 0; i < flash.size(); ++i) flash[i] = std::byte(i * 7 + 1);
  ASSERT_TRUE(d.write_flash(0, flash).ok());
  auto reg = rig.mem_nic.register_memory(d, 0, 8 * kPage, runtime::kAccessRemoteRead);
  ASSERT_TRUE(reg.ok());
  auto qp = rig.connect();
  ASSERT_TRUE(qp != nullptr);
  // The hint starts the fills; the READ follows at once, long before they are in.
  const PoolRange r{0, 8 * kPage};
  const Instant t0 = world.loop().now();
  ASSERT_TRUE(d.prefetch(1, std::span(&r, 1), true).ok());
  std::vector<std::byte> back(8 * kPage);
  std::optional<std::vector<Status>> done;
  qp->post({{runtime::RdmaOp::Kind::kRead, back, reg->addr, reg->rkey}},
           [&](std::vector<Status> s) { done = s; });
  ASSERT_TRUE(world.run_until([&] { return done.has_value(); }).ok());
  ASSERT_TRUE((*done)[0].ok());
  EXPECT_EQ(back, flash);
  // One die fills the 8 pages in turn: the READ waited for that, not more.
  const auto fills = 8 * (params.flash_read + d.flash().page_transfer());
  EXPECT_GE(world.loop().now() - t0, fills);
  EXPECT_LT(world.loop().now() - t0, fills + 20us);
  EXPECT_EQ(fabric.remote_access_errors(), 0u);
}

// A 32 MiB WRITE into cold pages fills them page by page as its data arrives
// (write-allocate). Another node's READ of one cold page, posted while that
// WRITE streams, waits for the flash only about as long as a few fills -- the
// WRITE's later fills were not booked on the flash ahead of it.
TEST(CxlSsdDevice, AColdWriteDoesNotBookTheFlashAheadOfOtherReaders) {
  RnicRig rig(6);
  auto& world = rig.world;
  CxlSsdParams params;  // the default profile's device
  CxlSsdDevice d(world.loop(), params);
  const std::uint64_t bytes = 32 << 20;
  const std::uint64_t other = 4 * bytes;  // a page the WRITE does not touch
  std::vector<std::byte> page(kPage, std::byte{7});
  ASSERT_TRUE(d.write_flash(other, page).ok());
  auto reg = rig.mem_nic
                 .register_memory(d, 0, 8 * bytes,
                                  runtime::kAccessRemoteRead | runtime::kAccessRemoteWrite)
                 .value();
  auto writer = rig.connect();
  std::shared_ptr<runtime::QueuePair> reader;
  auto reader_strand = world.add_node("gpu2").make_strand("rdma");
  rig.fabric.add_nic("gpu2").connect("mem", *reader_strand, [&](auto r) { reader = r.value(); });
  ASSERT_TRUE(world.run_until([&] { return reader != nullptr; }).ok());
  // The WRITE's pages have old contents on flash: each needs a flash read.
  for (std::uint64_t o = 0; o < bytes; o += kPage) ASSERT_TRUE(d.write_flash(o, page).ok());

  std::vector<std::byte> head(kPage);
  runtime::RdmaOp big{runtime::RdmaOp::Kind::kWrite, head, reg.addr, reg.rkey};
  big.length = bytes;
  std::optional<Instant> write_done, read_done;
  const Instant start = world.loop().now();
  writer->post({big}, [&](std::vector<Status> s) {
    EXPECT_TRUE(s[0].ok());
    write_done = world.loop().now();
  });
  world.run_for(1ms);
  std::vector<std::byte> back(kPage);
  const Instant read_posted = world.loop().now();
  reader->post({{runtime::RdmaOp::Kind::kRead, back, reg.addr + other, reg.rkey}},
               [&](std::vector<Status> s) {
                 EXPECT_TRUE(s[0].ok());
                 read_done = world.loop().now();
               });
  ASSERT_TRUE(world.run_until([&] { return write_done && read_done; }).ok());
  EXPECT_EQ(back, page);
  // The WRITE is flash-bound: it takes many milliseconds...
  const auto write_took = *write_done - start;
  EXPECT_GT(write_took, 10ms);
  // ...while the READ waits for its own fill, in a gap the WRITE's booked
  // fills leave: a few fill times with the NIC's round trip (13.5 us; 53 us
  // before the timelines took gaps, session 33).
  const auto read_took = *read_done - read_posted;
  EXPECT_LT(read_took, 3 * d.flash().uncontended_read())
      << "read " << runtime::to_seconds(read_took) * 1e3 << " ms, write "
      << runtime::to_seconds(write_took) * 1e3 << " ms";
}

// Virtual time of a 16 MiB READ through the RNIC, hinted `lead` before it (or not).
runtime::Duration load_time(const CxlSsdParams& params, std::optional<runtime::Duration> lead) {
  RnicRig rig(4);
  auto& world = rig.world;
  CxlSsdDevice d(world.loop(), params);
  const std::uint64_t bytes = 16 << 20;
  auto reg = rig.mem_nic.register_memory(d, 0, bytes, runtime::kAccessRemoteRead).value();
  auto qp = rig.connect();
  if (lead) {
    const PoolRange r{0, bytes};
    EXPECT_TRUE(d.prefetch(1, std::span(&r, 1), true).ok());
    world.run_for(*lead);
  }
  std::vector<std::byte> sample(kPage);
  std::vector<runtime::RdmaOp> ops;
  for (std::uint64_t o = 0; o < bytes; o += 1 << 20) {
    ops.push_back({runtime::RdmaOp::Kind::kRead, sample, reg.addr + o, reg.rkey, 1 << 20});
  }
  const Instant start = world.loop().now();
  bool done = false;
  qp->post(ops, [&](std::vector<Status>) { done = true; });
  EXPECT_TRUE(world.run_until([&] { return done; }).ok());
  return world.loop().now() - start;
}

// PAPER "beyond the seed": the gain from hints moves the physically right way.
TEST(CxlSsdDevice, R3_LongerHintLeadAndFasterFlashShortenTheLoad) {
  CxlSsdParams params;  // the default profile's device
  const auto cold = load_time(params, std::nullopt);
  const auto together = load_time(params, 0us);
  const auto ahead = load_time(params, 1ms);
  CxlSsdParams all_dram = params;
  all_dram.all_resident = true;
  const auto dram = load_time(all_dram, std::nullopt);
  EXPECT_GT(cold, together);
  EXPECT_GE(together, ahead);
  EXPECT_GE(ahead, dram);
  CxlSsdParams tlc = params;
  tlc.flash_read = 50us;  // TLC class
  EXPECT_GT(load_time(tlc, std::nullopt), cold);
  EXPECT_GT(load_time(tlc, 0us), together);
}

}  // namespace
}  // namespace rcxl::device
