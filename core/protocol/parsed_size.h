// An upper bound of the memory a JSON text holds once parsed into an
// nlohmann::json tree. Padding makes a tree far larger than its text (a frame
// of `[{},{},...]` parses to ~27 times its size), so a queue of parsed
// requests is bounded by this, not by the frames' bytes.
#pragma once

#include <cstddef>
#include <string_view>

namespace rcxl::protocol {

// Per `{`, `[`, `,` or `:` (each starts or adds at most one value or member):
// above the most measured per token, ~110 bytes for an array of 16385 short
// strings, whose vector just doubled (glibc usable sizes; parsed_size_test
// checks the shapes).
inline constexpr std::size_t kParsedBytesPerToken = 128;

inline std::size_t parsed_size_bound(std::string_view text) {
  std::size_t tokens = 1;  // the top-level value
  for (const char c : text) tokens += (c == '{') | (c == '[') | (c == ',') | (c == ':');
  return text.size() + tokens * kParsedBytesPerToken;
}

}  // namespace rcxl::protocol
