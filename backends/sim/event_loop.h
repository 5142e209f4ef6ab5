// One event loop in virtual time. Events run in (time, sequence) order, so ties
// are broken by the order they were scheduled: deterministic by construction.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <string>
#include <utility>

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
    return schedule_at(now_ + delay, std::move(fn));
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
  bool idle() const { return events_.empty(); }
  std::size_t pending() const { return events_.size(); }
  std::uint64_t executed() const { return executed_; }

 private:
  using Key = std::pair<std::int64_t, std::uint64_t>;  // (time ns, sequence)
  std::map<Key, std::function<void()>> events_;
  std::map<EventId, Key> keys_;
  Instant now_{0};
  std::uint64_t next_seq_ = 0;
  std::uint64_t executed_ = 0;
};

}  // namespace rcxl::sim
