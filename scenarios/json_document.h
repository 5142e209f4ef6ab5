// Reads a scenario or profile document (JSON text a user wrote): invalid JSON
// is refused with its line and column, and so are documents nested deeper
// than kMaxJsonDepth (copying one would recurse off the stack) and objects
// that give a key twice (which one would win is not what the user meant).
#pragma once

#include <nlohmann/json.hpp>
#include <string>

#include "core/runtime/status.h"

namespace rcxl::scenarios {

inline constexpr int kMaxJsonDepth = 64;

// `origin` names the text in errors ("scenarios/x.json").
Result<nlohmann::json> parse_json_document(const std::string& text, const std::string& origin);

}  // namespace rcxl::scenarios
