// Reads a scenario or profile document (JSON text a user wrote): invalid JSON
// is refused with its line and column, and so are documents nested deeper
// than kMaxJsonDepth (copying one would recurse off the stack) and objects
// that give a key twice (which one would win is not what the user meant).
#pragma once

#include <cstdint>
#include <nlohmann/json.hpp>
#include <string>
#include <string_view>

#include "core/runtime/printable.h"
#include "core/runtime/status.h"

namespace rcxl::scenarios {

inline constexpr int kMaxJsonDepth = 64;

// Scenarios and profiles are a few KiB; a larger file is a mistake (`run /dev/zero`).
inline constexpr std::uintmax_t kMaxDocumentBytes = std::uintmax_t{16} << 20;

// `origin` names the text in errors ("scenarios/x.json").
Result<nlohmann::json> parse_json_document(const std::string& text, const std::string& origin);

// `text` as an error message may show it (core/runtime/printable.h).
using runtime::printable;
// `key` as one reference token of a JSON pointer (RFC 6901: '~' is "~0", '/'
// is "~1"), then printable: "/a~1b" names the key "a/b", not "b" inside "a".
std::string pointer_token(std::string_view key);

// The text of the regular file at `path`, at most kMaxDocumentBytes: a missing
// file is kNotFound; a directory, FIFO, device or socket (which could block or
// never end), a larger file or an unreadable one is kBadRequest. Each error
// starts with `path`.
Result<std::string> read_document_file(const std::string& path);

}  // namespace rcxl::scenarios
