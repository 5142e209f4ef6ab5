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
#include "tests/child_process.h"

namespace {

using Json = nlohmann::json;
namespace fs = std::filesystem;
using rcxl::testing::Wire;

using Child = rcxl::testing::ChildProcess;

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
