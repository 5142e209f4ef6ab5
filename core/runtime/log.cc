#include "core/runtime/log.h"

#include <array>
#include <string>
#include <utility>

namespace rcxl::runtime {

Result<LogLevel> parse_log_level(std::string_view text) {
  static constexpr std::array<std::pair<std::string_view, LogLevel>, 5> kLevels = {{
      {"trace", LogLevel::kTrace},
      {"debug", LogLevel::kDebug},
      {"info", LogLevel::kInfo},
      {"warn", LogLevel::kWarn},
      {"error", LogLevel::kError},
  }};
  for (const auto& [name, level] : kLevels) {
    if (name == text) return level;
  }
  return Error(ErrorCode::kBadRequest,
               "bad log level '" + std::string(text) + "' (use trace, debug, info, warn or error)");
}

}  // namespace rcxl::runtime
