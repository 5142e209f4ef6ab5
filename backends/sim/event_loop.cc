#include "backends/sim/event_loop.h"

#include <algorithm>
#include <cstdio>
#include <cstdlib>

namespace rcxl::sim {

EventLoop::EventId EventLoop::schedule_at(Instant when, std::function<void()> fn) {
  if (when < now_) when = now_;  // the past is now: time never goes backwards
  std::size_t slot;
  if (!free_slots_.empty()) {
    slot = free_slots_.back();
    free_slots_.pop_back();
  } else {
    slot = slots_.size();
    slots_.emplace_back();
  }
  // Past either field's width an id would alias another event (the wrong one
  // skipped, ties out of order): stop loudly instead.
  if (slot >= (std::size_t{1} << (64 - kSlotShift)) || next_seq_ >= (EventId{1} << kSlotShift)) {
    std::fputs("rcxl-sim: more than 2^24 pending or 2^40 scheduled events in one run\n", stderr);
    std::abort();
  }
  const EventId id = (EventId{slot} << kSlotShift) | next_seq_++;
  slots_[slot].fn = std::move(fn);
  slots_[slot].id = id;
  heap_.push_back({when.count(), id});
  std::push_heap(heap_.begin(), heap_.end(), std::greater<>());
  ++pending_;
  return id;
}

bool EventLoop::cancel(EventId id) {
  const std::size_t slot = slot_of(id);
  if (slot >= slots_.size() || slots_[slot].id != id) return false;
  // The heap entry stays; it no longer matches its slot, so it is skipped.
  slots_[slot].fn = nullptr;
  slots_[slot].id = kNoEvent;
  free_slots_.push_back(slot);
  --pending_;
  return true;
}

bool EventLoop::settle() {
  while (!heap_.empty() && !live(heap_.front())) {
    std::pop_heap(heap_.begin(), heap_.end(), std::greater<>());
    heap_.pop_back();
  }
  return !heap_.empty();
}

bool EventLoop::step() {
  if (!settle()) return false;
  std::pop_heap(heap_.begin(), heap_.end(), std::greater<>());
  const Entry e = heap_.back();
  heap_.pop_back();
  Slot& s = slots_[slot_of(e.id)];
  auto fn = std::move(s.fn);
  s.fn = nullptr;
  s.id = kNoEvent;
  free_slots_.push_back(slot_of(e.id));
  --pending_;
  now_ = Instant(e.time);
  ++executed_;
  fn();
  return true;
}

bool EventLoop::run_until(const std::function<bool()>& done, Instant limit) {
  while (!done()) {
    if (!settle()) return false;
    if (Instant(heap_.front().time) > limit) {
      now_ = std::max(now_, limit);  // a limit already past never turns time back
      return false;
    }
    step();
  }
  return true;
}

void EventLoop::run_for(Duration d) {
  const Instant end = d > Instant::max() - now_ ? Instant::max() : now_ + d;
  while (settle() && Instant(heap_.front().time) <= end) step();
  if (now_ < end) now_ = end;
}

}  // namespace rcxl::sim
