#include "backends/verbs/spdlog_sink.h"

#include <spdlog/sinks/stdout_sinks.h>
#include <spdlog/spdlog.h>

namespace rcxl::verbs {
namespace {

spdlog::level::level_enum to_spdlog(runtime::LogLevel level) {
  switch (level) {
    case runtime::LogLevel::kTrace:
      return spdlog::level::trace;
    case runtime::LogLevel::kDebug:
      return spdlog::level::debug;
    case runtime::LogLevel::kInfo:
      return spdlog::level::info;
    case runtime::LogLevel::kWarn:
      return spdlog::level::warn;
    case runtime::LogLevel::kError:
      return spdlog::level::err;
  }
  return spdlog::level::info;
}

}  // namespace

SpdlogSink::SpdlogSink(runtime::LogLevel level)
    : level_(level),
      // Not registered globally: several runtimes (tests) may live in one process.
      logger_(std::make_shared<spdlog::logger>("rcxl",
                                               std::make_shared<spdlog::sinks::stderr_sink_mt>())) {
  logger_->set_pattern("%Y-%m-%dT%H:%M:%S.%e %^%l%$ %v");
  logger_->set_level(spdlog::level::trace);  // filtered by enabled()
  logger_->flush_on(spdlog::level::trace);
}

SpdlogSink::~SpdlogSink() = default;

void SpdlogSink::log(runtime::LogLevel level, std::string_view component,
                     std::string_view message) {
  if (!enabled(level)) return;
  logger_->log(to_spdlog(level), "[{}] {}", component, message);
}

}  // namespace rcxl::verbs
