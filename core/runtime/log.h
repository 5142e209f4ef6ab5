// Logger port: where core's log lines go (spdlog in the thread runtime; the sim
// stamps them with virtual time).
#pragma once

#include <string_view>

#include "core/runtime/status.h"

namespace rcxl::runtime {

enum class LogLevel { kTrace, kDebug, kInfo, kWarn, kError };

// "trace" | "debug" | "info" | "warn" | "error" (the binaries' --log-level);
// anything else is bad_request naming the choices.
Result<LogLevel> parse_log_level(std::string_view text);

class LogSink {
 public:
  virtual ~LogSink() = default;
  virtual void log(LogLevel level, std::string_view component, std::string_view message) = 0;
  virtual bool enabled(LogLevel level) const = 0;
};

}  // namespace rcxl::runtime
