// Value files of `rcxl-kv`: a store reads a regular file of 1..max_bytes
// bytes, so every value is checked before the NIC opens; a load writes one.
#pragma once

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <csignal>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
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

// "cannot write PATH: WHY", with the likely fix where it is one.
inline Status value_write_error(const std::string& path, int err) {
  // The hint only where it is the likely cause (not for a missing directory).
  const bool space = err == ENOSPC || err == EROFS || err == EDQUOT || err == EIO;
  return Error(ErrorCode::kIoError,
               "cannot write " + path + ": " + std::strerror(err) +
                   (space ? " (is --out on a full or read-only file system?)" : ""));
}

// The temporary file a load is writing, removed if a signal ends the process
// first (a hidden partial file of up to a chunk was left behind).
namespace detail {
inline char interrupted_temp[4096];
inline volatile std::sig_atomic_t temp_in_use = 0;
extern "C" inline void remove_temp_and_die(int sig) {
  if (temp_in_use) ::unlink(interrupted_temp);
  std::signal(sig, SIG_DFL);
  std::raise(sig);
}
}  // namespace detail

// SIGINT, SIGTERM and SIGHUP remove a value file still being written, then
// end the process as the signal would have.
inline void remove_partial_values_on_signals() {
  for (int sig : {SIGINT, SIGTERM, SIGHUP}) std::signal(sig, detail::remove_temp_and_die);
}

// Writes `value` to `fd`; 0 or the errno that stopped it.
inline int write_all(int fd, std::span<const std::byte> value) {
  for (std::size_t done = 0; done < value.size();) {
    const ssize_t n = ::write(fd, value.data() + done, value.size() - done);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return n < 0 ? errno : EIO;
    done += static_cast<std::size_t>(n);
  }
  return 0;
}

// Writes a loaded value to `path`. A regular file (or none) is written to a
// new file of its own beside it (mkstemp: O_EXCL, so no symlink or other
// load's file is written through) and renamed over `path`: a failed or cut
// write never leaves half a value, and a symlink at `path` is replaced, not
// followed. Anything else there (a device, a FIFO) is written in place, its
// close checked: a full disk may show only there. A FIFO nobody reads is
// refused at once, not waited on forever.
inline Status write_value_file(const std::string& path, std::span<const std::byte> value) {
  std::error_code ec;
  const auto st = std::filesystem::symlink_status(path, ec);
  const bool in_place = !ec && std::filesystem::exists(st) &&
                        !std::filesystem::is_regular_file(st) && !std::filesystem::is_symlink(st);
  if (in_place) {
    const int fd = ::open(path.c_str(), O_WRONLY | O_TRUNC | O_NONBLOCK | O_CLOEXEC);
    if (fd < 0) {
      if (errno == ENXIO && std::filesystem::is_fifo(st)) {
        return Error(ErrorCode::kIoError,
                     "cannot write " + path + ": a FIFO with no reader (start its reader first)");
      }
      return value_write_error(path, errno);
    }
    // Opened: a reader is there, so writes may block for it as a pipe's do.
    const int flags = ::fcntl(fd, F_GETFL);
    int err = flags < 0 || ::fcntl(fd, F_SETFL, flags & ~O_NONBLOCK) != 0 ? errno : 0;
    if (err == 0) err = write_all(fd, value);
    if (::close(fd) != 0 && err == 0) err = errno;
    if (err != 0) return value_write_error(path, err);
    return {};
  }
  // A short name: a key's own name may already be NAME_MAX long.
  const auto dir = std::filesystem::path(path).parent_path();
  std::string temp =
      ((dir.empty() ? std::filesystem::path(".") : dir) / ".rcxl-kv-XXXXXX").string();
  const bool watched = temp.size() < sizeof detail::interrupted_temp;
  if (watched) {
    // The name is complete before the handler may read it.
    std::memcpy(detail::interrupted_temp, temp.c_str(), temp.size() + 1);
  }
  const int fd = ::mkstemp(watched ? detail::interrupted_temp : temp.data());
  if (fd < 0) return value_write_error(path, errno);
  if (watched) {
    temp = detail::interrupted_temp;
    detail::temp_in_use = 1;
  }
  struct Unwatch {
    ~Unwatch() { detail::temp_in_use = 0; }
  } unwatch;
  int err = write_all(fd, value);
  // The bytes reach the disk before the name does: ext4 and xfs may commit
  // the rename first, and a power cut then leaves an empty or cut value. The
  // directory is not synced: after a cut the old file or the whole new one.
  if (err == 0 && ::fdatasync(fd) != 0) err = errno;
  if (::close(fd) != 0 && err == 0) err = errno;
  // mkstemp's 0600: a loaded value reads as any file the user writes would.
  if (err == 0) {
    const mode_t mask = ::umask(0);
    ::umask(mask);
    if (::chmod(temp.c_str(), 0666 & ~mask) != 0) err = errno;
  }
  if (err == 0 && std::rename(temp.c_str(), path.c_str()) != 0) err = errno;
  if (err != 0) {
    std::filesystem::remove(temp, ec);
    return value_write_error(path, err);
  }
  return {};
}

// A key that missed: an older value file of it under --out would read as
// this load's value. Only a regular file (or a symlink) goes; true when one did.
inline bool remove_stale_value_file(const std::string& path) {
  std::error_code ec;
  const auto st = std::filesystem::symlink_status(path, ec);
  if (ec || !(std::filesystem::is_regular_file(st) || std::filesystem::is_symlink(st))) {
    return false;
  }
  return std::filesystem::remove(path, ec);
}

}  // namespace rcxl::kv
