// One reference token of a JSON pointer (RFC 6901): '~' is written "~0" and
// '/' is "~1", so "/a~1b" names the key "a/b", not "b" inside "a".
#pragma once

#include <string>
#include <string_view>

namespace rcxl::protocol {

inline std::string json_pointer_token(std::string_view key) {
  std::string escaped;
  escaped.reserve(key.size());
  for (const char c : key) {
    if (c == '~') {
      escaped += "~0";
    } else if (c == '/') {
      escaped += "~1";
    } else {
      escaped += c;
    }
  }
  return escaped;
}

}  // namespace rcxl::protocol
