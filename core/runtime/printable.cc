#include "core/runtime/printable.h"

#include <algorithm>
#include <cstdio>

namespace rcxl::runtime {
namespace {

// The length of the well-formed UTF-8 sequence at text[i] (RFC 3629: no
// overlong forms, no surrogates, nothing past U+10FFFF), or 0.
std::size_t utf8_sequence_at(std::string_view text, std::size_t i) {
  const auto byte = [&](std::size_t k) { return static_cast<unsigned char>(text[k]); };
  const unsigned char lead = byte(i);
  std::size_t length = 0;
  unsigned char low = 0x80;  // the second byte's range
  unsigned char high = 0xbf;
  if (lead >= 0xc2 && lead <= 0xdf) {
    length = 2;
  } else if (lead >= 0xe0 && lead <= 0xef) {
    length = 3;
    if (lead == 0xe0) low = 0xa0;
    if (lead == 0xed) high = 0x9f;
  } else if (lead >= 0xf0 && lead <= 0xf4) {
    length = 4;
    if (lead == 0xf0) low = 0x90;
    if (lead == 0xf4) high = 0x8f;
  } else {
    return 0;
  }
  if (i + length > text.size() || byte(i + 1) < low || byte(i + 1) > high) return 0;
  for (std::size_t k = 2; k < length; ++k) {
    if ((byte(i + k) & 0xc0) != 0x80) return 0;
  }
  return length;
}

}  // namespace

std::string printable(std::string_view text, std::size_t max_chars) {
  std::size_t cut = std::min(text.size(), max_chars);
  // Never cut a UTF-8 sequence in two.
  while (cut > 0 && cut < text.size() && (static_cast<unsigned char>(text[cut]) & 0xc0) == 0x80) {
    --cut;
  }
  const std::string_view shown = text.substr(0, cut);
  std::string out;
  const auto hex_byte = [&out](const char* format, unsigned char c) {
    char hex[8];
    std::snprintf(hex, sizeof hex, format, c);
    out += hex;
  };
  for (std::size_t i = 0; i < shown.size(); ++i) {
    const auto c = static_cast<unsigned char>(shown[i]);
    if (c == '\n') {
      out += "\\n";
    } else if (c == '\t') {
      out += "\\t";
    } else if (c < 0x20 || c == 0x7f) {
      hex_byte("\\x%02x", c);
    } else if (c < 0x80) {
      out += static_cast<char>(c);
    } else if (const std::size_t n = utf8_sequence_at(shown, i); n == 0) {
      // Not UTF-8 (e.g. 0x9b, which an 8-bit terminal takes for CSI): shown as a byte.
      hex_byte("\\x%02x", c);
    } else if (c == 0xc2 && static_cast<unsigned char>(shown[i + 1]) <= 0x9f) {
      // A C1 control (U+0080..U+009F, e.g. NEL): terminals act on it too.
      hex_byte("\\u%04x", static_cast<unsigned char>(shown[++i]));
    } else {
      out.append(shown.substr(i, n));
      i += n - 1;
    }
  }
  if (cut < text.size()) out += "... (" + std::to_string(text.size()) + " characters)";
  return out;
}

}  // namespace rcxl::runtime
