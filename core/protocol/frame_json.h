// A frame's (or a small file's) JSON text to a value. nlohmann's lexer takes a
// NUL byte for the end of input and would act on the text before it while never
// looking at the rest; JSON text holds no raw NUL, so one makes it invalid.
#pragma once

#include <cstddef>
#include <nlohmann/json.hpp>
#include <string>
#include <string_view>

namespace rcxl::protocol {

// nlohmann parses and frees without recursion but copies and dumps with one
// call per level: a 300k-deep frame (600 KB, under the frame limit) would
// overflow a thread's stack at the first copy. No message of the contract
// nests past a handful of levels.
inline constexpr std::size_t kMaxJsonDepth = 256;

// Whether arrays and objects nest deeper than `limit` outside strings. Only
// for text that is otherwise checked: a broken string just ends the scan.
inline bool nests_deeper_than(std::string_view text, std::size_t limit) {
  std::size_t depth = 0;
  for (std::size_t i = 0; i < text.size(); ++i) {
    const char c = text[i];
    if (c == '"') {
      for (++i; i < text.size() && text[i] != '"'; ++i) {
        if (text[i] == '\\') ++i;  // the escaped byte cannot end the string
      }
    } else if (c == '[' || c == '{') {
      if (++depth > limit) return true;
    } else if ((c == ']' || c == '}') && depth > 0) {
      --depth;
    }
  }
  return false;
}

// Discarded (is_discarded()) when the text is not one valid JSON value or
// nests deeper than kMaxJsonDepth.
inline nlohmann::json parse_json_text(std::string_view text) {
  if (text.find('\0') != std::string_view::npos) return nlohmann::json::value_t::discarded;
  if (nests_deeper_than(text, kMaxJsonDepth)) return nlohmann::json::value_t::discarded;
  return nlohmann::json::parse(text, nullptr, /*allow_exceptions=*/false);
}

// Why parse_json_text discarded `text`, for a bad_frame's message.
inline std::string why_not_json(std::string_view text) {
  if (nests_deeper_than(text, kMaxJsonDepth)) {
    return "frame nests arrays or objects deeper than " + std::to_string(kMaxJsonDepth) + " levels";
  }
  return "frame is not valid UTF-8 JSON";
}

}  // namespace rcxl::protocol
