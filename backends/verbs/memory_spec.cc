#include "backends/verbs/memory_spec.h"

#include <limits>

namespace rcxl::verbs {

namespace {

Status bad(std::string_view text, std::string_view why) {
  return Error(ErrorCode::kBadRequest,
               "bad memory spec '" + std::string(text) + "': " + std::string(why));
}

// A byte size stands alone (--chunk-size) or inside a spec, which names it.
Status bad_size(std::string_view text, std::string_view why) {
  return Error(ErrorCode::kBadRequest, "bad size '" + std::string(text) + "': " + std::string(why));
}

unsigned suffix_shift(char c) {
  switch (c) {
    case 'K':
    case 'k':
      return 10;
    case 'M':
    case 'm':
      return 20;
    case 'G':
    case 'g':
      return 30;
    case 'T':  // as the simulator's sizes take it
    case 't':
      return 40;
    default:
      return 0;
  }
}

}  // namespace

Result<std::uint64_t> parse_byte_size(std::string_view text) {
  if (text.empty()) return bad_size(text, "size is empty");
  std::string_view digits = text;
  unsigned shift = suffix_shift(text.back());
  if (shift) digits.remove_suffix(1);
  if (digits.empty()) return bad_size(text, "size has no digits");
  std::uint64_t value = 0;
  for (char c : digits) {
    if (c < '0' || c > '9') {
      return bad_size(text, "size must be an integer with an optional K, M, G or T suffix");
    }
    const std::uint64_t digit = static_cast<std::uint64_t>(c - '0');
    if (value > (std::numeric_limits<std::uint64_t>::max() - digit) / 10) {
      return bad_size(text, "size overflows 64 bits");
    }
    value = value * 10 + digit;
  }
  if (value > (std::numeric_limits<std::uint64_t>::max() >> shift)) {
    return bad_size(text, "size overflows 64 bits");
  }
  value <<= shift;
  if (value == 0) return bad_size(text, "size must be greater than zero");
  return value;
}

Result<MemorySpec> parse_memory_spec(std::string_view text) {
  const auto colon = text.find(':');
  if (colon == std::string_view::npos) {
    return bad(text, "expected anon:BYTES, file:PATH:BYTES or dax:PATH");
  }
  const std::string_view kind = text.substr(0, colon);
  const std::string_view rest = text.substr(colon + 1);
  MemorySpec spec;
  if (kind == "anon") {
    auto bytes = parse_byte_size(rest);
    if (!bytes) return bad(text, bytes.status().message());
    spec.kind = MemorySpec::Kind::kAnon;
    spec.bytes = *bytes;
  } else if (kind == "file") {
    // The size follows the last colon, so paths may contain colons.
    const auto last = rest.rfind(':');
    if (last == std::string_view::npos) return bad(text, "expected file:PATH:BYTES");
    if (last == 0) return bad(text, "file path is empty");
    auto bytes = parse_byte_size(rest.substr(last + 1));
    if (!bytes) return bad(text, bytes.status().message());
    spec.kind = MemorySpec::Kind::kFile;
    spec.path = std::string(rest.substr(0, last));
    spec.bytes = *bytes;
  } else if (kind == "dax") {
    if (rest.empty()) return bad(text, "dax path is empty");
    spec.kind = MemorySpec::Kind::kDax;
    spec.path = std::string(rest);
  } else {
    return bad(text, "unknown kind '" + std::string(kind) + "' (anon, file or dax)");
  }
  return spec;
}

std::string format_bytes(std::uint64_t bytes) {
  static constexpr const char* kUnits[] = {"B", "KiB", "MiB", "GiB", "TiB"};
  unsigned unit = 0;
  while (unit < 4 && bytes >= 1024 && bytes % 1024 == 0) {
    bytes /= 1024;
    ++unit;
  }
  return std::to_string(bytes) + " " + kUnits[unit];
}

}  // namespace rcxl::verbs
