#include "backends/sim/event_loop.h"

namespace rcxl::sim {

EventLoop::EventId EventLoop::schedule_at(Instant when, std::function<void()> fn) {
  if (when < now_) when = now_;  // the past is now: time never goes backwards
  const EventId id = next_seq_++;
  const Key key{when.count(), id};
  events_.emplace(key, std::move(fn));
  keys_.emplace(id, key);
  return id;
}

bool EventLoop::cancel(EventId id) {
  auto it = keys_.find(id);
  if (it == keys_.end()) return false;
  events_.erase(it->second);
  keys_.erase(it);
  return true;
}

bool EventLoop::step() {
  if (events_.empty()) return false;
  auto it = events_.begin();
  const Key key = it->first;
  auto fn = std::move(it->second);
  events_.erase(it);
  keys_.erase(key.second);
  now_ = Instant(key.first);
  ++executed_;
  fn();
  return true;
}

bool EventLoop::run_until(const std::function<bool()>& done, Instant limit) {
  while (!done()) {
    if (events_.empty()) return false;
    if (Instant(events_.begin()->first.first) > limit) {
      now_ = limit;
      return false;
    }
    step();
  }
  return true;
}

void EventLoop::run_for(Duration d) {
  const Instant end = now_ + d;
  while (!events_.empty() && Instant(events_.begin()->first.first) <= end) step();
  if (now_ < end) now_ = end;
}

}  // namespace rcxl::sim
