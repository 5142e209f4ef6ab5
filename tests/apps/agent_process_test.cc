// The rcxl-agent binary as a process (SPEC R7, R2.1, R2.5, PROTOCOL.md
// "Process"): flags, TCP, auth from a secret file, the recording extension's
// log, SIGTERM -> exit 0, a bad extension -> exit non-zero with a message.
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
#include <sstream>
#include <string>
#include <vector>

#include "core/protocol/auth.h"
#include "core/protocol/frame_codec.h"
#include "tests/agent/tcp_wire.h"

namespace {

using Json = nlohmann::json;
namespace fs = std::filesystem;
using rcxl::testing::Wire;

// A child process with its stdout and stderr on pipes.
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
  // Reads stdout until a whole line arrives (or 10 s pass).
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
  std::string read_all_err() {
    std::string text;
    char buf[4096];
    ssize_t n;
    while ((n = read(err, buf, sizeof buf)) > 0) text.append(buf, n);
    return text;
  }
  // Exit status, or -1 when it did not exit within `limit`.
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

fs::path scratch_dir() {
  char tmpl[] = "/tmp/rcxl-agent-test-XXXXXX";
  return fs::path(mkdtemp(tmpl));
}

std::vector<Json> read_log(const fs::path& path) {
  std::vector<Json> lines;
  std::ifstream in(path);
  std::string line;
  while (std::getline(in, line)) lines.push_back(Json::parse(line));
  return lines;
}

TEST(AgentProcess, R7_ServesTheProtocolOverTcpAndExitsCleanlyOnSigterm) {
  const fs::path dir = scratch_dir();
  std::ofstream(dir / "secret") << "process-secret\n";
  const Json ext_config = {{"log", (dir / "log").string()},
                           {"actions", {"read_hint", "read_hint_end"}}};
  Child agent = Child::Start({RCXL_AGENT_BINARY, "--listen", "127.0.0.1:0", "--auth-secret-file",
                              (dir / "secret").string(), "--memory", "anon:16M", "--nic", "none",
                              "--region-extension", "recording", "--region-extension-config",
                              ext_config.dump(), "--boot-id", "test-boot", "--log-level", "warn"});
  const std::string line = agent.read_line();
  const auto colon = line.find("127.0.0.1:");
  ASSERT_NE(colon, std::string::npos) << line << agent.read_all_err();
  const int port = std::atoi(line.c_str() + colon + 10);

  Wire wire(port);
  ASSERT_TRUE(wire.connected());
  Json greeting = wire.next();
  ASSERT_EQ(greeting["op"], "greeting");
  Json hello =
      wire.call({{"op", "hello"},
                 {"id", 1},
                 {"version", 1},
                 {"auth", rcxl::protocol::hmac_sha256_hex(
                              "process-secret", greeting["challenge"].get<std::string>())}});
  ASSERT_EQ(hello["ok"], true) << hello.dump();
  EXPECT_EQ(hello["boot"], "test-boot");
  EXPECT_EQ(hello["region_extension"]["actions"], Json::array({"read_hint", "read_hint_end"}));
  const auto conn = hello["conn"].get<std::uint64_t>();

  Json alloc = wire.call({{"op", "alloc"}, {"id", 2}, {"size", 1 << 20}});
  ASSERT_EQ(alloc["ok"], true) << alloc.dump();
  const auto region = alloc["region"].get<std::uint64_t>();
  Json map = wire.call({{"op", "map"},
                        {"id", 3},
                        {"region", region},
                        {"handle", alloc["handle"]},
                        {"epoch", "test-boot"},
                        {"fresh", true}});
  ASSERT_EQ(map["ok"], true) << map.dump();
  EXPECT_EQ(map["rkey"], 0);  // --nic none
  Json hint = wire.call({{"op", "extension"},
                         {"id", 4},
                         {"action", "read_hint"},
                         {"epoch", "test-boot"},
                         {"request", "q1"},
                         {"ranges", Json::array({{region, 0, 4096}})},
                         {"handles", {{std::to_string(region), alloc["read_handle"]}}}});
  EXPECT_EQ(hint["ok"], true) << hint.dump();
  Json bad = wire.call({{"op", "extension"},
                        {"id", 5},
                        {"action", "write_hint"},
                        {"epoch", "test-boot"},
                        {"token", "t"},
                        {"ranges", Json::array({{region, 0, 4096}})},
                        {"handles", {{std::to_string(region), alloc["read_handle"]}}}});
  EXPECT_EQ(bad["error"]["code"], "not_advertised");

  kill(agent.pid, SIGTERM);
  EXPECT_EQ(agent.wait_exit(std::chrono::seconds(5)), 0);
  const auto log = read_log(dir / "log");
  ASSERT_GE(log.size(), 4u);
  EXPECT_EQ(log[0], (Json{{"hook", "validate_access"}, {"region", region}}));
  EXPECT_EQ(log[1], (Json{{"hook", "mapped"}, {"region", region}, {"fresh", true}}));
  EXPECT_EQ(log[2], (Json{{"hook", "hint"},
                          {"conn", conn},
                          {"action", "read_hint"},
                          {"request", "q1"},
                          {"ranges", Json::array({{region, 0, 4096}})}}));
  EXPECT_EQ(log.back(), (Json{{"hook", "close"}}));
  fs::remove_all(dir);
}

TEST(AgentProcess, R2_1_AnExtensionThatCannotBeLoadedExitsNonZeroNamingIt) {
  Child agent = Child::Start({RCXL_AGENT_BINARY, "--listen", "127.0.0.1:0", "--auth", "none",
                              "--memory", "anon:1M", "--region-extension", "no_such_ext"});
  EXPECT_EQ(agent.wait_exit(std::chrono::seconds(5)), 1);
  EXPECT_NE(agent.read_all_err().find("no_such_ext"), std::string::npos);
}

TEST(AgentProcess, R7_AuthNoneIsRefusedOnANonLoopbackListener) {
  Child agent = Child::Start(
      {RCXL_AGENT_BINARY, "--listen", "0.0.0.0:0", "--auth", "none", "--memory", "anon:1M"});
  EXPECT_EQ(agent.wait_exit(std::chrono::seconds(5)), 1);
  EXPECT_NE(agent.read_all_err().find("loopback"), std::string::npos);
}

TEST(AgentProcess, R2_1_TheExtensionNameDefaultsFromTheEnvironment) {
  setenv("RCXL_AGENT_REGION_EXTENSION", "from_env_ext", 1);
  Child agent = Child::Start(
      {RCXL_AGENT_BINARY, "--listen", "127.0.0.1:0", "--auth", "none", "--memory", "anon:1M"});
  unsetenv("RCXL_AGENT_REGION_EXTENSION");
  EXPECT_EQ(agent.wait_exit(std::chrono::seconds(5)), 1);
  EXPECT_NE(agent.read_all_err().find("from_env_ext"), std::string::npos);
}

}  // namespace
