// Fields of a peer's reply, read without trusting their types. A reply is input
// too (SPEC R1.2: bad input never crashes): nlohmann's value() and get() throw on
// a field of another type, so replies are read only through these.
#pragma once

#include <cstdint>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>

namespace rcxl::protocol {

// The string at `key`, if `j` is an object holding one there.
inline std::optional<std::string> string_field(const nlohmann::json& j, const char* key) {
  if (!j.is_object()) return std::nullopt;
  auto it = j.find(key);
  if (it == j.end() || !it->is_string()) return std::nullopt;
  return it->get<std::string>();
}

// The unsigned integer at `key` (a negative or fractional number is none).
inline std::optional<std::uint64_t> u64_field(const nlohmann::json& j, const char* key) {
  if (!j.is_object()) return std::nullopt;
  auto it = j.find(key);
  if (it == j.end() || !it->is_number_unsigned()) return std::nullopt;
  return it->get<std::uint64_t>();
}

inline std::optional<bool> bool_field(const nlohmann::json& j, const char* key) {
  if (!j.is_object()) return std::nullopt;
  auto it = j.find(key);
  if (it == j.end() || !it->is_boolean()) return std::nullopt;
  return it->get<bool>();
}

}  // namespace rcxl::protocol
