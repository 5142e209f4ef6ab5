// The rcxl-kv binary as a process: --help, bad arguments and a missing RDMA
// device end with exit code 1 and a message that says what to do. (Moving
// bytes needs a device: ci/rxe-guest-e2e runs it inside the SoftRoCE VM.)
#include <gtest/gtest.h>
#include <sys/wait.h>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <string>

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

std::string secret_file() {
  const auto path = std::filesystem::temp_directory_path() / "rcxl_kv_process_test.secret";
  std::ofstream(path) << "s3cret\n";
  return path.string();
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
  EXPECT_NE(none.exit_code, 0);
  EXPECT_TRUE(contains(none.output, "subcommand")) << none.output;
  ProcessRun no_nic = run_kv(std::string(kBase) + "--auth none load k --out /tmp");
  EXPECT_NE(no_nic.exit_code, 0);
  EXPECT_TRUE(contains(no_nic.output, "--nic")) << no_nic.output;
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
