// One flash resource's (a die, a channel, the controller backend) booked busy
// intervals, disjoint and in time order. A booking takes the first gap at or
// after the time asked that is long enough, so work that can start sooner
// does not wait behind work booked ahead of it (a chained miss's fill is
// booked when its slot frees; a busy-until time served bookings in call
// order and left such gaps idle).
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
  // than it can hold nothing, so it is joined to its neighbour (fewer
  // intervals to look through, same answers).
  explicit BusyTimeline(Duration least_work = Duration{1}) : least_work_(least_work) {}

  // The earliest start >= `t` of a free span `d` long.
  Instant first_fit(Instant t, Duration d) const {
    if (t >= last_end_) return t;  // the common case: nothing booked after t
    // A few intervals at most (ended ones are dropped as work is booked): a
    // scan from the oldest, skipping those that end by t.
    Instant start = t;
    for (std::size_t i = begin_; i != end_; ++i) {
      const Interval& busy = busy_[i];
      if (busy.end <= start) continue;
      if (start + d <= busy.start) return start;
      start = busy.end;
    }
    return start;
  }

  // Books [start, start + d); it must be free (first_fit's answer). Work that
  // ended by `now` is forgotten: nothing is asked for before now.
  void book(Instant start, Duration d, Instant now) {
    if (d <= Duration::zero()) return;
    drop_ended(now);
    const Instant end = start + d;
    if (start >= last_end_) {
      last_end_ = end;
      if (begin_ != end_ && start - busy_[end_ - 1].end < least_work_) {
        busy_[end_ - 1].end = end;  // back to back: one interval
        return;
      }
      make_room(now);
      busy_[end_++] = {start, end};
      return;
    }
    book_in_a_gap(start, end, now);
  }

  // The end of the last booking: after it the resource is free for good.
  Instant last_end() const { return last_end_; }

  // A reset aborts queued work: nothing stays booked past `now`.
  void abort_after(Instant now) {
    while (begin_ != end_ && busy_[end_ - 1].start >= now) --end_;
    if (begin_ != end_) busy_[end_ - 1].end = std::min(busy_[end_ - 1].end, now);
    last_end_ = std::min(last_end_, now);
  }

 private:
  struct Interval {
    Instant start;
    Instant end;
  };
  // Intervals kept per resource: a few fills' worth of look-ahead is all a
  // device books; more would only cost time.
  static constexpr std::size_t kMaxIntervals = 16;

  void book_in_a_gap(Instant start, Instant end, Instant now) {
    if (end_ == kMaxIntervals) drop_ended(now);
    std::size_t at = begin_;
    while (at != end_ && busy_[at].start < start) ++at;
    bool joins_before = at != begin_ && start - busy_[at - 1].end < least_work_;
    bool joins_after = at != end_ && busy_[at].start - end < least_work_;
    if (!joins_before && !joins_after && end_ - begin_ == kMaxIntervals) {
      // At the bound: the gap beside it is given up (taken as busy).
      (at != begin_ ? joins_before : joins_after) = true;
    }
    if (joins_before && joins_after) {
      busy_[at - 1].end = busy_[at].end;
      std::copy(busy_.data() + at + 1, busy_.data() + end_, busy_.data() + at);
      --end_;
    } else if (joins_before) {
      busy_[at - 1].end = end;
    } else if (joins_after) {
      busy_[at].start = start;
    } else {
      if (end_ == kMaxIntervals) {  // room at the back: the live ones move to the front
        at -= begin_;
        compact();
      }
      std::copy_backward(busy_.data() + at, busy_.data() + end_, busy_.data() + end_ + 1);
      ++end_;
      busy_[at] = {start, end};
    }
  }

  // Room for one more interval at the back: ended work goes first; at the
  // bound the oldest gap is given up (taken as busy), as a busy-until time
  // gives up every gap; only work asked for that long ago could use it.
  void make_room(Instant now) {
    if (end_ < kMaxIntervals) return;
    drop_ended(now);
    if (begin_ == 0) {
      busy_[1].start = busy_[0].start;
      begin_ = 1;
    }
    compact();
  }
  void drop_ended(Instant now) {
    while (begin_ != end_ && busy_[begin_].end <= now) ++begin_;
  }
  void compact() {
    std::copy(busy_.data() + begin_, busy_.data() + end_, busy_.data());
    end_ -= begin_;
    begin_ = 0;
  }

  Duration least_work_;
  Instant last_end_{0};
  std::size_t begin_ = 0;  // busy_[begin_, end_): booked, in time order
  std::size_t end_ = 0;
  std::array<Interval, kMaxIntervals> busy_{};
};

}  // namespace rcxl::device
