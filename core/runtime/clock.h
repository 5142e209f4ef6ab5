// Clock port: time since the runtime started, in nanoseconds (virtual in sim).
#pragma once

#include <chrono>
#include <cmath>
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
// Rounded to the nearest tick: a cast truncates, so 1.001 s was 1000999999 ns
// and a fault "at_s": 1.001 ran before an event at exactly that time.
inline Duration from_seconds(double s) {
  return std::chrono::round<Duration>(std::chrono::duration<double>(s));
}
// Whether `s` seconds is a whole number of ticks (within double rounding):
// a finer time would run as its rounding, two sweep values as one point.
inline bool whole_nanoseconds(double s) {
  const double ns = s * 1e9;
  return std::fabs(ns - std::round(ns)) <= 1e-6 + 1e-15 * std::fabs(ns);
}

}  // namespace rcxl::runtime
