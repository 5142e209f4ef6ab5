// Strand port: a serial executor. Tasks run one at a time, in the order posted;
// timers fire on the strand. Thread runtime: one OS thread; sim: a virtual thread.
#pragma once

#include <cstdint>
#include <functional>
#include <string>

#include "core/runtime/clock.h"

namespace rcxl::runtime {

using Task = std::function<void()>;
using TimerId = std::uint64_t;

class Strand {
 public:
  virtual ~Strand() = default;
  virtual const std::string& name() const = 0;
  // Thread-safe. Runs after every task posted before it on this strand.
  virtual void post(Task task) = 0;
  // Thread-safe. Runs `task` on this strand once `delay` has passed.
  virtual TimerId post_after(Duration delay, Task task) = 0;
  // True when the timer was still pending and will now never run.
  virtual bool cancel(TimerId id) = 0;
  // True when the caller is running on this strand.
  virtual bool running_here() const = 0;
};

}  // namespace rcxl::runtime
