// A frame's (or a small file's) JSON text to a value. nlohmann's lexer takes a
// NUL byte for the end of input and would act on the text before it while never
// looking at the rest; JSON text holds no raw NUL, so one makes it invalid.
#pragma once

#include <nlohmann/json.hpp>
#include <string_view>

namespace rcxl::protocol {

// Discarded (is_discarded()) when the text is not one valid JSON value.
inline nlohmann::json parse_json_text(std::string_view text) {
  if (text.find('\0') != std::string_view::npos) return nlohmann::json::value_t::discarded;
  return nlohmann::json::parse(text, nullptr, /*allow_exceptions=*/false);
}

}  // namespace rcxl::protocol
