// `rcxl-sim sweep` (issue #6 item 4, SPEC R8's what-if side): parameter
// parsing, grid order, validation before any run, and results that do not
// depend on the thread count.
#include "scenarios/sweep.h"

#include <fcntl.h>
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <filesystem>
#include <fstream>
#include <limits>
#include <optional>
#include <sstream>
#include <stdexcept>

#include "scenarios/batch_runner.h"
#include "scenarios/embedded/embedded.h"
#include "scenarios/out_dir.h"
#include "tests/scratch_dir.h"

namespace rcxl::scenarios {
namespace {

// A few short conversations: each run takes milliseconds of CPU. The think
// time lets each turn's store land before the next turn looks it up.
Json tiny_scenario() {
  return Json::parse(R"({
    "name": "tiny",
    "workload": {"conversations": 3, "turns": 2, "first_prompt_tokens": [600, 800],
                 "followup_prompt_tokens": [20, 40], "output_tokens": [4, 8],
                 "start_window_s": 0.05, "think_time_s": 0.2}
  })");
}

SweepOptions tiny_options() {
  SweepOptions o;
  o.scenario = tiny_scenario();
  o.scenario_path = "tiny.json";
  o.write_files = false;
  return o;
}

SweepParam param(const std::string& spec) {
  auto p = parse_sweep_param(spec);
  EXPECT_TRUE(p.ok()) << p.status().ToString();
  return p.ok() ? *p : SweepParam{};
}

std::vector<std::string> lines_of(const std::string& text) {
  std::vector<std::string> out;
  std::stringstream in(text);
  for (std::string line; std::getline(in, line);) out.push_back(line);
  return out;
}

TEST(Sweep, R8_ParsesNamesValuesAndBinarySuffixes) {
  const SweepParam dram = param("dram_cache_bytes=4G,512M,1.5K,3000");
  EXPECT_EQ(dram.name, "dram_cache_bytes");
  EXPECT_EQ(dram.texts, (std::vector<std::string>{"4G", "512M", "1.5K", "3000"}));
  EXPECT_EQ(dram.values[0].get<std::uint64_t>(), 4ull << 30);
  EXPECT_EQ(dram.values[1].get<std::uint64_t>(), 512ull << 20);
  EXPECT_EQ(dram.values[2].get<std::uint64_t>(), 1536u);
  EXPECT_EQ(dram.values[3].get<std::uint64_t>(), 3000u);
  // Either case, as the agent's --memory and rcxl-kv's sizes (session 32).
  EXPECT_EQ(param("dram_cache_bytes=4g").values[0].get<std::uint64_t>(), 4ull << 30);
  const SweepParam lead = param("hint_lead_ms=0.3,2");
  EXPECT_DOUBLE_EQ(lead.values[0].get<double>(), 0.3);
  const SweepParam pointer = param("/client/read_hint_on_arrival=false,true");
  EXPECT_EQ(pointer.values[1], Json(true));
  EXPECT_EQ(param("/device/flash_read_ns=5000").values[0].get<std::uint64_t>(), 5000u);
}

TEST(Sweep, R8_BadParametersAreRefusedNamingTheParameterAndTheFix) {
  struct Case {
    std::string spec;
    std::string names;  // the message must name this ...
    std::string fix;    // ... and say this
  };
  const std::vector<Case> cases = {
      {"dram=4G", "dram", "dram_cache_bytes"},
      {"flash_read_ns=fast", "flash_read_ns", "write a number"},
      {"flash_read_ns=3X", "flash_read_ns", "K, M, G or T"},
      {"flash_read_ns=1,,2", "flash_read_ns", "write a number"},
      {"flash_read_ns", "flash_read_ns", "NAME=V1,V2"},
      {"flash_read_ns=", "flash_read_ns", "no values"},
      {"=1", "=1", "NAME=V1,V2"},
      {"/seed=1,2", "/seed", "--seeds"},
      {"/profile=all_dram", "/profile", "--configs"},
      {"/device/flash/read_ns=1", "/device/flash/read_ns", "/<section>/<field>"},
  };
  for (const auto& c : cases) {
    auto p = parse_sweep_param(c.spec);
    ASSERT_FALSE(p.ok()) << c.spec;
    EXPECT_EQ(p.status().code(), ErrorCode::kBadRequest) << c.spec;
    EXPECT_NE(p.status().message().find("--param " + c.names), std::string::npos)
        << c.spec << ": " << p.status().message();
    EXPECT_NE(p.status().message().find(c.fix), std::string::npos)
        << c.spec << ": " << p.status().message();
  }
}

TEST(Sweep, R8_OutOfRangeValuesAreRefusedBeforeAnyRun) {
  struct Case {
    std::string spec;
    std::string says;
  };
  const std::vector<Case> cases = {
      {"dram_cache_bytes=64M,100", "dram_cache_bytes=100"},
      {"concurrency=2,0", "concurrency=0"},
      {"/device/bogus_knob=1", "bogus_knob"},
      {"/workload/bogus=1", "bogus"},
      {"hint_lead_ms=-1", "hint_lead_ms=-1"},
  };
  for (const auto& c : cases) {
    SweepOptions o = tiny_options();
    o.params = {param(c.spec)};
    std::atomic<int> runs{0};
    o.progress = [&](const std::string&) { ++runs; };
    auto r = sweep(o);
    ASSERT_FALSE(r.ok()) << c.spec;
    EXPECT_EQ(r.status().code(), ErrorCode::kBadRequest) << c.spec;
    EXPECT_NE(r.status().message().find(c.says), std::string::npos)
        << c.spec << ": " << r.status().message();
    EXPECT_EQ(runs.load(), 0) << c.spec << ": nothing runs when a value is bad";
  }
  SweepOptions o = tiny_options();
  o.configs = {"hints", "fast"};
  auto r = sweep(o);
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("'fast'"), std::string::npos);
  EXPECT_NE(r.status().message().find("no_hints"), std::string::npos) << "lists the known ones";
  o = tiny_options();
  o.params = {param("flash_read_ns=3000"), param("flash_read_ns=4000")};
  EXPECT_FALSE(sweep(o).ok()) << "one parameter given twice";
}

// SPEC R8: a mistake in the scenario itself blames the file, not a parameter;
// one a parameter makes (an `expect` value) names that parameter.
TEST(Sweep, R8_ScenarioAndExpectMistakesAreRefusedBeforeAnyRun) {
  SweepOptions o = tiny_options();
  o.scenario->merge_patch({{"expect", {{"boots", Json::array({"(("})}}}});
  o.params = {param("concurrency=1")};
  std::atomic<int> runs{0};
  o.progress = [&](const std::string&) { ++runs; };
  auto r = sweep(o);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), ErrorCode::kBadRequest);
  EXPECT_EQ(r.status().message().rfind("tiny.json: /expect/boots/0: ", 0), 0u)
      << r.status().message();
  o = tiny_options();
  o.params = {param("/expect/min_reuse_hits=-1")};
  o.progress = [&](const std::string&) { ++runs; };
  r = sweep(o);
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("--param /expect/min_reuse_hits=-1: tiny.json: "
                                      "/expect/min_reuse_hits"),
            std::string::npos)
      << r.status().message();
  EXPECT_EQ(runs.load(), 0);
}

// SPEC R8: --out is made and proven writable before the first run.
TEST(Sweep, R8_AnUnwritableOutDirIsRefusedBeforeAnyRun) {
  SweepOptions o = tiny_options();
  o.write_files = true;
  o.out_dir = "/proc/rcxl-no-such-dir";
  o.params = {param("concurrency=1")};
  std::atomic<int> runs{0};
  o.progress = [&](const std::string&) { ++runs; };
  auto r = sweep(o);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), ErrorCode::kBadRequest);
  EXPECT_EQ(
      r.status().message().rfind("--out /proc/rcxl-no-such-dir: cannot create directory (", 0), 0u)
      << r.status().message();
  EXPECT_NE(r.status().message().find("choose a writable directory"), std::string::npos);
  EXPECT_EQ(runs.load(), 0);
}

TEST(Sweep, R8_GridIsNestedWithTheFirstParameterOutermost) {
  const auto grid = expand_grid({param("flash_read_ns=1,2"), param("concurrency=1,2,3")});
  ASSERT_EQ(grid.size(), 6u);
  const std::vector<std::vector<std::size_t>> want = {{0, 0}, {0, 1}, {0, 2},
                                                      {1, 0}, {1, 1}, {1, 2}};
  for (std::size_t i = 0; i < grid.size(); ++i) EXPECT_EQ(grid[i].index, want[i]) << i;
  EXPECT_EQ(expand_grid({}).size(), 1u) << "no parameter: one point";
}

// The tiny grid: 2 DRAM sizes x 2 configurations x 2 seeds.
SweepOptions tiny_grid(int threads) {
  SweepOptions o = tiny_options();
  o.params = {param("dram_cache_bytes=64M,1G")};
  o.seeds = 2;
  o.threads = threads;
  return o;
}

// One-turn conversations serve no reuse turn: every cell read n/a and the
// sweep passed (new-user review, session 32). It fails, saying why.
TEST(Sweep, R8_ASweepThatMeasuresNoReuseTurnFails) {
  SweepOptions o = tiny_options();
  o.turns = 1;
  o.configs = {"hints"};
  auto report = sweep(o);
  ASSERT_TRUE(report.ok()) << report.status().ToString();
  ASSERT_EQ(report->failures.size(), 1u);
  EXPECT_NE(report->failures[0].find("give --turns 2 or more"), std::string::npos)
      << report->failures[0];
  o.turns = 2;
  report = sweep(o);
  ASSERT_TRUE(report.ok()) << report.status().ToString();
  EXPECT_TRUE(report->failures.empty()) << report->failures.front();
}

TEST(Sweep, R8_ResultsDoNotDependOnTheThreadCount) {
  auto one = sweep(tiny_grid(1));
  auto two = sweep(tiny_grid(2));
  ASSERT_TRUE(one.ok()) << one.status().ToString();
  ASSERT_TRUE(two.ok()) << two.status().ToString();
  EXPECT_EQ(one->csv, two->csv);
  EXPECT_EQ(one->table, two->table);
  EXPECT_TRUE(one->failures.empty()) << one->failures.front();
  // The comparison covers each run's fingerprint: every row ends in its hash.
  const auto lines = lines_of(one->csv);
  ASSERT_GT(lines.size(), 1u);
  EXPECT_NE(lines[0].find(",trace_hash"), std::string::npos) << lines[0];
  for (std::size_t i = 1; i < lines.size(); ++i) {
    const std::string hash = lines[i].substr(lines[i].rfind(',') + 1);
    EXPECT_EQ(hash.size(), 64u) << lines[i];
    EXPECT_EQ(hash.find_first_not_of("0123456789abcdef"), std::string::npos) << lines[i];
  }
}

TEST(Sweep, R8_CsvHasOneRowPerPointConfigurationAndSeed) {
  auto r = sweep(tiny_grid(2));
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  const auto lines = lines_of(r->csv);
  ASSERT_EQ(lines.size(), 1u + 2 * 2 * 2);
  EXPECT_EQ(lines[0].rfind("dram_cache_bytes,config,seed,ok,reuse_turns,loads,ttft_mean_ms,"
                           "ttft_p50_ms,ttft_p99_ms,load_mean_ms,",
                           0),
            0u)
      << lines[0];
  const auto commas = std::count(lines[0].begin(), lines[0].end(), ',');
  // Point-major, then configuration (as given: hints, no_hints), then seed.
  const std::vector<std::string> prefixes = {
      "67108864,hints,1,1,",      "67108864,hints,2,1,",     "67108864,no_hints,1,1,",
      "67108864,no_hints,2,1,",   "1073741824,hints,1,1,",   "1073741824,hints,2,1,",
      "1073741824,no_hints,1,1,", "1073741824,no_hints,2,1,"};
  for (std::size_t i = 0; i < prefixes.size(); ++i) {
    EXPECT_EQ(lines[i + 1].rfind(prefixes[i], 0), 0u) << lines[i + 1];
    EXPECT_EQ(std::count(lines[i + 1].begin(), lines[i + 1].end(), ','), commas) << lines[i + 1];
  }
  ASSERT_EQ(r->runs.size(), 8u);
  for (const auto& run : r->runs) EXPECT_GT(run.summary.ttfts.size(), 0u) << "reuse turns ran";
}

// A parameter reaches the run: with a DRAM cache of one chunk the KV lives on
// flash, and slower flash makes un-hinted loads slower.
TEST(Sweep, R8_FlashReadTimeReachesTheDevice) {
  SweepOptions o = tiny_options();
  o.params = {param("flash_read_ns=3000,300000"), param("dram_cache_bytes=32M")};
  o.configs = {"no_hints"};
  auto r = sweep(o);
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  ASSERT_EQ(r->runs.size(), 2u);
  ASSERT_TRUE(r->runs[0].summary.ok() && r->runs[1].summary.ok());
  EXPECT_GT(r->runs[1].summary.load_ms, r->runs[0].summary.load_ms);
  // One seed per point: a mean and no interval (not one of zero width).
  ASSERT_EQ(r->json["summary"].size(), 2u);
  EXPECT_TRUE(r->json["summary"][0]["load_mean_ms"]["ci"].is_null());
  EXPECT_EQ(r->json["summary"][0]["load_mean_ms"]["mean"], r->runs[0].summary.load_ms);
}

// hint_lead_ms is the engine's scheduler-to-worker hand-off: loads start later.
TEST(Sweep, R8_HintLeadDelaysTheWorkersReads) {
  SweepOptions o = tiny_options();
  o.params = {param("hint_lead_ms=0.3,50")};
  o.configs = {"hints"};
  auto r = sweep(o);
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  ASSERT_EQ(r->runs.size(), 2u);
  ASSERT_EQ(r->runs[0].summary.loads.size(), r->runs[1].summary.loads.size());
  ASSERT_GT(r->runs[0].summary.loads.size(), 0u);
  EXPECT_GT(r->runs[1].summary.ttft_ms, r->runs[0].summary.ttft_ms + 40);
}

// A point whose parameter changes nothing runs exactly what `rcxl-sim run`
// runs for that configuration: the configuration's client and profile, the seed.
TEST(Sweep, R8_APointIsTheScenarioUnderItsConfiguration) {
  SweepOptions o = tiny_options();
  o.params = {param("/workload/turns=2")};
  o.configs = {"gated", "hints"};
  o.first_seed = 7;
  auto r = sweep(o);
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  ASSERT_EQ(r->runs.size(), 2u);
  Json j = tiny_scenario();
  j["client"] = {{"read_hints", true}};
  auto sc = parse_scenario(j, "tiny.json");
  ASSERT_TRUE(sc.ok()) << sc.status().ToString();
  sc->seed = 7;
  auto profile = load_profile("", "cxl_ssd_default");
  ASSERT_TRUE(profile.ok());
  const RunResult direct = run_scenario(*sc, *profile);
  EXPECT_EQ(r->runs[1].config, "hints");
  EXPECT_EQ(r->runs[1].seed, 7u);
  EXPECT_DOUBLE_EQ(r->runs[1].summary.ttft_ms, mean_reuse_ttft_ms(direct.records));
  EXPECT_DOUBLE_EQ(r->runs[1].summary.load_ms, mean_load_ms(direct.records));
  EXPECT_EQ(r->runs[1].summary.counters, direct.counters);
  EXPECT_EQ(r->runs[0].summary.counters["/scheduler/hints_sent"_json_pointer], 0)
      << "gated sends no hints";
}

// A refused sweep: kBadRequest saying `says`, and nothing ran.
void expect_refused(SweepOptions o, const std::string& says) {
  std::atomic<int> runs{0};
  o.progress = [&](const std::string&) { ++runs; };
  auto r = sweep(o);
  ASSERT_FALSE(r.ok()) << says;
  EXPECT_EQ(r.status().code(), ErrorCode::kBadRequest) << r.status().message();
  EXPECT_NE(r.status().message().find(says), std::string::npos) << r.status().message();
  EXPECT_EQ(runs.load(), 0) << says;
}

// SPEC R8 (bad input never crashes): a pointer into an array names an existing
// entry. nlohmann's operator[] grew /faults to the index (7 GB, then bad_alloc).
TEST(Sweep, R8_AnArrayIndexPastTheEndIsRefusedNotGrown) {
  SweepOptions o = tiny_options();
  o.scenario->merge_patch(
      {{"faults", Json::array({{{"kind", "reset"}, {"at_s", 0.1}, {"node", "mem0"}}})}});
  const std::vector<std::pair<std::string, std::string>> cases = {
      {"/faults/400000000/at_s=1",
       "--param /faults/400000000/at_s: '400000000' is not an entry of /faults (1 entry); a "
       "parameter changes an existing entry (index 0 to 0), it cannot add one"},
      {"/faults/1/at_s=1", "'1' is not an entry of /faults (1 entry)"},
      {"/faults/-/at_s=1", "'-' is not an entry of /faults"},
      {"/faults/01/at_s=1", "'01' is not an entry of /faults"},
      {"/faults/99999999999999999999999/at_s=1", "is not an entry of /faults"},
      {"/workload/first_prompt_tokens/2=900",
       "'2' is not an entry of /workload/first_prompt_tokens (2 entries)"},
      {"/expect/boots/0=1", "/expect/boots is not an array in the scenario"},
      {"/workload/turns/x=1",
       "/workload/turns is a number in the scenario, not an object or array"},
  };
  for (const auto& [spec, says] : cases) {
    o.params = {param(spec)};
    expect_refused(o, says);
  }
  // Without any faults: the array is not made either.
  o = tiny_options();
  o.params = {param("/faults/400000000/at_s=1")};
  expect_refused(o, "--param /faults/400000000/at_s: /faults is not an array in the scenario");
  // The same walk guards apply_sweep_value, which reproduce --set uses.
  Json scenario = tiny_scenario(), profile = Json::object({{"device", Json::array()}});
  const SweepParam device = param("/device/400000000=1");
  auto s = apply_sweep_value(device, 0, scenario, profile);
  EXPECT_EQ(s.code(), ErrorCode::kBadRequest);
  EXPECT_TRUE(profile["device"].empty()) << "nothing grown";
}

// SPEC R8: a pointer that would build deep new structure is a mistake, refused
// naming it; an existing entry, or the schema's deepest new field, is fine.
TEST(Sweep, R8_APointerMakingDeepNewStructureIsRefused) {
  SweepOptions o = tiny_options();
  o.params = {param("/a/b/c/d/e=1")};
  expect_refused(o, "--param /a/b/c/d/e: would create 4+ new levels under /a/b/c/d");
  Json scenario = tiny_scenario(), profile;
  ASSERT_TRUE(
      apply_sweep_value(param("/workload/first_prompt_tokens/1=900"), 0, scenario, profile).ok());
  EXPECT_EQ(scenario["workload"]["first_prompt_tokens"], Json::array({600, 900}));
  ASSERT_TRUE(
      apply_sweep_value(param("/expect/counters/device.hits/max=7"), 0, scenario, profile).ok());
  EXPECT_EQ(scenario["expect"]["counters"]["device.hits"]["max"], 7);
}

// SPEC R8: the base scenario is read as `rcxl-sim run` reads it before
// anything is applied: a workload that is not an object threw a type_error.
TEST(Sweep, R8_TheBaseScenarioIsCheckedAsRunChecksIt) {
  for (const Json& workload : {Json(5), Json(nullptr), Json::array()}) {
    SweepOptions o = tiny_options();
    (*o.scenario)["workload"] = workload;
    o.turns = 1;
    o.conversations = 1;
    expect_refused(o, "tiny.json: /workload: expected an object");
  }
}

// A fault the base scenario can meet but --turns takes away is blamed on --turns
// (the message named only the scenario file, which is fine as written).
TEST(Sweep, R8_AnOverrideThatMakesAFaultImpossibleIsNamed) {
  SweepOptions o = tiny_options();
  (*o.scenario)["faults"] = Json::array({{{"kind", "reset"}, {"during_load", 1}}});
  o.turns = 1;
  expect_refused(o, "--turns 1: tiny.json: /faults/0/during_load: load 1 never starts");
}

// SPEC R8: two spellings of one field ran every point at the last one's value
// under the first one's label; --conversations lost to a parameter silently.
TEST(Sweep, R8_TwoSettersOfOneFieldAreRefusedNamingBoth) {
  struct Case {
    std::vector<std::string> specs;
    std::optional<int> conversations, turns;
    std::string says;
  };
  const std::vector<Case> cases = {
      {{"dram_cache_bytes=4G,8G", "/device/dram_cache_bytes=16G"},
       {},
       {},
       "--param /device/dram_cache_bytes: sets the same field as --param dram_cache_bytes "
       "(/device/dram_cache_bytes)"},
      {{"concurrency=1,2", "/workload/conversations=3"},
       {},
       {},
       "--param /workload/conversations: sets the same field as --param concurrency"},
      {{"/workload/conversations=1,2"},
       1,
       {},
       "--param /workload/conversations: sets the same field as --conversations"},
      {{"concurrency=1,2"}, 1, {}, "--param concurrency: sets the same field as --conversations"},
      {{"/workload/turns=1,2"}, {}, 2, "--param /workload/turns: sets the same field as --turns"},
      {{"/workload/start_window_s=1", "/workload=1"},
       {},
       {},
       "--param /workload: overlaps --param /workload/start_window_s"},
  };
  for (const auto& c : cases) {
    SweepOptions o = tiny_options();
    for (const auto& spec : c.specs) o.params.push_back(param(spec));
    o.conversations = c.conversations;
    o.turns = c.turns;
    expect_refused(o, c.says);
    expect_refused(o, "give one of them");
  }
  EXPECT_TRUE(check_distinct_targets({param("flash_read_ns=1"), param("/device/channels=4")},
                                     {{"--turns", "/workload/turns"}})
                  .ok());
}

// SPEC R8: a configuration named twice ran every point twice.
TEST(Sweep, R8_AConfigurationGivenTwiceIsRefused) {
  SweepOptions o = tiny_options();
  o.configs = {"hints", "gated", "hints"};
  expect_refused(o, "--configs: 'hints' is given twice");
}

// SPEC R8: seeds past 2^64 - 1 wrapped to 0 and 1.
TEST(Sweep, R8_SeedsThatWouldWrapAreRefused) {
  SweepOptions o = tiny_options();
  o.first_seed = std::numeric_limits<std::uint64_t>::max();
  o.seeds = 3;
  expect_refused(o,
                 "--seed 18446744073709551615 with --seeds 3: the seeds would pass "
                 "18446744073709551615 and wrap to 0; give a --seed of at most "
                 "18446744073709551613");
  EXPECT_TRUE(check_seed_range(std::numeric_limits<std::uint64_t>::max() - 2, 3, "--seeds").ok());
  EXPECT_TRUE(check_seed_range(std::numeric_limits<std::uint64_t>::max(), 1, "--seeds").ok());
  EXPECT_FALSE(check_seed_range(std::numeric_limits<std::uint64_t>::max() - 1, 3, "--seeds").ok());
}

// SPEC R8: `sweep --out D --scenario D/sweep.json` overwrote its own input.
TEST(Sweep, R8_AnOutputThatIsTheScenarioFileIsRefused) {
  const std::filesystem::path dir =
      std::filesystem::temp_directory_path() / ("rcxl_sweep_test_" + std::to_string(::getpid()));
  std::filesystem::create_directories(dir);
  const std::string input = (dir / "sweep.json").string();
  const std::string text = tiny_scenario().dump();
  std::ofstream(input) << text;
  SweepOptions o = tiny_options();
  o.write_files = true;
  o.scenario_path = input;
  o.params = {param("concurrency=1")};
  for (const std::string& out : {dir.string(), (dir / ".." / dir.filename()).string() + "/"}) {
    o.out_dir = out;
    expect_refused(o, "--out " + out + ": the sweep writes ");
    expect_refused(o, "which is the --scenario file " + input + "; choose another --out");
  }
  std::ifstream in(input);
  EXPECT_EQ(std::string(std::istreambuf_iterator<char>(in), {}), text) << "the input is untouched";
  std::filesystem::remove_all(dir);
}

std::filesystem::path fresh_dir(const std::string& tag) {
  return rcxl::testing::fresh_dir("rcxl_sweep", tag);
}

// One short run writing its files into `dir`.
SweepOptions writing_options(const std::filesystem::path& dir) {
  SweepOptions o = tiny_options();
  o.write_files = true;
  o.out_dir = dir.string();
  o.params = {param("concurrency=1")};
  o.configs = {"hints"};
  return o;
}

// SPEC R8: an output that was a FIFO hung the sweep in its final open, forever;
// one that was a directory failed after every run with "cannot write" and no reason.
TEST(Sweep, R8_AnOutputThatIsNotARegularFileIsRefusedBeforeAnyRun) {
  const std::filesystem::path dir = fresh_dir("nonregular");
  const SweepOptions o = writing_options(dir);
  const std::string fix = ", not a regular file; remove it or choose another --out directory";
  for (const std::string name : {"sweep.csv", "sweep.json", "sweep_ttft_mean_ms.svg",
                                 "sweep_ttft_p99_ms.svg", "sweep_load_mean_ms.svg"}) {
    const std::string path = (dir / name).string();
    ASSERT_EQ(::mkfifo(path.c_str(), 0600), 0) << path;
    // A reader lets a writer's open return: unfixed, this test fails instead of hanging.
    const int reader = ::open(path.c_str(), O_RDONLY | O_NONBLOCK);
    ASSERT_GE(reader, 0) << path;
    expect_refused(o, "--out " + dir.string() + ": " + path + " is a FIFO (named pipe)" + fix);
    ::close(reader);
    std::filesystem::remove(path);
    std::filesystem::create_directory(path);
    expect_refused(o, "--out " + dir.string() + ": " + path + " is a directory" + fix);
    std::filesystem::remove(path);
  }
  // Through a symbolic link, too: the open would follow it.
  const std::string fifo = (dir / "elsewhere").string();
  ASSERT_EQ(::mkfifo(fifo.c_str(), 0600), 0);
  const int reader = ::open(fifo.c_str(), O_RDONLY | O_NONBLOCK);
  ASSERT_GE(reader, 0);
  std::filesystem::create_symlink(fifo, dir / "sweep.json");
  expect_refused(o, (dir / "sweep.json").string() +
                        " is a symbolic link to a FIFO (named pipe), not a regular file");
  ::close(reader);
  std::filesystem::remove_all(dir);
}

// Hunt (session 11): a dangling link as an output, or two outputs linked to
// one file, failed (or lost a file) only after every run.
TEST(Sweep, R8_DanglingOrSharedOutputLinksAreRefusedBeforeAnyRun) {
  const std::filesystem::path dir = fresh_dir("links");
  const SweepOptions o = writing_options(dir);
  std::filesystem::create_symlink("/nonexistent/x", dir / "sweep.csv");
  expect_refused(o, (dir / "sweep.csv").string() + " is a symbolic link to a missing path");
  std::filesystem::remove(dir / "sweep.csv");
  std::ofstream(dir / "real") << "x";
  std::filesystem::create_symlink(dir / "real", dir / "sweep.csv");
  std::filesystem::create_symlink(dir / "real", dir / "sweep.json");
  expect_refused(o, (dir / "sweep.json").string() + " and " + (dir / "sweep.csv").string() +
                        " are one file (linked)");
  std::filesystem::remove_all(dir);
}

// The final write checks again: a FIFO made after the first check is refused,
// not opened (which would block until a reader came); a failed write says why.
TEST(Sweep, R8_TheFinalWriteRefusesWhatIsNotARegularFile) {
  const std::filesystem::path dir = fresh_dir("final_write");
  const std::string fifo = (dir / "sweep.csv").string();
  ASSERT_EQ(::mkfifo(fifo.c_str(), 0600), 0);
  const int reader = ::open(fifo.c_str(), O_RDONLY | O_NONBLOCK);  // a regression fails, not hangs
  ASSERT_GE(reader, 0);
  Status s = write_out_file(dir.string(), fifo, "x\n");
  EXPECT_EQ(s.code(), ErrorCode::kBadRequest);
  EXPECT_EQ(s.message(), "--out " + dir.string() + ": " + fifo +
                             " is a FIFO (named pipe), not a regular file; remove it or choose "
                             "another --out directory");
  char byte;
  EXPECT_LT(::read(reader, &byte, 1), 1) << "nothing was written into the FIFO";
  ::close(reader);
  std::filesystem::create_directory(dir / "sweep.json");
  s = write_out_file(dir.string(), (dir / "sweep.json").string(), "x\n");
  EXPECT_EQ(s.code(), ErrorCode::kBadRequest);
  EXPECT_NE(s.message().find("sweep.json is a directory, not a regular file"), std::string::npos)
      << s.message();
  // A file that cannot be made: the reason, not only "cannot write".
  s = write_out_file(dir.string(), (dir / "no_such_dir" / "sweep.csv").string(), "x\n");
  EXPECT_EQ(s.code(), ErrorCode::kIoError);
  EXPECT_NE(s.message().find("cannot write " + (dir / "no_such_dir" / "sweep.csv").string() +
                             " (No such file or directory)"),
            std::string::npos)
      << s.message();
  const std::string file = (dir / "sweep_load_mean_ms.svg").string();
  ASSERT_TRUE(write_out_file(dir.string(), file, "<svg/>").ok());
  std::ifstream in(file);
  EXPECT_EQ(std::string(std::istreambuf_iterator<char>(in), {}), "<svg/>");
  std::filesystem::remove_all(dir);
}

// A regular file (or a link to one) from an earlier sweep is overwritten.
TEST(Sweep, R8_AnEarlierSweepsFilesAreOverwritten) {
  const std::filesystem::path dir = fresh_dir("overwrite");
  std::ofstream(dir / "sweep.csv") << "old\n";
  std::ofstream(dir / "target.json") << "old\n";
  std::filesystem::create_symlink(dir / "target.json", dir / "sweep.json");
  auto r = sweep(writing_options(dir));
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  std::ifstream csv(dir / "sweep.csv");
  EXPECT_EQ(std::string(std::istreambuf_iterator<char>(csv), {}), r->csv);
  std::ifstream json(dir / "target.json");
  EXPECT_EQ(Json::parse(json), r->json);
  std::filesystem::remove_all(dir);
}

// The values 1..n, comma separated.
std::string values_1_to(int n) {
  std::string out;
  for (int i = 1; i <= n; ++i) out += (i > 1 ? "," : "") + std::to_string(i);
  return out;
}

// SPEC R8 (bad input never crashes): three axes of 1000 values were expanded
// (10^9 points, bad_alloc or 7 GB) before the run limit was checked.
TEST(Sweep, R8_AHugeGridIsRefusedBeforeItIsExpanded) {
  SweepOptions o = tiny_options();
  o.params = {param("flash_read_ns=" + values_1_to(1000)),
              param("/device/read_miss_depth=" + values_1_to(1000)),
              param("concurrency=" + values_1_to(1000))};
  expect_refused(o,
                 "the grid has 1000 x 1000 x 1000 points x 2 configurations x 1 seed = "
                 "2000000000 runs; keep it at most 10000 (fewer values, configurations or "
                 "seeds)");
  // Past 2^64 runs: the count does not wrap to a small number.
  o.params.push_back(param("/workload/turns=" + values_1_to(1000)));
  o.params.push_back(param("/workload/start_window_s=" + values_1_to(1000)));
  o.params.push_back(param("/workload/think_time_s=" + values_1_to(1000)));
  o.params.push_back(param("/device/channels=" + values_1_to(1000)));
  o.seeds = std::numeric_limits<int>::max();
  expect_refused(o, "x 2147483647 seeds = more than 18446744073709551615 runs");
  // The limit counts seeds and configurations as well.
  o = tiny_options();
  o.params = {param("concurrency=" + values_1_to(1000))};
  o.configs = {"hints", "no_hints", "gated"};
  o.seeds = 4;
  expect_refused(o, "the grid has 1000 points x 3 configurations x 4 seeds = 12000 runs");
}

// SPEC R8: a value listed twice ran the same point twice under two labels.
TEST(Sweep, R8_AValueGivenTwiceInOneParameterIsRefused) {
  const std::vector<std::pair<std::string, std::string>> cases = {
      {"flash_read_ns=3000,3000",
       "--param flash_read_ns: '3000' is given twice; each value would run the same points "
       "twice, so list it once"},
      {"dram_cache_bytes=4G,8G,4294967296",
       "--param dram_cache_bytes: '4294967296' is the same value as '4G' (4294967296)"},
      {"hint_lead_ms=0.5,1,0.50", "--param hint_lead_ms: '0.50' is the same value as '0.5'"},
      {"/client/read_hint_on_arrival=true,false,true",
       "--param /client/read_hint_on_arrival: 'true' is given twice"},
      // A switch takes 1/0 and true/false alike.
      {"idle_write_back=1,true", "--param idle_write_back: 'true' is the same value as '1'"},
  };
  for (const auto& [spec, says] : cases) {
    auto p = parse_sweep_param(spec);
    ASSERT_FALSE(p.ok()) << spec;
    EXPECT_EQ(p.status().code(), ErrorCode::kBadRequest) << spec;
    EXPECT_NE(p.status().message().find(says), std::string::npos) << p.status().message();
  }
  EXPECT_TRUE(parse_sweep_param("flash_read_ns=3000,3001,1K,1000").ok());
  // A parameter built in code (not parsed) is checked by sweep() too.
  SweepOptions o = tiny_options();
  o.params = {SweepParam{"flash_read_ns", {"1000", "1000"}, {Json(1000), Json(1000)}}};
  expect_refused(o, "--param flash_read_ns: '1000' is given twice");
}

// Review, session 26: sweep values the model never reads, or refused in words
// that mislead.
TEST(Sweep, R8_ANoteFieldIsNoParameter) {
  // Parsers skip `_`-keys: each point ran the same, under another label.
  for (const char* spec : {"/engine/_prefill_per_token_us=50,100", "/workload/_x=1,2"}) {
    auto p = parse_sweep_param(spec);
    ASSERT_FALSE(p.ok()) << spec;
    EXPECT_NE(p.status().message().find("a note the model does not read"), std::string::npos)
        << p.status().message();
  }
}

TEST(Sweep, R8_AScaledValueOutOfRangeSaysHowItMapsToTheField) {
  SweepOptions o = tiny_options();
  o.params = {param("hint_lead_ms=20000")};
  // Before: only "scheduler_to_worker_us: expected a number in 0..10000000",
  // which 20000 (ms, as written) seems to be inside.
  expect_refused(o, "(hint_lead_ms sets /engine/scheduler_to_worker_us x 1000)");
}

TEST(Sweep, R8_AValueOneConfigurationCannotTakeNamesThatConfiguration) {
  SweepOptions o = tiny_options();
  o.configs = {"hints", "no_hints"};
  o.params = {param("/client/read_hint_on_arrival=false,true")};
  // no_hints has no read hints, so no hints on arrival: the fix is the
  // configuration list, not the scenario's read_hints (which a sweep refuses).
  expect_refused(o,
                 "configuration no_hints cannot take this point, hints can: leave no_hints "
                 "out of --configs");
  o.configs = {"hints"};
  o.seeds = 1;
  auto r = sweep(o);
  EXPECT_TRUE(r.ok()) << r.status().message();
}

// Hunt (session 11): what makes a configuration is not a sweep parameter: a
// row would carry one configuration's label and another's behaviour.
TEST(Sweep, R8_AConfigurationsOwnClientFieldIsNoParameter) {
  for (const char* field : {"/client/read_hints", "/client/write_hints", "/client/read_promotes",
                            "/client/gate_reads"}) {
    auto p = parse_sweep_param(std::string(field) + "=true,false");
    ASSERT_FALSE(p.ok()) << field;
    EXPECT_NE(p.status().message().find("is what a configuration is made of"), std::string::npos)
        << p.status().message();
  }
  EXPECT_TRUE(parse_sweep_param("/client/write_wait_ms=0,50").ok());
}

// Hunt (session 11): values valid only together (a range's two ends, a fault
// on a store only a larger workload has) were refused one by one.
TEST(Sweep, R8_ValuesValidOnlyTogetherRun) {
  SweepOptions o = tiny_options();
  o.configs = {"hints"};
  o.params = {param("/workload/output_tokens/0=400"), param("/workload/output_tokens/1=500")};
  auto r = sweep(o);
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_TRUE(r->runs[0].summary.ok()) << r->runs[0].summary.failure();
  // Ends that cross are refused, naming a value that is at fault.
  o.params = {param("/workload/output_tokens/0=400"), param("/workload/output_tokens/1=300")};
  expect_refused(o, "/workload/output_tokens: expected [lo, hi] with 1 <= lo <= hi");
  // The one value without which the point is valid is blamed alone.
  o.params = {param("/workload/output_tokens/0=400"), param("/workload/output_tokens/1=500"),
              param("/workload/turns=0")};
  expect_refused(o, "--param /workload/turns=0: ");
}

// Review (session 11): the cross-check `rcxl-sim run` makes of a scenario
// against its profile (a pool must hold one region) is made before any run.
TEST(Sweep, R8_APoolThatCannotHoldARegionIsRefusedBeforeAnyRun) {
  SweepOptions o = tiny_options();
  o.params = {param("/pool_bytes=1M,2G")};
  expect_refused(o,
                 "--param /pool_bytes=1M: tiny.json: /pool_bytes: memory node mem0's pool of "
                 "1048576 bytes");
}

// A mean over no requests is no number (null, blank, n/a), and a run whose
// fault never came is failed, as `rcxl-sim run` says of both.
TEST(Sweep, R8_EmptyMeansAreNullAndAFaultThatNeverCameFailsTheRun) {
  SweepOptions o = tiny_options();
  (*o.scenario)["workload"]["turns"] = 1;  // no reuse turn, no load
  o.params = {param("concurrency=1,2")};
  o.configs = {"hints"};
  auto r = sweep(o);
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  for (const auto& cell : r->json["summary"]) {
    EXPECT_TRUE(cell["ttft_mean_ms"]["mean"].is_null()) << cell.dump();
    EXPECT_TRUE(cell["load_mean_ms"]["mean"].is_null()) << cell.dump();
  }
  EXPECT_TRUE(r->json["runs"][0]["ttft_mean_ms"].is_null());
  EXPECT_NE(r->table.find("n/a"), std::string::npos) << r->table;

  SweepOptions late = tiny_options();
  (*late.scenario)["faults"] = Json::array({{{"kind", "reset"}, {"at_s", 500}}});
  late.params = {param("concurrency=3")};
  late.configs = {"hints"};
  auto f = sweep(late);
  ASSERT_TRUE(f.ok()) << f.status().ToString();
  ASSERT_EQ(f->runs.size(), 1u);
  EXPECT_FALSE(f->runs[0].summary.ok());
  EXPECT_NE(f->runs[0].summary.failure().find("FAULT NEVER HAPPENED: /faults/0"), std::string::npos)
      << f->runs[0].summary.failure();

  // The line that reproduces it writes elsewhere: run as printed, it had
  // overwritten this sweep's files with its own one run (review, session 26).
  late.write_files = true;
  late.out_dir = fresh_dir("rerun").string();
  auto w = sweep(late);
  ASSERT_TRUE(w.ok()) << w.status().ToString();
  ASSERT_EQ(w->failures.size(), 1u);
  EXPECT_NE(w->failures[0].find(" --out " + late.out_dir + "-rerun"), std::string::npos)
      << w->failures[0];
  std::filesystem::remove_all(late.out_dir);
}

// SPEC R8 (sweep pictures): a byte-size axis is drawn in the unit its values
// reach; a 64 KiB segment size read "0.0001" on an axis in GiB.
TEST(Sweep, R8_SmallByteAxesAreNotDrawnInGiB) {
  SweepOptions o = tiny_options();
  o.params = {param("/nic/stream_segment_bytes=65536,262144")};
  o.configs = {"hints"};
  o.write_files = true;
  o.out_dir = fresh_dir("byte-axis").string();
  auto r = sweep(o);
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  std::ifstream in(std::filesystem::path(o.out_dir) / "sweep_load_mean_ms.svg");
  const std::string svg(std::istreambuf_iterator<char>(in), {});
  EXPECT_NE(svg.find("/nic/stream_segment_bytes (KiB)"), std::string::npos) << svg;
  EXPECT_NE(svg.find(">250</text>"), std::string::npos) << svg;  // ticks 100..250 KiB
  EXPECT_EQ(svg.find("GiB"), std::string::npos);
  std::filesystem::remove_all(o.out_dir);
}

// The built-in profiles, written to `dir`, cxl_ssd_default with 0 flash channels.
void write_broken_profiles(const std::filesystem::path& dir) {
  for (const std::string name : {"all_dram", "cxl_ssd_default"}) {
    Json j = Json::parse(*embedded_file("profiles/" + name + ".json"));
    if (name == "cxl_ssd_default") j["device"]["channels"]["value"] = 0;
    std::ofstream(dir / (name + ".json")) << j.dump(2);
  }
}

// SPEC R8: with --profiles DIR, a broken profile was blamed on the built-in
// profiles/<name>.json, a file the user never gave; `rcxl-sim run` names DIR's.
TEST(Sweep, R8_ABrokenProfileIsNamedByTheFileItCameFrom) {
  const std::filesystem::path dir = fresh_dir("own");
  write_broken_profiles(dir);
  SweepOptions o = tiny_options();
  o.profiles_dir = dir.string();
  o.params = {param("concurrency=1")};
  expect_refused(o,
                 dir.string() + "/cxl_ssd_default.json: /device/channels: must lie in [1, 1024]");
  o.configs = {"all_dram"};  // only the good profile: runs
  auto r = sweep(o);
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  // A value that breaks a built-in profile names the built-in file.
  o = tiny_options();
  o.params = {param("/device/channels=0")};
  expect_refused(o,
                 "--param /device/channels=0: profiles/cxl_ssd_default.json (built in): "
                 "/device/channels: must lie in");
  std::filesystem::remove_all(dir);
}

// A run that throws in a worker thread aborted rcxl-sim without a word
// (std::terminate; session-33 review): the batch stops taking jobs and the
// exception reaches the caller, whose crash guard names it.
TEST(Sweep, R8_ARunThatThrowsStopsTheBatchAndReachesTheCaller) {
  for (const int threads : {1, 2}) {
    std::atomic<int> ran{0};
    EXPECT_THROW(run_parallel(
                     100, threads,
                     [&](std::size_t i) {
                       ++ran;
                       if (i == 3) throw std::runtime_error("run 3 broke");
                     },
                     nullptr),
                 std::runtime_error);
    // On one thread no job starts after it (on two, the other may have taken them all).
    if (threads == 1) {
      EXPECT_EQ(ran.load(), 4);
    }
  }
  int done = 0;
  run_parallel(
      5, 2, [](std::size_t) {}, [&](std::size_t, std::size_t) { ++done; });
  EXPECT_EQ(done, 5);
}
}  // namespace
}  // namespace rcxl::scenarios