#include "backends/verbs/posix_file_system.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <string>

#include "backends/verbs/regular_file.h"

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

// The largest file read whole: a state file of a million regions is ~200 MB.
constexpr std::uint64_t kMaxReadBytes = 1ull << 30;

}  // namespace

Result<std::string> PosixFileSystem::read_file(const std::string& path) {
  using Problem = RegularFileRead::Problem;
  RegularFileRead file = read_regular_file(path, kMaxReadBytes);
  switch (file.problem) {
    case Problem::kNone:
      return std::move(file.contents);
    case Problem::kNotFound:
      return Error(ErrorCode::kNotFound, "no such file: " + path);
    case Problem::kDirectory:
    case Problem::kNotRegular:
      // A FIFO would block, /dev/zero never ends, a directory cannot be read.
      return Error(ErrorCode::kIoError, "cannot read " + path + ": not a regular file");
    case Problem::kTooLarge:
      if (file.grew)
        return Error(ErrorCode::kIoError, "cannot read " + path + ": it grew past 1 GiB");
      return Error(ErrorCode::kIoError, "cannot read " + path + ": it holds " +
                                            std::to_string(file.size) +
                                            " bytes, more than the 1 GiB a file read takes");
    case Problem::kSystem:
      break;
  }
  return io_error("cannot read", path, file.error);
}

Status PosixFileSystem::append_file(const std::string& path, std::string_view data) {
  // O_NONBLOCK: opening a FIFO must not wait for a reader (an agent whose
  // extension log was one hung at start, deaf to SIGTERM; session 30 review).
  const int fd =
      ::open(path.c_str(), O_WRONLY | O_APPEND | O_CREAT | O_NONBLOCK | O_NOCTTY | O_CLOEXEC, 0644);
  const auto not_regular = [&path] {
    return Error(ErrorCode::kIoError, "cannot append to " + path +
                                          ": not a regular file (a FIFO, device or socket); "
                                          "name a regular file");
  };
  // ENXIO: a FIFO nobody reads (O_NONBLOCK), or a device with nothing behind it.
  if (fd < 0 && errno == ENXIO) return not_regular();
  if (fd < 0) return io_error("cannot open", path, errno);
  struct stat st {};
  if (::fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
    ::close(fd);
    return not_regular();
  }
  const int error = write_all(fd, data);
  // All or nothing: part of a line left by a full disk would join the next
  // line into one no reader can parse. One writer per file is assumed (the
  // extension's log): a copytruncate rotation in between would be undone.
  if (error != 0) (void)!::ftruncate(fd, st.st_size);
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
  // The rename is durable only once its directory is, else a power cut may bring
  // the old file back. Best effort: the new file is in place and read by now, so
  // failing the caller would undo in memory what every reader of the file now sees.
  const std::string directory = std::filesystem::path(path).parent_path().string();
  const int dir_fd =
      ::open(directory.empty() ? "." : directory.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (dir_fd >= 0) {
    static_cast<void>(::fsync(dir_fd));
    ::close(dir_fd);
  }
  return {};
}

}  // namespace rcxl::verbs
