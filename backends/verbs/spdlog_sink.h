// The Log port in production: spdlog to stderr, with a settable level.
#pragma once

#include <atomic>
#include <memory>

#include "core/runtime/log.h"

namespace spdlog {
class logger;
}

namespace rcxl::verbs {

class SpdlogSink final : public runtime::LogSink {
 public:
  explicit SpdlogSink(runtime::LogLevel level);
  ~SpdlogSink() override;

  void log(runtime::LogLevel level, std::string_view component, std::string_view message) override;
  bool enabled(runtime::LogLevel level) const override { return level >= level_.load(); }
  void set_level(runtime::LogLevel level) { level_ = level; }

 private:
  std::atomic<runtime::LogLevel> level_;
  std::shared_ptr<spdlog::logger> logger_;
};

}  // namespace rcxl::verbs
