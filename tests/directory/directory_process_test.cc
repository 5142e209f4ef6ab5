// The rcxl-directory binary as a process: --help, flags, TCP with the HMAC
// hello from a secret file, the ops, SIGTERM -> exit 0.
#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <poll.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "core/protocol/auth.h"
#include "tests/agent/tcp_wire.h"

namespace {

using Json = nlohmann::json;
namespace fs = std::filesystem;
using rcxl::testing::Wire;

struct Child {
  pid_t pid = -1;
  int out = -1;
  int err = -1;

  static Child Start(const std::vector<std::string>& args) {
    int out_pipe[2];
    int err_pipe[2];
    EXPECT_EQ(pipe(out_pipe), 0);
    EXPECT_EQ(pipe(err_pipe), 0);
    Child c;
    c.pid = fork();
    if (c.pid == 0) {
      dup2(out_pipe[1], 1);
      dup2(err_pipe[1], 2);
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
  std::string read_line() {
    std::string line;
    char ch;
    while (line.empty() || line.back() != '\n') {
      pollfd p{out, POLLIN, 0};
      if (poll(&p, 1, 10000) <= 0 || read(out, &ch, 1) != 1) break;
      line.push_back(ch);
    }
    return line;
  }
  std::string read_all(int fd) {
    std::string text;
    char buf[4096];
    ssize_t n;
    while ((n = read(fd, buf, sizeof buf)) > 0) text.append(buf, n);
    return text;
  }
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
  ~Child() {
    if (pid > 0) {
      kill(pid, SIGKILL);
      waitpid(pid, nullptr, 0);
    }
    if (out >= 0) close(out);
    if (err >= 0) close(err);
  }
};

TEST(DirectoryProcess, R1_1_HelpNamesTheFlags) {
  Child c = Child::Start({RCXL_DIRECTORY_BINARY, "--help"});
  EXPECT_EQ(c.wait_exit(std::chrono::seconds(5)), 0);
  const std::string help = c.read_all(c.out);
  for (const char* flag : {"--listen", "--auth-secret-file", "--auth", "--max-keys"}) {
    EXPECT_NE(help.find(flag), std::string::npos) << flag;
  }
}

TEST(DirectoryProcess, R1_3_AuthNoneIsRefusedOffLoopbackAndAuthIsRequired) {
  Child open = Child::Start({RCXL_DIRECTORY_BINARY, "--listen", "0.0.0.0:0", "--auth", "none"});
  EXPECT_NE(open.wait_exit(std::chrono::seconds(5)), 0);
  EXPECT_NE(open.read_all(open.err).find("loopback"), std::string::npos);
  Child none = Child::Start({RCXL_DIRECTORY_BINARY, "--listen", "127.0.0.1:0"});
  EXPECT_NE(none.wait_exit(std::chrono::seconds(5)), 0);
}

TEST(DirectoryProcess, R1_1_ServesTheOpsOverTcpAndExitsOnSigterm) {
  char tmpl[] = "/tmp/rcxl-directory-test-XXXXXX";
  const fs::path dir(mkdtemp(tmpl));
  std::ofstream(dir / "secret") << "dir-secret\n";
  Child d = Child::Start({RCXL_DIRECTORY_BINARY, "--listen", "127.0.0.1:0", "--auth-secret-file",
                          (dir / "secret").string(), "--log-level", "warn"});
  const std::string line = d.read_line();
  const auto at = line.find("127.0.0.1:");
  ASSERT_NE(at, std::string::npos) << line;
  Wire wire(std::atoi(line.c_str() + at + 10));
  ASSERT_TRUE(wire.connected());
  Json greeting = wire.next();
  ASSERT_EQ(greeting["op"], "greeting");
  Json hello = wire.call({{"op", "hello"},
                          {"id", 1},
                          {"version", 1},
                          {"auth", rcxl::protocol::hmac_sha256_hex(
                                       "dir-secret", greeting["challenge"].get<std::string>())}});
  ASSERT_EQ(hello["ok"], true) << hello.dump();
  const Json location = {{"agent", "10.0.0.1:7000"}, {"boot", "b"}, {"region", 1},
                         {"read_handle", "ab"},      {"offset", 0}, {"length", 4096}};
  Json reg = wire.call(
      {{"op", "register"}, {"id", 2}, {"entries", {{{"key", "k"}, {"location", location}}}}});
  EXPECT_EQ(reg["registered"], Json::array({true})) << reg.dump();
  Json look = wire.call({{"op", "lookup"}, {"id", 3}, {"keys", {"k", "nope"}}});
  ASSERT_EQ(look["locations"].size(), 1u) << look.dump();
  EXPECT_EQ(look["locations"][0], location);
  Json rel = wire.call({{"op", "release"}, {"id", 4}, {"lease", look["lease"]}});
  EXPECT_EQ(rel["ok"], true);
  kill(d.pid, SIGTERM);
  EXPECT_EQ(d.wait_exit(std::chrono::seconds(5)), 0);
  fs::remove_all(dir);
}

}  // namespace
