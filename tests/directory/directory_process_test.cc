// The rcxl-directory binary as a process: --help, flags, TCP with the HMAC
// hello from a secret file, the ops, SIGTERM -> exit 0.
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
#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <utility>
#include <vector>

#include "core/protocol/auth.h"
#include "tests/agent/tcp_wire.h"
#include "tests/child_process.h"
#include "tests/held_port.h"

namespace {

using Json = nlohmann::json;
namespace fs = std::filesystem;
using rcxl::testing::Wire;

using Child = rcxl::testing::ChildProcess;

// Registers key "k" at one location over `wire` and looks up "k" and "nope":
// the lookup reply (its one location checked against the registered one).
Json register_and_look_up(Wire& wire) {
  const Json location = {{"agent", "10.0.0.1:7000"}, {"boot", "b"}, {"region", 1},
                         {"read_handle", "ab"},      {"offset", 0}, {"length", 4096}};
  Json reg = wire.call(
      {{"op", "register"}, {"id", 2}, {"entries", {{{"key", "k"}, {"location", location}}}}});
  EXPECT_EQ(reg["registered"], Json::array({true})) << reg.dump();
  Json look = wire.call({{"op", "lookup"}, {"id", 3}, {"keys", {"k", "nope"}}});
  if (look["locations"].size() == 1) {
    EXPECT_EQ(look["locations"][0], location);
  }
  return look;
}

// A connection to a directory started with --auth none on 127.0.0.1:0, its
// hello answered; null (and a failure) when any step fails.
std::unique_ptr<Wire> hello_with_no_auth(Child& d) {
  const std::string line = d.read_line();
  const auto at = line.find("127.0.0.1:");
  if (at == std::string::npos) {
    ADD_FAILURE() << line << d.read_all(d.err);
    return nullptr;
  }
  auto wire = std::make_unique<Wire>(std::atoi(line.c_str() + at + 10));
  if (!wire->connected() || wire->next()["op"] != "greeting") {
    ADD_FAILURE() << "no greeting from the directory";
    return nullptr;
  }
  Json hello = wire->call({{"op", "hello"}, {"id", 1}, {"version", 1}, {"auth", ""}});
  if (hello["ok"] != true) {
    ADD_FAILURE() << hello.dump();
    return nullptr;
  }
  return wire;
}

// The hello answer over `wire` to a directory whose secret is `secret` (null
// without a greeting).
Json hello_with_secret(Wire& wire, const std::string& secret) {
  Json greeting = wire.next();
  if (greeting["op"] != "greeting") return nullptr;
  return wire.call({{"op", "hello"},
                    {"id", 1},
                    {"version", 1},
                    {"auth", rcxl::protocol::hmac_sha256_hex(
                                 secret, greeting["challenge"].get<std::string>())}});
}

TEST(DirectoryProcess, R1_1_HelpNamesTheFlags) {
  Child c = Child::Start({RCXL_DIRECTORY_BINARY, "--help"});
  EXPECT_EQ(c.wait_exit(std::chrono::seconds(5)), 0);
  const std::string help = c.read_all(c.out);
  for (const char* flag : {"--listen", "--auth-secret-file", "--auth", "--max-keys"}) {
    EXPECT_NE(help.find(flag), std::string::npos) << flag;
  }
  // One address, shown as one: not CLI11's "TEXT ..." of a repeatable flag.
  EXPECT_NE(help.find("--listen HOST:PORT REQUIRED"), std::string::npos) << help;
}

struct Outcome {
  int exit_code = -1;
  std::string err;
};

// Runs the directory with `args` after the binary until it exits (5 s at most).
Outcome run_directory(std::vector<std::string> args) {
  args.insert(args.begin(), RCXL_DIRECTORY_BINARY);
  Child d = Child::Start(args);
  Outcome r;
  r.exit_code = d.wait_exit(std::chrono::seconds(5));
  r.err = d.read_all(d.err);
  return r;
}

bool contains(const std::string& text, const std::string& part) {
  return text.find(part) != std::string::npos;
}

TEST(DirectoryProcess, R1_1_HelpSaysAnAuthFlagIsRequiredAndTheExitCodes) {
  Child c = Child::Start({RCXL_DIRECTORY_BINARY, "--help"});
  EXPECT_EQ(c.wait_exit(std::chrono::seconds(5)), 0);
  const std::string help = c.read_all(c.out);
  EXPECT_TRUE(contains(help, "one of --auth-secret-file PATH or --auth none")) << help;
  EXPECT_TRUE(contains(help, "1 bad flags")) << help;
}

// SPEC R1.2 (bad input is refused with a reason): a bad flag exits with the
// usage code 1, not CLI11's 105, and says what the flag wants.
TEST(DirectoryProcess, R1_2_ABadFlagValueExitsOneSayingWhatIsWanted) {
  const std::vector<std::pair<std::vector<std::string>, std::string>> cases = {
      {{"--max-keys", "0"}, "--max-keys: must be a whole number >= 1, not '0'"},
      {{"--lease-ttl-s", "-1"}, "--lease-ttl-s: must be a number >= 0.001, not '-1'"},
      {{"--lease-ttl-s", "abc"}, "--lease-ttl-s: must be a number >= 0.001, not 'abc'"},
      // SPEC R1.2: below 4096 bytes even the hello is a bad_frame (1 was taken).
      {{"--max-frame-bytes", "0"}, "--max-frame-bytes: must be a whole number >= 4096, not '0'"},
      {{"--max-frame-bytes", "4095"}, "--max-frame-bytes: must be a whole number >= 4096"},
      // SPEC R1.2: a lease shorter than 1 ms ends before a reader's READs land.
      {{"--lease-ttl-s", "1e-12"}, "--lease-ttl-s: must be a number >= 0.001, not '1e-12'"},
      // A positive timeout under 1 ms rounded to 0 ns, which means "never".
      {{"--hello-timeout-s", "1e-10"},
       "--hello-timeout-s: must be 0 (never) or a number >= 0.001, not '1e-10'"},
      // Whole numbers are decimal, as in the agent (CLI11 alone read 0x10, and 010 as 8).
      {{"--max-connections", "0x10"}, "--max-connections: must be a whole number >= 0"},
      {{"--max-connections", "-1"}, "--max-connections: must be a whole number >= 0, not '-1'"},
      {{"--auth-secret-file", ""}, "--auth-secret-file: must name a file, not ''"},
      {{"--no-such-flag"}, "--no-such-flag"},
  };
  for (const auto& [flag, says] : cases) {
    std::vector<std::string> args = {"--listen", "127.0.0.1:0", "--auth", "none"};
    args.insert(args.end(), flag.begin(), flag.end());
    const Outcome r = run_directory(args);
    EXPECT_EQ(r.exit_code, 1) << flag[0] << ": " << r.err;
    EXPECT_TRUE(contains(r.err, says)) << flag[0] << ": " << r.err;
    EXPECT_TRUE(contains(r.err, "run with --help")) << r.err;
    EXPECT_LT(r.err.size(), 300u) << r.err;
    EXPECT_EQ(std::count(r.err.begin(), r.err.end(), '\n'), 1) << r.err;  // one line
  }
  const Outcome auth = run_directory({"--listen", "127.0.0.1:0", "--auth", "no\nne"});
  EXPECT_TRUE(contains(auth.err, "--auth takes only 'none', not 'no\\nne'")) << auth.err;
  const Outcome missing = run_directory({"--auth", "none"});
  EXPECT_EQ(missing.exit_code, 1) << missing.err;
  EXPECT_TRUE(contains(missing.err, "--listen")) << missing.err;
  // The agent takes several --listen; the directory says it takes one.
  const Outcome twice =
      run_directory({"--listen", "127.0.0.1:0", "--listen", "127.0.0.1:0", "--auth", "none"});
  EXPECT_EQ(twice.exit_code, 1) << twice.err;
  EXPECT_TRUE(contains(twice.err, "the directory serves one address (give --listen once)"))
      << twice.err;
}

TEST(DirectoryProcess, R1_3_AMissingSecretFileNamesTheFlag) {
  const Outcome r =
      run_directory({"--listen", "127.0.0.1:0", "--auth-secret-file", "/nonexistent/secret"});
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_TRUE(contains(r.err, "--auth-secret-file: ")) << r.err;
  EXPECT_TRUE(contains(r.err, "/nonexistent/secret")) << r.err;
}

// SPEC R1.1: a listen name that does not resolve names the flag and the fix.
TEST(DirectoryProcess, R1_1_AListenNameThatDoesNotResolveNamesTheFlag) {
  const Outcome r = run_directory({"--listen", "no-such-host.invalid:7100", "--auth", "none"});
  EXPECT_EQ(r.exit_code, 1) << r.err;
  EXPECT_TRUE(contains(r.err, "--listen no-such-host.invalid:7100: cannot resolve")) << r.err;
  EXPECT_TRUE(contains(r.err, "give a name or address of this host")) << r.err;
}

TEST(DirectoryProcess, R1_1_AListenAddressInUseIsNamedOnce) {
  rcxl::testing::HeldPort held;
  ASSERT_NE(held.port(), 0);
  const std::string address = "127.0.0.1:" + std::to_string(held.port());
  const Outcome r = run_directory({"--listen", address, "--auth", "none"});
  EXPECT_EQ(r.exit_code, 1);
  const auto first = r.err.find(address);
  ASSERT_NE(first, std::string::npos) << r.err;
  EXPECT_EQ(r.err.find(address, first + address.size()), std::string::npos) << r.err;
}

TEST(DirectoryProcess, R1_1_AnIpv6ListenerIsPrintedInBrackets) {
  Child d = Child::Start({RCXL_DIRECTORY_BINARY, "--listen", "[::1]:0", "--auth", "none"});
  const std::string line = d.read_line();
  if (line.empty()) GTEST_SKIP() << "no IPv6 loopback here: " << d.read_all(d.err);
  EXPECT_TRUE(contains(line, "listening on [::1]:")) << line;
  kill(d.pid, SIGTERM);
  EXPECT_EQ(d.wait_exit(std::chrono::seconds(5)), 0);
}

// A hangup (its terminal closed) stops the directory cleanly, exit 0, as
// SIGTERM does (session 30; before, its default killed it).
TEST(DirectoryProcess, R1_1_AHangupStopsTheDirectoryCleanly) {
  Child d = Child::Start({RCXL_DIRECTORY_BINARY, "--listen", "127.0.0.1:0", "--auth", "none"});
  const std::string line = d.read_line();
  ASSERT_TRUE(contains(line, "listening on 127.0.0.1:")) << line << d.read_all(d.err);
  kill(d.pid, SIGHUP);
  EXPECT_EQ(d.wait_exit(std::chrono::seconds(5)), 0);
}

// SIGUSR1 (the agent's "metrics" signal) killed the directory and every key
// it held (new-user review, session 32): it prints the stats op's answer.
TEST(DirectoryProcess, R1_1_Sigusr1PrintsStatsAndKeepsServing) {
  Child d = Child::Start({RCXL_DIRECTORY_BINARY, "--listen", "127.0.0.1:0", "--auth", "none"});
  const std::string line = d.read_line();
  ASSERT_TRUE(contains(line, "listening on 127.0.0.1:")) << line << d.read_all(d.err);
  kill(d.pid, SIGUSR1);
  const std::string stats = d.read_line(d.err);
  EXPECT_TRUE(contains(stats, "rcxl-directory stats {\"doomed\":0")) << stats;
  EXPECT_EQ(d.wait_exit(std::chrono::milliseconds(300)), -1) << "the directory exited";
  kill(d.pid, SIGTERM);
  EXPECT_EQ(d.wait_exit(std::chrono::seconds(5)), 0);
}

TEST(DirectoryProcess, R1_3_AuthNoneIsRefusedOffLoopbackAndAuthIsRequired) {
  Child open = Child::Start({RCXL_DIRECTORY_BINARY, "--listen", "0.0.0.0:0", "--auth", "none"});
  EXPECT_EQ(open.wait_exit(std::chrono::seconds(5)), 1);
  const std::string err = open.read_all(open.err);
  EXPECT_NE(err.find("loopback"), std::string::npos) << err;
  EXPECT_NE(err.find("or give --auth-secret-file PATH"), std::string::npos) << err;  // the fix
  Child none = Child::Start({RCXL_DIRECTORY_BINARY, "--listen", "127.0.0.1:0"});
  EXPECT_EQ(none.wait_exit(std::chrono::seconds(5)), 1);
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
  Json hello = hello_with_secret(wire, "dir-secret");
  ASSERT_EQ(hello["ok"], true) << hello.dump();
  Json look = register_and_look_up(wire);
  ASSERT_EQ(look["locations"].size(), 1u) << look.dump();
  Json rel = wire.call({{"op", "release"}, {"id", 4}, {"lease", look["lease"]}});
  EXPECT_EQ(rel["ok"], true);
  kill(d.pid, SIGTERM);
  EXPECT_EQ(d.wait_exit(std::chrono::seconds(5)), 0);
  fs::remove_all(dir);
}

// A directory whose output nobody reads any more (`| head`, a log collector
// restarting) died of SIGPIPE at its next log line: here a failed hello's.
TEST(DirectoryProcess, R1_1_AClosedOutputPipeDoesNotEndTheDirectory) {
  char tmpl[] = "/tmp/rcxl-directory-test-XXXXXX";
  const fs::path dir(mkdtemp(tmpl));
  std::ofstream(dir / "secret") << "dir-secret\n";
  Child d = Child::Start({RCXL_DIRECTORY_BINARY, "--listen", "127.0.0.1:0", "--auth-secret-file",
                          (dir / "secret").string()});
  const std::string line = d.read_line();
  const auto at = line.find("127.0.0.1:");
  ASSERT_NE(at, std::string::npos) << line;
  const int port = std::atoi(line.c_str() + at + 10);
  close(std::exchange(d.out, -1));
  close(std::exchange(d.err, -1));
  {
    Wire wrong(port);
    ASSERT_TRUE(wrong.connected());
    ASSERT_EQ(wrong.next()["op"], "greeting");
    Json hello = wrong.call({{"op", "hello"}, {"id", 1}, {"version", 1}, {"auth", "00"}});
    EXPECT_EQ(hello["error"]["code"], "auth_failed") << hello.dump();
  }
  Wire wire(port);
  ASSERT_TRUE(wire.connected()) << "the directory is gone: exit "
                                << d.wait_exit(std::chrono::seconds(1));
  Json hello = hello_with_secret(wire, "dir-secret");
  EXPECT_EQ(hello["ok"], true) << hello.dump();
  kill(d.pid, SIGTERM);
  EXPECT_EQ(d.wait_exit(std::chrono::seconds(5)), 0);
  fs::remove_all(dir);
}

// A client that half-closes after its last requests (`nc -N`: all of it sent
// before the greeting is read) gets the greeting, every reply, in order, and
// then the directory's end of the stream.
TEST(DirectoryProcess, R1_1_AClientThatHalfClosesGetsItsRepliesThenTheEnd) {
  char tmpl[] = "/tmp/rcxl-directory-test-XXXXXX";
  const fs::path dir(mkdtemp(tmpl));
  Child d = Child::Start(
      {RCXL_DIRECTORY_BINARY, "--listen", "127.0.0.1:0", "--auth", "none", "--log-level", "warn"});
  const std::string line = d.read_line();
  const auto at = line.find("127.0.0.1:");
  ASSERT_NE(at, std::string::npos) << line;
  Wire wire(std::atoi(line.c_str() + at + 10));
  ASSERT_TRUE(wire.connected());
  wire.send({{"op", "hello"}, {"id", 1}, {"version", 1}, {"auth", "none"}});
  wire.send({{"op", "lookup"}, {"id", 2}, {"keys", {"k"}}});
  wire.half_close();
  EXPECT_EQ(wire.next()["op"], "greeting");
  EXPECT_EQ(wire.next()["id"], 1);
  Json look = wire.next();
  EXPECT_EQ(look["id"], 2) << look.dump();
  EXPECT_EQ(look["ok"], true) << look.dump();
  EXPECT_TRUE(wire.at_end());
  kill(d.pid, SIGTERM);
  EXPECT_EQ(d.wait_exit(std::chrono::seconds(5)), 0);
  fs::remove_all(dir);
}

// SPEC R1.3, R1.2: the secret is a small regular file. A FIFO blocked the
// start and /dev/zero was read without end; now both are refused at once.
TEST(DirectoryProcess, R1_3_SecretFileMustBeASmallRegularFile) {
  char tmpl[] = "/tmp/rcxl-directory-test-XXXXXX";
  const fs::path dir(mkdtemp(tmpl));
  const std::string fifo = (dir / "fifo").string();
  ASSERT_EQ(mkfifo(fifo.c_str(), 0600), 0);
  const std::string big = (dir / "big").string();
  std::ofstream(big) << std::string(5000, 's');
  for (const std::string& path : {fifo, std::string("/dev/zero"), dir.string(), big}) {
    const Outcome r = run_directory({"--listen", "127.0.0.1:0", "--auth-secret-file", path});
    EXPECT_EQ(r.exit_code, 1) << path << ": " << r.err;
    EXPECT_TRUE(contains(r.err, "--auth-secret-file: " + path)) << r.err;
    EXPECT_TRUE(contains(r.err, "give a regular file of at most 4096 bytes")) << r.err;
  }
  fs::remove_all(dir);
}

// SPEC R1.2: the smallest --max-frame-bytes still serves a hello and a
// one-key register and lookup, so the floor refuses only useless limits.
TEST(DirectoryProcess, R1_2_TheSmallestFrameLimitStillServesTheOps) {
  Child d = Child::Start({RCXL_DIRECTORY_BINARY, "--listen", "127.0.0.1:0", "--auth", "none",
                          "--max-frame-bytes", "4096", "--log-level", "warn"});
  auto wire_ptr = hello_with_no_auth(d);
  ASSERT_NE(wire_ptr, nullptr);
  Wire& wire = *wire_ptr;
  Json look = register_and_look_up(wire);
  ASSERT_EQ(look["locations"].size(), 1u) << look.dump();
  kill(d.pid, SIGTERM);
  EXPECT_EQ(d.wait_exit(std::chrono::seconds(5)), 0);
}

// --max-keys also bounds the pages kept for reclaim: with 1, three keys
// evicted in turn leave one kept page (the newest), given back once.
TEST(DirectoryProcess, R1_1_MaxKeysBoundsThePagesKeptForReclaim) {
  Child d = Child::Start({RCXL_DIRECTORY_BINARY, "--listen", "127.0.0.1:0", "--auth", "none",
                          "--max-keys", "1", "--log-level", "warn"});
  auto wire_ptr = hello_with_no_auth(d);
  ASSERT_NE(wire_ptr, nullptr);
  Wire& wire = *wire_ptr;
  for (int i = 0; i < 4; ++i) {
    const Json location = {{"agent", "10.0.0.1:7000"}, {"boot", "b"},        {"region", 1},
                           {"read_handle", "ab"},      {"offset", i * 4096}, {"length", 4096}};
    Json reg =
        wire.call({{"op", "register"},
                   {"id", 2 + i},
                   {"entries", {{{"key", "k" + std::to_string(i)}, {"location", location}}}}});
    ASSERT_EQ(reg["registered"], Json::array({true})) << reg.dump();
  }
  Json stats = wire.call({{"op", "stats"}, {"id", 10}});
  EXPECT_EQ(stats["evictions"], 3) << stats.dump();
  EXPECT_EQ(stats["reclaimable"], 1) << stats.dump();
  EXPECT_EQ(stats["reclaimable_dropped"], 2) << stats.dump();  // k0, k1: the oldest
  const Json region = {{"agent", "10.0.0.1:7000"}, {"region", 1}, {"read_handle", "ab"}};
  Json back = wire.call({{"op", "reclaim"}, {"id", 11}, {"regions", {region}}, {"max", 8}});
  ASSERT_EQ(back["locations"].size(), 1u) << back.dump();
  EXPECT_EQ(back["locations"][0]["offset"], 2 * 4096);  // k2, the newest to leave
  kill(d.pid, SIGTERM);
  EXPECT_EQ(d.wait_exit(std::chrono::seconds(5)), 0);
}

}  // namespace
