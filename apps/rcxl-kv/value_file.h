// Value files of `rcxl-kv`: a store reads a regular file of 1..max_bytes
// bytes, so every value is checked before the NIC opens; a load writes one.
#pragma once

#include <cerrno>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <filesystem>
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
// the stream's buffer until then, so a full disk shows only there. A regular
// file (or none) is written aside and renamed over `path`: a failed or cut
// write never leaves half a value, and a symlink there is replaced, not
// followed. Anything else (a device, a FIFO) is written in place.
inline Status write_value_file(const std::string& path, std::span<const std::byte> value) {
  std::error_code ec;
  const auto st = std::filesystem::symlink_status(path, ec);
  const bool in_place = !ec && std::filesystem::exists(st) &&
                        !std::filesystem::is_regular_file(st) && !std::filesystem::is_symlink(st);
  const std::string target = in_place ? path : path + ".rcxl-kv-partial";
  errno = 0;
  std::ofstream out(target, std::ios::binary | std::ios::trunc);
  if (out) {
    out.write(reinterpret_cast<const char*>(value.data()),
              static_cast<std::streamsize>(value.size()));
    out.close();
  }
  int err = out ? 0 : (errno ? errno : EIO);
  if (!out && !in_place) std::filesystem::remove(target, ec);
  if (out && !in_place && std::rename(target.c_str(), path.c_str()) != 0) {
    err = errno;
    std::filesystem::remove(target, ec);
  }
  if (err != 0) {
    // The hint only where it is the likely cause (not for a missing directory).
    const bool space = err == ENOSPC || err == EROFS || err == EDQUOT || err == EIO;
    return Error(ErrorCode::kIoError, "cannot write " + path + ": " + std::strerror(err) +
                                          (space ? " (is --out on a full or read-only file "
                                                   "system?)"
                                                 : ""));
  }
  return {};
}

// A key that missed: an older file of it under --out would read as this
// load's value. True when one was removed.
inline bool remove_stale_value_file(const std::string& path) {
  std::error_code ec;
  return std::filesystem::remove(path, ec);
}

}  // namespace rcxl::kv
