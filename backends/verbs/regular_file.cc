#include "backends/verbs/regular_file.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstddef>

namespace rcxl::verbs {
namespace {

// Closes the fd however the read ends.
struct ClosingFd {
  int fd;
  ~ClosingFd() {
    if (fd >= 0) ::close(fd);
  }
};

}  // namespace

RegularFileRead read_regular_file(const std::string& path, std::uint64_t max_bytes) {
  using Problem = RegularFileRead::Problem;
  RegularFileRead out;
  auto fail = [&out](Problem problem, int error = 0) {
    out.problem = problem;
    out.error = error;
    out.contents.clear();
    return std::move(out);
  };
  // What the path names, before opening it: opening a device may act (a tape
  // rewinds, a watchdog arms), a socket cannot be opened at all.
  struct stat st {};
  if (::stat(path.c_str(), &st) != 0) {
    const int error = errno;
    // ENOTDIR: a part of the path is a file, so no such file either.
    if (error == ENOENT || error == ENOTDIR) return fail(Problem::kNotFound, error);
    return fail(Problem::kSystem, error);
  }
  if (S_ISDIR(st.st_mode)) return fail(Problem::kDirectory);
  if (!S_ISREG(st.st_mode)) return fail(Problem::kNotRegular);
  // O_NONBLOCK: should it have become a FIFO since, opening must not wait for
  // a writer; fstat then refuses it.
  ClosingFd file{::open(path.c_str(), O_RDONLY | O_NONBLOCK | O_NOCTTY | O_CLOEXEC)};
  if (file.fd < 0) {
    const int error = errno;
    if (error == ENOENT || error == ENOTDIR) return fail(Problem::kNotFound, error);
    return fail(Problem::kSystem, error);
  }
  if (::fstat(file.fd, &st) != 0) return fail(Problem::kSystem, errno);
  out.mode = static_cast<unsigned>(st.st_mode);
  out.size = static_cast<std::uint64_t>(st.st_size);
  if (S_ISDIR(st.st_mode)) return fail(Problem::kDirectory);
  if (!S_ISREG(st.st_mode)) return fail(Problem::kNotRegular);
  if (out.size > max_bytes) return fail(Problem::kTooLarge);
  // Read to the end, one byte past the limit at most (a /proc file says size 0,
  // and any file may grow meanwhile).
  char buffer[64 * 1024];
  for (;;) {
    const std::uint64_t room = max_bytes - out.contents.size();
    const std::size_t want =
        room < sizeof buffer ? static_cast<std::size_t>(room) + 1 : sizeof buffer;
    const ssize_t n = ::read(file.fd, buffer, want);
    if (n == 0) break;
    if (n < 0) {
      if (errno == EINTR) continue;
      return fail(Problem::kSystem, errno);
    }
    out.contents.append(buffer, static_cast<std::size_t>(n));
    if (out.contents.size() > max_bytes) {
      out.grew = true;  // stat said it fit
      return fail(Problem::kTooLarge);
    }
  }
  return out;
}

}  // namespace rcxl::verbs
