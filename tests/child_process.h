// A binary under test as a child process, its stdout and stderr on pipes:
// the process-level tests of rcxl-agent, rcxl-directory and rcxl-kv share it.
#pragma once

#include <fcntl.h>
#include <gtest/gtest.h>
#include <poll.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <string>
#include <utility>
#include <vector>

namespace rcxl::testing {

class ChildProcess {
 public:
  // argv[0] is the binary's path; execv failure exits 127.
  static ChildProcess Start(const std::vector<std::string>& args) {
    int out_pipe[2];
    int err_pipe[2];
    // Close-on-exec: the child keeps only its ends (dup2 clears the flag), so a
    // pipe whose reader this process closes has none left.
    EXPECT_EQ(pipe2(out_pipe, O_CLOEXEC), 0);
    EXPECT_EQ(pipe2(err_pipe, O_CLOEXEC), 0);
    ChildProcess c;
    c.pid = fork();
    if (c.pid == 0) {
      dup2(out_pipe[1], 1);
      dup2(err_pipe[1], 2);
      // As a shell starts it: the test process may ignore SIGPIPE, and exec keeps that.
      signal(SIGPIPE, SIG_DFL);
      std::vector<char*> argv;
      for (const auto& a : args) argv.push_back(const_cast<char*>(a.c_str()));
      argv.push_back(nullptr);
      execv(argv[0], argv.data());
      _exit(127);
    }
    close(out_pipe[1]);
    close(err_pipe[1]);
    c.out = out_pipe[0];
    c.err = err_pipe[0];
    return c;
  }

  ChildProcess() = default;
  ChildProcess(ChildProcess&& o) noexcept
      : pid(std::exchange(o.pid, -1)),
        out(std::exchange(o.out, -1)),
        err(std::exchange(o.err, -1)) {}
  ChildProcess& operator=(ChildProcess&&) = delete;
  ~ChildProcess() {
    if (pid > 0) {
      kill(pid, SIGKILL);
      waitpid(pid, nullptr, 0);
    }
    if (out >= 0) close(out);
    if (err >= 0) close(err);
  }

  // Reads stdout (or `fd`) until a whole line arrives (or 10 s pass).
  std::string read_line(int fd = -1) {
    std::string line;
    char ch;
    while (line.empty() || line.back() != '\n') {
      pollfd p{fd < 0 ? out : fd, POLLIN, 0};
      if (poll(&p, 1, 10000) <= 0 || read(p.fd, &ch, 1) != 1) break;
      line.push_back(ch);
    }
    return line;
  }
  // Everything left on `fd` (out or err) until the child closes it.
  static std::string read_all(int fd) {
    std::string text;
    char buf[4096];
    ssize_t n;
    while ((n = read(fd, buf, sizeof buf)) > 0) text.append(buf, n);
    return text;
  }
  std::string read_all_err() { return read_all(err); }
  // Exit status (128 + signal when killed), or -1 when it did not exit within `limit`.
  int wait_exit(std::chrono::milliseconds limit) {
    const auto deadline = std::chrono::steady_clock::now() + limit;
    while (std::chrono::steady_clock::now() < deadline) {
      int status = 0;
      if (waitpid(pid, &status, WNOHANG) == pid) {
        pid = -1;
        return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
      }
      usleep(10000);
    }
    return -1;
  }

  pid_t pid = -1;
  int out = -1;
  int err = -1;
};

}  // namespace rcxl::testing
