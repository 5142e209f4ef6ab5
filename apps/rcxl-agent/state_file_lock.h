// One agent per --state-file: the table is replaced by rename, so the lock is
// on a companion file, PATH.lock, held (flock) for the process's life. A
// second agent naming the same state file would otherwise rewrite the first
// one's table (a created pool empties it) and lose its regions for good.
// PATH.lock is never removed: a process that opened it just before another
// removed it would lock a file no longer there, beside one that is.
#pragma once

#include <fcntl.h>
#include <sys/file.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <string>
#include <utility>

#include "core/runtime/printable.h"
#include "core/runtime/status.h"

namespace rcxl::apps::agent {

class StateFileLock {
 public:
  StateFileLock() = default;
  StateFileLock(StateFileLock&& other) noexcept
      : path_(std::move(other.path_)), fd_(std::exchange(other.fd_, -1)) {}
  StateFileLock& operator=(StateFileLock&&) = delete;
  ~StateFileLock() {
    if (fd_ >= 0) ::close(fd_);
  }

  static Result<StateFileLock> take(const std::string& state_file) {
    StateFileLock lock;
    lock.path_ = state_file + ".lock";
    lock.fd_ = ::open(lock.path_.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0600);
    if (lock.fd_ < 0) {
      return Error(ErrorCode::kIoError, "--state-file: cannot open its lock " +
                                            runtime::printable(lock.path_, 2000) + ": " +
                                            std::strerror(errno));
    }
    if (::flock(lock.fd_, LOCK_EX | LOCK_NB) != 0) {
      const int err = errno;
      ::close(std::exchange(lock.fd_, -1));  // not ours: left in place
      if (err == EWOULDBLOCK) {
        return Error(ErrorCode::kBadRequest, "--state-file " +
                                                 runtime::printable(state_file, 2000) +
                                                 " is in use by another rcxl-agent (it holds " +
                                                 runtime::printable(lock.path_, 2000) +
                                                 "); give each agent its own state file");
      }
      return Error(ErrorCode::kIoError, "--state-file: cannot lock " +
                                            runtime::printable(lock.path_, 2000) + ": " +
                                            std::strerror(err));
    }
    return lock;
  }

 private:
  std::string path_;
  int fd_ = -1;
};

}  // namespace rcxl::apps::agent
