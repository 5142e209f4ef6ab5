// Reads a file a binary takes as input that must be a small regular file: a
// FIFO would block, /dev/zero never ends, and a huge file would be read whole
// only to be refused. Messages say what is wrong; callers prefix the flag.
#pragma once

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdint>
#include <cstring>
#include <string>

#include "core/runtime/status.h"

namespace rcxl::apps {

struct SmallFile {
  std::string contents;
  mode_t mode = 0;  // st_mode, for permission warnings
};

namespace detail {

// Closes the fd however the read ends.
struct ClosingFd {
  int fd;
  ~ClosingFd() {
    if (fd >= 0) close(fd);
  }
};

}  // namespace detail

// `wanted` ends the messages of a file of the wrong kind or size ("give a
// regular file of at most 4096 bytes").
inline Result<SmallFile> read_small_file(const std::string& path, std::uint64_t max_bytes,
                                         const std::string& wanted) {
  auto refuse = [](const std::string& what) { return Error(ErrorCode::kBadRequest, what); };
  // O_NONBLOCK: opening a FIFO must not wait for a writer; fstat then refuses it.
  detail::ClosingFd file{open(path.c_str(), O_RDONLY | O_NONBLOCK | O_CLOEXEC | O_NOCTTY)};
  if (file.fd < 0) return refuse(std::strerror(errno));
  struct stat st {};
  if (fstat(file.fd, &st) != 0) return refuse(std::strerror(errno));
  if (!S_ISREG(st.st_mode)) return refuse("not a regular file; " + wanted);
  const auto size = static_cast<std::uint64_t>(st.st_size);
  if (size > max_bytes) return refuse("holds " + std::to_string(size) + " bytes; " + wanted);
  SmallFile out;
  out.mode = st.st_mode;
  out.contents.resize(size + 1);  // one spare byte tells a file that grew
  std::uint64_t have = 0;
  while (have < out.contents.size()) {
    const ssize_t n = read(file.fd, out.contents.data() + have, out.contents.size() - have);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) return refuse(std::strerror(errno));
    if (n == 0) break;
    have += static_cast<std::uint64_t>(n);
  }
  if (have != size) return refuse("changed size while being read; " + wanted);
  out.contents.resize(size);
  return out;
}

}  // namespace rcxl::apps
