// One argument as a shell reads it back (a POSIX shell, or bash for the
// $'...' form): "reproduce:" lines name paths and values a user pastes into
// a shell, spaces and semicolons included.
#pragma once

#include <string>
#include <string_view>

namespace rcxl::scenarios {

// `text` unchanged when it holds only characters no shell treats specially,
// else in single quotes (a ' inside becomes '\''). A control character
// (a newline in a path) would break the line: such a word is $'...' with
// \xHH escapes (bash, zsh, ksh; POSIX sh has no one-line form for it).
inline std::string shell_word(std::string_view text) {
  auto plain = [](char c) {
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
           std::string_view("_-./:=@%+,").find(c) != std::string_view::npos;
  };
  auto control = [](char c) {
    return static_cast<unsigned char>(c) < 0x20 || static_cast<unsigned char>(c) == 0x7f;
  };
  bool quote = text.empty();
  bool escape = false;
  for (char c : text) {
    quote = quote || !plain(c);
    escape = escape || control(c);
  }
  if (!quote) return std::string(text);
  if (escape) {
    static constexpr char kHex[] = "0123456789abcdef";
    std::string out = "$'";
    for (char c : text) {
      const auto byte = static_cast<unsigned char>(c);
      if (control(c)) {
        out += "\\x";
        out += kHex[byte >> 4];
        out += kHex[byte & 0xf];
      } else if (c == '\'' || c == '\\') {
        out += '\\';
        out += c;
      } else {
        out += c;
      }
    }
    return out + "'";
  }
  std::string out = "'";
  for (char c : text) {
    if (c == '\'') {
      out += "'\\''";
    } else {
      out += c;
    }
  }
  return out + "'";
}

// A path as a shell word that no argument parser takes for an option: a
// relative path that starts with '-' gets "./" in front (the same file).
inline std::string shell_path(std::string_view path) {
  if (path.starts_with('-')) return shell_word("./" + std::string(path));
  return shell_word(path);
}

}  // namespace rcxl::scenarios
