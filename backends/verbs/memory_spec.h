// `--memory` values (SPEC R7): anon:BYTES | file:PATH:BYTES | dax:PATH, where
// BYTES is a plain integer or takes a K/M/G suffix (powers of 1024).
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

#include "core/runtime/status.h"

namespace rcxl::verbs {

struct MemorySpec {
  enum class Kind { kAnon, kFile, kDax };
  Kind kind = Kind::kAnon;
  std::string path;         // file and dax
  std::uint64_t bytes = 0;  // anon and file; dax takes the device's size
};

// "4096", "64K", "2M", "1G" (also lower case). Zero, junk and overflow are bad_request.
Result<std::uint64_t> parse_byte_size(std::string_view text);

Result<MemorySpec> parse_memory_spec(std::string_view text);

// "1 GiB", "512 KiB", "1000 B": for logs and describe().
std::string format_bytes(std::uint64_t bytes);

}  // namespace rcxl::verbs
