// When one direction of an RNIC port is busy: the transfers booked on it, as
// [start, end) intervals. A transfer is booked into the first gap that fits
// it at or after its earliest start, so a transfer booked for later (a READ
// segment waiting for the device) does not hold the port idle until then.
#pragma once

#include <algorithm>
#include <iterator>
#include <map>

#include "core/runtime/clock.h"

namespace rcxl::sim {

class PortTimeline {
 public:
  // The first start >= `earliest` at which [start, start + length) is free.
  runtime::Instant first_fit(runtime::Instant earliest, runtime::Duration length) const {
    runtime::Instant t = earliest;
    auto it = busy_.upper_bound(t);
    if (it != busy_.begin()) {
      const auto before = std::prev(it);
      if (before->second > t) t = before->second;
    }
    for (it = busy_.lower_bound(t); it != busy_.end() && it->first < t + length; ++it) {
      t = std::max(t, it->second);
    }
    return t;
  }

  // Books [start, start + length), which first_fit said is free; forgets what
  // ended before `now` (nothing is booked before now).
  void book(runtime::Instant start, runtime::Duration length, runtime::Instant now) {
    while (!busy_.empty() && busy_.begin()->second <= now) busy_.erase(busy_.begin());
    // Nothing to book: an empty [t, t) kept would push later transfers past t.
    if (length <= runtime::Duration(0)) return;
    runtime::Instant end = start + length;
    auto next = busy_.find(end);
    if (next != busy_.end()) {  // joins the interval right after it
      end = next->second;
      busy_.erase(next);
    }
    auto it = busy_.lower_bound(start);
    if (it != busy_.begin()) {
      auto before = std::prev(it);
      if (before->second == start) {  // extends the interval right before it
        before->second = end;
        return;
      }
    }
    busy_[start] = end;
  }

  // Frees [start, start + length), which book() booked and nothing else holds:
  // a transfer that will not be sent (its WRITE was refused) gives its time back.
  void release(runtime::Instant start, runtime::Duration length) {
    if (length <= runtime::Duration(0)) return;
    const runtime::Instant end = start + length;
    auto it = busy_.upper_bound(start);
    if (it == busy_.begin()) return;
    --it;
    if (it->second < end) return;  // not booked as one: nothing of it is ours to free
    const runtime::Instant was_end = it->second;
    if (it->first == start) {
      busy_.erase(it);
    } else {
      it->second = start;
    }
    if (was_end > end) busy_[end] = was_end;
  }

  std::size_t intervals() const { return busy_.size(); }

  // Transfers streaming on this port (a QP's WRITE data or READ responses):
  // while more than one, each books a segment at a time and they alternate.
  void join() { ++streams_; }
  void leave() { --streams_; }
  bool shared() const { return streams_ > 1; }

 private:
  std::map<runtime::Instant, runtime::Instant> busy_;  // start -> end, disjoint
  int streams_ = 0;
};

// The first start >= `earliest` at which both a sender's TX and a receiver's
// RX are free for `length`, booked on both.
inline runtime::Instant book_both(PortTimeline& tx, PortTimeline& rx, runtime::Instant earliest,
                                  runtime::Duration length, runtime::Instant now) {
  runtime::Instant t = earliest;
  while (true) {
    const runtime::Instant a = tx.first_fit(t, length);
    const runtime::Instant b = rx.first_fit(a, length);
    t = b;
    if (b == a) break;
  }
  tx.book(t, length, now);
  rx.book(t, length, now);
  return t;
}

}  // namespace rcxl::sim
