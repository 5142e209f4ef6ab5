// Value files of `rcxl-kv`: a store reads a regular file of 1..max_bytes
// bytes, so every value is checked before the NIC opens; a load writes one.
#pragma once

#include <cerrno>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <fstream>
#include <span>
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

// Writes a loaded value to `path`. The close is checked: a small value sits in
// the stream's buffer until then, so a full disk shows only there.
inline Status write_value_file(const std::string& path, std::span<const std::byte> value) {
  errno = 0;
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  if (out) {
    out.write(reinterpret_cast<const char*>(value.data()),
              static_cast<std::streamsize>(value.size()));
    out.close();
  }
  if (!out) {
    const int err = errno;
    // The hint only where it is the likely cause (not for a missing directory).
    const bool space = err == ENOSPC || err == EROFS || err == EDQUOT || err == EIO;
    return Error(ErrorCode::kIoError,
                 "cannot write " + path + ": " + (err ? std::strerror(err) : "the write failed") +
                     (space ? " (is --out on a full or read-only file system?)" : ""));
  }
  return {};
}

}  // namespace rcxl::kv
