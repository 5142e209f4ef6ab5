// The rcxl-agent binary as a process (SPEC R7, R2.1, R2.5, PROTOCOL.md
// "Process"): flags, TCP, auth from a secret file, the recording extension's
// log, SIGTERM -> exit 0, a bad extension -> exit non-zero with a message.
#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <poll.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iomanip>
#include <limits>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "apps/cli_checks.h"
#include "apps/rcxl-agent/agent_flag_checks.h"
#include "core/protocol/auth.h"
#include "core/protocol/frame_codec.h"
#include "core/protocol/messages.h"
#include "core/runtime/printable.h"
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

// An agent on loopback without RDMA, on a 4 MiB file pool with a state file.
std::vector<std::string> file_pool_agent(const fs::path& pool, const std::string& state_file) {
  return {RCXL_AGENT_BINARY,
          "--listen",
          "127.0.0.1:0",
          "--auth",
          "none",
          "--nic",
          "none",
          "--memory",
          "file:" + pool.string() + ":4M",
          "--state-file",
          state_file};
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

// An agent whose output nobody reads any more (`| head`, a log collector
// restarting) died of SIGPIPE at its next write, losing an anon pool's regions.
TEST(AgentProcess, R7_AClosedOutputPipeDoesNotEndTheAgent) {
  Child agent = Child::Start({RCXL_AGENT_BINARY, "--listen", "127.0.0.1:0", "--auth", "none",
                              "--memory", "anon:1M", "--nic", "none", "--boot-id", "pipe-boot"});
  const std::string line = agent.read_line();
  const auto colon = line.find("127.0.0.1:");
  ASSERT_NE(colon, std::string::npos) << line << agent.read_all_err();
  const int port = std::atoi(line.c_str() + colon + 10);
  close(std::exchange(agent.out, -1));
  close(std::exchange(agent.err, -1));
  kill(agent.pid, SIGUSR1);  // metrics, to the closed stderr
  ASSERT_EQ(agent.wait_exit(std::chrono::milliseconds(300)), -1) << "the agent exited";
  Wire wire(port);
  ASSERT_TRUE(wire.connected());
  ASSERT_EQ(wire.next()["op"], "greeting");
  Json hello = wire.call({{"op", "hello"}, {"id", 1}, {"version", 1}, {"auth", ""}});
  EXPECT_EQ(hello["ok"], true) << hello.dump();
  kill(agent.pid, SIGTERM);
  EXPECT_EQ(agent.wait_exit(std::chrono::seconds(5)), 0);
}

// A hangup (the terminal it ran in closed) killed the agent by default: no
// metrics, no extension close() (session 30 review). It stops cleanly now,
// as on SIGTERM.
TEST(AgentProcess, R7_AHangupStopsTheAgentCleanly) {
  const fs::path dir = scratch_dir();
  const Json ext_config = {{"log", (dir / "log").string()}};
  Child agent =
      Child::Start({RCXL_AGENT_BINARY, "--listen", "127.0.0.1:0", "--auth", "none", "--memory",
                    "anon:1M", "--nic", "none", "--region-extension", "recording",
                    "--region-extension-config", ext_config.dump(), "--boot-id", "hup-boot"});
  const std::string line = agent.read_line();
  ASSERT_NE(line.find("127.0.0.1:"), std::string::npos) << line << agent.read_all_err();
  kill(agent.pid, SIGHUP);
  EXPECT_EQ(agent.wait_exit(std::chrono::seconds(5)), 0);
  EXPECT_NE(agent.read_all_err().find("rcxl_agent_maps_total"), std::string::npos);
  const auto log = read_log(dir / "log");
  ASSERT_FALSE(log.empty());
  EXPECT_EQ(log.back(), (Json{{"hook", "close"}}));
  fs::remove_all(dir);
}

// The recording log may not be a FIFO: opening one to append waited for a
// reader with the stop signals blocked, so the start hung for good and
// SIGTERM did nothing (session 30 review). The start fails, naming it.
TEST(AgentProcess, R7_AnExtensionLogThatIsAFifoFailsTheStart) {
  const fs::path dir = scratch_dir();
  const fs::path fifo = dir / "log";
  ASSERT_EQ(::mkfifo(fifo.c_str(), 0600), 0);
  const Json ext_config = {{"log", fifo.string()}};
  Child agent = Child::Start({RCXL_AGENT_BINARY, "--listen", "127.0.0.1:0", "--auth", "none",
                              "--memory", (dir / "pool").string().insert(0, "file:") + ":1M",
                              "--nic", "none", "--region-extension", "recording",
                              "--region-extension-config", ext_config.dump(), "--boot-id", "b"});
  const int code = agent.wait_exit(std::chrono::seconds(10));
  if (code == -1) kill(agent.pid, SIGKILL);
  EXPECT_EQ(code, 1);
  const std::string err = agent.read_all_err();
  EXPECT_NE(err.find("not a regular file"), std::string::npos) << err;
  EXPECT_FALSE(fs::exists(dir / "pool")) << "a failed start leaves no pool file";
  fs::remove_all(dir);
}

TEST(AgentProcess, R2_1_AnExtensionThatCannotBeLoadedExitsNonZeroNamingIt) {
  Child agent = Child::Start({RCXL_AGENT_BINARY, "--listen", "127.0.0.1:0", "--auth", "none",
                              "--memory", "anon:1M", "--region-extension", "no_such_ext"});
  EXPECT_EQ(agent.wait_exit(std::chrono::seconds(5)), 1);
  const std::string err = agent.read_all_err();
  EXPECT_NE(err.find("no_such_ext"), std::string::npos);
  // What there is to name instead, and where plugins were looked for.
  EXPECT_NE(err.find("(built in: none, recording)"), std::string::npos) << err;
  EXPECT_NE(err.find("no --extension-path"), std::string::npos) << err;
}

TEST(AgentProcess, R7_ABadLogLevelExitsNonZeroNamingTheChoices) {
  Child agent = Child::Start({RCXL_AGENT_BINARY, "--listen", "127.0.0.1:0", "--auth", "none",
                              "--memory", "anon:1M", "--log-level", "loud"});
  EXPECT_EQ(agent.wait_exit(std::chrono::seconds(5)), 1);
  const std::string err = agent.read_all_err();
  EXPECT_NE(err.find("'loud'"), std::string::npos) << err;
  EXPECT_NE(err.find("warn"), std::string::npos) << err;
  EXPECT_NE(err.find("--log-level: "), std::string::npos) << err;  // names its flag (session 30)
}

TEST(AgentProcess, R7_AuthNoneIsRefusedOnANonLoopbackListener) {
  Child agent = Child::Start(
      {RCXL_AGENT_BINARY, "--listen", "0.0.0.0:0", "--auth", "none", "--memory", "anon:1M"});
  EXPECT_EQ(agent.wait_exit(std::chrono::seconds(5)), 1);
  const std::string err = agent.read_all_err();
  EXPECT_NE(err.find("loopback"), std::string::npos) << err;
  EXPECT_NE(err.find("or give --auth-secret-file PATH"), std::string::npos) << err;  // the fix
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
  // Still running (the flags were taken): its stderr would never end.
  if (r.exit_code == -1) kill(agent.pid, SIGKILL);
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
  // The bounds the flag checks enforce are in the help, not only in refusals.
  for (const std::string bound :
       {"UINT:>= 524288", "FLOAT:>= 0.001", "at most 4096 bytes", "BYTES >= 4096",
        "without spaces or ':'", "the extension none takes none", "each address once"}) {
    EXPECT_TRUE(contains(help, bound)) << bound << "\n" << help;
  }
}

// SPEC R7: a bad flag value exits with the usage code 1 (not CLI11's 105),
// saying what the flag wants in a line a person can read.
TEST(AgentProcess, R7_ABadFlagValueExitsOneSayingWhatIsWanted) {
  const std::vector<std::pair<std::vector<std::string>, std::string>> cases = {
      {{"--max-frame-bytes", "0"}, "--max-frame-bytes: must be a whole number >= 524288, not '0'"},
      {{"--max-frame-bytes", "4294967296"}, "--max-frame-bytes: must be at most 4294967295"},
      {{"--memory-generation-poll-s", "abc"},
       "--memory-generation-poll-s: must be a number >= 0.001, not 'abc'"},
      // Seconds are decimal: strtod alone took the hex float 0x10 as 16.
      {{"--memory-generation-poll-s", "0x10"},
       "--memory-generation-poll-s: must be a number >= 0.001, not '0x10'"},
      {{"--max-hint-requests", "-1"}, "--max-hint-requests: must be a whole number >= 1"},
      {{"--memory-generation-grace-s", "-1"}, "--memory-generation-grace-s: must be a number >= 0"},
      {{"--sweep-interval-s", "1e300"}, "--sweep-interval-s: must be at most"},
      // Past a double's range: too large, not "must be >= 0.001" (session 28).
      {{"--memory-generation-poll-s", "1e400"},
       "--memory-generation-poll-s: must be at most 31536000 (a year), not '1e400'"},
      // A positive timeout under 1 ms rounded to 0 ns, which means "never".
      {{"--hello-timeout-s", "1e-10"},
       "--hello-timeout-s: must be 0 (never) or a number >= 0.001, not '1e-10'"},
      // An unset variable in the unit's ExecStart passes ''.
      {{"--state-file", ""}, "--state-file: must name a file, not ''"},
      {{"--boot-id", ""}, "--boot-id: must not be empty; leave the flag out"},
      {{"--no-such-flag"}, "--no-such-flag"},
      {{"--reader-rkeys", "rw"}, "--reader-rkeys: rw not in {read-only,shared}"},
      {{"--rdma-auth", "yes"}, "--rdma-auth: yes not in {none,proof}"},
  };
  for (const auto& [flag, says] : cases) {
    const Outcome r = run_agent(with(kLoopbackNoAuth, flag));
    EXPECT_EQ(r.exit_code, 1) << flag[0] << ": " << r.err;
    EXPECT_TRUE(contains(r.err, says)) << flag[0] << ": " << r.err;
    EXPECT_TRUE(contains(r.err, "run with --help")) << r.err;
    EXPECT_EQ(std::count(r.err.begin(), r.err.end(), '\n'), 1) << r.err;  // one line
    EXPECT_LT(r.err.size(), 300u) << r.err;  // no 300-digit range bounds
  }
  const Outcome missing = run_agent({"--auth", "none", "--memory", "anon:1M"});
  EXPECT_EQ(missing.exit_code, 1) << missing.err;
  EXPECT_TRUE(contains(missing.err, "--listen")) << missing.err;
}

// The RDMA listener's address: docs/hardware.md told InfiniBand users to give
// one, and no flag took it (new-user review, session 32). Without verbs it
// means nothing, so it is refused; its use is tested in the VM's e2e.
TEST(AgentProcess, R7_RdmaListenNeedsAVerbsNic) {
  const Outcome r = run_agent(with(kLoopbackNoAuth, {"--rdma-listen", "10.0.0.1:7472"}));
  EXPECT_EQ(r.exit_code, 1) << r.err;
  EXPECT_TRUE(contains(r.err, "--rdma-listen needs --nic verbs:DEVICE")) << r.err;
  // A port clients can be told (verbs:x: the flag is judged before the NIC opens).
  const Outcome bad =
      run_agent(with(kLoopbackNoAuth, {"--nic", "verbs:x", "--rdma-listen", "10.0.0.1:74x"}));
  EXPECT_EQ(bad.exit_code, 1) << bad.err;
  EXPECT_TRUE(contains(bad.err, "rcxl-agent: --rdma-listen 10.0.0.1:74x: ")) << bad.err;
  // Port 0 is any free port (printed once bound, the VM's e2e uses it): the
  // flag passes and the missing device is what fails.
  const Outcome any =
      run_agent(with(kLoopbackNoAuth, {"--nic", "verbs:x", "--rdma-listen", "10.0.0.1:0"}));
  EXPECT_EQ(any.exit_code, 1) << any.err;
  EXPECT_TRUE(contains(any.err, "--nic verbs:x --rdma-listen 10.0.0.1:0: ")) << any.err;
}

// Out of descriptors (a low `ulimit -n`): the runtime's eventfd failed with an
// exception nothing caught, and the agent aborted (134) without a word
// (session-33 review). One line naming the limit, exit 1.
TEST(AgentProcess, R7_TooFewDescriptorsIsOneLineAndExit1NotAnAbort) {
  // Descriptors the test runner left open are closed first: with only 0-2
  // open, the loader has fd 3 and the runtime's second descriptor fails.
  Child agent = Child::Start(
      {"/bin/bash", "-c",  // bash: dash's exec closes only descriptors 0-9
       "for f in /proc/$$/fd/*; do n=${f##*/}; [ \"$n\" -gt 2 ] && eval \"exec $n>&-\"; done; "
       "ulimit -n 4; exec \"$0\" --listen 127.0.0.1:0 --auth none --memory anon:1M",
       RCXL_AGENT_BINARY});
  const int code = agent.wait_exit(std::chrono::seconds(5));
  const std::string err = agent.read_all_err();
  EXPECT_EQ(code, 1) << err;
  EXPECT_TRUE(contains(err, "rcxl-agent: ")) << err;
  EXPECT_TRUE(contains(err, "Too many open files")) << err;
}

// SPEC R3.3's default, as the binary takes it (session-33 audit: nothing
// pinned it).
TEST(AgentProcess, R3_3_TheHintRequestLimitDefaultsTo4096) {
  Child agent = Child::Start({RCXL_AGENT_BINARY, "--help"});
  EXPECT_EQ(agent.wait_exit(std::chrono::seconds(5)), 0);
  EXPECT_TRUE(contains(Child::read_all(agent.out), "--max-hint-requests UINT:POSITIVE=4096"));
}

TEST(AgentProcess, R7_VersionPrintsTheProjectsVersion) {
  Child agent = Child::Start({RCXL_AGENT_BINARY, "--version"});
  EXPECT_EQ(agent.wait_exit(std::chrono::seconds(5)), 0);
  EXPECT_EQ(Child::read_all(agent.out), "rcxl-agent " RCXL_VERSION "\n");
}

// SPEC R7: a misspelt required flag is named as unknown, with the flag meant;
// CLI11 alone said only "--listen is required", never naming the typo.
TEST(AgentProcess, R7_AMisspeltFlagIsNamedWithTheOneMeant) {
  const Outcome r = run_agent({"--listne", "127.0.0.1:0", "--auth", "none", "--memory", "anon:1M"});
  EXPECT_EQ(r.exit_code, 1) << r.err;
  EXPECT_TRUE(contains(r.err, "unknown option '--listne' (did you mean --listen?)")) << r.err;
  const Outcome far = run_agent(with(kLoopbackNoAuth, {"--zzzzzz=1"}));
  EXPECT_TRUE(contains(far.err, "unknown option '--zzzzzz';")) << far.err;  // nothing near
}

// A first install has no secret yet: the message says how to write one, as
// for an empty file (new-user review, session 28).
TEST(AgentProcess, R7_AMissingSecretFileNamesTheFlagAndHowToWriteOne) {
  const Outcome r = run_agent({"--listen", "127.0.0.1:0", "--auth-secret-file",
                               "/nonexistent/secret", "--memory", "anon:1M"});
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_TRUE(contains(r.err, "--auth-secret-file: ")) << r.err;
  EXPECT_TRUE(contains(r.err, "/nonexistent/secret")) << r.err;
  EXPECT_TRUE(contains(r.err, "openssl rand -hex 32 > FILE")) << r.err;
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

// SPEC R7: on a host without the named RDMA device the refusal says what to
// do: another device, SoftRoCE, the VM, or --nic none for the control plane.
TEST(AgentProcess, R7_AMissingRdmaDeviceSaysWhatToDoInstead) {
  const Outcome r = run_agent(with(kLoopbackNoAuth, {"--nic", "verbs:no_such_dev0"}));
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_TRUE(contains(r.err, "no RDMA device 'no_such_dev0'")) << r.err;
  EXPECT_TRUE(contains(r.err, "ibv_devices")) << r.err;
  EXPECT_TRUE(contains(r.err, "--nic none serves the control plane only")) << r.err;
}

// The connect proof is keyed by the shared secret: without one it cannot be.
TEST(AgentProcess, R7_RdmaAuthProofWithoutASecretIsRefusedNamingTheFlag) {
  const Outcome r = run_agent(with(kLoopbackNoAuth, {"--rdma-auth", "proof"}));
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_TRUE(contains(r.err, "--rdma-auth proof needs --auth-secret-file")) << r.err;
}

TEST(AgentProcess, R2_1_AnExtensionPathThatIsNoDirectoryIsRefused) {
  const Outcome r = run_agent(with(kLoopbackNoAuth, {"--extension-path", "/nonexistent/plugins"}));
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_TRUE(contains(r.err, "--extension-path")) << r.err;
  EXPECT_TRUE(contains(r.err, "/nonexistent/plugins")) << r.err;
}

TEST(AgentProcess, R2_1_AnUnknownRecordingKeyListsTheKeysItTakes) {
  const Outcome r =
      run_agent(with(kLoopbackNoAuth, {"--region-extension", "recording",
                                       "--region-extension-config", R"({"generation_fil":"/x"})"}));
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_TRUE(contains(r.err, "unknown key 'generation_fil'; it takes actions, generation_file"))
      << r.err;
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

// SPEC R7 (a failed start changes nothing): a file: pool opened before a later
// setup step fails (here the listener) is removed again, or shrunk back with
// its bytes intact, as docs/agent.md promises.
TEST(AgentProcess, R7_AStartThatFailsAfterThePoolOpenedTakesThePoolFileBack) {
  rcxl::testing::HeldPort held;
  ASSERT_NE(held.port(), 0);
  const fs::path dir = scratch_dir();
  const std::string taken = "127.0.0.1:" + std::to_string(held.port());
  const Outcome fresh = run_agent(
      {"--listen", taken, "--auth", "none", "--memory", "file:" + (dir / "new").string() + ":16M"});
  EXPECT_EQ(fresh.exit_code, 1);
  EXPECT_TRUE(contains(fresh.err, "cannot listen on")) << fresh.err;
  EXPECT_FALSE(fs::exists(dir / "new")) << fresh.err;

  std::ofstream(dir / "old") << "kept bytes";
  const Outcome grown = run_agent(
      {"--listen", taken, "--auth", "none", "--memory", "file:" + (dir / "old").string() + ":16M"});
  EXPECT_EQ(grown.exit_code, 1);
  EXPECT_EQ(fs::file_size(dir / "old"), 10u) << grown.err;
  std::ifstream in(dir / "old");
  std::string back;
  std::getline(in, back);
  EXPECT_EQ(back, "kept bytes");
  fs::remove_all(dir);
}

// SPEC R6.1 with --state-file: a restart keeps a region only while its pool
// file does. A pool file removed (or a new path) is made anew, all zeros: the
// table's regions were restored under the same boot and their maps answered
// ok, so readers took zeros as KV (review, session 26).
TEST(AgentProcess, R6_1_APoolFileMadeAnewDoesNotBringTheStateFilesRegionsBack) {
  const fs::path dir = scratch_dir();
  std::vector<std::string> flags = file_pool_agent(dir / "pool", (dir / "state").string());
  flags.insert(flags.end(), {"--boot-id", "fixed-boot"});
  // Starts the agent and maps `region` with `handle` (allocating when 0): the map's answer.
  auto start_and_map = [&](std::uint64_t& region, Json& handle) {
    Child agent = Child::Start(flags);
    const std::string line = agent.read_line();
    const auto colon = line.find("127.0.0.1:");
    if (colon == std::string::npos) {
      ADD_FAILURE() << line << agent.read_all_err();
      return Json();
    }
    Wire wire(std::atoi(line.c_str() + colon + 10));
    EXPECT_EQ(wire.next()["op"], "greeting");
    EXPECT_EQ(wire.call({{"op", "hello"}, {"id", 1}, {"version", 1}})["ok"], true);
    if (region == 0) {
      Json alloc = wire.call({{"op", "alloc"}, {"id", 2}, {"size", 1 << 20}});
      region = alloc.value("region", std::uint64_t{0});
      handle = alloc["handle"];
    }
    Json map = wire.call({{"op", "map"},
                          {"id", 3},
                          {"region", region},
                          {"handle", handle},
                          {"epoch", "fixed-boot"}});
    kill(agent.pid, SIGTERM);
    EXPECT_EQ(agent.wait_exit(std::chrono::seconds(5)), 0);
    return map;
  };
  std::uint64_t region = 0;
  Json handle;
  ASSERT_EQ(start_and_map(region, handle)["ok"], true);
  ASSERT_NE(region, 0u);
  EXPECT_EQ(start_and_map(region, handle)["ok"], true);  // the same pool file: kept
  fs::remove(dir / "pool");
  const Json gone = start_and_map(region, handle);
  EXPECT_EQ(gone["error"]["code"], "not_found") << gone.dump();
  fs::remove_all(dir);
}

// SPEC R6.2 (a failure to read the generation at start stops the agent): the refusal says where the
// recording extension looks, so the user knows which file to write.
TEST(AgentProcess, R6_2_AMissingGenerationFileIsNamedWhenTheStartIsRefused) {
  const fs::path dir = scratch_dir();
  const Json config = {{"generation_file", (dir / "gen").string()}};
  const Outcome r = run_agent(with(kLoopbackNoAuth, {"--region-extension", "recording",
                                                     "--region-extension-config", config.dump()}));
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_TRUE(contains(r.err, "cannot tell the memory generation at start")) << r.err;
  EXPECT_TRUE(contains(r.err, "generation_file " + (dir / "gen").string())) << r.err;
  fs::remove_all(dir);
}

// A state or generation file that is a FIFO or a device is refused at start:
// the agent used to wait on the FIFO for a writer (or read /dev/zero without
// end) with its stop signals held back, so only SIGKILL ended it.
TEST(AgentProcess, R7_AStateOrGenerationFileThatIsNotRegularIsRefusedAtStart) {
  const fs::path dir = scratch_dir();
  const std::string fifo = (dir / "fifo").string();
  ASSERT_EQ(mkfifo(fifo.c_str(), 0600), 0);
  for (const std::string& path : {fifo, std::string("/dev/zero")}) {
    // A state file needs memory that outlives the process.
    const Outcome state =
        run_agent({"--listen", "127.0.0.1:0", "--auth", "none", "--memory",
                   "file:" + (dir / "pool").string() + ":1M", "--state-file", path});
    EXPECT_EQ(state.exit_code, 1) << state.err;
    EXPECT_TRUE(contains(state.err, "--state-file " + path)) << state.err;
    EXPECT_TRUE(contains(state.err, "not a regular file")) << state.err;
    const Json config = {{"generation_file", path}};
    const Outcome generation =
        run_agent(with(kLoopbackNoAuth, {"--region-extension", "recording",
                                         "--region-extension-config", config.dump()}));
    EXPECT_EQ(generation.exit_code, 1) << generation.err;
    EXPECT_TRUE(contains(generation.err, "not a regular file")) << generation.err;
  }
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

// The port of the next listener the agent announces, 0 if it did not come up.
int start_and_read_port(Child& agent) {
  const std::string line = agent.read_line();
  const auto at = line.find("127.0.0.1:");
  return at == std::string::npos ? 0 : std::atoi(line.c_str() + at + 10);
}

// SIGTERM, then the exit code; an agent that does not exit in 5 s is killed
// (so that reading its stderr ends) and answers -1.
int stop_agent(Child& agent) {
  kill(agent.pid, SIGTERM);
  const int code = agent.wait_exit(std::chrono::seconds(5));
  if (code == -1) kill(agent.pid, SIGKILL);
  return code;
}

// SPEC R7 (packaging/rcxl-agent.service: exit within 5 s of SIGTERM): an
// extension whose close() hangs cannot hold the agent; a second signal ends
// it at once. Both exit 1, saying why.
TEST(AgentProcess, R7_AStopThatHangsEndsAfterFiveSecondsOrASecondSignal) {
  for (const bool second_signal : {false, true}) {
    SCOPED_TRACE(second_signal ? "second signal" : "time limit");
    Child agent = Child::Start({RCXL_AGENT_BINARY, "--listen", "127.0.0.1:0", "--auth", "none",
                                "--memory", "anon:1M", "--extension-path", RCXL_TEST_PLUGIN_DIR,
                                "--region-extension", "testplug", "--region-extension-config",
                                R"({"close_sleep_s":60,"generation":"1"})"});
    ASSERT_NE(start_and_read_port(agent), 0) << agent.read_all_err();
    const auto start = std::chrono::steady_clock::now();
    kill(agent.pid, SIGTERM);
    if (second_signal) {
      // Past the second in which a signal counts as the same stop sent twice,
      // with room for a busy machine to take the first one late.
      std::this_thread::sleep_for(std::chrono::milliseconds(2000));
      kill(agent.pid, SIGINT);
    }
    const int code = agent.wait_exit(std::chrono::seconds(20));
    const auto took = std::chrono::steady_clock::now() - start;
    if (code == -1) kill(agent.pid, SIGKILL);
    EXPECT_EQ(code, 1);
    EXPECT_LT(took, second_signal ? std::chrono::milliseconds(4000) : std::chrono::seconds(9));
    if (!second_signal) {
      EXPECT_GE(took, std::chrono::milliseconds(4500));  // the limit, not at once
    }
    EXPECT_TRUE(contains(agent.read_all_err(), "exiting without it"));
  }
}

// One stop request delivered twice (timeout(1) and a terminal signal the child,
// then its process group) is a clean stop: the duplicate was taken for an
// impatient second signal and the agent exited 1 mid-stop (session 27 review).
TEST(AgentProcess, R7_TheSameStopSignalledTwiceAtOnceIsACleanStop) {
  Child agent = Child::Start(
      {RCXL_AGENT_BINARY, "--listen", "127.0.0.1:0", "--auth", "none", "--memory", "anon:1M"});
  ASSERT_NE(start_and_read_port(agent), 0) << agent.read_all_err();
  kill(agent.pid, SIGINT);
  // Not at once (two pending signals merge into one), and within the stop
  // (at least its 50 ms of letting closes land).
  std::this_thread::sleep_for(std::chrono::milliseconds(10));
  kill(agent.pid, SIGINT);
  const int code = agent.wait_exit(std::chrono::seconds(10));
  if (code == -1) kill(agent.pid, SIGKILL);
  EXPECT_EQ(code, 0);
  const std::string err = agent.read_all_err();
  EXPECT_TRUE(contains(err, "agent stopped")) << err;
  EXPECT_FALSE(contains(err, "exiting without it")) << err;
}

// A second agent naming a running agent's --state-file is refused before it
// touches anything: it rewrote the table (its new pool emptied it) and the
// first agent's regions were gone after its restart (session 27 review).
TEST(AgentProcess, R7_TwoAgentsCannotShareAStateFile) {
  const fs::path dir = scratch_dir();
  const std::string state = (dir / "state").string();
  auto flags = [&](const char* pool) { return file_pool_agent(dir / pool, state); };
  Child first = Child::Start(flags("pool-a"));
  const int port = start_and_read_port(first);
  ASSERT_NE(port, 0) << first.read_all_err();
  Wire wire(port);
  EXPECT_EQ(wire.next()["op"], "greeting");
  EXPECT_EQ(wire.call({{"op", "hello"}, {"id", 1}, {"version", 1}})["ok"], true);
  const Json alloc = wire.call({{"op", "alloc"}, {"id", 2}, {"size", 1 << 20}});
  ASSERT_EQ(alloc["ok"], true) << alloc.dump();
  Child second = Child::Start(flags("pool-b"));
  const int second_code = second.wait_exit(std::chrono::seconds(10));
  if (second_code == -1) {
    kill(second.pid, SIGKILL);  // it started: its stderr would never end
    (void)second.wait_exit(std::chrono::seconds(5));
  }
  EXPECT_EQ(second_code, 1);
  const std::string err = second.read_all_err();
  EXPECT_TRUE(contains(err, "is in use by another rcxl-agent")) << err;
  EXPECT_FALSE(fs::exists(dir / "pool-b"));  // refused before its pool was made
  std::ifstream in(state);
  const Json table = Json::parse(in);
  EXPECT_EQ(table["regions"].size(), 1u) << table.dump();
  kill(first.pid, SIGTERM);
  EXPECT_EQ(first.wait_exit(std::chrono::seconds(5)), 0);
  // The lock went with the process (its file stays): the next agent takes it.
  Child again = Child::Start(flags("pool-a"));
  ASSERT_NE(start_and_read_port(again), 0) << again.read_all_err();
  kill(again.pid, SIGTERM);
  EXPECT_EQ(again.wait_exit(std::chrono::seconds(5)), 0);
  // The pool's own file as the state file is named as such.
  Child same = Child::Start(
      {RCXL_AGENT_BINARY, "--listen", "127.0.0.1:0", "--auth", "none", "--nic", "none", "--memory",
       "file:" + (dir / "pool-a").string() + ":4M", "--state-file", (dir / "pool-a").string()});
  EXPECT_EQ(same.wait_exit(std::chrono::seconds(10)), 1);
  const std::string same_err = same.read_all_err();
  EXPECT_TRUE(contains(same_err, "is the --memory pool's own file")) << same_err;
  fs::remove_all(dir);
}

// SPEC R7: a poll or sweep interval under 1 ms only spins a core (1e-12 s
// took 3 s of CPU in 3 s); the refusal names the flag, the value and the floor.
TEST(AgentProcess, R7_AnIntervalUnderAMillisecondIsRefused) {
  for (const std::string flag : {"--sweep-interval-s", "--memory-generation-poll-s"}) {
    for (const std::string value : {"1e-12", "1e-9", "0.0009"}) {
      const Outcome r = run_agent(with(kLoopbackNoAuth, {flag, value}));
      EXPECT_EQ(r.exit_code, 1) << flag << " " << value << ": " << r.err;
      EXPECT_TRUE(contains(r.err, flag + ": must be a number >= 0.001, not '" + value + "'"))
          << r.err;
    }
  }
  // The floor itself is a working interval.
  Child agent = Child::Start(with(with({RCXL_AGENT_BINARY}, kLoopbackNoAuth),
                                  {"--sweep-interval-s", "0.001", "--memory-generation-poll-s",
                                   "0.001", "--log-level", "warn"}));
  ASSERT_NE(start_and_read_port(agent), 0) << agent.read_all_err();
  EXPECT_EQ(stop_agent(agent), 0);
}

// The largest hint PROTOCOL.md allows: 4096 ranges, each on its own region,
// every number 20 digits, a 32-hex handle per region, a `token` of the most
// bytes a name may have, padded by a field the agent ignores to exactly
// `frame_bytes` (the frame's payload).
Json largest_hint(const std::string& epoch, std::size_t frame_bytes) {
  constexpr std::uint64_t kMax = std::numeric_limits<std::uint64_t>::max();
  Json ranges = Json::array();
  Json handles = Json::object();
  for (std::uint64_t i = 0; i < 4096; ++i) {
    ranges.push_back({kMax - i, kMax, kMax});
    handles[std::to_string(kMax - i)] = std::string(32, 'f');
  }
  Json hint = {{"op", "extension"},
               {"id", kMax},
               {"action", "write_hint"},
               {"epoch", epoch},
               {"token", ""},
               {"ranges", std::move(ranges)},
               {"handles", std::move(handles)}};
  const std::size_t size = hint.dump().size();
  if (size >= frame_bytes) return hint;
  const std::size_t token = std::min(frame_bytes - size, rcxl::protocol::kMaxNameBytes);
  hint["token"] = std::string(token, 't');
  const std::string pad_key = ",\"padding\":\"\"";
  if (frame_bytes - size - token > pad_key.size()) {
    hint["padding"] = std::string(frame_bytes - size - token - pad_key.size(), 'p');
  }
  return hint;
}

// SPEC R7 / PROTOCOL.md Framing: --max-frame-bytes below 512 KiB is refused,
// because at 512 KiB the largest hint the protocol allows still fits (one byte
// more is a bad_frame, so the limit is really in force).
TEST(AgentProcess, R7_AFrameLimitTooSmallForTheLargestHintIsRefused) {
  for (const std::string value : {"1", "4096", "524287"}) {
    const Outcome r = run_agent(with(kLoopbackNoAuth, {"--max-frame-bytes", value}));
    EXPECT_EQ(r.exit_code, 1) << value << ": " << r.err;
    EXPECT_TRUE(
        contains(r.err, "--max-frame-bytes: must be a whole number >= 524288, not '" + value + "'"))
        << r.err;
  }
  const std::uint32_t limit = rcxl::apps::agent::kMinMaxFrameBytes;
  Child agent = Child::Start(
      with(with({RCXL_AGENT_BINARY}, kLoopbackNoAuth),
           {"--max-frame-bytes", std::to_string(limit), "--boot-id", std::string(128, 'b')}));
  const int port = start_and_read_port(agent);
  ASSERT_NE(port, 0) << agent.read_all_err();
  const std::string boot = std::string(128, 'b');
  // Unpadded, the worst case leaves room for names (the 512 KiB reason).
  EXPECT_LE(largest_hint(boot, 0).dump().size() + 16 * 1024, limit);
  for (const std::size_t size : {std::size_t{limit}, std::size_t{limit} + 1}) {
    Wire wire(port);
    ASSERT_TRUE(wire.connected());
    ASSERT_EQ(wire.next()["op"], "greeting");
    ASSERT_EQ(wire.call({{"op", "hello"}, {"id", 1}})["ok"], true);
    const Json hint = largest_hint(boot, size);
    ASSERT_EQ(hint.dump().size(), size);
    const Json reply = wire.call(hint);
    // Parsed and checked (no extension: not_advertised), or refused as a frame.
    EXPECT_EQ(reply["error"]["code"], size <= limit ? "not_advertised" : "bad_frame")
        << size << ": " << reply.dump().substr(0, 300);
  }
  EXPECT_EQ(stop_agent(agent), 0);
}

// SPEC R7 / PROTOCOL.md Boot: the boot is `<boot_id>:<generation>`, so a ':'
// in the id makes it ambiguous; spaces and huge ids are refused too.
TEST(AgentProcess, R7_ABootIdThatWouldMakeTheBootAmbiguousIsRefused) {
  const std::vector<std::pair<std::string, std::string>> cases = {
      {"node:1", "has a ':' at 4"},
      {"two words", "has a space"},
      {"tab\there", "has a space"},
      {std::string(129, 'x'), "is 129 characters long"},
      {std::string(100 * 1024, 'x'), "is 102400 characters long"},
  };
  for (const auto& [id, says] : cases) {
    const Outcome r = run_agent(with(kLoopbackNoAuth, {"--boot-id", id}));
    EXPECT_EQ(r.exit_code, 1) << r.err;
    // Shown printable (the tab as \t): the message stays one line.
    EXPECT_TRUE(contains(r.err, "--boot-id: '" + rcxl::runtime::printable(id, 64).substr(0, 64)))
        << r.err;
    EXPECT_TRUE(contains(r.err, says)) << r.err;
    EXPECT_TRUE(contains(r.err, "128 printable ASCII characters without spaces or ':'")) << r.err;
    EXPECT_LT(r.err.size(), 400u) << "a 100 KB id is not echoed whole";
  }
  // 128 printable characters are fine.
  Child agent = Child::Start(with(with({RCXL_AGENT_BINARY}, kLoopbackNoAuth),
                                  {"--boot-id", std::string(128, '~'), "--log-level", "warn"}));
  EXPECT_TRUE(contains(agent.read_line(), "boot " + std::string(128, '~')));
  EXPECT_EQ(stop_agent(agent), 0);
}

// SPEC R2.1: a config with --region-extension none is a forgotten extension
// name (the simulator refuses it too); an empty object is no config.
TEST(AgentProcess, R2_1_AConfigForTheExtensionNoneIsRefusedNamingBoth) {
  const Outcome r =
      run_agent(with(kLoopbackNoAuth, {"--region-extension-config", R"({"log":"/tmp/x"})"}));
  EXPECT_EQ(r.exit_code, 1) << r.err;
  EXPECT_TRUE(contains(r.err, R"('{"log":"/tmp/x"}')")) << r.err;
  EXPECT_TRUE(contains(r.err, "--region-extension is none, which takes no config")) << r.err;
  EXPECT_TRUE(contains(r.err, "RCXL_AGENT_REGION_EXTENSION")) << r.err;

  Child agent = Child::Start(with(with({RCXL_AGENT_BINARY}, kLoopbackNoAuth),
                                  {"--region-extension-config", "{}", "--log-level", "warn"}));
  ASSERT_NE(start_and_read_port(agent), 0) << agent.read_all_err();
  EXPECT_EQ(stop_agent(agent), 0);
}

// SPEC R7 (--memory): a pool under one 4096-byte region can never serve an
// alloc; it is refused before a file: pool is created.
TEST(AgentProcess, R7_APoolSmallerThanOneRegionIsRefused) {
  const fs::path dir = scratch_dir();
  const std::string file_pool = "file:" + (dir / "pool").string() + ":100";
  for (const std::string& memory : std::vector<std::string>{"anon:1", "anon:4095", file_pool}) {
    const Outcome r = run_agent({"--listen", "127.0.0.1:0", "--auth", "none", "--memory", memory});
    EXPECT_EQ(r.exit_code, 1) << memory << ": " << r.err;
    EXPECT_TRUE(contains(r.err, "--memory " + memory + ": ")) << r.err;
    EXPECT_TRUE(contains(r.err, "give at least 4096")) << r.err;
  }
  EXPECT_FALSE(fs::exists(dir / "pool"));
  fs::remove_all(dir);
}

// SPEC R7: an empty secret says how to make one.
TEST(AgentProcess, R7_AnEmptySecretFileSaysHowToWriteOne) {
  const fs::path dir = scratch_dir();
  { std::ofstream(dir / "empty") << "\n"; }
  chmod((dir / "empty").c_str(), 0600);
  const Outcome r = run_agent({"--listen", "127.0.0.1:0", "--auth-secret-file",
                               (dir / "empty").string(), "--memory", "anon:1M"});
  EXPECT_EQ(r.exit_code, 1) << r.err;
  EXPECT_TRUE(contains(r.err, "holds an empty secret; write one: (umask 077; openssl rand -hex 32"))
      << r.err;
  fs::remove_all(dir);
}

// SPEC R7 (--auth-secret-file): a secret is a small regular file; /dev/zero
// (read 2 GB before), a FIFO (would block) or a 5000-byte file is refused.
TEST(AgentProcess, R7_ASecretFileThatIsNotASmallRegularFileIsRefused) {
  const fs::path dir = scratch_dir();
  std::ofstream(dir / "big") << std::string(5000, 's');
  ASSERT_EQ(mkfifo((dir / "fifo").c_str(), 0600), 0);
  const std::vector<std::pair<std::string, std::string>> cases = {
      {"/dev/zero", "not a regular file"},
      {(dir / "fifo").string(), "not a regular file"},
      {(dir / "big").string(), "holds 5000 bytes"},
      {dir.string(), "not a regular file"},
  };
  for (const auto& [path, says] : cases) {
    const Outcome r =
        run_agent({"--listen", "127.0.0.1:0", "--auth-secret-file", path, "--memory", "anon:1M"});
    EXPECT_EQ(r.exit_code, 1) << path << ": " << r.err;
    EXPECT_TRUE(contains(r.err, "--auth-secret-file: " + path + ": " + says)) << r.err;
    EXPECT_TRUE(contains(r.err, "a regular file of at most 4096 bytes")) << r.err;
  }
  fs::remove_all(dir);
}

// SPEC R7: a secret file every user can read still works (tests and setups
// rely on it) but the agent warns, naming the file and the fix.
TEST(AgentProcess, R7_AWorldReadableSecretFileWorksWithAWarning) {
  const fs::path dir = scratch_dir();
  const fs::path secret = dir / "secret";
  std::ofstream(secret) << "s\n";
  for (const mode_t mode : {0644, 0600}) {
    ASSERT_EQ(chmod(secret.c_str(), mode), 0);
    Child agent = Child::Start({RCXL_AGENT_BINARY, "--listen", "127.0.0.1:0", "--auth-secret-file",
                                secret.string(), "--memory", "anon:1M", "--log-level", "warn"});
    ASSERT_NE(start_and_read_port(agent), 0) << agent.read_all_err();
    EXPECT_EQ(stop_agent(agent), 0);
    const std::string err = agent.read_all_err();
    const std::string warning = "warning: --auth-secret-file: " + secret.string() +
                                " (mode 0644) is readable by every user; chmod 600 it";
    EXPECT_EQ(contains(err, warning), mode == 0644) << err;
  }
  fs::remove_all(dir);
}

// SPEC R7 (--listen): a name that does not resolve, or two spellings of one
// address, are named with the flag before the pool opens (they read "cannot
// resolve 'X'" and "another process holds that port" before).
TEST(AgentProcess, R7_AListenAddressIsResolvedBeforeTheStart) {
  const Outcome unresolved =
      run_agent({"--listen", "no-such-host.invalid:7400", "--auth", "none", "--memory", "anon:1M"});
  EXPECT_EQ(unresolved.exit_code, 1) << unresolved.err;
  EXPECT_TRUE(contains(unresolved.err, "--listen no-such-host.invalid:7400: cannot resolve"))
      << unresolved.err;
  const Outcome spellings = run_agent({"--listen", "127.0.0.1:7781", "--listen", "127.1:7781",
                                       "--auth", "none", "--memory", "anon:1M"});
  EXPECT_EQ(spellings.exit_code, 1) << spellings.err;
  EXPECT_TRUE(contains(spellings.err, "--listen 127.0.0.1:7781 and 127.1:7781 are one address"))
      << spellings.err;
}

// SPEC R7 (--listen): an address given twice is named up front, not reported
// as "Address already in use"; port 0 twice is two ports.
TEST(AgentProcess, R7_AListenAddressGivenTwiceIsRefusedNamingIt) {
  const Outcome r = run_agent({"--listen", "127.0.0.1:7781", "--listen", "127.0.0.1:0", "--listen",
                               "127.0.0.1:7781", "--auth", "none", "--memory", "anon:1M"});
  EXPECT_EQ(r.exit_code, 1) << r.err;
  EXPECT_TRUE(contains(r.err, "--listen 127.0.0.1:7781 is given twice")) << r.err;
  EXPECT_FALSE(contains(r.err, "already in use")) << r.err;

  Child agent =
      Child::Start({RCXL_AGENT_BINARY, "--listen", "127.0.0.1:0", "--listen", "127.0.0.1:0",
                    "--auth", "none", "--memory", "anon:1M", "--log-level", "warn"});
  const int first = start_and_read_port(agent);
  const int second = start_and_read_port(agent);
  EXPECT_NE(first, 0) << agent.read_all_err();
  EXPECT_NE(second, 0);
  EXPECT_NE(first, second);
  EXPECT_EQ(stop_agent(agent), 0);
}

// SPEC R7 (--memory dax:PATH): a path that is not a Device DAX gets a reason
// and the alternatives (pmem2 gave "pmem2 source dax /dev/null: " and nothing).
TEST(AgentProcess, R7_ADaxPathThatIsNotADaxDeviceSaysWhy) {
  const fs::path dir = scratch_dir();
  std::ofstream(dir / "small") << "x";
  const std::vector<std::pair<std::string, std::string>> cases = {
      {"/dev/null", "/dev/null is a character device but not a Device DAX"},
      {dir.string(), dir.string() + " is a directory, not a Device DAX"},
      {(dir / "small").string(), (dir / "small").string() + " holds 1 bytes, no region"},
  };
  for (const auto& [path, says] : cases) {
    const Outcome r =
        run_agent({"--listen", "127.0.0.1:0", "--auth", "none", "--memory", "dax:" + path});
    EXPECT_EQ(r.exit_code, 1) << r.err;
    EXPECT_TRUE(contains(r.err, "--memory dax:" + path + ": " + says)) << r.err;
    EXPECT_TRUE(contains(r.err, "file:PATH:BYTES")) << r.err;
  }
  fs::remove_all(dir);
}

// SPEC R7: "agent stopped" is logged by an agent that ran, not after a setup
// error that kept it from starting.
TEST(AgentProcess, R7_OnlyAnAgentThatStartedLogsThatItStopped) {
  rcxl::testing::HeldPort held;
  ASSERT_NE(held.port(), 0);
  const Outcome failed = run_agent({"--listen", "127.0.0.1:" + std::to_string(held.port()),
                                    "--auth", "none", "--memory", "anon:1M"});
  EXPECT_EQ(failed.exit_code, 1) << failed.err;
  EXPECT_TRUE(contains(failed.err, "cannot listen on")) << failed.err;
  EXPECT_FALSE(contains(failed.err, "agent stopped")) << failed.err;

  Child agent = Child::Start(with({RCXL_AGENT_BINARY}, kLoopbackNoAuth));
  ASSERT_NE(start_and_read_port(agent), 0) << agent.read_all_err();
  EXPECT_EQ(stop_agent(agent), 0);
  EXPECT_TRUE(contains(agent.read_all_err(), "agent stopped"));
}

// Errors are one line whatever a flag value holds: a line break or an escape
// sequence is shown escaped, a huge value cut (a 120 KB config was echoed whole).
TEST(AgentProcess, R7_AnErrorIsOneLineWhateverTheValueItEchoes) {
  const Outcome newline =
      run_agent({"--listen", "127.0.0.1:0", "--auth", "no\nne\x1b[31m", "--memory", "anon:1M"});
  EXPECT_EQ(newline.exit_code, 1) << newline.err;
  EXPECT_TRUE(contains(newline.err, "--auth takes only 'none', not 'no\\nne\\x1b[31m'"))
      << newline.err;
  EXPECT_EQ(std::count(newline.err.begin(), newline.err.end(), '\n'), 1) << newline.err;
  const Json config = {{"no_such_key", std::string(100000, 'a')}};
  const Outcome huge =
      run_agent(with(kLoopbackNoAuth, {"--region-extension", "recording",
                                       "--region-extension-config", config.dump()}));
  EXPECT_EQ(huge.exit_code, 1) << huge.err.substr(0, 300);
  EXPECT_LT(huge.err.size(), 2200u);
  EXPECT_EQ(std::count(huge.err.begin(), huge.err.end(), '\n'), 1);
  const Outcome port =
      run_agent({"--listen", "127.0.0.1:99999", "--auth", "none", "--memory", "anon:1M"});
  EXPECT_TRUE(contains(port.err, "the port must be a whole number 0..65535")) << port.err;
  const Outcome secret =
      run_agent({"--listen", "127.0.0.1:0", "--auth-secret-file", "", "--memory", "anon:1M"});
  EXPECT_TRUE(contains(secret.err, "--auth-secret-file: must name a file, not ''")) << secret.err;
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
