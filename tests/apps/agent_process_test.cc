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

#include "apps/cli_checks.h"
#include "core/protocol/auth.h"
#include "core/protocol/frame_codec.h"
#include "tests/agent/tcp_wire.h"
#include "tests/child_process.h"
#include "tests/held_port.h"

namespace {

using Json = nlohmann::json;
namespace fs = std::filesystem;
using rcxl::testing::Wire;

using Child = rcxl::testing::ChildProcess;

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

TEST(AgentProcess, R7_ABadLogLevelExitsNonZeroNamingTheChoices) {
  Child agent = Child::Start({RCXL_AGENT_BINARY, "--listen", "127.0.0.1:0", "--auth", "none",
                              "--memory", "anon:1M", "--log-level", "loud"});
  EXPECT_EQ(agent.wait_exit(std::chrono::seconds(5)), 1);
  const std::string err = agent.read_all_err();
  EXPECT_NE(err.find("'loud'"), std::string::npos) << err;
  EXPECT_NE(err.find("warn"), std::string::npos) << err;
}

TEST(AgentProcess, R7_AuthNoneIsRefusedOnANonLoopbackListener) {
  Child agent = Child::Start(
      {RCXL_AGENT_BINARY, "--listen", "0.0.0.0:0", "--auth", "none", "--memory", "anon:1M"});
  EXPECT_EQ(agent.wait_exit(std::chrono::seconds(5)), 1);
  EXPECT_NE(agent.read_all_err().find("loopback"), std::string::npos);
}

struct Outcome {
  int exit_code = -1;
  std::string err;
};

// Runs the agent with `args` after the binary until it exits (5 s at most).
Outcome run_agent(std::vector<std::string> args) {
  args.insert(args.begin(), RCXL_AGENT_BINARY);
  Child agent = Child::Start(args);
  Outcome r;
  r.exit_code = agent.wait_exit(std::chrono::seconds(5));
  r.err = agent.read_all_err();
  return r;
}

bool contains(const std::string& text, const std::string& part) {
  return text.find(part) != std::string::npos;
}

const std::vector<std::string> kLoopbackNoAuth = {"--listen", "127.0.0.1:0", "--auth",
                                                  "none",     "--memory",    "anon:1M"};

std::vector<std::string> with(std::vector<std::string> args, const std::vector<std::string>& more) {
  args.insert(args.end(), more.begin(), more.end());
  return args;
}

// SPEC R7: --help lists the flags, says which auth flag is required and the exit codes.
TEST(AgentProcess, R7_HelpExitsZeroAndSaysAnAuthFlagIsRequired) {
  Child agent = Child::Start({RCXL_AGENT_BINARY, "--help"});
  EXPECT_EQ(agent.wait_exit(std::chrono::seconds(5)), 0);
  const std::string help = Child::read_all(agent.out);
  EXPECT_TRUE(contains(help, "one of --auth-secret-file PATH or --auth none")) << help;
  EXPECT_TRUE(contains(help, "1 bad flags")) << help;
  EXPECT_TRUE(contains(help, "--boot-id")) << help;
}

// SPEC R7: a bad flag value exits with the usage code 1 (not CLI11's 105),
// saying what the flag wants in a line a person can read.
TEST(AgentProcess, R7_ABadFlagValueExitsOneSayingWhatIsWanted) {
  const std::vector<std::pair<std::vector<std::string>, std::string>> cases = {
      {{"--max-frame-bytes", "0"}, "--max-frame-bytes: must be a whole number >= 1, not '0'"},
      {{"--max-frame-bytes", "4294967296"}, "--max-frame-bytes: must be at most 4294967295"},
      {{"--memory-generation-poll-s", "abc"},
       "--memory-generation-poll-s: must be a number > 0, not 'abc'"},
      {{"--max-hint-requests", "-1"}, "--max-hint-requests: must be a whole number >= 1"},
      {{"--memory-generation-grace-s", "-1"}, "--memory-generation-grace-s: must be a number >= 0"},
      {{"--sweep-interval-s", "1e300"}, "--sweep-interval-s: must be at most"},
      {{"--no-such-flag"}, "--no-such-flag"},
  };
  for (const auto& [flag, says] : cases) {
    const Outcome r = run_agent(with(kLoopbackNoAuth, flag));
    EXPECT_EQ(r.exit_code, 1) << flag[0] << ": " << r.err;
    EXPECT_TRUE(contains(r.err, says)) << flag[0] << ": " << r.err;
    EXPECT_TRUE(contains(r.err, "run with --help")) << r.err;
    EXPECT_LT(r.err.size(), 300u) << r.err;  // no 300-digit range bounds
  }
  const Outcome missing = run_agent({"--auth", "none", "--memory", "anon:1M"});
  EXPECT_EQ(missing.exit_code, 1) << missing.err;
  EXPECT_TRUE(contains(missing.err, "--listen")) << missing.err;
}

TEST(AgentProcess, R7_AMissingSecretFileNamesTheFlag) {
  const Outcome r = run_agent({"--listen", "127.0.0.1:0", "--auth-secret-file",
                               "/nonexistent/secret", "--memory", "anon:1M"});
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_TRUE(contains(r.err, "--auth-secret-file: ")) << r.err;
  EXPECT_TRUE(contains(r.err, "/nonexistent/secret")) << r.err;
}

TEST(AgentProcess, R7_AListenAddressInUseIsNamedOnce) {
  rcxl::testing::HeldPort held;
  ASSERT_NE(held.port(), 0);
  const std::string address = "127.0.0.1:" + std::to_string(held.port());
  const Outcome r =
      run_agent({"--listen", address, "--auth", "none", "--memory", "anon:1M", "--nic", "none"});
  EXPECT_EQ(r.exit_code, 1);
  const auto first = r.err.find("cannot listen on " + address);
  ASSERT_NE(first, std::string::npos) << r.err;
  EXPECT_EQ(r.err.find(address, first + 17 + address.size()), std::string::npos) << r.err;
}

// SPEC R2.1: the config may come from the flag or the environment (a systemd
// drop-in); the refusal names both and quotes what arrived.
TEST(AgentProcess, R2_1_AConfigThatIsNotJsonNamesTheFlagAndTheVariable) {
  const Outcome r = run_agent(with(kLoopbackNoAuth, {"--region-extension", "recording",
                                                     "--region-extension-config", "{log:/tmp/x}"}));
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_TRUE(contains(r.err, "--region-extension-config")) << r.err;
  EXPECT_TRUE(contains(r.err, "RCXL_AGENT_REGION_EXTENSION_CONFIG")) << r.err;
  EXPECT_TRUE(contains(r.err, "'{log:/tmp/x}'")) << r.err;
}

// SPEC R7 (--memory file:PATH:BYTES): a pool that cannot be made leaves no file.
TEST(AgentProcess, R7_AFilePoolThatCannotBeMadeLeavesNoFileBehind) {
  const fs::path dir = scratch_dir();
  const fs::path pool = dir / "bigpool";
  const Outcome r = run_agent({"--listen", "127.0.0.1:0", "--auth", "none", "--memory",
                               "file:" + pool.string() + ":1048576G"});
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_TRUE(contains(r.err, "--memory")) << r.err;
  EXPECT_FALSE(fs::exists(pool)) << r.err;
  fs::remove_all(dir);
}

TEST(AgentProcess, R2_1_TheExtensionNameDefaultsFromTheEnvironment) {
  setenv("RCXL_AGENT_REGION_EXTENSION", "from_env_ext", 1);
  Child agent = Child::Start(
      {RCXL_AGENT_BINARY, "--listen", "127.0.0.1:0", "--auth", "none", "--memory", "anon:1M"});
  unsetenv("RCXL_AGENT_REGION_EXTENSION");
  EXPECT_EQ(agent.wait_exit(std::chrono::seconds(5)), 1);
  EXPECT_NE(agent.read_all_err().find("from_env_ext"), std::string::npos);
}

// The number a flag validator checked is the number the flag gets: CLI11 alone
// would read "010" as octal 8 after "10" passed the check.
TEST(AgentProcess, R7_AWholeNumberFlagIsReadAsTheDecimalItWasCheckedAs) {
  CLI::App app;
  std::uint64_t value = 0;
  app.add_option("--n", value)->transform(rcxl::apps::WholeNumberAtLeast<std::uint64_t>(9));
  const char* argv[] = {"prog", "--n", "010"};
  app.parse(3, const_cast<char**>(argv));
  EXPECT_EQ(value, 10u);
}

}  // namespace
