// Logger port: where core's log lines go (spdlog in the thread runtime; the sim
// stamps them with virtual time).
#pragma once

#include <string_view>

namespace rcxl::runtime {

enum class LogLevel { kTrace, kDebug, kInfo, kWarn, kError };

class LogSink {
 public:
  virtual ~LogSink() = default;
  virtual void log(LogLevel level, std::string_view component, std::string_view message) = 0;
  virtual bool enabled(LogLevel level) const = 0;
};

}  // namespace rcxl::runtime
