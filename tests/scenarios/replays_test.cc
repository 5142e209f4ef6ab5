// Every shipped replay (scenarios/replays/*.json) passes its `expect` block and
// the invariants, and runs twice to the same trace hash.
#include <gtest/gtest.h>

#include <algorithm>
#include <functional>

#include "scenarios/embedded/embedded.h"
#include "scenarios/run_counters.h"
#include "scenarios/serving_rig.h"

namespace rcxl::scenarios {
namespace {

std::vector<std::string> replay_paths() {
  std::vector<std::string> out;
  for (const auto& f : embedded_files()) {
    if (f.path.rfind("replays/", 0) == 0 && f.path != "replays/seed_serving.json") {
      out.emplace_back(f.path);
    }
  }
  return out;
}

// The dotted paths of every number in a run's counters JSON.
void number_paths(const Json& j, const std::string& at, std::vector<std::string>& out) {
  if (j.is_number()) out.push_back(at);
  if (!j.is_object()) return;
  for (const auto& [k, v] : j.items()) number_paths(v, at.empty() ? k : at + "." + k, out);
}

// What `expect` accepts at load (run_counters.h) is what runs report: every
// fixed path is in the counters and every counter is a fixed or family path.
void expect_counters_match_the_catalogue(const Json& counters) {
  std::vector<std::string> seen;
  number_paths(counters, "", seen);
  for (const auto& p : seen) EXPECT_TRUE(check_counter_path(p).ok()) << p << " is not catalogued";
  for (const auto& p : fixed_counter_paths()) {
    EXPECT_NE(std::find(seen.begin(), seen.end(), p), seen.end()) << p << " is not in the run";
  }
}

class Replay : public ::testing::TestWithParam<std::string> {};

TEST_P(Replay, PassesItsExpectationsAndIsDeterministic) {
  auto text = embedded_file(GetParam());
  ASSERT_TRUE(text.has_value());
  auto sc = parse_scenario(Json::parse(*text), GetParam());
  ASSERT_TRUE(sc.ok()) << sc.status().ToString();
  auto profile = load_profile("", sc->profile);
  ASSERT_TRUE(profile.ok()) << profile.status().ToString();
  const RunResult first = run_scenario(*sc, *profile);
  ASSERT_TRUE(first.status.ok()) << first.status.ToString();
  for (const auto& v : first.invariants.violations) ADD_FAILURE() << v;
  EXPECT_EQ(first.invariants.stale_reads, 0u);
  expect_counters_match_the_catalogue(first.counters);
  const RunResult second = run_scenario(*sc, *profile);
  EXPECT_EQ(first.trace_hash, second.trace_hash) << "same scenario and seed, different trace";
}

// A replay tests behaviour, not one timing: its faults land on the loads and
// stores its `expect` needs under other seeds too (`rcxl-sim replay --seed`).
TEST_P(Replay, PassesUnderOtherSeeds) {
  auto sc = parse_scenario(Json::parse(*embedded_file(GetParam())), GetParam());
  ASSERT_TRUE(sc.ok()) << sc.status().ToString();
  auto profile = load_profile("", sc->profile);
  ASSERT_TRUE(profile.ok()) << profile.status().ToString();
  for (std::uint64_t seed = 1; seed <= 24; ++seed) {
    sc->seed = seed;
    const RunResult r = run_scenario(*sc, *profile);
    ASSERT_TRUE(r.status.ok()) << "seed " << seed << ": " << r.status.ToString();
    for (const auto& v : r.invariants.violations) ADD_FAILURE() << "seed " << seed << ": " << v;
    for (std::size_t i = 0; i < r.faults_fired.size(); ++i) {
      EXPECT_TRUE(r.faults_fired[i]) << "seed " << seed << ": fault " << i << " never happened";
    }
  }
}

// The same faults with the other write-back policy of the profile (eager, in
// idle channel time): the invariants and expectations do not depend on it,
// except a reset's witnesses of a lost page. Eager write-back cleans a stored
// page within seconds, so a reset may find nothing dirty under a load to lose.
TEST_P(Replay, PassesWithEagerWriteBackToo) {
  auto sc = parse_scenario(Json::parse(*embedded_file(GetParam())), GetParam());
  ASSERT_TRUE(sc.ok()) << sc.status().ToString();
  const bool resets = std::any_of(sc->faults.begin(), sc->faults.end(),
                                  [](const Fault& f) { return f.kind == Fault::Kind::kReset; });
  if (resets) {
    std::erase_if(sc->expect.counters, [](const CounterBounds& c) {
      return c.path == "worker.remote_access_errors" || c.path == "kv.short_loads";
    });
  }
  auto profile = load_profile("", sc->profile);
  ASSERT_TRUE(profile.ok()) << profile.status().ToString();
  profile->device.device.idle_write_back = true;
  const RunResult first = run_scenario(*sc, *profile);
  ASSERT_TRUE(first.status.ok()) << first.status.ToString();
  for (const auto& v : first.invariants.violations) ADD_FAILURE() << v;
  EXPECT_EQ(first.invariants.stale_reads, 0u);
  EXPECT_EQ(first.trace_hash, run_scenario(*sc, *profile).trace_hash);
}

INSTANTIATE_TEST_SUITE_P(Shipped, Replay, ::testing::ValuesIn(replay_paths()),
                         [](const auto& info) {
                           std::string name = info.param.substr(8, info.param.size() - 13);
                           for (auto& c : name)
                             c = std::isalnum(static_cast<unsigned char>(c)) ? c : '_';
                           return name;
                         });

TEST(Replay, AnExpectationThatDoesNotHoldFailsTheRun) {
  auto sc = parse_scenario(Json::parse(*embedded_file("replays/reset_during_load.json")), "t");
  ASSERT_TRUE(sc.ok());
  sc->faults.clear();  // no reset: the expected boot change cannot happen
  auto profile = load_profile("", sc->profile);
  const RunResult r = run_scenario(*sc, *profile);
  ASSERT_TRUE(r.status.ok());
  ASSERT_FALSE(r.invariants.violations.empty());
  EXPECT_NE(r.invariants.violations.front().find("expect:"), std::string::npos);
}

TEST(Replay, ADifferentSeedGivesADifferentTrace) {
  auto sc = parse_scenario(Json::parse(*embedded_file("replays/reset_during_load.json")), "t");
  auto profile = load_profile("", sc->profile);
  const auto a = run_scenario(*sc, *profile).trace_hash;
  sc->seed += 1;
  EXPECT_NE(a, run_scenario(*sc, *profile).trace_hash);
}

// SPEC R8: the typed `expect` block judges a run; each failure names what was
// wanted and what the run did (no run needed: the result is made up).
TEST(Replay, R8_ExpectationsJudgeTheRunsBootsCountersAndReuseHits) {
  Json j = {{"name", "t"},
            {"expect",
             {{"boots", Json::array({"^boot-mem0:1$", "^boot-mem0:2$"})},
              {"counters",
               {{"device.resets", {{"min", 1}, {"max", 1}}},
                {"agent.maps", {{"min", 0}}},
                {"agent.hints_refused.bad_range", {{"max", 0}}}}},
              {"min_reuse_hits", 2}}}};
  auto sc = parse_scenario(j, "t.json");
  ASSERT_TRUE(sc.ok()) << sc.status().ToString();
  RunResult run;
  run.boots_seen = {"boot-mem0:1", "boot-mem0:2"};
  run.counters = {{"device", {{"resets", 1}}}};  // as when the agent did not come back
  RequestRecord reuse;
  reuse.turn = 2;
  reuse.loaded_chunks = 1;
  run.records = {reuse, reuse};
  EXPECT_EQ(check_expectations(sc->expect, run),
            (std::vector<std::string>{
                "counter agent.hints_refused.bad_range is not in this run's counters",
                "counter agent.maps is not in this run's counters"}));

  // A refusal code the run never counted reads as 0 (the family holds only keys seen).
  run.counters = {{"device", {{"resets", 1}}},
                  {"agent", {{"maps", 3}, {"hints_refused", Json::object()}}}};
  EXPECT_TRUE(check_expectations(sc->expect, run).empty());
  run.counters["agent"]["hints_refused"]["bad_range"] = 2;
  EXPECT_EQ(check_expectations(sc->expect, run),
            std::vector<std::string>{"counter agent.hints_refused.bad_range = 2, wanted <= 0"});

  run.boots_seen = {"boot-mem0:2", "boot-mem0:1"};  // out of order
  run.counters = {{"device", {{"resets", 2}}},
                  {"agent", {{"maps", 0}, {"hints_refused", Json::object()}}}};
  run.records.pop_back();
  EXPECT_EQ(
      check_expectations(sc->expect, run),
      (std::vector<std::string>{
          "no boot matching '^boot-mem0:2$' in order; boots seen: boot-mem0:2, boot-mem0:1",
          "counter device.resets = 2, wanted <= 1", "reuse turns that loaded KV: 1, wanted >= 2"}));

  // A pattern (the file's text) and boots (agents' text) are shown escaped, on
  // one line: a failure line drives no terminal (session-24 review).
  j["expect"] = {{"boots", Json::array({"zz\n\x1b\\[31mRED"})}};
  sc = parse_scenario(j, "t.json");
  ASSERT_TRUE(sc.ok()) << sc.status().ToString();
  run.boots_seen = {"b\x1b[2J"};
  EXPECT_EQ(check_expectations(sc->expect, run),
            std::vector<std::string>{
                "no boot matching 'zz\\n\\x1b\\[31mRED' in order; boots seen: b\\x1b[2J"});
}

TEST(Replay, UnknownProfileNamesTheBuiltInOnes) {
  auto p = load_profile("", "nope");
  ASSERT_FALSE(p.ok());
  EXPECT_NE(p.status().message().find("cxl_ssd_default"), std::string::npos);
}

// Runs a scenario given as JSON on its built-in profile, `edit`ed first when
// given; the run must end.
RunResult run_json(const Json& j, const std::string& origin,
                   const std::function<void(Profile&)>& edit = nullptr) {
  auto sc = parse_scenario(j, origin);
  EXPECT_TRUE(sc.ok()) << sc.status().ToString();
  if (!sc.ok()) return {};
  auto profile = load_profile("", sc->profile);
  EXPECT_TRUE(profile.ok());
  if (!profile.ok()) return {};
  if (edit) edit(*profile);
  RunResult r = run_scenario(*sc, *profile);
  EXPECT_TRUE(r.status.ok()) << r.status.ToString();
  return r;
}

// An agent whose extension takes read_hint but not read_hint_end gets no
// read hints: it could never be told one ended, so each would stay open until
// the connection closed (the hunt's false "hint requests still open").
TEST(Replay, R4_2_NoReadHintToAnAgentThatCannotEndIt) {
  const Json j = {{"name", "read_hint_only"},
                  {"extension", {{"name", "recording"}, {"config", {{"actions", {"read_hint"}}}}}},
                  {"client", {{"read_hints", true}}},
                  {"workload", {{"conversations", 4}, {"turns", 3}}}};
  const RunResult r = run_json(j, "read_hint_only");
  for (const auto& v : r.invariants.violations) ADD_FAILURE() << v;
  EXPECT_EQ(r.invariants.open_hints_at_end, 0u);
  EXPECT_EQ(counter_value(r.counters, "agent.hints_accepted.read_hint"), 0.0);
  EXPECT_GT(counter_value(r.counters, "scheduler.lookups"), 0.0);
}

// The scenario's `agent` block reaches every simulated agent (SPEC R7's
// flags): with one open hint request allowed per connection, the scheduler's
// second concurrent read hint is refused with too_many_hint_requests; with the
// default 4096 none is. The invariant monitor checks the same limit.
TEST(Replay, R3_3_TheScenariosAgentBlockSetsTheHintLimit) {
  Json j = {{"name", "one_hint"},
            {"client", {{"read_hints", true}, {"read_hint_on_arrival", true}}},
            {"workload", {{"conversations", 8}, {"turns", 3}, {"start_window_s", 0.2}}}};
  const RunResult defaults = run_json(j, "one_hint");
  for (const auto& v : defaults.invariants.violations) ADD_FAILURE() << v;
  EXPECT_EQ(counter_value(defaults.counters, "agent.hints_refused.too_many_hint_requests"), 0.0);
  j["agent"] = {{"max_hint_requests", 1}};
  const RunResult limited = run_json(j, "one_hint");
  for (const auto& v : limited.invariants.violations) ADD_FAILURE() << v;
  EXPECT_GE(counter_value(limited.counters, "agent.hints_refused.too_many_hint_requests"), 1.0);
  EXPECT_EQ(limited.invariants.open_hints_at_end, 0u);
}

// An unknown period while scheduler hints are open (the cxl_ssd device keeps
// its generation through it, so only the agent's ends free its pins): every
// request the boot change closed is ended at the extension. The invariant
// (no request left open at the extension) fails the run otherwise; before,
// the monitor forgot them at the boot change.
TEST(Replay, R6_4_AnUnknownPeriodEndsTheOpenHintsAtTheExtension) {
  const Json j = {
      {"name", "unknown_with_open_hints"},
      {"seed", 2},
      {"client", {{"read_hints", true}, {"read_hint_on_arrival", true}}},
      {"workload",
       {{"conversations", 24},
        {"turns", 4},
        {"start_window_s", 0.5},
        {"first_prompt_tokens", {4000, 8000}}}},
      {"faults",
       {{{"kind", "unknown_generation"}, {"during_load", 20}, {"after_ms", 1}, {"for_s", 2.5}}}}};
  const RunResult r = run_json(j, "unknown_with_open_hints");
  for (const auto& v : r.invariants.violations) ADD_FAILURE() << v;
  EXPECT_GE(counter_value(r.counters, "agent.hint_requests_closed_by_boot_change"), 1.0);
  EXPECT_EQ(r.invariants.open_hints_at_end, 0u);
}

// A reset while a load's READs stream (7.62 s, inside the agent's 0.1 s poll,
// so the registrations are still there): the pages whose bytes were only in
// DRAM are poisoned and a READ of them fails, so the load is a miss, never a
// hit with bytes that are not the key's (before: 7 of 20 seeds did).
TEST(Replay, R6_AResetDuringAReadNeverGivesAHitWithOtherBytes) {
  Json j = Json::parse(*embedded_file("replays/reset_during_load.json"));
  j["faults"] = Json::array({{{"kind", "reset"}, {"at_s", 7.62}}});
  j.erase("expect");
  for (std::uint64_t seed = 1; seed <= 10; ++seed) {
    j["seed"] = seed;
    const RunResult r = run_json(j, "reset_during_load at 7.62 s");
    EXPECT_EQ(r.invariants.stale_reads, 0u) << "seed " << seed;
    for (const auto& v : r.invariants.violations) ADD_FAILURE() << "seed " << seed << ": " << v;
  }
}

// The shipped replay's reset lands 2 ms into the third load: on every seed a
// reader gets a miss (a READ of a lost page fails) and never another key's
// bytes; with the device's poison off (a device that returns the older flash
// copy of a page it lost) the same run reads stale bytes and the invariant
// fails it: the check is live, not vacuous.
TEST(Replay, R6_AResetDuringALoadGivesMissesAndWithoutPoisonStaleBytesAreCaught) {
  Json j = Json::parse(*embedded_file("replays/reset_during_load.json"));
  j.erase("expect");
  for (std::uint64_t seed = 1; seed <= 5; ++seed) {
    j["seed"] = seed;
    const RunResult poisoned = run_json(j, "reset_during_load");
    EXPECT_TRUE(poisoned.invariants.violations.empty()) << "seed " << seed;
    EXPECT_GE(poisoned.counters["kv"]["short_loads"].get<std::uint64_t>(), 1u) << "seed " << seed;
    EXPECT_GE(poisoned.counters["worker"]["remote_access_errors"].get<std::uint64_t>(), 1u);
    const RunResult unpoisoned = run_json(
        j, "reset_during_load", [](Profile& p) { p.device.device.poison_lost_pages = false; });
    EXPECT_GE(unpoisoned.invariants.stale_reads, 1u) << "seed " << seed;
    ASSERT_FALSE(unpoisoned.invariants.violations.empty()) << "seed " << seed;
    EXPECT_NE(unpoisoned.invariants.violations[0].find("returned bytes that are not the key's"),
              std::string::npos)
        << unpoisoned.invariants.violations[0];
  }
}

// A topology of one node of each kind is the deployment the simulator always
// had: the same trace, bit for bit.
TEST(Replay, R8_OneNodeOfEachIsTheDeploymentWithoutATopology) {
  Json j = Json::parse(*embedded_file("replays/reset_during_load.json"));
  ASSERT_FALSE(j.contains("topology"));
  auto plain = parse_scenario(j, "plain");
  j["topology"] = {{"gpu_nodes", 1}, {"memory_nodes", 1}};
  auto explicit_one = parse_scenario(j, "explicit");
  ASSERT_TRUE(plain.ok() && explicit_one.ok());
  auto profile = load_profile("", plain->profile);
  ASSERT_TRUE(profile.ok());
  const RunResult a = run_scenario(*plain, *profile);
  const RunResult b = run_scenario(*explicit_one, *profile);
  EXPECT_EQ(a.trace_hash, b.trace_hash);
  EXPECT_FALSE(a.counters.contains("by_node"));
  // Two GPU nodes: each has its own numbers, and the totals are their sums.
  j["topology"] = {{"gpu_nodes", 2}, {"memory_nodes", 1}};
  auto two = parse_scenario(j, "two");
  ASSERT_TRUE(two.ok());
  const RunResult c = run_scenario(*two, *profile);
  ASSERT_TRUE(c.status.ok()) << c.status.ToString();
  for (const auto& v : c.invariants.violations) ADD_FAILURE() << v;
  const auto& n = c.counters["by_node"];
  EXPECT_GT(n["gpu0"]["worker"]["stores"].get<std::uint64_t>(), 0u);
  EXPECT_GT(n["gpu1"]["worker"]["stores"].get<std::uint64_t>(), 0u);
  EXPECT_EQ(c.counters["worker"]["stores"].get<std::uint64_t>(),
            n["gpu0"]["worker"]["stores"].get<std::uint64_t>() +
                n["gpu1"]["worker"]["stores"].get<std::uint64_t>());
  EXPECT_EQ(c.records.size(), a.records.size());  // every request served once
}

// `"extension": {"name": "none"}` runs the agent without an extension (it
// crashed: the invariant wrapper wrapped nothing).
TEST(Replay, R2_AScenarioWithoutAnExtensionRuns) {
  Json j = Json::parse(*embedded_file("replays/reset_during_load.json"));
  j["extension"] = {{"name", "none"}};
  j.erase("faults");
  j.erase("expect");
  const RunResult r = run_json(j, "no extension");
  for (const auto& v : r.invariants.violations) ADD_FAILURE() << v;
  EXPECT_GT(mean_reuse_ttft_ms(r.records), 0);
}

// A request the time limit cut off has no first token (or load end): means
// leave it out instead of counting 0 - arrival (negative TTFT before).
TEST(Replay, R8_MeansLeaveOutRequestsWithoutAnAnswer) {
  RequestRecord answered;
  answered.turn = 2;
  answered.hit_chunks = 1;
  answered.arrival = runtime::Instant(std::chrono::milliseconds(100));
  answered.first_token = runtime::Instant(std::chrono::milliseconds(150));
  answered.load_start = runtime::Instant(std::chrono::milliseconds(110));
  answered.load_end = runtime::Instant(std::chrono::milliseconds(120));
  RequestRecord cut = answered;
  cut.arrival = runtime::Instant(std::chrono::milliseconds(9000));
  cut.first_token = runtime::Instant(0);
  cut.load_start = runtime::Instant(std::chrono::milliseconds(9001));
  cut.load_end = runtime::Instant(0);
  EXPECT_DOUBLE_EQ(mean_reuse_ttft_ms({answered, cut}), 50.0);
  EXPECT_DOUBLE_EQ(mean_load_ms({answered, cut}), 10.0);
  EXPECT_DOUBLE_EQ(mean_reuse_ttft_ms({cut}), 0.0);
}

// An agent restart while the generation cannot be told: the new agent cannot
// start (R6.2) and stays down; the run says so and has no agent counters, so a
// bound on one fails (before, a failed agent's zeros were reported).
// SPEC R8 (expect): boots_exactly is one boot per pattern and no other; `boots`
// lets others come between, so agent_restart's "the boot is unchanged" could
// not fail (session-31 review: a reset added to it still passed).
TEST(Replay, R8_BootsExactlyRefusesABootThePatternsDoNotName) {
  Json j = {{"name", "t"}, {"expect", {{"boots_exactly", Json::array({"^boot-mem0:1$"})}}}};
  auto sc = parse_scenario(j, "t.json");
  ASSERT_TRUE(sc.ok()) << sc.status().ToString();
  RunResult run;
  run.boots_seen = {"boot-mem0:1"};
  EXPECT_TRUE(check_expectations(sc->expect, run).empty());
  run.boots_seen = {"boot-mem0:1", "boot-mem0:2"};
  EXPECT_EQ(check_expectations(sc->expect, run),
            std::vector<std::string>{"boots_exactly: 2 boots seen, 1 expected; boots seen: "
                                     "boot-mem0:1, boot-mem0:2"});
  run.boots_seen = {"boot-mem0:0", "boot-mem0:1"};
  EXPECT_EQ(check_expectations(sc->expect, run),
            std::vector<std::string>{"boot 1 'boot-mem0:0' does not match '^boot-mem0:1$'; "
                                     "boots seen: boot-mem0:0, boot-mem0:1"});
  run.boots_seen = {};
  EXPECT_EQ(check_expectations(sc->expect, run),
            std::vector<std::string>{"no boot 1 matching '^boot-mem0:1$' in order; boots seen: "});

  // The shipped replay itself, with a reset the restart should not hide.
  Json restart = Json::parse(*embedded_file("replays/agent_restart.json"));
  restart["faults"].push_back({{"kind", "reset"}, {"during_load", 2}});
  const RunResult r = run_json(restart, "agent_restart with a reset");
  ASSERT_EQ(r.invariants.violations.size(), 1u);
  EXPECT_NE(r.invariants.violations[0].find("boots_exactly: 2 boots seen"), std::string::npos)
      << r.invariants.violations[0];
}

TEST(Replay, R6_2_AnAgentThatCannotRestartStaysDownAndSaysSo) {
  Json j = Json::parse(*embedded_file("replays/reset_during_load.json"));
  j["faults"] = Json::array({{{"kind", "unknown_generation"}, {"at_s", 1.9}, {"for_s", 5}},
                             {{"kind", "agent_restart"}, {"at_s", 2}}});
  j["expect"] = {{"counters", {{"agent.maps", {{"max", 0}}}}}};
  auto sc = parse_scenario(j, "restart in an unknown period");
  ASSERT_TRUE(sc.ok()) << sc.status().ToString();
  auto profile = load_profile("", sc->profile);
  ASSERT_TRUE(profile.ok());
  const RunResult r = run_scenario(*sc, *profile);
  EXPECT_TRUE(r.counters.contains("agent_restart_failure"));
  EXPECT_FALSE(r.counters.contains("agent"));
  ASSERT_EQ(r.invariants.violations.size(), 1u);
  EXPECT_NE(r.invariants.violations[0].find("agent.maps is not in this run"), std::string::npos);
}

// A second agent_restart on the node a failed one left down starts the agent
// (it crashed: the restart stopped an agent that was not there).
TEST(Replay, R6_2_ARestartAfterAFailedOneStartsTheAgent) {
  Json j = Json::parse(*embedded_file("replays/reset_during_load.json"));
  j["faults"] = Json::array({{{"kind", "unknown_generation"}, {"at_s", 1.9}, {"for_s", 2}},
                             {{"kind", "agent_restart"}, {"at_s", 2}},
                             {{"kind", "agent_restart"}, {"at_s", 2.5}},
                             {{"kind", "agent_restart"}, {"at_s", 4.5}}});
  j.erase("expect");
  const RunResult r = run_json(j, "restarts in and after an unknown period");
  for (const auto& v : r.invariants.violations) ADD_FAILURE() << v;
  EXPECT_FALSE(r.counters.contains("agent_restart_failure"));  // the last one started it
  ASSERT_TRUE(r.counters.contains("agent"));
  EXPECT_GE(r.counters["agent"]["maps"].get<std::uint64_t>(), 1u);
}

// by_node.<node>. family counters that never fired read 0, like the totals'.
TEST(RunCountersValue, R8_AByNodeFamilyKeyThatNeverFiredIsZero) {
  const Json counters = {{"by_node", {{"mem0", {{"agent", {{"hints_refused", Json::object()}}}}}}},
                         {"agent", {{"hints_refused", Json::object()}}}};
  EXPECT_EQ(counter_value(counters, "agent.hints_refused.bad_range"), 0.0);
  EXPECT_EQ(counter_value(counters, "by_node.mem0.agent.hints_refused.bad_range"), 0.0);
  EXPECT_FALSE(counter_value(counters, "by_node.mem1.agent.hints_refused.bad_range").has_value());
}

}  // namespace
}  // namespace rcxl::scenarios
