// Status and Result: errors at module boundaries carry a code from PROTOCOL.md.
#pragma once

#include <cassert>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <variant>

namespace rcxl {

// The first block is PROTOCOL.md's error table, spelled as on the wire; the
// second block never crosses the wire (local failures of ports and clients).
enum class ErrorCode {
  kOk = 0,
  kBadRequest,
  kUnauthenticated,
  kAuthFailed,
  kStaleEpoch,
  kNotAdvertised,
  kBadRange,
  kTooManyHintRequests,
  kRefused,
  kGenerationUnknown,
  kBootChanged,
  kExtensionFailed,
  kNotFound,
  kNoSpace,
  kBadFrame,
  // local only
  kIoError,
  kTimeout,
  kClosed,
  kUnavailable,
  kInternal,
  kRemoteAccess,  // RDMA through a registration that is gone
};

// Wire spelling of a code ("bad_request"); local codes have names too.
std::string_view error_code_name(ErrorCode code);
// Inverse of error_code_name; nullopt for an unknown name.
std::optional<ErrorCode> error_code_from_name(std::string_view name);
// Whether a code is in PROTOCOL.md's table (the first block): a peer may send it.
inline bool is_wire_code(ErrorCode code) {
  return code > ErrorCode::kOk && code <= ErrorCode::kBadFrame;
}

class [[nodiscard]] Status {
 public:
  Status() = default;
  Status(ErrorCode code, std::string message) : code_(code), message_(std::move(message)) {}
  static Status Ok() { return {}; }

  bool ok() const { return code_ == ErrorCode::kOk; }
  ErrorCode code() const { return code_; }
  const std::string& message() const { return message_; }
  std::string ToString() const;

 private:
  ErrorCode code_ = ErrorCode::kOk;
  std::string message_;
};

inline Status Error(ErrorCode code, std::string message) {
  return {code, std::move(message)};
}

// A value or a non-ok Status (std::expected is C++23).
template <typename T>
class [[nodiscard]] Result {
 public:
  Result(T value) : v_(std::move(value)) {}        // NOLINT(google-explicit-constructor)
  Result(Status status) : v_(std::move(status)) {  // NOLINT(google-explicit-constructor)
    assert(!std::get<Status>(v_).ok());
  }

  bool ok() const { return std::holds_alternative<T>(v_); }
  explicit operator bool() const { return ok(); }
  const Status& status() const {
    static const Status kOkStatus;
    return ok() ? kOkStatus : std::get<Status>(v_);
  }
  T& value() & { return std::get<T>(v_); }
  const T& value() const& { return std::get<T>(v_); }
  T&& value() && { return std::get<T>(std::move(v_)); }
  T* operator->() { return &value(); }
  const T* operator->() const { return &value(); }
  T& operator*() & { return value(); }
  const T& operator*() const& { return value(); }

 private:
  std::variant<T, Status> v_;
};

}  // namespace rcxl
