// Clock port: time since the runtime started, in nanoseconds (virtual in sim).
#pragma once

#include <chrono>
#include <cstdint>

namespace rcxl::runtime {

using Duration = std::chrono::nanoseconds;
// Time since the runtime's start; never goes backwards.
using Instant = std::chrono::nanoseconds;

using std::chrono_literals::operator""ns;
using std::chrono_literals::operator""us;
using std::chrono_literals::operator""ms;
using std::chrono_literals::operator""s;

class Clock {
 public:
  virtual ~Clock() = default;
  virtual Instant now() const = 0;
};

inline double to_seconds(Duration d) {
  return std::chrono::duration<double>(d).count();
}
inline double to_millis(Duration d) {
  return std::chrono::duration<double, std::milli>(d).count();
}
inline Duration from_seconds(double s) {
  return std::chrono::duration_cast<Duration>(std::chrono::duration<double>(s));
}

}  // namespace rcxl::runtime
