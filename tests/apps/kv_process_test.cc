// The rcxl-kv binary as a process: --help, bad arguments and a missing RDMA
// device end with exit code 1 and a message that says what to do. (Moving
// bytes needs a device: ci/rxe-guest-e2e runs it inside the SoftRoCE VM.)
#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <string>
#include <utility>
#include <vector>

namespace {

struct ProcessRun {
  int exit_code = -1;
  std::string output;  // stdout and stderr
};

ProcessRun run_kv(const std::string& args) {
  ProcessRun r;
  const std::string command = std::string(RCXL_KV_BINARY) + " " + args + " 2>&1";
  FILE* pipe = popen(command.c_str(), "r");
  if (!pipe) return r;
  char buf[4096];
  std::size_t n;
  while ((n = fread(buf, 1, sizeof buf, pipe)) > 0) r.output.append(buf, n);
  const int status = pclose(pipe);
  r.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  return r;
}

bool contains(const std::string& text, const std::string& part) {
  return text.find(part) != std::string::npos;
}

// One file per test process: ctest -j runs these tests in parallel processes,
// and rewriting a shared file could hand another test's rcxl-kv an empty secret.
std::string secret_file() {
  struct File {
    std::filesystem::path path = std::filesystem::temp_directory_path() /
                                 ("rcxl_kv_process_test." + std::to_string(::getpid()) + ".secret");
    File() { std::ofstream(path) << "s3cret\n"; }
    ~File() { std::filesystem::remove(path); }
  };
  static const File file;
  return file.path.string();
}

constexpr char kBase[] = "--directory 127.0.0.1:1 --agent 127.0.0.1:2 ";

// SPEC R1.1: the client role as a tool; every mode is named in --help.
TEST(KvProcess, R1_1_HelpNamesEveryModeAndExitsZero) {
  ProcessRun r = run_kv("--help");
  EXPECT_EQ(r.exit_code, 0) << r.output;
  for (const char* part : {"store", "load", "bench", "--directory", "--nic", "--secret-file",
                           "--zero-copy", "Exit codes"}) {
    EXPECT_TRUE(contains(r.output, part)) << part << " missing from:\n" << r.output;
  }
}

// SPEC R1.2 (bad input is refused with a reason): arguments checked before any I/O.
TEST(KvProcess, R1_2_MissingModeOrRequiredFlagIsRefused) {
  ProcessRun none = run_kv(std::string(kBase) + "--nic verbs:rxe0 --auth none");
  EXPECT_EQ(none.exit_code, 1) << none.output;
  EXPECT_TRUE(contains(none.output, "subcommand")) << none.output;
  ProcessRun no_nic = run_kv(std::string(kBase) + "--auth none load k --out /tmp");
  EXPECT_EQ(no_nic.exit_code, 1) << no_nic.output;
  EXPECT_TRUE(contains(no_nic.output, "--nic")) << no_nic.output;
}

// Exit code 1 is the documented usage error (--help, docs/hardware.md), not
// CLI11's 105/106/109, and the message says what the flag wants.
TEST(KvProcess, R1_2_ABadFlagValueExitsOneSayingWhatIsWanted) {
  const std::string base = std::string(kBase) + "--nic verbs:rxe0 --auth none ";
  const std::vector<std::pair<std::string, std::string>> cases = {
      {"bench --batch 0", "--batch: must be a whole number from 1 to 4096, not '0'"},
      {"bench --mib 0", "--mib: must be a whole number from 1 to 1048576, not '0'"},
      {"--timeout-s 0 bench", "--timeout-s: must be a number > 0, not '0'"},
      {"bench --settle-s abc", "--settle-s: must be a number >= 0, not 'abc'"},
      {"--write-wait-ms 10001 bench", "--write-wait-ms: must be a whole number from 0 to 10000"},
      {"--read-hints --no-read-hints bench", "excludes"},
      {"--no-such-flag bench", "--no-such-flag"},
  };
  for (const auto& [args, says] : cases) {
    ProcessRun r = run_kv(base + args);
    EXPECT_EQ(r.exit_code, 1) << args << ": " << r.output;
    EXPECT_TRUE(contains(r.output, says)) << args << ": " << r.output;
    EXPECT_TRUE(contains(r.output, "run with --help")) << r.output;
  }
}

// SPEC R3.4: read hints are on unless --no-read-hints; --help must not suggest otherwise.
TEST(KvProcess, R3_4_HelpSaysReadHintsAreOnByDefault) {
  ProcessRun r = run_kv("--help");
  EXPECT_EQ(r.exit_code, 0) << r.output;
  EXPECT_TRUE(contains(r.output, "read hints (SPEC R3.4) on (default: on)")) << r.output;
  EXPECT_TRUE(contains(r.output, "--no-read-hints")) << r.output;
  EXPECT_FALSE(contains(r.output, "{false}")) << r.output;
}

TEST(KvProcess, R1_2_StoreNeedsKeyFilePairs) {
  ProcessRun r = run_kv(std::string(kBase) + "--nic verbs:rxe0 --auth none store onlykey");
  EXPECT_EQ(r.exit_code, 1) << r.output;
  EXPECT_TRUE(contains(r.output, "KEY FILE pairs")) << r.output;
}

TEST(KvProcess, R1_2_BadNicSpecSaysTheForm) {
  ProcessRun r = run_kv(std::string(kBase) + "--nic rxe0 --auth none load k --out /tmp");
  EXPECT_EQ(r.exit_code, 1) << r.output;
  EXPECT_TRUE(contains(r.output, "verbs:DEVICE")) << r.output;
}

TEST(KvProcess, R1_3_SecretIsRequiredAndItsFileMustExist) {
  ProcessRun none = run_kv(std::string(kBase) + "--nic verbs:rxe0 load k --out /tmp");
  EXPECT_EQ(none.exit_code, 1) << none.output;
  EXPECT_TRUE(contains(none.output, "--secret-file PATH")) << none.output;
  ProcessRun missing = run_kv(std::string(kBase) +
                              "--nic verbs:rxe0 --secret-file /nonexistent/s load k --out /tmp");
  EXPECT_EQ(missing.exit_code, 1) << missing.output;
  EXPECT_TRUE(contains(missing.output, "/nonexistent/s")) << missing.output;
}

TEST(KvProcess, R1_2_RegionSizeMustHoldWholeChunks) {
  ProcessRun r = run_kv(std::string(kBase) + "--nic verbs:rxe0 --secret-file " + secret_file() +
                        " --chunk-size 3000 --region-size 64M bench");
  EXPECT_EQ(r.exit_code, 1) << r.output;
  EXPECT_TRUE(contains(r.output, "--region-size must be a multiple")) << r.output;
}

TEST(KvProcess, R1_2_ExpectResetNeedsTheCommandThatResets) {
  ProcessRun r = run_kv(std::string(kBase) + "--nic verbs:rxe0 --auth none bench --expect-reset");
  EXPECT_EQ(r.exit_code, 1) << r.output;
  EXPECT_TRUE(contains(r.output, "--between-rounds")) << r.output;
}

// Issue #7 item 7: without the device the message names ci/rxe-vm.
TEST(KvProcess, R1_6_MissingRdmaDeviceNamesTheSoftRoceVm) {
  ProcessRun r = run_kv(std::string(kBase) + "--nic verbs:no_such_dev0 --secret-file " +
                        secret_file() + " load k --out /tmp");
  EXPECT_EQ(r.exit_code, 1) << r.output;
  EXPECT_TRUE(contains(r.output, "no RDMA device 'no_such_dev0'")) << r.output;
  EXPECT_TRUE(contains(r.output, "ci/rxe-vm")) << r.output;
}

}  // namespace
