#include "core/runtime/status.h"

#include <array>

namespace rcxl {
namespace {

struct CodeName {
  ErrorCode code;
  std::string_view name;
};

constexpr std::array kNames = {
    CodeName{ErrorCode::kOk, "ok"},
    CodeName{ErrorCode::kBadRequest, "bad_request"},
    CodeName{ErrorCode::kUnauthenticated, "unauthenticated"},
    CodeName{ErrorCode::kAuthFailed, "auth_failed"},
    CodeName{ErrorCode::kStaleEpoch, "stale_epoch"},
    CodeName{ErrorCode::kNotAdvertised, "not_advertised"},
    CodeName{ErrorCode::kBadRange, "bad_range"},
    CodeName{ErrorCode::kTooManyHintRequests, "too_many_hint_requests"},
    CodeName{ErrorCode::kRefused, "refused"},
    CodeName{ErrorCode::kGenerationUnknown, "generation_unknown"},
    CodeName{ErrorCode::kBootChanged, "boot_changed"},
    CodeName{ErrorCode::kExtensionFailed, "extension_failed"},
    CodeName{ErrorCode::kNotFound, "not_found"},
    CodeName{ErrorCode::kNoSpace, "no_space"},
    CodeName{ErrorCode::kBadFrame, "bad_frame"},
    CodeName{ErrorCode::kIoError, "io_error"},
    CodeName{ErrorCode::kTimeout, "timeout"},
    CodeName{ErrorCode::kClosed, "closed"},
    CodeName{ErrorCode::kUnavailable, "unavailable"},
    CodeName{ErrorCode::kInternal, "internal"},
    CodeName{ErrorCode::kRemoteAccess, "remote_access"},
};

}  // namespace

std::string_view error_code_name(ErrorCode code) {
  for (const auto& entry : kNames) {
    if (entry.code == code) return entry.name;
  }
  return "internal";
}

std::optional<ErrorCode> error_code_from_name(std::string_view name) {
  for (const auto& entry : kNames) {
    if (entry.name == name) return entry.code;
  }
  return std::nullopt;
}

std::string Status::ToString() const {
  if (ok()) return "ok";
  return std::string(error_code_name(code_)) + ": " + message_;
}

}  // namespace rcxl
