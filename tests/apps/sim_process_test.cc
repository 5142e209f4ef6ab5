// `rcxl-sim reproduce` as a process (issue #6): the figures' pairs, the
// no-hint configuration only with --beyond, and bad arguments refused.
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>
#include <vector>

#include "tests/child_process.h"
#include "tests/scratch_dir.h"

namespace {

using namespace std::chrono_literals;
using rcxl::testing::ChildProcess;

// PAPER.md method: P1-P3 over --pairs, P5 over --p5-pairs (the seed's 3 by
// default), the no-hint run (beyond the seed) only when asked for.
TEST(SimProcess, R8_ReproduceRunsEachFigureOnItsOwnPairs) {
  const auto out = rcxl::testing::fresh_dir("rcxl_sim_process", "reproduce");
  std::filesystem::remove_all(out);
  auto child = ChildProcess::Start({RCXL_SIM_BINARY, "reproduce", "--pairs", "2", "--p5-pairs", "1",
                                    "--json", "--quiet", "--out", out.string()});
  const std::string text = ChildProcess::read_all(child.out);
  const std::string err = child.read_all_err();
  // ctest's limit for this build (longer under sanitizers), less a margin to report.
  ASSERT_EQ(child.wait_exit(std::chrono::seconds(RCXL_TEST_TIMEOUT_S - 5)), 0) << err;
  const auto j = nlohmann::json::parse(text);
  for (const char* k : {"P1", "P2", "P3", "P4", "P5", "P6"}) EXPECT_TRUE(j.contains(k)) << k;
  EXPECT_EQ(j["P1"]["pairs"], 2);
  EXPECT_EQ(j["P3"]["pairs"], 2);
  EXPECT_EQ(j["P5"]["pairs"], 1);
  EXPECT_EQ(j["first_seed"], 1);  // which seeds the pairs ran (session 27 review)
  // Two pairs give a t-interval; one pair a mean and no interval (not a zero-width one).
  ASSERT_TRUE(j["P1"]["ci"].is_array());
  EXPECT_LT(j["P1"]["ci"][0].get<double>(), j["P1"]["ci"][1].get<double>());
  EXPECT_TRUE(j["P5"]["ci"].is_null());
  EXPECT_TRUE(j["P1"].contains("seed_in_ci") && j["P1"]["seed_in_ci"].is_boolean());
  // P3 also reports the gate's own cost: its load delta minus P2's.
  EXPECT_NEAR(j["P3"]["over_hints_ms"].get<double>(),
              j["P3"]["delta_ms"].get<double>() - j["P2"]["value"].get<double>(), 1e-9);
  EXPECT_FALSE(j.contains("beyond_seed"));
  EXPECT_EQ(j["runs"]["hints"]["mean_load_ms"].size(), 2u);
  EXPECT_EQ(j["runs"]["waits_off"]["mean_load_ms"].size(), 1u);
  EXPECT_FALSE(j["runs"].contains("no_hints"));
  // P5 pairs waits_off with the first hints run (the same seed).
  const auto& runs = j["runs"];
  EXPECT_DOUBLE_EQ(j["P5"]["value"].get<double>(),
                   runs["waits_off"]["mean_reuse_ttft_ms"][0].get<double>() /
                       runs["hints"]["mean_reuse_ttft_ms"][0].get<double>());
  for (const char* f :
       {"reproduce.json", "ttft_cdf.svg", "load_time_cdf.svg", "store_bandwidth.svg"}) {
    EXPECT_TRUE(std::filesystem::exists(out / f)) << f;
  }
  std::filesystem::remove_all(out);
}

// The shipped profile's answer, as `make run` prints it: a change to the model
// that moves P4-P6 out of the seed's interval fails here, not in a reader's
// eyes. P1-P3 move with the store timing and the device's write-backs (issue
// #6, docs/reproduce.md, *When a turn's KV is stored*); their verdicts must be
// the rules', computed again from the values they report.
TEST(SimProcess, R8_TheDefaultReproduceKeepsP4P5P6WithinAndJudgesP1P2P3ByTheirRules) {
  const auto out = rcxl::testing::fresh_dir("rcxl_sim_process", "figures");
  std::filesystem::remove_all(out);
  auto child = ChildProcess::Start(
      {RCXL_SIM_BINARY, "reproduce", "--json", "--quiet", "--out", out.string()});
  const std::string text = ChildProcess::read_all(child.out);
  const std::string err = child.read_all_err();
  ASSERT_EQ(child.wait_exit(std::chrono::seconds(RCXL_TEST_TIMEOUT_S - 5)), 0) << err;
  const auto j = nlohmann::json::parse(text);
  for (const char* k : {"P4", "P5", "P6"}) {
    EXPECT_EQ(j[k]["within"], true) << k << ": " << j[k].dump();
  }
  // P1: the mean ratio inside the seed's interval; P2: within 25% of +1.24 ms.
  const double p1 = j["P1"]["value"].get<double>();
  EXPECT_EQ(j["P1"]["within"].get<bool>(), p1 >= 0.993 && p1 <= 1.015) << j["P1"].dump();
  const double p2 = j["P2"]["value"].get<double>();
  EXPECT_EQ(j["P2"]["within"].get<bool>(), std::abs(p2 - 1.24) <= 0.25 * 1.24) << j["P2"].dump();
  // Each also says whether the seed's value lies inside our interval, and on
  // this profile both do: a model change that moves them out fails here.
  EXPECT_EQ(j["P1"]["seed_in_ci"], true) << j["P1"].dump();
  EXPECT_EQ(j["P2"]["seed_in_ci"], true) << j["P2"].dump();
  for (const char* k : {"P1", "P2"}) {
    const auto& f = j[k];
    ASSERT_TRUE(f.contains("seed_in_ci")) << k;
    const double seed = f["seed"].get<double>();
    EXPECT_EQ(f["seed_in_ci"].get<bool>(),
              seed >= f["ci"][0].get<double>() && seed <= f["ci"][1].get<double>())
        << k << ": " << f.dump();
  }
  EXPECT_EQ(j["P1"]["pairs"], 5);
  EXPECT_EQ(j["P5"]["pairs"], 3);
  // P6, "latency = fill time": the READ ends after its range's last page is
  // in, by no more than that last segment's way back (well under 0.1 ms).
  const auto& p6 = j["P6"]["detail"];
  const double held = p6["latency_ms"].get<double>() - p6["fill_ms"].get<double>();
  EXPECT_GE(held, 0) << p6.dump();
  EXPECT_LT(held, 0.1) << p6.dump();
  // P3: within 25% of the seed's excess over 1 and of its delta (docs/reproduce.md).
  const auto& p3 = j["P3"];
  const double excess = p3["ratio"].get<double>() - 1;
  const double seed_excess = p3["seed_ratio"].get<double>() - 1;
  const double delta = p3["delta_ms"].get<double>();
  const double seed_delta = p3["seed_delta_ms"].get<double>();
  const bool rule = std::abs(excess - seed_excess) <= 0.25 * seed_excess &&
                    std::abs(delta - seed_delta) <= 0.25 * seed_delta;
  EXPECT_EQ(p3["within"].get<bool>(), rule) << p3.dump();
  std::filesystem::remove_all(out);
}

// One pair has no interval, so there is nothing the seed's value can be
// inside: `seed_in_ci` is null, not false.
TEST(SimProcess, R8_OnePairSaysNothingAboutTheSeedsValueInsideAnInterval) {
  const auto out = rcxl::testing::fresh_dir("rcxl_sim_process", "one_pair");
  std::filesystem::remove_all(out);
  auto json = ChildProcess::Start(
      {RCXL_SIM_BINARY, "reproduce", "--pairs", "1", "--json", "--quiet", "--out", out.string()});
  const std::string text = ChildProcess::read_all(json.out);
  const std::string err = json.read_all_err();
  ASSERT_EQ(json.wait_exit(std::chrono::seconds(RCXL_TEST_TIMEOUT_S - 5)), 0) << err;
  const auto j = nlohmann::json::parse(text);
  for (const char* k : {"P1", "P2"}) {
    EXPECT_TRUE(j[k]["ci"].is_null()) << k;
    ASSERT_TRUE(j[k].contains("seed_in_ci")) << k;
    EXPECT_TRUE(j[k]["seed_in_ci"].is_null()) << k;
  }
  std::filesystem::remove_all(out);
}

TEST(SimProcess, R8_ReproduceRefusesPairsOutOfRange) {
  for (const char* bad : {"--pairs=0", "--p5-pairs=0", "--pairs=x"}) {
    auto child = ChildProcess::Start({RCXL_SIM_BINARY, "reproduce", bad, "--quiet"});
    const std::string err = child.read_all_err();
    EXPECT_NE(child.wait_exit(10s), 0) << bad;
    EXPECT_NE(err.find(std::string(bad).substr(0, std::string(bad).find('='))), std::string::npos)
        << bad << ": " << err;
  }
}

// A scratch directory of scenario files for `rcxl-sim run`.
class SimRun : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = std::filesystem::temp_directory_path() / ("rcxl_sim_run_" + std::to_string(::getpid()));
    std::filesystem::create_directories(dir_);
  }
  void TearDown() override { std::filesystem::remove_all(dir_); }
  // A run of a second or less: two one-turn conversations.
  std::string write_scenario(const char* name, nlohmann::json extra = nlohmann::json::object()) {
    nlohmann::json j = {{"name", "t"}, {"workload", {{"conversations", 2}, {"turns", 1}}}};
    j.merge_patch(extra);
    const std::string path = (dir_ / name).string();
    std::ofstream(path) << j.dump();
    return path;
  }
  struct Exit {
    int code;
    std::string out, err;
  };
  static Exit run(const std::vector<std::string>& args) {
    std::vector<std::string> argv = {RCXL_SIM_BINARY};
    argv.insert(argv.end(), args.begin(), args.end());
    auto child = ChildProcess::Start(argv);
    const int code = child.wait_exit(30s);  // before reading: a hung child must not hang the test
    if (code < 0) return {code, "", "(no exit in 30 s)"};
    return {code, ChildProcess::read_all(child.out), child.read_all_err()};
  }
  static std::string text_of(const std::string& path) {
    std::ifstream in(path);
    std::stringstream s;
    s << in.rdbuf();
    return s.str();
  }
  std::filesystem::path dir_;
};

// Hunt (session 11): a FIFO as --trace blocked the run forever in open();
// a pipe is refused before the run. A character device is written like a
// file: /dev/null takes the trace, /dev/full cannot, and the run says so.
TEST_F(SimRun, R8_ATraceThatIsAPipeIsRefusedAndAFailedWriteFailsTheRun) {
  const std::string scenario = write_scenario("s.json");
  const std::string fifo = (dir_ / "trace.fifo").string();
  ASSERT_EQ(::mkfifo(fifo.c_str(), 0600), 0);
  const Exit pipe = run({"run", "--quiet", "--trace", fifo, scenario});
  EXPECT_EQ(pipe.code, 2) << pipe.err;
  EXPECT_NE(pipe.err.find("--trace " + fifo + ": is a pipe, socket or block device"),
            std::string::npos)
      << pipe.err;
  const Exit null = run({"run", "--quiet", "--trace", "/dev/null", scenario});
  EXPECT_EQ(null.code, 0) << null.out << null.err;
  const Exit full = run({"run", "--quiet", "--trace", "/dev/full", scenario});
  EXPECT_EQ(full.code, 1) << full.out << full.err;
  EXPECT_NE(full.out.find("the trace could not be written to /dev/full"), std::string::npos)
      << full.out;
}

// Review (session 11): a memory node's profile from --profiles is an input
// of the run too, and its name is checked like the scenario's profile.
TEST_F(SimRun, R8_MemoryProfilesAreInputsAndNamedLikeTheProfile) {
  const auto profiles = dir_ / "profiles";
  std::filesystem::create_directories(profiles);
  for (const char* name : {"all_dram.json", "cxl_ssd_default.json"}) {
    std::filesystem::copy_file(std::filesystem::path(RCXL_SOURCE_DIR) / "scenarios/profiles" / name,
                               profiles / name);
  }
  const nlohmann::json mixed = {
      {"topology", {{"memory_nodes", 2}, {"memory_profiles", {"all_dram", "cxl_ssd_default"}}}}};
  const std::string scenario = write_scenario("mixed.json", mixed);
  const std::string node_profile = (profiles / "all_dram.json").string();
  const std::string before = text_of(node_profile);
  const Exit e =
      run({"run", "--quiet", "--profiles", profiles.string(), "--trace", node_profile, scenario});
  EXPECT_EQ(e.code, 2) << e.err;
  EXPECT_NE(e.err.find("--trace " + node_profile + ": is " + node_profile + ", an input"),
            std::string::npos)
      << e.err;
  EXPECT_EQ(text_of(node_profile), before);
  // A name outside the directory is no profile of it.
  const std::string outside = write_scenario(
      "outside.json",
      {{"topology", {{"memory_nodes", 2}, {"memory_profiles", {"all_dram", "../x"}}}}});
  const Exit o = run({"run", "--quiet", "--profiles", profiles.string(), outside});
  EXPECT_EQ(o.code, 2) << o.err;
  EXPECT_NE(o.err.find(outside + ": /topology/memory_profiles/1: no profile '../x' in " +
                       profiles.string()),
            std::string::npos)
      << o.err;
}

// Hunt (session 11): 1e400 escaped as "internal error" (nlohmann's
// out_of_range), and bytes after a NUL were silently ignored.
TEST_F(SimRun, R8_OverflowingNumbersAndNulBytesAreRefusedNamingTheFile) {
  const std::string big = (dir_ / "big.json").string();
  std::ofstream(big) << R"({"name": "t", "seed": 1e400})";
  const Exit overflow = run({"run", "--quiet", big});
  EXPECT_EQ(overflow.code, 2) << overflow.err;
  EXPECT_NE(overflow.err.find(big + ": /seed: number overflow parsing '1e400'"), std::string::npos)
      << overflow.err;
  const std::string nul = (dir_ / "nul.json").string();
  std::ofstream(nul, std::ios::binary) << std::string(R"({"name": "t"})") << '\0' << "junk";
  const Exit cut = run({"run", "--quiet", nul});
  EXPECT_EQ(cut.code, 2) << cut.err;
  EXPECT_NE(cut.err.find(nul + ": not valid JSON: a NUL byte at offset 13"), std::string::npos)
      << cut.err;
}

// Hunt (session 11): a start window or the pauses of a conversation past the
// time limit were accepted, and the run could only time out.
TEST_F(SimRun, R8_AWorkloadThatCannotFinishInTheTimeLimitIsRefused) {
  const Exit window =
      run({"run", "--quiet", write_scenario("w.json", {{"workload", {{"start_window_s", 3600}}}})});
  EXPECT_EQ(window.code, 2) << window.err;
  EXPECT_NE(window.err.find("/workload/start_window_s: a start window of 3600 s is not before "
                            "the run's time limit of 600 s"),
            std::string::npos)
      << window.err;
  const Exit pauses =
      run({"run", "--quiet",
           write_scenario("t.json", {{"workload", {{"turns", 4}, {"think_time_s", 250}}}})});
  EXPECT_EQ(pauses.code, 2) << pauses.err;
  EXPECT_NE(pauses.err.find("/workload/think_time_s: a conversation's pauses between its turns"),
            std::string::npos)
      << pauses.err;
  // Within the limit it runs.
  const Exit fine =
      run({"run", "--quiet",
           write_scenario("f.json", {{"workload", {{"turns", 2}, {"think_time_s", 1}}}})});
  EXPECT_EQ(fine.code, 0) << fine.out << fine.err;
}

// Hunt (session 11): a pool smaller than one region (32 chunks) made every
// store fail and the run still passed; it is refused before the run.
TEST_F(SimRun, R8_APoolThatCannotHoldARegionIsRefused) {
  const std::string scenario = write_scenario("small.json", {{"pool_bytes", 1 << 20}});
  const Exit e = run({"run", "--quiet", scenario});
  EXPECT_EQ(e.code, 2) << e.err;
  EXPECT_NE(e.err.find(scenario + ": /pool_bytes: memory node mem0's pool of 1048576 bytes"),
            std::string::npos)
      << e.err;
  EXPECT_NE(e.err.find("give it at least 1073741824"), std::string::npos) << e.err;
  // One region exactly is enough.
  const Exit fits = run({"run", "--quiet", write_scenario("fits.json", {{"pool_bytes", 1 << 30}})});
  EXPECT_EQ(fits.code, 0) << fits.out << fits.err;
}

// Hunt (session 11): a mean over no requests printed as 0.00 ms; it is n/a
// (null in --json), so nobody reads a run without loads as free loads.
TEST_F(SimRun, R8_AMeanOverNothingIsNotAvailableNotZero) {
  const std::string one_turn = write_scenario("one.json");  // 2 conversations x 1 turn
  const Exit text = run({"run", "--quiet", one_turn});
  EXPECT_EQ(text.code, 0) << text.err;
  EXPECT_NE(text.out.find("reuse-turn TTFT n/a, KV load n/a, 2 requests"), std::string::npos)
      << text.out;
  const Exit json = run({"run", "--quiet", "--json", one_turn});
  ASSERT_EQ(json.code, 0) << json.err;
  const auto j = nlohmann::json::parse(json.out);
  EXPECT_TRUE(j["mean_reuse_ttft_ms"].is_null());
  EXPECT_TRUE(j["mean_load_ms"].is_null());
}

// Hunt (session 11): `--profiles ''` and `--trace ''` were taken as "none".
TEST_F(SimRun, R8_AnEmptyPathFlagIsRefused) {
  const std::string scenario = write_scenario("s.json");
  for (const std::string flag : {"--profiles", "--trace"}) {
    const Exit e = run({"run", "--quiet", flag, "", scenario});
    EXPECT_EQ(e.code, 2) << flag << ": " << e.err;
    EXPECT_NE(e.err.find(flag + ": empty; name a path, or leave the flag out"), std::string::npos)
        << e.err;
  }
  for (const char* command : {"sweep", "reproduce"}) {
    const Exit e = run({command, "--quiet", "--profiles", ""});
    EXPECT_EQ(e.code, 2) << command << ": " << e.err;
    EXPECT_NE(e.err.find("--profiles: empty"), std::string::npos) << e.err;
  }
  // An empty --scenario ran the built-in seed_serving (review, session 26).
  const Exit sweep = run({"sweep", "--quiet", "--scenario", "", "--configs", "hints"});
  EXPECT_EQ(sweep.code, 2) << sweep.err;
  EXPECT_NE(sweep.err.find("--scenario: empty"), std::string::npos) << sweep.err;
}

// A replay name is shown escaped and cut, never as raw control characters.
TEST_F(SimRun, R8_AnUnknownReplayNameIsShownPrintable) {
  const Exit e = run({"replay", "a\nb" + std::string(300, 'x')});
  EXPECT_EQ(e.code, 2);
  EXPECT_NE(e.err.find("no shipped scenario 'a\\nbxxx"), std::string::npos) << e.err;
  EXPECT_NE(e.err.find("... (303 characters)'"), std::string::npos) << e.err;
  EXPECT_EQ(std::count(e.err.begin(), e.err.end(), '\n'), 1) << e.err;
}

// SPEC R8, hunt W15: `run x.json --trace x.json` overwrote the scenario.
// A trace onto any input of the run (however it is named) is refused.
TEST_F(SimRun, R8_TraceOntoAnInputIsRefused) {
  const std::string scenario = write_scenario("s.json");
  const std::string before = text_of(scenario);
  std::filesystem::create_hard_link(scenario, dir_ / "link.json");
  for (const std::string& trace :
       {scenario, (dir_ / "." / "s.json").string(), (dir_ / "link.json").string()}) {
    const Exit e = run({"run", "--quiet", "--trace", trace, scenario});
    EXPECT_EQ(e.code, 2) << trace << ": " << e.err;
    EXPECT_NE(e.err.find("--trace " + trace + ": is " + scenario + ", an input of this run"),
              std::string::npos)
        << e.err;
    EXPECT_EQ(text_of(scenario), before);
  }
  // A profile read from --profiles is an input too.
  const auto profiles = dir_ / "profiles";
  std::filesystem::create_directories(profiles);
  const std::string profile_file = (profiles / "mine.json").string();
  std::ofstream(profile_file) << R"({"name": "mine"})";  // every parameter at its default
  const std::string with_profile = write_scenario("p.json", {{"profile", "mine"}});
  const Exit e = run(
      {"run", "--quiet", "--profiles", profiles.string(), "--trace", profile_file, with_profile});
  EXPECT_EQ(e.code, 2) << e.err;
  EXPECT_NE(e.err.find("an input of this run"), std::string::npos) << e.err;
  EXPECT_GT(std::filesystem::file_size(profile_file), 0u);
}

// SPEC R8, hunt W15: a sweep's --scenario is not one of the files it writes.
TEST_F(SimRun, R8_SweepScenarioThatItsOutputWouldOverwriteIsRefused) {
  const std::string scenario = write_scenario("sweep.json");
  const std::string before = text_of(scenario);
  const Exit e = run({"sweep", "--quiet", "--scenario", scenario, "--out", dir_.string()});
  EXPECT_EQ(e.code, 2) << e.err;
  EXPECT_NE(e.err.find("which is the --scenario file " + scenario + "; choose another --out"),
            std::string::npos)
      << e.err;
  EXPECT_EQ(text_of(scenario), before);
}

// SPEC R8, hunt H5: `run /dev/zero` read 4 GB and `run FIFO` blocked for ever.
TEST_F(SimRun, R8_OnlyRegularFilesAreRead) {
  const std::string fifo = (dir_ / "fifo.json").string();
  ASSERT_EQ(::mkfifo(fifo.c_str(), 0600), 0);
  for (const std::string& path : {fifo, std::string("/dev/zero")}) {
    const Exit e = run({"run", "--quiet", path});
    EXPECT_EQ(e.code, 2) << path << ": " << e.err;
    EXPECT_EQ(e.err, "rcxl-sim: " + path +
                         ": is not a regular file (a FIFO, device or socket could block or never "
                         "end); name a .json file\n");
  }
}

// SPEC R8, hunt item 8: a profile that is not there is the scenario's mistake:
// named by its file and /profile, with the names it could be.
TEST_F(SimRun, R8_UnknownProfileNamesTheScenarioAndPointer) {
  const std::string scenario = write_scenario("s.json", {{"profile", "cxl_sd"}});
  const Exit e = run({"run", "--quiet", scenario});
  EXPECT_EQ(e.code, 2);
  EXPECT_EQ(e.err, "rcxl-sim: " + scenario +
                       ": /profile: no profile 'cxl_sd' built in; expected one of: all_dram, "
                       "cxl_ssd_default (or pass --profiles DIR for your own)\n");
  const Exit in_dir = run({"run", "--quiet", "--profiles", dir_.string(), scenario});
  EXPECT_EQ(in_dir.code, 2);
  EXPECT_NE(in_dir.err.find(": /profile: no profile 'cxl_sd' in " + dir_.string() +
                            "; expected one of: s"),
            std::string::npos)
      << in_dir.err;
}

// SPEC R8, hunt W4: a fault timed after the workload ends never happens; the
// run says so and fails instead of passing without it.
TEST_F(SimRun, R8_AFaultThatNeverHappenedFailsTheRun) {
  const nlohmann::json late = {{"faults", {{{"kind", "reset"}, {"at_s", 100}}}}};
  const std::string late_file = write_scenario("late.json", late);
  const Exit e = run({"run", "--quiet", late_file});
  EXPECT_EQ(e.code, 1) << e.err;
  EXPECT_NE(e.out.find("FAULT NEVER HAPPENED: /faults/0 (reset at 100 s): the workload's last "
                       "turn was answered at "),
            std::string::npos)
      << e.out;
  // A fault in the 50 ms the run settles after its last turn never happens
  // either, and the line names a time before it, in full (it named the end of
  // the settle, after the fault, rounded to 3 digits: session 27 review).
  const Exit plain = run({"run", "--quiet", "--json", write_scenario("plain.json")});
  ASSERT_EQ(plain.code, 0) << plain.err;
  const double end_s = nlohmann::json::parse(plain.out)["virtual_s"].get<double>();
  const double at_s = end_s - 0.02;
  const Exit settle =
      run({"run", "--quiet",
           write_scenario("settle.json",
                          {{"faults", {{{"kind", "drop_connections"}, {"at_s", at_s}}}}})});
  EXPECT_EQ(settle.code, 1) << settle.err;
  const auto said = settle.out.find("was answered at ");
  ASSERT_NE(said, std::string::npos) << settle.out;
  const double answered_s = std::stod(settle.out.substr(said + 16));
  EXPECT_LT(answered_s, at_s) << settle.out;
  EXPECT_GT(answered_s, at_s - 0.05) << settle.out;
  EXPECT_EQ(settle.out.find("e+"), std::string::npos) << settle.out;
  // The failing run prints the one line that runs it again (issue #6, item 4),
  // with --profiles when the profile came from there.
  EXPECT_NE(e.err.find("reproduce: rcxl-sim run " + late_file + " --seed 1\n"), std::string::npos)
      << e.err;
  const auto profiles = dir_ / "profiles";
  std::filesystem::create_directories(profiles);
  std::ofstream(profiles / "mine.json") << R"({"name": "mine"})";
  nlohmann::json mine = late;
  mine["profile"] = "mine";
  const std::string mine_file = write_scenario("late-mine.json", mine);
  const Exit with_profiles = run({"run", "--quiet", "--profiles", profiles.string(), mine_file});
  EXPECT_EQ(with_profiles.code, 1) << with_profiles.err;
  EXPECT_NE(with_profiles.err.find("reproduce: rcxl-sim run " + mine_file + " --profiles " +
                                   profiles.string() + " --seed 1\n"),
            std::string::npos)
      << with_profiles.err;
  // A fault on a load no run can start (one-turn conversations load nothing)
  // is refused when the file is read; one on a load this run did not start
  // (no prompt fills a 256-token chunk, so nothing is stored to load) fails it.
  const nlohmann::json one_turn = {{"faults", {{{"kind", "reset"}, {"during_load", 2}}}}};
  const Exit never = run({"run", "--quiet", write_scenario("one-turn.json", one_turn)});
  EXPECT_EQ(never.code, 2) << never.err;
  EXPECT_NE(never.err.find("/faults/0/during_load: load 2 never starts: the workload has 0 reuse "
                           "turns"),
            std::string::npos)
      << never.err;
  const nlohmann::json no_load = {{"workload",
                                   {{"turns", 2},
                                    {"first_prompt_tokens", {10, 20}},
                                    {"followup_prompt_tokens", {1, 2}},
                                    {"output_tokens", {1, 2}}}},
                                  {"faults", {{{"kind", "reset"}, {"during_load", 2}}}}};
  const Exit unloaded = run({"run", "--quiet", write_scenario("no-load.json", no_load)});
  EXPECT_EQ(unloaded.code, 1) << unloaded.err;
  EXPECT_NE(unloaded.out.find("FAULT NEVER HAPPENED: /faults/0 (reset during load 2): the run "
                              "started 0 load(s); pick an earlier load"),
            std::string::npos)
      << unloaded.out;
  // A store past the requests is refused when the file is read; one within
  // them that never comes (no request here fills a 256-token chunk) fails the run.
  const nlohmann::json past = {{"workload", {{"conversations", 2}, {"turns", 1}}},
                               {"faults", {{{"kind", "reset"}, {"during_store", 50}}}}};
  const Exit refused = run({"run", "--quiet", write_scenario("past.json", past)});
  EXPECT_EQ(refused.code, 2) << refused.err;
  EXPECT_NE(refused.err.find("/faults/0/during_store: store 50 never starts: the workload has 2 "
                             "requests and each stores at most once; pick 1..2"),
            std::string::npos)
      << refused.err;
  const nlohmann::json no_store = {{"workload",
                                    {{"conversations", 2},
                                     {"turns", 2},
                                     {"first_prompt_tokens", {100, 100}},
                                     {"followup_prompt_tokens", {10, 10}},
                                     {"output_tokens", {10, 10}}}},
                                   {"faults", {{{"kind", "reset"}, {"during_store", 1}}}}};
  const Exit unstored = run({"run", "--quiet", write_scenario("no-store.json", no_store)});
  EXPECT_EQ(unstored.code, 1) << unstored.err;
  EXPECT_NE(unstored.out.find("FAULT NEVER HAPPENED: /faults/0 (reset during store 1): the run "
                              "started 0 store(s); pick an earlier store"),
            std::string::npos)
      << unstored.out;
  const nlohmann::json early = {{"faults", {{{"kind", "reset"}, {"at_s", 0.01}}}}};
  const Exit ok = run({"run", "--quiet", write_scenario("early.json", early)});
  EXPECT_EQ(ok.code, 0) << ok.out << ok.err;
}

}  // namespace

namespace {

// SPEC R8 (--help on every binary): every subcommand says what its exit codes
// mean; reproduce's 0 covers a figure outside (a result, not a failure).
TEST(SimProcess, R8_EverySubcommandsHelpSaysItsExitCodes) {
  for (const std::string sub : {"demo", "run", "replay", "reproduce", "sweep"}) {
    auto child = rcxl::testing::ChildProcess::Start({RCXL_SIM_BINARY, sub, "--help"});
    EXPECT_EQ(child.wait_exit(std::chrono::seconds(10)), 0) << sub;
    const std::string help = rcxl::testing::ChildProcess::read_all(child.out);
    EXPECT_NE(help.find("Exit codes: 0 "), std::string::npos) << sub << "\n" << help;
    EXPECT_NE(help.find("2 bad input"), std::string::npos) << sub << "\n" << help;
  }
}

}  // namespace
