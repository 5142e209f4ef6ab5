// One event loop in virtual time. Events run in (time, sequence) order, so ties
// are broken by the order they were scheduled: deterministic by construction.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <utility>
#include <vector>

#include "core/runtime/clock.h"
#include "core/runtime/status.h"

namespace rcxl::sim {

using runtime::Duration;
using runtime::Instant;

class EventLoop final : public runtime::Clock {
 public:
  using EventId = std::uint64_t;

  Instant now() const override { return now_; }
  EventId schedule_at(Instant when, std::function<void()> fn);
  EventId schedule_after(Duration delay, std::function<void()> fn) {
    // Saturates: a huge delay wrapped negative and ran at once.
    const Instant when = delay > Instant::max() - now_ ? Instant::max() : now_ + delay;
    return schedule_at(when, std::move(fn));
  }
  // True when the event was pending and is now gone.
  bool cancel(EventId id);
  // Runs the next event; false when there is none.
  bool step();
  // Runs until `done()` holds, no events are left, or virtual time passes `limit`.
  // Returns true when done() held.
  bool run_until(const std::function<bool()>& done, Instant limit = Instant::max());
  // Runs every event up to and including time `t`, then sets the clock to `t`.
  void run_for(Duration d);
  bool idle() const { return pending_ == 0; }
  std::size_t pending() const { return pending_; }
  std::uint64_t executed() const { return executed_; }

 private:
  // A binary heap of (time, sequence) over slots that hold the callbacks: a
  // schedule or a step moves 24 bytes, not a tree node with a std::function.
  struct Entry {
    std::int64_t time;
    EventId id;  // (slot << kSlotShift) | sequence; the sequence orders ties
    bool operator>(const Entry& o) const {
      return time != o.time ? time > o.time : sequence(id) > sequence(o.id);
    }
  };
  struct Slot {
    std::function<void()> fn;
    EventId id = kNoEvent;  // the event it holds, kNoEvent when free
  };
  static constexpr int kSlotShift = 40;  // 2^40 events per loop, 2^24 pending
  static constexpr EventId kNoEvent = ~EventId{0};
  static std::uint64_t sequence(EventId id) { return id & ((EventId{1} << kSlotShift) - 1); }
  static std::size_t slot_of(EventId id) { return static_cast<std::size_t>(id >> kSlotShift); }
  bool live(const Entry& e) const { return slots_[slot_of(e.id)].id == e.id; }
  // Drops cancelled entries from the top; false when no event is pending.
  bool settle();

  std::vector<Entry> heap_;
  std::vector<Slot> slots_;
  std::vector<std::size_t> free_slots_;
  std::size_t pending_ = 0;
  Instant now_{0};
  std::uint64_t next_seq_ = 0;
  std::uint64_t executed_ = 0;
};

}  // namespace rcxl::sim
