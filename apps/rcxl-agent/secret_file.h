// Reads --auth-secret-file: a regular file of at most kMaxSecretFileBytes
// (a FIFO would block and /dev/zero never ends), and says when other users
// may read it.
#pragma once

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <string>

#include "core/runtime/status.h"

namespace rcxl::apps::agent {

// A shared secret is a line of text; 4 KiB is far more than any key needs.
inline constexpr std::uint64_t kMaxSecretFileBytes = 4096;

struct SecretFile {
  std::string contents;
  std::string warning;  // empty, or why the file's mode is unsafe (read anyway)
};

namespace detail {

// "--auth-secret-file: PATH: WHAT".
inline Status secret_error(const std::string& path, const std::string& what) {
  return Error(ErrorCode::kBadRequest, "--auth-secret-file: " + path + ": " + what);
}

// Closes the fd however the read ends.
struct SecretFd {
  int fd;
  ~SecretFd() {
    if (fd >= 0) close(fd);
  }
};

}  // namespace detail

inline Result<SecretFile> read_secret_file(const std::string& path) {
  // O_NONBLOCK: opening a FIFO must not wait for a writer; fstat then refuses it.
  detail::SecretFd file{open(path.c_str(), O_RDONLY | O_NONBLOCK | O_CLOEXEC | O_NOCTTY)};
  if (file.fd < 0) return detail::secret_error(path, std::strerror(errno));
  struct stat st {};
  if (fstat(file.fd, &st) != 0) {
    return detail::secret_error(path, std::strerror(errno));
  }
  const std::string wanted =
      "give a regular file of at most " + std::to_string(kMaxSecretFileBytes) + " bytes";
  if (!S_ISREG(st.st_mode)) return detail::secret_error(path, "not a regular file; " + wanted);
  if (static_cast<std::uint64_t>(st.st_size) > kMaxSecretFileBytes) {
    return detail::secret_error(path, "holds " + std::to_string(st.st_size) + " bytes; " + wanted);
  }
  SecretFile secret;
  char buffer[kMaxSecretFileBytes + 1];
  for (;;) {
    const ssize_t n = read(file.fd, buffer, sizeof(buffer));
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) return detail::secret_error(path, std::strerror(errno));
    if (n == 0) break;
    secret.contents.append(buffer, static_cast<std::size_t>(n));
    if (secret.contents.size() > kMaxSecretFileBytes) {
      return detail::secret_error(path, "grew while being read; " + wanted);
    }
  }
  if (st.st_mode & S_IROTH) {
    char mode[8];
    std::snprintf(mode, sizeof(mode), "%04o", static_cast<unsigned>(st.st_mode & 07777));
    secret.warning = "--auth-secret-file: " + path + " (mode " + mode +
                     ") is readable by every user; chmod 600 it";
  }
  return secret;
}

}  // namespace rcxl::apps::agent
