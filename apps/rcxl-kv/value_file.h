// Reads a value file for `rcxl-kv store`: a regular file of 1..max_bytes bytes,
// so every value is checked before the NIC opens.
#pragma once

#include <cstdint>
#include <string>

#include "apps/small_file.h"
#include "core/runtime/status.h"

namespace rcxl::kv {

// "store KEY: PATH: WHAT" on refusal.
inline Result<std::string> read_value_file(const std::string& key, const std::string& path,
                                           std::uint64_t max_bytes) {
  const std::string where = "store " + key + ": " + path + ": ";
  const std::string wanted = "a value is a regular file of 1.." + std::to_string(max_bytes) +
                             " bytes (raise --chunk-size for larger ones)";
  auto file = apps::read_small_file(path, max_bytes, wanted);
  if (!file.ok()) return Error(ErrorCode::kBadRequest, where + file.status().message());
  if (file->contents.empty())
    return Error(ErrorCode::kBadRequest, where + "holds 0 bytes; " + wanted);
  return std::move(file->contents);
}

}  // namespace rcxl::kv
