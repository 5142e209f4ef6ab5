// One flash resource's (a die, a channel, the controller backend) booked
// work: busy until `last_end`, except for the gaps it lists. A booking takes
// the first gap at or after the time asked that is long enough, so work that
// can start sooner does not wait behind work booked ahead of it (a chained
// miss's fill is booked when its slot frees; a busy-until time served
// bookings in call order and left such gaps idle). Without gaps (the common
// case: work booked in time order) it costs what a busy-until time does.
#pragma once

#include <algorithm>
#include <array>
#include <cstddef>

#include "core/runtime/clock.h"

namespace rcxl::device {

class BusyTimeline {
 public:
  using Instant = runtime::Instant;
  using Duration = runtime::Duration;

  // `least_work`: the shortest booking this resource takes; a gap shorter
  // than it can hold nothing, so it is not kept (same answers, less to scan).
  explicit BusyTimeline(Duration least_work = Duration{1}) : least_work_(least_work) {}

  // The earliest start >= `t` of a free span `d` long.
  Instant first_fit(Instant t, Duration d) const {
    if (t >= last_end_) return t;
    for (std::size_t i = 0; i != gaps_; ++i) {
      const Instant start = std::max(t, gap_[i].start);
      if (start + d <= gap_[i].end) return start;
    }
    return last_end_;
  }

  // Books [start, start + d); it must be free (first_fit's answer: a span
  // in no listed gap is one this timeline counts as busy already, so it
  // changes nothing). Gaps that ended by `now` are forgotten: nothing is
  // asked for before now.
  void book(Instant start, Duration d, Instant now) {
    if (d <= Duration::zero()) return;
    if (gaps_ != 0 && gap_[0].end <= now) drop_ended(now);
    const Instant end = start + d;
    if (start >= last_end_) {
      if (start - last_end_ >= least_work_) add_gap({last_end_, start});
      last_end_ = end;
      return;
    }
    // Inside a gap: what is left of it on either side stays free.
    for (std::size_t i = 0; i != gaps_; ++i) {
      if (gap_[i].start > start || end > gap_[i].end) continue;
      const Gap before{gap_[i].start, start}, after{end, gap_[i].end};
      remove_gap(i);
      if (after.end - after.start >= least_work_) insert_gap(i, after);
      if (before.end - before.start >= least_work_) insert_gap(i, before);
      return;
    }
  }

  // The end of the last booking: after it the resource is free for good.
  Instant last_end() const { return last_end_; }

  // A reset aborts queued work: nothing stays booked past `now` (what was
  // free before now may read as busy: nothing is asked for before now).
  void abort_after(Instant now) {
    while (gaps_ != 0 && gap_[gaps_ - 1].start >= now) --gaps_;
    if (gaps_ != 0) gap_[gaps_ - 1].end = std::min(gap_[gaps_ - 1].end, now);
    last_end_ = std::min(last_end_, now);
  }

 private:
  struct Gap {
    Instant start;
    Instant end;
  };
  // Gaps kept per resource: as many as the longest chain of misses the
  // default profile books ahead (read_miss_depth 8); past it the oldest gap
  // is given up (taken as busy), as a busy-until time gives up every gap, so
  // a deeper profile only loses some of the gain (docs/device-model.md).
  static constexpr std::size_t kMaxGaps = 8;

  void add_gap(Gap g) {
    if (gaps_ == kMaxGaps) remove_gap(0);
    gap_[gaps_++] = g;
  }
  void insert_gap(std::size_t at, Gap g) {
    if (gaps_ == kMaxGaps) {
      if (at == 0) return;  // it would be the oldest: given up
      remove_gap(0);
      --at;
    }
    std::copy_backward(gap_.data() + at, gap_.data() + gaps_, gap_.data() + gaps_ + 1);
    gap_[at] = g;
    ++gaps_;
  }
  void remove_gap(std::size_t at) {
    std::copy(gap_.data() + at + 1, gap_.data() + gaps_, gap_.data() + at);
    --gaps_;
  }
  void drop_ended(Instant now) {
    std::size_t ended = 0;
    while (ended != gaps_ && gap_[ended].end <= now) ++ended;
    std::copy(gap_.data() + ended, gap_.data() + gaps_, gap_.data());
    gaps_ -= ended;
  }

  Duration least_work_;
  Instant last_end_{0};
  std::size_t gaps_ = 0;  // gap_[0, gaps_): free spans before last_end_, in time order
  std::array<Gap, kMaxGaps> gap_{};
};

}  // namespace rcxl::device
