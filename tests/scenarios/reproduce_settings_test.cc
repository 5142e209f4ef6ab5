// `rcxl-sim reproduce --set NAME=VALUE`: a what-if on the seed's table. The
// setting reaches every profile reproduce runs; a bad one is a coded error
// naming --set and the fix, before anything runs.
#include <fcntl.h>
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <atomic>
#include <filesystem>
#include <fstream>
#include <limits>
#include <string>
#include <vector>

#include "scenarios/embedded/embedded.h"
#include "scenarios/reproduce.h"
#include "tests/scratch_dir.h"

namespace rcxl::scenarios {
namespace {

TEST(ReproduceSettings, R8_ASettingReachesEveryProfile) {
  ReproduceOptions options;
  options.settings = {"idle_write_back=1", "hint_lead_ms=2", "/nic/bytes_per_second=6.25e9"};
  auto profiles = reproduce_profiles(options);
  ASSERT_TRUE(profiles.ok()) << profiles.status().ToString();
  ASSERT_EQ(profiles->count("cxl_ssd_default"), 1u);
  ASSERT_EQ(profiles->count("all_dram"), 1u);
  for (const auto& [name, p] : *profiles) {
    EXPECT_TRUE(p.device.device.idle_write_back) << name;
    EXPECT_EQ(p.engine.scheduler_to_worker, std::chrono::microseconds(2000)) << name;
    EXPECT_EQ(p.device.nic.bytes_per_second, 6.25e9) << name;
  }
}

// Review (session 11): a --set capacity below one region would fail every
// run; it is refused before any run, naming the profile.
TEST(ReproduceSettings, R8_ACapacityBelowOneRegionIsRefusedBeforeAnyRun) {
  ReproduceOptions options;
  options.settings = {"/device/capacity_bytes=16M"};
  options.out_dir = (rcxl::testing::fresh_dir("rcxl_repro", "capacity") / "out").string();
  std::atomic<int> lines{0};
  options.progress = [&](const std::string&) { ++lines; };
  auto r = reproduce(options);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), ErrorCode::kBadRequest);
  EXPECT_NE(r.status().message().find("--set (profile all_dram): /pool_bytes: memory node mem0's "
                                      "pool of 16777216 bytes"),
            std::string::npos)
      << r.status().message();
  EXPECT_EQ(lines.load(), 0);
  EXPECT_FALSE(std::filesystem::exists(options.out_dir));
}

// Chunks so large that the shipped files' pool_bytes (64 GiB) cannot take
// them: raising the capacity would not help, and pool_bytes is no --set
// field. The message names what --set can change (session 30 walkthrough).
TEST(ReproduceSettings, R8_ChunksTooLargeForTheShippedPoolsNameTheChunkFields) {
  for (const char* tokens : {"16384", "65536"}) {
    ReproduceOptions options;
    options.settings = {std::string("/engine/chunk_tokens=") + tokens};
    options.out_dir = (rcxl::testing::fresh_dir("rcxl_repro", "chunks") / "out").string();
    auto r = reproduce(options);
    ASSERT_FALSE(r.ok()) << tokens;
    EXPECT_EQ(r.status().code(), ErrorCode::kBadRequest);
    const std::string& m = r.status().message();
    EXPECT_NE(m.find("--set cannot change it: make KV chunks smaller (/engine/chunk_tokens or "
                     "/engine/kv_bytes_per_token)"),
              std::string::npos)
        << m;
    EXPECT_EQ(m.find("capacity_bytes at least"), std::string::npos) << m;
    EXPECT_EQ(m.find("raise pool_bytes"), std::string::npos) << m;
    EXPECT_EQ(m.find("give it at least"), std::string::npos) << m;
  }
}

// P4 stores 64 chunks (2 GiB) into one device: a --set capacity below that
// printed "P4 0.00 vs 0.00 GB/s" and exited 0 (session 27 review); it is
// refused before anything runs.
TEST(ReproduceSettings, R8_ACapacityP4CannotStoreIntoIsRefusedBeforeAnyRun) {
  ReproduceOptions options;
  options.settings = {"/device/capacity_bytes=1G"};
  options.out_dir = (rcxl::testing::fresh_dir("rcxl_repro", "p4") / "out").string();
  std::atomic<int> lines{0};
  options.progress = [&](const std::string&) { ++lines; };
  auto r = reproduce(options);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), ErrorCode::kBadRequest);
  EXPECT_NE(r.status().message().find(
                "--set (profile cxl_ssd_default): P4's store experiment "
                "(replays/store_bandwidth.json) does not fit: /workload: 64 stores x 1 chunk(s) "
                "on each of 1 GPU node(s) need 2 regions of 1073741824 bytes"),
            std::string::npos)
      << r.status().message();
  EXPECT_NE(r.status().message().find("and the pools hold 1 "), std::string::npos);
  EXPECT_NE(r.status().message().find("give /device/capacity_bytes at least 2147483648"),
            std::string::npos)
      << r.status().message();
  EXPECT_EQ(lines.load(), 0);
  EXPECT_FALSE(std::filesystem::exists(options.out_dir));
}

// A compared run whose reuse turns found no stored prefix counts their
// recomputed TTFTs in its mean: the table says how many (session 27 review:
// 235 of 240 such turns read as a plain result).
TEST(ReproduceSettings, R8_ReuseTurnsWithoutAStoredPrefixAreCounted) {
  ReproduceOptions options;
  options.pairs = 1;
  options.settings = {"/engine/store_prompt_after_prefill=0"};  // stores land at the finish
  options.out_dir = (rcxl::testing::fresh_dir("rcxl_repro", "without") / "out").string();
  auto r = reproduce(options);
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_NE(r->table.find("note: all_dram pair 1: "), std::string::npos) << r->table;
  EXPECT_NE(r->table.find(" of 240 reuse turns found no stored prefix"), std::string::npos)
      << r->table;
  const auto& runs = r->json["runs"]["all_dram"];
  EXPECT_EQ(runs["reuse_turns"][0], 240);
  EXPECT_GT(runs["reuse_turns_without_hits"][0].get<int>(), 0);
  std::filesystem::remove_all(options.out_dir);
}

// Review (session 25): settings under which no reuse turn loads anything
// (a chunk longer than every context) gave P2 "+0.00 [+0.00, +0.00]" as a
// measurement; reproduce now fails saying it measured nothing.
TEST(ReproduceSettings, R8_SettingsUnderWhichNothingLoadsFailTheRunsInsteadOfReadingZero) {
  ReproduceOptions options;
  options.pairs = 1;
  options.settings = {"/engine/chunk_tokens=16384", "/engine/kv_bytes_per_token=8"};
  options.out_dir = (rcxl::testing::fresh_dir("rcxl_repro", "no_loads") / "out").string();
  std::vector<std::string> lines;
  options.progress = [&](const std::string& line) { lines.push_back(line); };
  auto r = reproduce(options);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), ErrorCode::kInternal);
  EXPECT_NE(r.status().message().find("pair 1 loaded no KV"), std::string::npos)
      << r.status().message();
  bool said_na = false;
  for (const auto& line : lines) said_na |= line.find("load n/a") != std::string::npos;
  EXPECT_TRUE(said_na);  // the progress line too: no "load 0.00 ms"
  std::filesystem::remove_all(options.out_dir);
}

TEST(ReproduceSettings, R8_WithoutSettingsTheShippedProfilesRun) {
  auto profiles = reproduce_profiles(ReproduceOptions{});
  ASSERT_TRUE(profiles.ok());
  auto shipped = load_profile("", "cxl_ssd_default");
  ASSERT_TRUE(shipped.ok());
  const auto& p = profiles->at("cxl_ssd_default");
  EXPECT_FALSE(p.device.device.idle_write_back);
  EXPECT_EQ(p.device.nic.bytes_per_second, shipped->device.nic.bytes_per_second);
  EXPECT_EQ(p.engine.scheduler_to_worker, shipped->engine.scheduler_to_worker);
}

TEST(ReproduceSettings, R8_BadSettingsAreRefusedNamingTheOption) {
  const std::vector<std::pair<std::string, std::string>> cases = {
      {"nope=1", "--set nope: unknown parameter"},
      {"/workload/turns=3", "only profile fields"},
      {"concurrency=8", "only profile fields"},
      {"bogus=1", "--set bogus: unknown parameter; only profile fields can be set here"},
      {"idle_write_back=0,1", "takes one value"},
      {"flash_read_ns=3X", "K, M, G or T"},
      {"/nic/latency_ns=0x10", "'0x10' is not a value; write a number"},  // no hex floats
      {"/nic/latency_ns=0X1p3", "is not a value"},
      {"/device/channels=0", "/device/channels: must lie in"},
      {"/device/tR=3", "/device/tR: is not a known parameter"},
      {"idle_write_back", "--set idle_write_back: expected NAME=VALUE"},
      {"=1", "--set =1: expected NAME=VALUE"},
      {"/device/idle_write_back=2", "/device/idle_write_back: must lie in [0, 1]"},
      {"hint_lead_ms=-1",
       "scheduler_to_worker_us: expected a number in 0..10000000 (hint_lead_ms sets "
       "/engine/scheduler_to_worker_us x 1000)"},
  };
  for (const auto& [spec, says] : cases) {
    ReproduceOptions options;
    options.settings = {spec};
    auto profiles = reproduce_profiles(options);
    ASSERT_FALSE(profiles.ok()) << spec;
    EXPECT_EQ(profiles.status().code(), ErrorCode::kBadRequest) << spec;
    EXPECT_NE(profiles.status().message().find(says), std::string::npos)
        << spec << ": " << profiles.status().message();
    // reproduce() itself refuses before any run.
    auto report = reproduce(options);
    EXPECT_EQ(report.status().code(), ErrorCode::kBadRequest) << spec;
  }
}

// SPEC R8: --out is made and proven writable before the first run (it used to
// run everything and then throw filesystem_error).
TEST(ReproduceSettings, R8_AnUnwritableOutDirIsRefusedBeforeAnyRun) {
  ReproduceOptions options;
  options.out_dir = "/proc/rcxl-no-such-dir";
  int runs = 0;
  options.progress = [&](const std::string&) { ++runs; };
  auto report = reproduce(options);
  ASSERT_FALSE(report.ok());
  EXPECT_EQ(report.status().code(), ErrorCode::kBadRequest);
  const std::string& m = report.status().message();
  EXPECT_EQ(m.rfind("--out /proc/rcxl-no-such-dir: cannot create directory (", 0), 0u) << m;
  EXPECT_TRUE(m.ends_with("); choose a writable directory")) << m;
  EXPECT_EQ(runs, 0);
  // A file where the directory should be is named as a file.
  options.out_dir = "/proc/self/status";
  auto file = reproduce(options);
  ASSERT_FALSE(file.ok());
  EXPECT_EQ(file.status().message(),
            "--out /proc/self/status: it is a file, not a directory; choose a directory (it is "
            "made if missing)");
  EXPECT_EQ(runs, 0);
}

// SPEC R8: one field set twice (or by its two names) kept the last value.
TEST(ReproduceSettings, R8_OneFieldSetTwiceIsRefusedNamingBoth) {
  const std::vector<std::pair<std::vector<std::string>, std::string>> cases = {
      {{"flash_read_ns=1", "flash_read_ns=2"},
       "--set flash_read_ns: sets the same field as --set flash_read_ns (/device/flash_read_ns)"},
      {{"flash_read_ns=1", "/device/flash_read_ns=2"},
       "--set /device/flash_read_ns: sets the same field as --set flash_read_ns"},
      {{"/engine/scheduler_to_worker_us=5", "hint_lead_ms=2"},
       "--set hint_lead_ms: sets the same field as --set /engine/scheduler_to_worker_us"},
  };
  for (const auto& [settings, says] : cases) {
    ReproduceOptions options;
    options.settings = settings;
    auto profiles = reproduce_profiles(options);
    ASSERT_FALSE(profiles.ok()) << says;
    EXPECT_EQ(profiles.status().code(), ErrorCode::kBadRequest);
    EXPECT_NE(profiles.status().message().find(says), std::string::npos)
        << profiles.status().message();
  }
}

// A refused reproduce: kBadRequest saying `says`, and nothing ran.
void expect_refused(ReproduceOptions options, const std::string& says) {
  int runs = 0;
  options.progress = [&](const std::string&) { ++runs; };
  options.out_dir = "/proc/rcxl-no-such-dir";  // had the checks passed: refused here, not run
  auto report = reproduce(options);
  ASSERT_FALSE(report.ok()) << says;
  EXPECT_EQ(report.status().code(), ErrorCode::kBadRequest);
  EXPECT_NE(report.status().message().find(says), std::string::npos) << report.status().message();
  EXPECT_EQ(runs, 0);
}

// SPEC R8: --p5-pairs is "at most --pairs"; a larger value was silently
// clamped. Only the default (the seed's 3) still shrinks to a smaller --pairs.
TEST(ReproduceSettings, R8_P5PairsAboveThePairsIsRefused) {
  ReproduceOptions options;
  options.pairs = 2;
  options.p5_pairs = 4;
  expect_refused(options,
                 "--p5-pairs 4: at most --pairs 2 (P5 pairs with the hinted runs); give "
                 "--p5-pairs 2 or less, or raise --pairs to 4");
  options.p5_pairs = 3;  // the default's value, given on the command line
  options.p5_pairs_given = true;
  expect_refused(options, "--p5-pairs 3: at most --pairs 2");
  options.p5_pairs = 0;
  expect_refused(options, "--p5-pairs 0: P5 needs at least 1 pair");
  // The default passes these checks with --pairs 1 (and fails only at --out).
  options = ReproduceOptions{};
  options.pairs = 1;
  expect_refused(options, "--out /proc/rcxl-no-such-dir: cannot create directory");
}

// SPEC R8: seeds past 2^64 - 1 wrapped to 0.
TEST(ReproduceSettings, R8_SeedsThatWouldWrapAreRefused) {
  ReproduceOptions options;
  options.pairs = 2;
  options.first_seed = std::numeric_limits<std::uint64_t>::max();
  expect_refused(options,
                 "--seed 18446744073709551615 with --pairs 2: the seeds would pass "
                 "18446744073709551615 and wrap to 0");
}

std::filesystem::path fresh_dir(const std::string& tag) {
  return rcxl::testing::fresh_dir("rcxl_reproduce", tag);
}

// reproduce() into `dir` with one pair: kBadRequest saying `says`, nothing ran.
void expect_refused_in(const std::filesystem::path& dir, const std::string& says) {
  ReproduceOptions options;
  options.pairs = 1;
  options.out_dir = dir.string();
  int runs = 0;
  options.progress = [&](const std::string&) { ++runs; };
  auto report = reproduce(options);
  ASSERT_FALSE(report.ok()) << says;
  EXPECT_EQ(report.status().code(), ErrorCode::kBadRequest) << report.status().message();
  EXPECT_NE(report.status().message().find(says), std::string::npos) << report.status().message();
  EXPECT_EQ(runs, 0) << says;
}

// SPEC R8: a reproduce.json that was a FIFO hung reproduce in its final open;
// an output that was a directory failed after every run, with no reason.
TEST(ReproduceSettings, R8_AnOutputThatIsNotARegularFileIsRefusedBeforeAnyRun) {
  const std::filesystem::path dir = fresh_dir("nonregular");
  const std::string fix = ", not a regular file; remove it or choose another --out directory";
  const std::string json = (dir / "reproduce.json").string();
  ASSERT_EQ(::mkfifo(json.c_str(), 0600), 0);
  // A reader lets a writer's open return: unfixed, this test fails instead of hanging.
  const int reader = ::open(json.c_str(), O_RDONLY | O_NONBLOCK);
  ASSERT_GE(reader, 0);
  expect_refused_in(dir, "--out " + dir.string() + ": " + json + " is a FIFO (named pipe)" + fix);
  ::close(reader);
  std::filesystem::remove(json);
  for (const std::string name :
       {"reproduce.json", "ttft_cdf.svg", "load_time_cdf.svg", "store_bandwidth.svg"}) {
    const std::string path = (dir / name).string();
    std::filesystem::create_directory(path);
    expect_refused_in(dir, "--out " + dir.string() + ": " + path + " is a directory" + fix);
    std::filesystem::remove(path);
  }
  std::filesystem::remove_all(dir);
}

// SPEC R8: a --profiles DIR without one of the profiles reproduce needs said
// "name a .json file", a file the user never named: it now says which profile
// DIR needs and where the shipped one is (new-user review, session 28).
TEST(ReproduceSettings, R8_AProfilesDirWithoutANeededProfileSaysWhichOne) {
  const std::filesystem::path dir = fresh_dir("missing");
  std::ofstream(dir / "cxl_ssd_default.json") << *embedded_file("profiles/cxl_ssd_default.json");
  ReproduceOptions options;
  options.profiles_dir = dir.string();
  auto profiles = reproduce_profiles(options);
  ASSERT_FALSE(profiles.ok());
  EXPECT_EQ(profiles.status().code(), ErrorCode::kNotFound);
  EXPECT_EQ(profiles.status().message(),
            dir.string() + "/all_dram.json: no such file; --profiles " + dir.string() +
                " needs a profile named 'all_dram' (copy the shipped "
                "scenarios/profiles/all_dram.json there)");
  std::filesystem::remove_all(dir);
}

// SPEC R8: with --profiles DIR, a broken profile was blamed on the built-in
// profiles/<name>.json, a file the user never gave; `rcxl-sim run` names DIR's.
TEST(ReproduceSettings, R8_ABrokenProfileIsNamedByTheFileItCameFrom) {
  const std::filesystem::path dir = fresh_dir("own");
  for (const std::string name : {"all_dram", "cxl_ssd_default"}) {
    Json j = Json::parse(*embedded_file("profiles/" + name + ".json"));
    if (name == "cxl_ssd_default") j["device"]["channels"]["value"] = 0;
    std::ofstream(dir / (name + ".json")) << j.dump(2);
  }
  const std::string says =
      dir.string() + "/cxl_ssd_default.json: /device/channels: must lie in [1, 1024]";
  ReproduceOptions options;
  options.profiles_dir = dir.string();
  auto profiles = reproduce_profiles(options);
  ASSERT_FALSE(profiles.ok());
  EXPECT_EQ(profiles.status().code(), ErrorCode::kBadRequest);
  EXPECT_EQ(profiles.status().message().rfind(says, 0), 0u) << profiles.status().message();
  options.settings = {"idle_write_back=1"};
  profiles = reproduce_profiles(options);
  ASSERT_FALSE(profiles.ok());
  EXPECT_EQ(profiles.status().message().rfind("--set idle_write_back=1: " + says, 0), 0u)
      << profiles.status().message();
  // reproduce() itself refuses before any run, with the same words.
  options.settings.clear();
  options.out_dir = (dir / "out").string();
  int runs = 0;
  options.progress = [&](const std::string&) { ++runs; };
  auto report = reproduce(options);
  ASSERT_FALSE(report.ok());
  EXPECT_EQ(report.status().code(), ErrorCode::kBadRequest);
  EXPECT_EQ(report.status().message().rfind(says, 0), 0u) << report.status().message();
  EXPECT_EQ(runs, 0);
  std::filesystem::remove_all(dir);
}
}  // namespace
}  // namespace rcxl::scenarios
