// The rcxl-kv binary as a process: --help, bad arguments and a missing RDMA
// device end with exit code 1 and a message that says what to do. (Moving
// bytes needs a device: ci/rxe-guest-e2e runs it inside the SoftRoCE VM.)
#include <gtest/gtest.h>
#include <sys/stat.h>
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

// A scratch directory per test process holding the odd files a hunt feeds in:
// a FIFO, an empty file, a file of `big` bytes, a plain file. Removed at exit.
struct OddFiles {
  std::filesystem::path dir = std::filesystem::temp_directory_path() /
                              ("rcxl_kv_process_test." + std::to_string(::getpid()) + ".odd");
  std::string fifo = (dir / "fifo").string();
  std::string empty = (dir / "empty").string();
  std::string big = (dir / "big").string();
  std::string plain = (dir / "plain").string();
  OddFiles() {
    std::filesystem::create_directories(dir);
    mkfifo(fifo.c_str(), 0600);
    std::ofstream{empty};
    std::ofstream(big) << std::string(5000, 'a');
    std::ofstream(plain) << "value";
  }
  ~OddFiles() { std::filesystem::remove_all(dir); }
};

const OddFiles& odd_files() {
  static const OddFiles files;
  return files;
}

// The device no host has: a check that ran after opening it would name it instead.
constexpr char kNoDevice[] = "--nic verbs:no_such_dev0 ";

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

// SPEC R1.2: a misspelt mode is named with the modes there are, and a global
// flag given after the mode is taken, not refused as unexpected.
TEST(KvProcess, R1_2_AnUnknownModeIsNamedAndGlobalFlagsMayFollowTheMode) {
  const std::string base = std::string(kBase) + "--nic verbs:rxe0 --auth none ";
  ProcessRun typo = run_kv(base + "frob");
  EXPECT_EQ(typo.exit_code, 1) << typo.output;
  EXPECT_TRUE(contains(typo.output, "no subcommand 'frob'; one of: store, load, bench"))
      << typo.output;
  ProcessRun help = run_kv("bench --help");
  EXPECT_TRUE(contains(help.output, "before or after the mode")) << help.output;
  ProcessRun after = run_kv(std::string(kBase) + "--auth none bench --chunk-size 1M --nic " +
                            "verbs:no_such_dev0");
  EXPECT_FALSE(contains(after.output, "not expected")) << after.output;
  EXPECT_TRUE(contains(after.output, "no_such_dev0")) << after.output;
}

// Exit code 1 is the documented usage error (--help, docs/hardware.md), not
// CLI11's 105/106/109, and the message says what the flag wants.
TEST(KvProcess, R1_2_ABadFlagValueExitsOneSayingWhatIsWanted) {
  const std::string base = std::string(kBase) + "--nic verbs:rxe0 --auth none ";
  const std::vector<std::pair<std::string, std::string>> cases = {
      {"bench --batch 0", "--batch: must be a whole number from 1 to 4096, not '0'"},
      {"bench --mib 0", "--mib: must be a whole number from 1 to 1048576, not '0'"},
      {"--timeout-s 0 bench", "--timeout-s: must be a number >= 0.001, not '0'"},
      // SPEC R1.2: a deadline under 1 ms rounds to 0 ms and would fail every call.
      {"--timeout-s 1e-9 bench", "--timeout-s: must be a number >= 0.001, not '1e-9'"},
      // SPEC R1.2: CLI11 alone took a negative seed and one past 2^64.
      {"bench --seed -1", "--seed: must be a whole number >= 0, not '-1'"},
      {"bench --seed 99999999999999999999999", "--seed: must be at most 18446744073709551615"},
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

// --only-pool-agents with no --agent: every stored key read as a miss (exit
// 3) and nothing said why; refused before the NIC opens (review, session 25).
TEST(KvProcess, R1_2_OnlyPoolAgentsWithoutAPoolIsRefused) {
  ProcessRun r = run_kv(
      "--directory 127.0.0.1:1 --nic verbs:no_such_dev0 --auth none "
      "--only-pool-agents load k --out /tmp");
  EXPECT_EQ(r.exit_code, 1) << r.output;
  EXPECT_TRUE(contains(r.output, "--only-pool-agents reads only from the pool")) << r.output;
  EXPECT_FALSE(contains(r.output, "no_such_dev0")) << r.output;  // before the NIC
}

// A subcommand's option before the subcommand: CLI11 said only "--nic is
// required" or "not expected"; the message says where it goes.
TEST(KvProcess, R8_AnOptionBeforeItsSubcommandIsNamed) {
  ProcessRun r = run_kv("--directory 127.0.0.1:1 --nic none --auth none --out /tmp load k");
  EXPECT_EQ(r.exit_code, 1) << r.output;
  EXPECT_TRUE(contains(r.output, "rcxl-kv: '--out' is an option of 'load': put it after 'load'"))
      << r.output;
}

// An agent's RDMA endpoint when it runs --rdma-listen (new-user review,
// session 32): malformed or repeated pairs are refused before the NIC opens.
TEST(KvProcess, R1_2_ABadAgentRdmaPairIsRefused) {
  const std::string base = "--directory 127.0.0.1:1 --nic verbs:no_such_dev0 --auth none ";
  for (const std::string pairs :
       {"--agent-rdma 10.0.0.5:7000", "--agent-rdma =10.1.0.5",
        "--agent-rdma 10.0.0.5:7000=", "--agent-rdma a:1=10.1.0.5:74x",
        "--agent-rdma a:1=10.1.0.5:0", "--agent-rdma a:1=b --agent-rdma a:1=c"}) {
    ProcessRun r = run_kv(base + pairs + " load k --out /tmp");
    EXPECT_EQ(r.exit_code, 1) << pairs << ": " << r.output;
    EXPECT_TRUE(contains(r.output, "--agent-rdma")) << pairs << ": " << r.output;
    EXPECT_FALSE(contains(r.output, "no_such_dev0")) << r.output;  // before the NIC
  }
}

// R4.3: a write wait rides on a write hint; with write hints off
// --write-wait-ms was silently ignored. Refused before the NIC opens; 0 and the
// default stay fine (session 26).
TEST(KvProcess, R4_3_AWriteWaitWithWriteHintsOffIsRefused) {
  const std::string base = "--directory 127.0.0.1:1 --nic verbs:no_such_dev0 --auth none ";
  for (const std::string flags : {"--no-write-hints", "--no-read-hints"}) {
    ProcessRun r = run_kv(base + flags + " --write-wait-ms 20 load k --out /tmp");
    EXPECT_EQ(r.exit_code, 1) << flags << ": " << r.output;
    EXPECT_TRUE(contains(r.output, "--write-wait-ms 20 waits only with write hints on"))
        << flags << ": " << r.output;
    EXPECT_FALSE(contains(r.output, "no_such_dev0")) << r.output;  // before the NIC
  }
  for (const std::string flags : {"--no-write-hints --write-wait-ms 0", "--no-write-hints",
                                  "--no-read-hints --write-hints --write-wait-ms 20"}) {
    ProcessRun r = run_kv(base + flags + " load k --out /tmp");
    EXPECT_TRUE(contains(r.output, "no_such_dev0")) << flags << ": " << r.output;  // got to the NIC
  }
}

// A key load cannot write (over NAME_MAX) was stored all the same, and could
// never be loaded with rcxl-kv (review, session 26).
TEST(KvProcess, R1_2_AKeyLongerThanAFileNameIsRefusedAtStore) {
  ProcessRun r = run_kv(
      "--directory 127.0.0.1:1 --agent 127.0.0.1:2 --nic verbs:no_such_dev0 "
      "--auth none store " +
      std::string(300, 'k') + " /etc/hostname");
  EXPECT_EQ(r.exit_code, 1) << r.output;
  EXPECT_TRUE(contains(r.output, "is 300 bytes; rcxl-kv load writes each key")) << r.output;
  EXPECT_FALSE(contains(r.output, "no_such_dev0")) << r.output;  // before the NIC
}

// Keys load cannot write ('.', '..') are refused at store too, before the
// NIC: stored, they could never be loaded with rcxl-kv (session 27 review).
TEST(KvProcess, R1_2_AKeyLoadCannotWriteIsRefusedAtStore) {
  for (const char* key : {".", ".."}) {
    ProcessRun r = run_kv(
        "--directory 127.0.0.1:1 --agent 127.0.0.1:2 --nic verbs:no_such_dev0 --auth none store " +
        std::string(key) + " /etc/hostname");
    EXPECT_EQ(r.exit_code, 1) << r.output;
    EXPECT_TRUE(contains(r.output, "names no file for rcxl-kv load")) << r.output;
    EXPECT_FALSE(contains(r.output, "no_such_dev0")) << r.output;
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
  // None at all: the usage, not CLI11's "pairs is required".
  r = run_kv(std::string(kBase) + "--nic verbs:rxe0 --auth none store");
  EXPECT_EQ(r.exit_code, 1) << r.output;
  EXPECT_TRUE(contains(r.output, "store: name at least one KEY FILE pair")) << r.output;
  r = run_kv(std::string(kBase) + kNoDevice + "--auth none load --out /tmp");
  EXPECT_EQ(r.exit_code, 1) << r.output;
  EXPECT_TRUE(contains(r.output, "load: name at least one KEY")) << r.output;
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
  // The agent's and directory's spelling is taken too (new-user review, session 32).
  ProcessRun services = run_kv(
      std::string(kBase) + "--nic verbs:rxe0 --auth-secret-file /nonexistent/s load k --out /tmp");
  EXPECT_EQ(services.exit_code, 1) << services.output;
  EXPECT_TRUE(contains(services.output, "/nonexistent/s")) << services.output;
  // An empty secret names its flag too (session 30 review).
  const std::string empty = "/tmp/rcxl_kv_empty_secret_" + std::to_string(::getpid());
  { std::ofstream(empty) << "\n"; }
  ::chmod(empty.c_str(), 0600);
  ProcessRun blank =
      run_kv(std::string(kBase) + "--nic verbs:rxe0 --secret-file " + empty + " load k --out /tmp");
  std::remove(empty.c_str());
  EXPECT_EQ(blank.exit_code, 1) << blank.output;
  EXPECT_TRUE(contains(blank.output, "--secret-file: " + empty + " holds an empty secret"))
      << blank.output;
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

// SPEC R1.3, R1.2: the secret is a small regular file. A FIFO blocked the
// start and /dev/zero was read without end; now both are refused at once.
TEST(KvProcess, R1_3_SecretFileMustBeASmallRegularFile) {
  const OddFiles& odd = odd_files();
  for (const std::string& path : {odd.fifo, std::string("/dev/zero"), odd.dir.string(), odd.big}) {
    ProcessRun r = run_kv(std::string(kBase) + kNoDevice + "--secret-file " + path +
                          " load k --out " + odd.dir.string());
    EXPECT_EQ(r.exit_code, 1) << path << ": " << r.output;
    EXPECT_TRUE(contains(r.output, "--secret-file: " + path)) << r.output;
    EXPECT_TRUE(contains(r.output, "give a regular file of at most 4096 bytes")) << r.output;
  }
}

// SPEC R1.2: every value file is read and checked before the NIC opens, and a
// FIFO or /dev/zero is refused rather than blocking or read without end.
TEST(KvProcess, R1_2_StoreValueFilesAreCheckedBeforeTheNic) {
  const OddFiles& odd = odd_files();
  const std::vector<std::pair<std::string, std::string>> cases = {
      {"store k " + odd.fifo, "store k: " + odd.fifo + ": not a regular file"},
      {"store k /dev/zero", "store k: /dev/zero: not a regular file"},
      {"store k " + odd.empty, "holds 0 bytes; a value is a regular file of 1..262144 bytes"},
      {"--chunk-size 4K store k " + odd.big,
       "holds 5000 bytes; a value is a regular file of 1..4096"},
      {"store k /nonexistent/v", "store k: /nonexistent/v: No such file"},
      {"store '' " + odd.plain, "store: a key is empty (pair 1)"},
      // First writer wins: the second file would have been dropped unseen.
      {"store k " + odd.plain + " k " + odd.plain, "store: key 'k' is given twice"},
  };
  for (const auto& [args, says] : cases) {
    ProcessRun r = run_kv(std::string(kBase) + kNoDevice + "--auth none " + args);
    EXPECT_EQ(r.exit_code, 1) << args << ": " << r.output;
    EXPECT_TRUE(contains(r.output, says)) << args << ": " << r.output;
    EXPECT_FALSE(contains(r.output, "no_such_dev0")) << args << ": " << r.output;
  }
}

// SPEC R1.2: each loaded key gets its own file under --out. Keys that would
// share one ('a/b' and 'a_b'), name none ('', '..') or too long a one were
// loaded and then overwrote each other or failed to write; now refused first.
TEST(KvProcess, R1_2_LoadKeysEachNeedTheirOwnFileUnderOut) {
  const OddFiles& odd = odd_files();
  const std::string out = " --out " + odd.dir.string();
  const std::vector<std::pair<std::string, std::string>> cases = {
      {"load ''" + out, "key '' names no file under --out"},
      {"load .." + out, "key '..' names no file under --out"},
      {"load k k" + out, "key 'k' is given twice"},
      {"load a/b a_b" + out, "keys 'a/b' and 'a_b' would both be written to --out/a_b"},
      {"load " + std::string(300, 'k') + out, "its file name under --out holds at most 255"},
      {"load k --out " + odd.plain, "--out " + odd.plain + " exists and is not a directory"},
      // Before the NIC too (session 27 review): these failed only after it opened.
      {"load k --out ''", "--out is empty"},
      {"load k --out " + odd.plain + "/sub/dir",
       odd.plain + " is not a directory, so no directory"},
  };
  for (const auto& [args, says] : cases) {
    ProcessRun r = run_kv(std::string(kBase) + kNoDevice + "--auth none " + args);
    EXPECT_EQ(r.exit_code, 1) << args << ": " << r.output;
    EXPECT_TRUE(contains(r.output, "rcxl-kv: load: ")) << args << ": " << r.output;
    EXPECT_TRUE(contains(r.output, says)) << args << ": " << r.output;
    EXPECT_FALSE(contains(r.output, "no_such_dev0")) << args << ": " << r.output;
  }
}

// SPEC R1.2: a chunk larger than the region is named as such (it read as a
// multiple-of problem of the region before).
TEST(KvProcess, R1_2_AChunkLargerThanTheRegionIsNamed) {
  ProcessRun r = run_kv(std::string(kBase) + kNoDevice +
                        "--auth none --chunk-size 99999999G load k --out /tmp");
  EXPECT_EQ(r.exit_code, 1) << r.output;
  EXPECT_TRUE(contains(r.output, "--chunk-size 99999999G is larger than --region-size 64M"))
      << r.output;
}

// SPEC R1.2: a bench call generates --batch values of --chunk-size at once;
// 4096 of 64 MiB (256 GiB) would exhaust memory, so over 1 GiB is refused.
TEST(KvProcess, R1_2_BenchBatchBytesAreBounded) {
  for (const std::string& args :
       {std::string("--chunk-size 64M bench --batch 4096"),
        std::string("--chunk-size 2G --region-size 2G bench --batch 1")}) {
    ProcessRun r = run_kv(std::string(kBase) + kNoDevice + "--auth none " + args);
    EXPECT_EQ(r.exit_code, 1) << args << ": " << r.output;
    EXPECT_TRUE(contains(r.output, "exceed 1 GiB per call; lower --batch or --chunk-size"))
        << args << ": " << r.output;
  }
  // The largest batch of the default chunk is exactly the bound: it passes on to the NIC.
  ProcessRun largest = run_kv(std::string(kBase) + kNoDevice + "--auth none bench --batch 4096");
  EXPECT_EQ(largest.exit_code, 1) << largest.output;
  EXPECT_TRUE(contains(largest.output, "no RDMA device 'no_such_dev0'")) << largest.output;
}

// SPEC R1.2: an agent named twice (two connections to one pool) and a client
// name that is empty or long enough to crowd the agent's frame are refused.
TEST(KvProcess, R1_2_AgentsOnceAndAShortClientName) {
  const std::string base = std::string("--directory 127.0.0.1:1 ") + kNoDevice + "--auth none ";
  const std::vector<std::pair<std::string, std::string>> cases = {
      {"--agent 127.0.0.1:2 --agent 127.0.0.1:2 bench", "--agent 127.0.0.1:2 is given twice"},
      {"--client-name '' load k --out /tmp", "--client-name must be 1..128 bytes, not 0"},
      {"--client-name " + std::string(129, 'n') + " load k --out /tmp",
       "--client-name must be 1..128 bytes, not 129"},
  };
  for (const auto& [args, says] : cases) {
    ProcessRun r = run_kv(base + args);
    EXPECT_EQ(r.exit_code, 1) << args << ": " << r.output;
    EXPECT_TRUE(contains(r.output, says)) << args << ": " << r.output;
  }
  ProcessRun longest =
      run_kv(base + "--client-name " + std::string(128, 'n') + " load k --out /tmp");
  EXPECT_TRUE(contains(longest.output, "no RDMA device 'no_such_dev0'")) << longest.output;
}

}  // namespace
