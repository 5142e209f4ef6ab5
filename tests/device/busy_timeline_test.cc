// The flash resources' timelines of booked work (devices/cxl_ssd_model/busy_timeline.h).
#include "devices/cxl_ssd_model/busy_timeline.h"

#include <gtest/gtest.h>

namespace rcxl::device {
namespace {

using namespace std::chrono_literals;
using Instant = runtime::Instant;

TEST(BusyTimeline, R8_WorkTakesTheFirstGapItFits) {
  BusyTimeline t;
  EXPECT_EQ(t.first_fit(Instant{5us}, 1us), Instant{5us});    // nothing booked
  t.book(Instant{10us}, 2us, Instant{0});                     // [10, 12)
  t.book(Instant{20us}, 2us, Instant{0});                     // [20, 22)
  EXPECT_EQ(t.first_fit(Instant{0}, 10us), Instant{0});       // fits before, ending at 10
  EXPECT_EQ(t.first_fit(Instant{1us}, 10us), Instant{22us});  // 1..11 does not, nor 12..22
  EXPECT_EQ(t.first_fit(Instant{11us}, 8us), Instant{12us});
  EXPECT_EQ(t.first_fit(Instant{11us}, 9us), Instant{22us});
  EXPECT_EQ(t.first_fit(Instant{30us}, 1us), Instant{30us});
  EXPECT_EQ(t.last_end(), Instant{22us});
  // Back to back bookings join; the gap they filled is gone.
  t.book(Instant{12us}, 8us, Instant{0});
  EXPECT_EQ(t.first_fit(Instant{10us}, 1ns), Instant{22us});
  t.book(Instant{8us}, 2us, Instant{0});
  EXPECT_EQ(t.first_fit(Instant{0}, 9us), Instant{22us});
  EXPECT_EQ(t.first_fit(Instant{0}, 8us), Instant{0});
}

TEST(BusyTimeline, R8_OnlyTheOldestGapsAreGivenUp) {
  BusyTimeline t;
  for (int i = 0; i < 40; ++i) {
    t.book(Instant{std::chrono::microseconds(10 * i)}, 5us, Instant{0});
  }
  // 39 gaps: the oldest are taken as busy (as a busy-until time takes them all)...
  EXPECT_EQ(t.first_fit(Instant{0}, 1us), Instant{315us});  // 31 given up, 8 kept
  // ...the recent ones stay free.
  EXPECT_EQ(t.first_fit(Instant{386us}, 1us), Instant{386us});
  EXPECT_EQ(t.last_end(), Instant{395us});
}

// Gaps that ended by now are forgotten when work is booked (nothing is asked
// for before now); the ones still ahead stay.
TEST(BusyTimeline, R8_GapsThatEndedAreForgotten) {
  BusyTimeline t;
  for (int i = 0; i < 6; ++i) t.book(Instant{std::chrono::microseconds(10 * i)}, 5us, Instant{0});
  t.book(Instant{200us}, 5us, Instant{32us});
  EXPECT_EQ(t.first_fit(Instant{32us}, 3us), Instant{35us});  // the gap [35, 40) is ahead
  EXPECT_EQ(t.first_fit(Instant{36us}, 4us), Instant{36us});
  EXPECT_EQ(t.first_fit(Instant{32us}, 6us), Instant{55us});
  EXPECT_EQ(t.first_fit(Instant{0}, 4us), Instant{35us});  // [5, 10) ... [25, 30) are gone
  EXPECT_EQ(t.last_end(), Instant{205us});
}

TEST(BusyTimeline, R6_AnAbortFreesEverythingFromNow) {
  BusyTimeline t;
  t.book(Instant{0}, 10us, Instant{0});
  t.book(Instant{20us}, 10us, Instant{0});
  t.abort_after(Instant{5us});
  EXPECT_EQ(t.last_end(), Instant{5us});
  EXPECT_EQ(t.first_fit(Instant{0}, 1us), Instant{5us});
  EXPECT_EQ(t.first_fit(Instant{6us}, 100us), Instant{6us});
}

}  // namespace
}  // namespace rcxl::device
