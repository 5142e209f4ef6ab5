// Small convenience over LogSink: `Logger log(sink, "agent"); log.info("x ", 3);`
#pragma once

#include <sstream>
#include <string>
#include <string_view>
#include <utility>

#include "core/runtime/log.h"

namespace rcxl::runtime {

class Logger {
 public:
  Logger(LogSink& sink, std::string component) : sink_(&sink), component_(std::move(component)) {}

  template <typename... Args>
  void log(LogLevel level, Args&&... args) const {
    if (!sink_->enabled(level)) return;
    std::ostringstream out;
    (out << ... << std::forward<Args>(args));
    sink_->log(level, component_, out.str());
  }
  template <typename... Args>
  void debug(Args&&... a) const {
    log(LogLevel::kDebug, std::forward<Args>(a)...);
  }
  template <typename... Args>
  void info(Args&&... a) const {
    log(LogLevel::kInfo, std::forward<Args>(a)...);
  }
  template <typename... Args>
  void warn(Args&&... a) const {
    log(LogLevel::kWarn, std::forward<Args>(a)...);
  }
  template <typename... Args>
  void error(Args&&... a) const {
    log(LogLevel::kError, std::forward<Args>(a)...);
  }

 private:
  LogSink* sink_;
  std::string component_;
};

}  // namespace rcxl::runtime
