// The cxl_ssd region extension: hints become device preparation (SPEC R2-R6).
#include "devices/cxl_ssd_model/cxl_ssd_extension.h"

#include <gtest/gtest.h>

#include "backends/sim/sim_world.h"

namespace rcxl::device {
namespace {

using namespace std::chrono_literals;
constexpr std::uint64_t kPage = 4096;

struct Rig {
  sim::SimWorld world{5};
  sim::SimNode& mem = world.add_node("mem");
  CxlSsdDevice device{world.loop(), params()};
  CxlSsdExtension ext{device, &mem};

  static CxlSsdParams params() {
    CxlSsdParams p;
    p.capacity_bytes = 4 << 20;
    p.dram_cache_bytes = 2 << 20;
    p.channels = 2;
    p.ways = 1;
    p.hinted_bytes_cap = 16 * kPage;
    return p;
  }
  static ext::Hint hint(std::uint64_t conn, std::string action, std::string request,
                        std::vector<ext::Range> ranges = {}) {
    return {conn, std::move(action), std::move(request), std::move(ranges)};
  }
  // A range of region 1, which sits at pool offset 1 MiB.
  static ext::Range range(std::uint64_t offset, std::uint64_t length) {
    return {1, offset, length, (1u << 20) + offset};
  }
};

TEST(CxlSsdExtension, R4_2_AdvertisesItsFiveActions) {
  Rig rig;
  EXPECT_EQ(rig.ext.hint_actions(),
            (std::vector<std::string>{"read_hint", "read_hint_end", "write_hint", "read_promote",
                                      "write_wait"}));
  EXPECT_TRUE(rig.ext.has_memory_generation());
  EXPECT_EQ(rig.ext.name(), "cxl_ssd");
}

TEST(CxlSsdExtension, R3_ReadHintPinsUntilItsEnd) {
  Rig rig;
  ASSERT_TRUE(rig.ext.hint(Rig::hint(3, "read_hint", "q1", {Rig::range(0, 4 * kPage)})).ok());
  EXPECT_EQ(rig.device.pinned_bytes(), 4 * kPage);
  EXPECT_EQ(rig.ext.open_hints(), 1u);
  // The same request on another connection is another hint.
  ASSERT_TRUE(rig.ext.hint(Rig::hint(4, "read_hint_end", "q1")).ok());
  EXPECT_EQ(rig.device.pinned_bytes(), 4 * kPage);
  ASSERT_TRUE(rig.ext.hint(Rig::hint(3, "read_hint_end", "q1")).ok());
  EXPECT_EQ(rig.device.pinned_bytes(), 0u);
  EXPECT_EQ(rig.ext.open_hints(), 0u);
}

TEST(CxlSsdExtension, R2_3_HintsAnswerAtOnceAndFillsFollow) {
  Rig rig;
  const Instant before = rig.world.loop().now();
  ASSERT_TRUE(rig.ext.hint(Rig::hint(3, "read_hint", "q1", {Rig::range(0, 64 * kPage)})).ok());
  EXPECT_EQ(rig.world.loop().now(), before);  // no virtual time passed inside the hook
  EXPECT_FALSE(rig.device.range_ready(1 << 20, 64 * kPage));
  rig.world.run_for(5ms);
  EXPECT_TRUE(rig.device.range_ready(1 << 20, 64 * kPage));
}

// When the last page of a range was filled; the page must have been filled.
Instant filled_at(const Rig& rig, std::uint64_t offset) {
  const PageState page = rig.device.page_state(offset);
  EXPECT_TRUE(page.resident) << "page at " << offset << " was never filled";
  return page.ready_at;
}

// A write_wait sent to the rig's extension: its answer and when it came.
struct WaitAnswer {
  WaitAnswer(Rig& rig, const ext::WriteWait& wait) {
    rig.ext.write_wait(wait, [this, &rig](Result<ext::Json> a) {
      answer = std::move(a);
      at = rig.world.loop().now();
    });
  }
  // Its callback points here: never copied or moved (returned as a prvalue only).
  WaitAnswer(const WaitAnswer&) = delete;
  WaitAnswer& operator=(const WaitAnswer&) = delete;
  bool in() const { return answer.has_value(); }
  const ext::Json& value() const { return answer->value(); }
  std::optional<Result<ext::Json>> answer;
  Instant at{0};
};

// A 40-page read hint, then a write_wait (`timeout_ms`) over two pages' worth
// from 100 bytes into page 10: one whole page (11) and two partial ones.
WaitAnswer wait_beside_a_read_hint(Rig& rig, std::uint32_t timeout_ms) {
  EXPECT_TRUE(
      rig.ext.hint(Rig::hint(3, "read_hint", "a", {Rig::range(20 * kPage, 40 * kPage)})).ok());
  return WaitAnswer(rig, {4, "s", {Rig::range(10 * kPage + 100, 2 * kPage)}, timeout_ms});
}

// Two requests under the hinted-bytes cap (16 pages), both queued: a's 8
// pages, then b's 4. Which fills first is the queue's order.
void hint_a_then_b(Rig& rig) {
  ASSERT_TRUE(rig.ext.hint(Rig::hint(3, "read_hint", "a", {Rig::range(0, 8 * kPage)})).ok());
  ASSERT_TRUE(
      rig.ext.hint(Rig::hint(3, "read_hint", "b", {Rig::range(128 * kPage, 4 * kPage)})).ok());
}

// After the fills ran: whether b's last page was in before a's.
bool b_filled_first(Rig& rig) {
  rig.world.run_for(5ms);
  return filled_at(rig, (1 << 20) + 131 * kPage) < filled_at(rig, (1 << 20) + 7 * kPage);
}

TEST(CxlSsdExtension, R4_5_PromoteMatchesTheRequestIdAlone) {
  Rig rig;
  hint_a_then_b(rig);
  // The worker's promote comes on its own connection.
  ASSERT_TRUE(rig.ext.hint(Rig::hint(9, "read_promote", "b")).ok());
  EXPECT_TRUE(b_filled_first(rig));
}

// The worker's promote goes straight to the agent; the scheduler's hint of
// the same request goes after a directory probe and can come second. The
// promote was dropped then, and the request filled in plain hint order.
TEST(CxlSsdExtension, R4_5_APromoteBeforeItsHintPromotesTheHintWhenItComes) {
  Rig rig;
  ASSERT_TRUE(rig.ext.hint(Rig::hint(9, "read_promote", "b")).ok());
  rig.world.run_for(10us);
  hint_a_then_b(rig);
  EXPECT_TRUE(b_filled_first(rig));
}

// A request promoted while hinted on one connection, then hinted on another
// (or before its first ranges reached the device: a hint with none): the later
// ranges were queued in plain hint order, behind requests no load waits for.
TEST(CxlSsdExtension, R4_5_RangesHintedAfterTheirRequestsPromoteJoinIt) {
  for (const bool other_connection : {true, false}) {
    Rig rig;
    const std::uint64_t first_conn = other_connection ? 5 : 3;
    ASSERT_TRUE(rig.ext
                    .hint(Rig::hint(first_conn, "read_hint", "b",
                                    other_connection ? std::vector{Rig::range(200 * kPage, kPage)}
                                                     : std::vector<ext::Range>{}))
                    .ok());
    ASSERT_TRUE(rig.ext.hint(Rig::hint(9, "read_promote", "b")).ok());
    hint_a_then_b(rig);  // b's 4 pages on connection 3
    EXPECT_TRUE(b_filled_first(rig)) << (other_connection ? "other connection" : "no ranges first");
  }
}

// ... but not for ever: a promote older than a second promotes nothing.
TEST(CxlSsdExtension, R4_5_AnEarlyPromoteIsForgottenAfterASecond) {
  Rig rig;
  ASSERT_TRUE(rig.ext.hint(Rig::hint(9, "read_promote", "b")).ok());
  rig.world.run_for(2s);
  hint_a_then_b(rig);
  EXPECT_FALSE(b_filled_first(rig));  // hint order
}

TEST(CxlSsdExtension, R6_6_ConnectionClosedEndsThatConnectionsHints) {
  Rig rig;
  ASSERT_TRUE(rig.ext.hint(Rig::hint(3, "read_hint", "a", {Rig::range(0, 2 * kPage)})).ok());
  ASSERT_TRUE(
      rig.ext.hint(Rig::hint(3, "read_hint", "b", {Rig::range(8 * kPage, 2 * kPage)})).ok());
  ASSERT_TRUE(
      rig.ext.hint(Rig::hint(4, "read_hint", "c", {Rig::range(16 * kPage, 2 * kPage)})).ok());
  ASSERT_TRUE(rig.ext.connection_closed(3).ok());
  EXPECT_EQ(rig.ext.open_hints(), 1u);
  EXPECT_EQ(rig.device.pinned_bytes(), 2 * kPage);
}

// SPEC R6.6/R4.5 across an agent restart: the new agent's extension on the
// same device numbered its requests from 1 again, so ending its first read
// hint released the old extension's write hint under that number too, and
// dropped its queued partial-page fills (session-31 review).
TEST(CxlSsdExtension, R6_6_ANewExtensionsTagsNeverTouchAnOldOnesWork) {
  Rig rig;
  // Both dies busy ~100 us with demand reads: queued fills wait past the horizon.
  (void)rig.device.access_ready(0, 64 * kPage, false, rig.world.loop().now());
  ASSERT_TRUE(rig.ext.hint(Rig::hint(3, "write_hint", "w", {Rig::range(100, 2 * kPage)})).ok());
  ASSERT_EQ(rig.device.fill_queue_pages(), 2u);  // its partial head and tail pages
  rig.ext.close();
  CxlSsdExtension restarted{rig.device, &rig.mem};
  ASSERT_TRUE(
      restarted.hint(Rig::hint(1, "read_hint", "x", {Rig::range(64 * kPage, 4 * kPage)})).ok());
  ASSERT_TRUE(restarted.hint(Rig::hint(1, "read_hint_end", "x")).ok());
  EXPECT_EQ(rig.device.fill_queue_pages(), 2u);
  // The old write hint's pages still come in, as if nothing had restarted.
  rig.world.loop().run_for(1ms);
  EXPECT_EQ(rig.device.fill_queue_pages(), 0u);
  EXPECT_TRUE(rig.device.range_ready((1u << 20) + 100, 2 * kPage));
}

TEST(CxlSsdExtension, R3_HintedBytesOverTheCapWaitForEnds) {
  Rig rig;  // cap: 16 pages
  ASSERT_TRUE(rig.ext.hint(Rig::hint(3, "read_hint", "a", {Rig::range(0, 12 * kPage)})).ok());
  ASSERT_TRUE(
      rig.ext.hint(Rig::hint(3, "read_hint", "b", {Rig::range(32 * kPage, 12 * kPage)})).ok());
  EXPECT_EQ(rig.device.pinned_bytes(), 12 * kPage);
  EXPECT_EQ(rig.device.waiting_bytes(), 12 * kPage);
  ASSERT_TRUE(rig.ext.hint(Rig::hint(3, "read_hint_end", "a")).ok());
  EXPECT_EQ(rig.device.pinned_bytes(), 12 * kPage);
  EXPECT_EQ(rig.device.waiting_bytes(), 0u);
}

TEST(CxlSsdExtension, R4_1_WriteHintPreparesWholePagesWithoutFlashReads) {
  Rig rig;
  ASSERT_TRUE(
      rig.ext.hint(Rig::hint(3, "write_hint", "store-1", {Rig::range(0, 16 * kPage)})).ok());
  EXPECT_TRUE(rig.device.range_ready(1 << 20, 16 * kPage));
  EXPECT_EQ(rig.device.counters().fills, 0u);
  EXPECT_EQ(rig.ext.open_hints(), 0u);  // fire and forget: nothing kept open
}

TEST(CxlSsdExtension, R4_3_WriteWaitAnswersWhenItsPagesAreReady) {
  Rig rig;
  // Partial pages need fills: the wait answers when they are in.
  ext::WriteWait wait{3, "store-1", {Rig::range(100, 2 * kPage)}, 50};
  WaitAnswer waited(rig, wait);
  EXPECT_FALSE(waited.in());
  ASSERT_TRUE(rig.world.run_until([&] { return waited.in(); }).ok());
  ASSERT_TRUE(waited.answer->ok());
  EXPECT_EQ(waited.value(), (ext::Json{{"ready", 1}, {"total", 1}}));
  EXPECT_LT(waited.at, Instant{1ms});
  EXPECT_GT(waited.at, Instant{3us});
}

TEST(CxlSsdExtension, R4_3_WriteWaitAnswersAtItsTimeoutWithWhatIsReady) {
  Rig rig;
  // A long load, promoted, occupies the flash; the wait's partial pages queue behind it.
  ASSERT_TRUE(rig.ext.hint(Rig::hint(3, "read_hint", "a", {Rig::range(0, 500 * kPage)})).ok());
  ASSERT_TRUE(rig.ext.hint(Rig::hint(9, "read_promote", "a")).ok());
  ext::WriteWait wait{
      4, "s", {Rig::range(600 * kPage, 4 * kPage), Rig::range(700 * kPage + 1, 10)}, 1};
  WaitAnswer waited(rig, wait);
  ASSERT_TRUE(rig.world.run_until([&] { return waited.in(); }).ok());
  EXPECT_EQ(rig.world.loop().now(), Instant{1ms});
  EXPECT_EQ(waited.value(), (ext::Json{{"ready", 1}, {"total", 2}}));
}

// A store waits on its partial pages; read prefetch no load has asked for yet
// (not promoted) waits instead. Before, the pages queued behind the whole read
// hint and the wait ran to its timeout (docs/device-model.md, gap 4).
TEST(CxlSsdExtension, R4_3_AWaitsPartialPagesGoAheadOfReadPrefetchNotPromoted) {
  Rig rig;
  ASSERT_TRUE(rig.ext.hint(Rig::hint(3, "read_hint", "a", {Rig::range(0, 500 * kPage)})).ok());
  ext::WriteWait wait{4, "s", {Rig::range(600 * kPage + 100, 2 * kPage)}, 5};
  WaitAnswer waited(rig, wait);
  ASSERT_TRUE(rig.world.run_until([&] { return waited.in(); }).ok());
  EXPECT_EQ(waited.value(), (ext::Json{{"ready", 1}, {"total", 1}}));
  // Two page fills behind the ones already on the channels; the read hint's
  // 500 pages take over 1 ms (the test above).
  EXPECT_LT(waited.at, Instant{100us});
  EXPECT_FALSE(rig.device.range_ready(1 << 20, 500 * kPage));
}

// A wait's whole pages get frames at once; its partial pages queue behind a
// read hint. Another store's write hint over more pages than DRAM holds then
// evicts those frames before this store's WRITE: the wait prepares them
// again instead of polling to its timeout (docs/device-model.md, gap 4).
TEST(CxlSsdExtension, R4_3_AWaitPreparesAgainThePagesAFullDramEvicted) {
  Rig rig;
  WaitAnswer waited = wait_beside_a_read_hint(rig, 5);
  const std::uint64_t whole_page = (1u << 20) + 11 * kPage;  // the wait's one whole page
  ASSERT_TRUE(rig.device.range_ready_at(whole_page, kPage).has_value());
  // 600 pages of another store's write hint: more than the 512 DRAM frames.
  ASSERT_TRUE(
      rig.ext.hint(Rig::hint(5, "write_hint", "other", {Rig::range(100 * kPage, 600 * kPage)}))
          .ok());
  ASSERT_FALSE(rig.device.range_ready_at(whole_page, kPage).has_value());  // evicted
  ASSERT_TRUE(rig.world.run_until([&] { return waited.in(); }).ok());
  ASSERT_TRUE(waited.answer->ok());
  EXPECT_EQ(waited.value(), (ext::Json{{"ready", 1}, {"total", 1}}));
  EXPECT_LT(waited.at, Instant{1ms});  // its fills' time, not the 5 ms timeout
}

// A partial page the wait had filled, evicted before its WRITE, is queued
// again where the wait's first fills went: ahead of read prefetch.
TEST(CxlSsdExtension, R4_3_AWaitsPartialPagesQueuedAgainStayAheadOfReadPrefetch) {
  Rig rig;
  ASSERT_TRUE(rig.ext.hint(Rig::hint(3, "read_hint", "a", {Rig::range(0, 200 * kPage)})).ok());
  std::vector<ext::Range> partial;  // ten ranges of 10 bytes, each in a page of its own
  for (std::uint64_t p = 0; p < 10; ++p) partial.push_back(Rig::range((210 + p) * kPage + 1, 10));
  WaitAnswer waited(rig, ext::WriteWait{4, "s", partial, 5});
  const std::uint64_t first = (1u << 20) + 210 * kPage;
  ASSERT_TRUE(rig.world.run_until([&] { return rig.device.page_state(first).resident; }).ok());
  ASSERT_FALSE(waited.in());
  // Another store's write hint over more pages than DRAM holds (512) evicts it.
  ASSERT_TRUE(
      rig.ext.hint(Rig::hint(5, "write_hint", "other", {Rig::range(230 * kPage, 538 * kPage)}))
          .ok());
  ASSERT_FALSE(rig.device.page_state(first).resident);
  ASSERT_TRUE(rig.world.run_until([&] { return waited.in(); }).ok());
  EXPECT_EQ(waited.value(), (ext::Json{{"ready", 10}, {"total", 10}}));
  EXPECT_LT(waited.at, Instant{300us}) << waited.at.count();
  EXPECT_FALSE(rig.device.range_ready(1 << 20, 200 * kPage));  // the read hint is still filling
}

// A wait over more pages than DRAM holds evicts its own frames as it makes
// them: it prepares them again only a few times, not on every poll.
TEST(CxlSsdExtension, R4_3_AWaitLargerThanDramPreparesAgainOnlyAFewTimes) {
  Rig rig;
  ext::WriteWait wait{4, "s", {Rig::range(0, 600 * kPage)}, 2};  // 512 frames
  WaitAnswer waited(rig, wait);
  ASSERT_TRUE(rig.world.run_until([&] { return waited.in(); }).ok());
  EXPECT_EQ(waited.value(), (ext::Json{{"ready", 0}, {"total", 1}}));
  EXPECT_EQ(rig.world.loop().now(), Instant{2ms});
  // The first preparation and at most 3 more; 100 polls would have made ~100.
  EXPECT_LE(rig.device.counters().hinted_bytes_prepared, 4 * 600 * kPage);
  EXPECT_GT(rig.device.counters().hinted_bytes_prepared, 600 * kPage);
}

// After a reset the wait's pages are gone with the memory: it prepares
// nothing again (the store's WRITEs will fail on the new boot).
TEST(CxlSsdExtension, R4_3_AWaitDoesNotPrepareAgainAfterAReset) {
  Rig rig;
  WaitAnswer waited = wait_beside_a_read_hint(rig, 2);
  rig.device.reset();
  const std::uint64_t prepared = rig.device.counters().hinted_bytes_prepared;
  ASSERT_TRUE(rig.world.run_until([&] { return waited.in(); }).ok());
  EXPECT_EQ(waited.value(), (ext::Json{{"ready", 0}, {"total", 1}}));
  EXPECT_EQ(rig.device.counters().hinted_bytes_prepared, prepared);
}

TEST(CxlSsdExtension, R5_2_FreshMapDropsTheRegionsStaleContents) {
  Rig rig;
  const std::vector<std::byte> stale(16, std::byte{0x5a});
  ASSERT_TRUE(rig.device.write_flash(1 << 20, stale).ok());
  ASSERT_TRUE(rig.ext.mapped({1, 1 << 20, 64 * kPage}, false).ok());
  EXPECT_FALSE(rig.device.page_state(1 << 20).trimmed);
  ASSERT_TRUE(rig.ext.mapped({1, 1 << 20, 64 * kPage}, true).ok());
  EXPECT_TRUE(rig.device.page_state(1 << 20).trimmed);
  std::vector<std::byte> back(16);
  ASSERT_TRUE(rig.device.read(1 << 20, back).ok());
  EXPECT_EQ(back, std::vector<std::byte>(16));
  (void)rig.device.access_ready(1 << 20, 64 * kPage, true, rig.world.loop().now());
  EXPECT_EQ(rig.device.counters().fills, 0u);
}

TEST(CxlSsdExtension, R6_GenerationFollowsResetsAndUnknownPeriods) {
  Rig rig;
  EXPECT_EQ(rig.ext.memory_generation(), std::optional<std::string>("1"));
  ASSERT_TRUE(rig.ext.hint(Rig::hint(3, "read_hint", "a", {Rig::range(0, 2 * kPage)})).ok());
  rig.device.reset();
  EXPECT_EQ(rig.ext.memory_generation(), std::optional<std::string>("2"));
  // The reset took the pins; the extension forgets its hints on the next call.
  ASSERT_TRUE(rig.ext.hint(Rig::hint(3, "read_hint_end", "a")).ok());
  EXPECT_EQ(rig.ext.open_hints(), 0u);
  rig.device.script_unknown_period(Instant{1ms}, Instant{3ms});
  rig.world.run_for(2ms);
  EXPECT_EQ(rig.ext.memory_generation(), std::nullopt);
  rig.world.run_for(2ms);
  EXPECT_EQ(rig.ext.memory_generation(), std::optional<std::string>("2"));
}

TEST(CxlSsdExtension, R1_2_BadInputIsRefusedWithoutChange) {
  Rig rig;
  EXPECT_EQ(rig.ext.hint(Rig::hint(3, "read_wait", "a", {Rig::range(0, kPage)})).code(),
            ErrorCode::kNotAdvertised);
  ext::Range outside{1, 0, kPage, (4u << 20) - 10};
  EXPECT_EQ(rig.ext.hint(Rig::hint(3, "read_hint", "a", {outside})).code(), ErrorCode::kBadRange);
  EXPECT_EQ(rig.ext.open_hints(), 0u);
  EXPECT_EQ(rig.device.pinned_bytes(), 0u);
  EXPECT_EQ(rig.ext.validate_access({1, 4u << 20, kPage}).code(), ErrorCode::kRefused);
  WaitAnswer waited(rig, ext::WriteWait{3, "s", {outside}, 10});
  ASSERT_TRUE(waited.in());
  EXPECT_EQ(waited.answer->status().code(), ErrorCode::kBadRange);
}

TEST(CxlSsdExtension, R2_1_FactoryNeedsTheDeviceAndAValidConfig) {
  Rig rig;
  EXPECT_FALSE(make_cxl_ssd_extension({&rig.mem, nullptr}, ext::Json::object()).ok());
  EXPECT_FALSE(make_cxl_ssd_extension({&rig.mem, &rig.device}, ext::Json{{"bogus", 1}}).ok());
  EXPECT_FALSE(
      make_cxl_ssd_extension({&rig.mem, &rig.device}, ext::Json{{"write_wait_poll_us", 0}}).ok());
  auto made =
      make_cxl_ssd_extension({&rig.mem, &rig.device}, ext::Json{{"write_wait_poll_us", 50}});
  ASSERT_TRUE(made.ok());
  EXPECT_EQ((*made)->name(), "cxl_ssd");
}

}  // namespace
}  // namespace rcxl::device
