#include "backends/verbs/posix_file_system.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>

namespace rcxl::verbs {
namespace {

Status io_error(const std::string& what, const std::string& path, int error) {
  return Error(ErrorCode::kIoError, what + " " + path + ": " + std::strerror(error));
}

// Writes all of `data`, retrying short writes and EINTR; errno on failure.
int write_all(int fd, std::string_view data) {
  while (!data.empty()) {
    const ssize_t n = ::write(fd, data.data(), data.size());
    if (n < 0) {
      if (errno == EINTR) continue;
      return errno;
    }
    data.remove_prefix(static_cast<std::size_t>(n));
  }
  return 0;
}

}  // namespace

Result<std::string> PosixFileSystem::read_file(const std::string& path) {
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) {
    if (errno == ENOENT) return Error(ErrorCode::kNotFound, "no such file: " + path);
    return io_error("cannot open", path, errno);
  }
  std::string contents;
  char buffer[64 * 1024];
  for (;;) {
    const ssize_t n = ::read(fd, buffer, sizeof buffer);
    if (n == 0) break;
    if (n < 0) {
      if (errno == EINTR) continue;
      const int error = errno;
      ::close(fd);
      return io_error("cannot read", path, error);  // e.g. EISDIR
    }
    contents.append(buffer, static_cast<std::size_t>(n));
  }
  ::close(fd);
  return contents;
}

Status PosixFileSystem::append_file(const std::string& path, std::string_view data) {
  const int fd = ::open(path.c_str(), O_WRONLY | O_APPEND | O_CREAT | O_CLOEXEC, 0644);
  if (fd < 0) return io_error("cannot open", path, errno);
  const int error = write_all(fd, data);
  ::close(fd);
  if (error != 0) return io_error("cannot append to", path, error);
  return {};
}

Status PosixFileSystem::write_file(const std::string& path, std::string_view data) {
  const std::string temporary = path + ".tmp";
  // 0600: the agent's state file holds every region's handles (capabilities).
  const int fd = ::open(temporary.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
  if (fd < 0) return io_error("cannot create", temporary, errno);
  // O_CREAT keeps the mode of a temporary left behind (older build, crash).
  int error = ::fchmod(fd, 0600) == 0 ? 0 : errno;
  if (error == 0) error = write_all(fd, data);
  // On disk before the rename: a power cut must leave the old file or the new, not an empty one.
  if (error == 0 && ::fdatasync(fd) != 0) error = errno;
  ::close(fd);
  if (error != 0) {
    ::unlink(temporary.c_str());
    return io_error("cannot write", temporary, error);
  }
  if (std::rename(temporary.c_str(), path.c_str()) != 0) {
    const int rename_error = errno;
    ::unlink(temporary.c_str());
    return io_error("cannot replace", path, rename_error);
  }
  return {};
}

}  // namespace rcxl::verbs
