// Scenario files: valid ones parse; each mistake names the file, the JSON
// pointer and the fix (docs/scenarios.md).
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <regex>
#include <sstream>

#include "scenarios/json_document.h"
#include "scenarios/run_counters.h"
#include "scenarios/scenario.h"

namespace rcxl::scenarios {
namespace {

Json minimal() {
  return {{"name", "t"}};
}

TEST(ScenarioFile, MinimalFileTakesDefaults) {
  auto sc = parse_scenario(minimal(), "t.json");
  ASSERT_TRUE(sc.ok()) << sc.status().ToString();
  EXPECT_EQ(sc->profile, "cxl_ssd_default");
  EXPECT_EQ(sc->workload.conversations, 48);
  EXPECT_EQ(sc->client.write_wait_ms, 50u);
}

// PAPER P4's store experiment is a workload kind: its fields, defaults and counts.
TEST(ScenarioFile, R8_AStoreWorkloadTakesItsOwnFields) {
  Json j = minimal();
  j["workload"] = {{"kind", "store"}, {"stores", 8}, {"chunks_per_store", 3}};
  auto sc = parse_scenario(j, "t.json");
  ASSERT_TRUE(sc.ok()) << sc.status().ToString();
  EXPECT_EQ(sc->workload.kind, WorkloadKind::kStore);
  EXPECT_EQ(sc->workload.stores, 8);
  EXPECT_EQ(sc->workload.chunks_per_store, 3);
  EXPECT_EQ(requests_of(sc->workload, 1), 8u);
  EXPECT_EQ(requests_of(sc->workload, 3), 24u);  // each GPU node makes its own stores
  EXPECT_EQ(reuse_turns_of(sc->workload), 0u);
  j["workload"] = {{"kind", "store"}};
  sc = parse_scenario(j, "t.json");
  ASSERT_TRUE(sc.ok()) << sc.status().ToString();
  EXPECT_EQ(sc->workload.stores, 64);
  EXPECT_EQ(sc->workload.chunks_per_store, 1);
  // No start window or think time to fit in the time limit (review, session 30:
  // the serving default of 2 s refused a short one, naming a field it refuses).
  j["time_limit_s"] = 0.5;
  EXPECT_TRUE(parse_scenario(j, "t.json").ok());
  j.erase("time_limit_s");
  // during_store counts the stores of every GPU node.
  j["topology"] = {{"gpu_nodes", 2}};
  j["faults"] = Json::array({{{"kind", "reset"}, {"during_store", 128}}});
  EXPECT_TRUE(parse_scenario(j, "t.json").ok());
  j["faults"][0]["during_store"] = 129;
  EXPECT_FALSE(parse_scenario(j, "t.json").ok());
  j.erase("topology");
  j.erase("faults");
  j["workload"] = {{"kind", "serving"}, {"turns", 2}};
  sc = parse_scenario(j, "t.json");
  ASSERT_TRUE(sc.ok()) << sc.status().ToString();
  EXPECT_EQ(sc->workload.kind, WorkloadKind::kServing);
  EXPECT_EQ(requests_of(sc->workload, 3), 96u);  // the conversations are dealt out
}

TEST(ScenarioFile, FaultsAndClientParse) {
  Json j = minimal();
  j["client"] = {{"read_hints", true}, {"write_wait_ms", 0}};
  j["faults"] = Json::array({{{"kind", "reset"}, {"at_s", 1.5}},
                             {{"kind", "unknown_generation"}, {"at_s", 2}, {"for_s", 3}}});
  auto sc = parse_scenario(j, "t.json");
  ASSERT_TRUE(sc.ok()) << sc.status().ToString();
  EXPECT_TRUE(sc->client.read_hints);
  EXPECT_EQ(sc->client.write_wait_ms, 0u);
  ASSERT_EQ(sc->faults.size(), 2u);
  EXPECT_EQ(sc->faults[1].kind, Fault::Kind::kUnknown);
  EXPECT_EQ(sc->faults[1].duration, std::chrono::seconds(3));
}

// Times are rounded to the nanosecond, not truncated: 1.001 s was 1000999999
// ns (a fault ran 1 ns before an event at 1.001 s), and the smallest
// extra_ms the error names (0.000001, 1 ns) was refused as 0 (review, session 25).
TEST(ScenarioFile, R8_TimesAreRoundedToTheNanosecond) {
  Json j = minimal();
  j["faults"] =
      Json::array({{{"kind", "reset"}, {"at_s", 1.001}},
                   {{"kind", "reset"}, {"during_load", 1}, {"after_ms", 4.1}},
                   {{"kind", "delay"}, {"at_s", 2}, {"for_s", 1}, {"extra_ms", 0.000001}}});
  auto sc = parse_scenario(j, "t.json");
  ASSERT_TRUE(sc.ok()) << sc.status().ToString();
  ASSERT_EQ(sc->faults.size(), 3u);
  EXPECT_EQ(sc->faults[0].at, std::chrono::nanoseconds(1001000000));
  EXPECT_EQ(sc->faults[1].after, std::chrono::nanoseconds(4100000));
  EXPECT_EQ(sc->faults[2].extra, std::chrono::nanoseconds(1));
}

// The `agent` block takes rcxl-agent's R7 settings; what it leaves out keeps
// the binary's defaults.
TEST(ScenarioFile, R7_TheAgentBlockTakesTheAgentsSettings) {
  auto defaults = parse_scenario(minimal(), "t.json");
  ASSERT_TRUE(defaults.ok()) << defaults.status().ToString();
  EXPECT_EQ(defaults->agent.generation_poll, std::chrono::milliseconds(100));
  EXPECT_EQ(defaults->agent.generation_grace, std::chrono::seconds(2));
  EXPECT_EQ(defaults->agent.sweep_interval, std::chrono::seconds(1));
  EXPECT_EQ(defaults->agent.max_hint_requests, 4096u);
  Json j = minimal();
  j["agent"] = {{"memory_generation_poll_s", 0.001},
                {"memory_generation_grace_s", 0},
                {"sweep_interval_s", 0.25},
                {"max_hint_requests", 7}};
  auto sc = parse_scenario(j, "t.json");
  ASSERT_TRUE(sc.ok()) << sc.status().ToString();
  EXPECT_EQ(sc->agent.generation_poll, std::chrono::milliseconds(1));
  EXPECT_EQ(sc->agent.generation_grace, runtime::Duration::zero());
  EXPECT_EQ(sc->agent.sweep_interval, std::chrono::milliseconds(250));
  EXPECT_EQ(sc->agent.max_hint_requests, 7u);
}

// A fault may fire on an event instead of a time: after_ms past the start of
// the N-th KV load (a reset or drop that must land while a load is in flight).
TEST(ScenarioFile, R8_ALoadTriggeredFaultParses) {
  Json j = minimal();
  j["workload"] = {{"conversations", 2}, {"turns", 4}};  // 6 reuse turns: 6 loads at most
  j["faults"] = Json::array({{{"kind", "reset"}, {"during_load", 3}, {"after_ms", 2.5}},
                             {{"kind", "drop_connections"}, {"during_load", 6}, {"node", "gpu0"}}});
  auto sc = parse_scenario(j, "t.json");
  ASSERT_TRUE(sc.ok()) << sc.status().ToString();
  EXPECT_EQ(sc->faults[0].during_load, 3u);
  EXPECT_EQ(sc->faults[0].after, std::chrono::microseconds(2500));
  EXPECT_EQ(sc->faults[1].during_load, 6u);
  EXPECT_EQ(sc->faults[1].after, std::chrono::nanoseconds(0));
}

// Or on the N-th KV store (a fault that must meet a store's write wait).
TEST(ScenarioFile, R8_AStoreTriggeredFaultParses) {
  Json j = minimal();
  j["faults"] =
      Json::array({{{"kind", "delay"}, {"during_store", 2}, {"for_s", 3}, {"extra_ms", 1500}},
                   {{"kind", "reset"}, {"during_store", 40}, {"after_ms", 1}}});
  auto sc = parse_scenario(j, "t.json");
  ASSERT_TRUE(sc.ok()) << sc.status().ToString();
  EXPECT_EQ(sc->faults[0].during_store, 2u);
  EXPECT_EQ(sc->faults[0].during_load, 0u);
  EXPECT_EQ(sc->faults[0].after, std::chrono::nanoseconds(0));
  EXPECT_EQ(sc->faults[1].during_store, 40u);
  EXPECT_EQ(sc->faults[1].after, std::chrono::milliseconds(1));
}

// The topology: how many GPU and memory nodes; faults and by_node counters
// may then name any of them.
TEST(ScenarioFile, R8_TopologyNamesTheNodesFaultsAndCountersMayUse) {
  Json j = minimal();
  j["topology"] = {{"gpu_nodes", 2}, {"memory_nodes", 3}};
  j["faults"] = Json::array({{{"kind", "reset"}, {"at_s", 1}, {"node", "mem2"}},
                             {{"kind", "partition"}, {"at_s", 1}, {"for_s", 1}, {"node", "gpu1"}}});
  j["expect"] = {{"counters",
                  {{"by_node.mem2.device.resets", {{"min", 1}}},
                   {"by_node.gpu1.kv.short_loads", {{"max", 0}}},
                   {"by_node.mem0.agent.hints_accepted.read_hint", {{"min", 1}}}}}};
  auto sc = parse_scenario(j, "t.json");
  ASSERT_TRUE(sc.ok()) << sc.status().ToString();
  EXPECT_EQ(sc->topology.gpu_nodes, 2);
  EXPECT_EQ(sc->topology.memory_nodes, 3);
  EXPECT_EQ(sc->faults[0].node, "mem2");
  const auto defaults = parse_scenario(minimal(), "t.json");
  ASSERT_TRUE(defaults.ok());
  EXPECT_EQ(defaults->topology.gpu_nodes, 1);
  EXPECT_EQ(defaults->topology.memory_nodes, 1);
  EXPECT_TRUE(defaults->topology.memory_profiles.empty());
  j["topology"]["memory_profiles"] = {"all_dram", "cxl_ssd_default", "all_dram"};
  auto mixed = parse_scenario(j, "t.json");
  ASSERT_TRUE(mixed.ok()) << mixed.status().ToString();
  EXPECT_EQ(mixed->topology.memory_profiles,
            (std::vector<std::string>{"all_dram", "cxl_ssd_default", "all_dram"}));
}

struct BadCase {
  Json patch;
  std::string pointer;
  friend void PrintTo(const BadCase& c, std::ostream* os) { *os << c.pointer; }
};

class ScenarioFileErrors : public ::testing::TestWithParam<BadCase> {};

TEST_P(ScenarioFileErrors, ErrorNamesFileAndPointer) {
  Json j = minimal();
  j.merge_patch(GetParam().patch);
  auto sc = parse_scenario(j, "bad.json");
  ASSERT_FALSE(sc.ok());
  EXPECT_EQ(sc.status().code(), ErrorCode::kBadRequest);
  EXPECT_NE(sc.status().message().find("bad.json"), std::string::npos) << sc.status().message();
  EXPECT_NE(sc.status().message().find(GetParam().pointer), std::string::npos)
      << sc.status().message();
}

INSTANTIATE_TEST_SUITE_P(
    Cases, ScenarioFileErrors,
    ::testing::Values(
        BadCase{{{"nme", 1}}, "/nme"}, BadCase{{{"seed", -3}}, "/seed"},
        BadCase{{{"client", {{"write_wait_ms", 20000}}}}, "/client/write_wait_ms"},
        BadCase{{{"client", {{"read_hint", true}}}}, "/client/read_hint"},
        BadCase{{{"faults", Json::array({{{"kind", "meteor"}, {"at_s", 1}}})}}, "/faults/0/kind"},
        BadCase{{{"faults", Json::array({{{"kind", "partition"}, {"at_s", 1}}})}},
                "/faults/0/for_s"},
        BadCase{{{"faults", Json::array({{{"kind", "reset"}}})}}, "/faults/0/at_s"},
        BadCase{{{"workload", {{"turns", 0}}}}, "/workload/turns"},
        BadCase{{{"extension", {{"name", "x"}, {"config", 3}}}}, "/extension/config"}));

// SPEC R8 (bad input is a coded error): every mistake in a scenario file is
// refused when the file is read, naming the file, the JSON pointer and the fix;
// nothing throws and nothing is left to fail after a run.
struct Refusal {
  std::string what;
  Json patch;
  std::string pointer;
  std::string fix;  // a piece of the message that says what would be right
  friend void PrintTo(const Refusal& c, std::ostream* os) { *os << c.what; }
};

class ScenarioFileRefusals : public ::testing::TestWithParam<Refusal> {};

TEST_P(ScenarioFileRefusals, R8_RefusedAtLoadNamingFilePointerAndFix) {
  Json j = minimal();
  j.merge_patch(GetParam().patch);
  Result<Scenario> sc = Error(ErrorCode::kInternal, "not parsed");
  ASSERT_NO_THROW(sc = parse_scenario(j, "bad.json"));
  ASSERT_FALSE(sc.ok());
  const std::string& m = sc.status().message();
  EXPECT_EQ(sc.status().code(), ErrorCode::kBadRequest);
  EXPECT_EQ(m.rfind("bad.json: " + GetParam().pointer + ": ", 0), 0u) << m;
  EXPECT_NE(m.find(GetParam().fix), std::string::npos) << m;
  EXPECT_EQ(m.find('\n'), std::string::npos) << m;
}

Json fault(Json f) {
  return {{"faults", Json::array({std::move(f)})}};
}

INSTANTIATE_TEST_SUITE_P(
    Cases, ScenarioFileRefusals,
    ::testing::Values(
        // A missing field says what it wants, as a wrong one does (audit, session 29).
        Refusal{"no_name", {{"name", nullptr}}, "/name", "missing; expected a non-empty string"},
        Refusal{"fault_without_kind", fault({{"at_s", 1}}), "/faults/0/kind",
                "missing; expected one of: agent_restart, delay"},
        Refusal{"write_wait_without_write_hints",  // no store would wait (session 27)
                {{"client", {{"read_hints", false}, {"write_wait_ms", 500}}}},
                "/client/write_wait_ms",
                "set \"write_hints\": true"},
        Refusal{"boot_not_a_regex",
                {{"expect", {{"boots", Json::array({"(("})}}}},
                "/expect/boots/0",
                "not a regular expression"},
        Refusal{"boot_empty",  // matches no boot: the run could only fail
                {{"expect", {{"boots", Json::array({""})}}}},
                "/expect/boots/0",
                "is empty and matches no boot"},
        Refusal{"counter_min_past_uint64",  // no counter reaches it
                {{"expect", {{"counters", {{"agent.boot_changes", {{"min", 1e308}}}}}}}},
                "/expect/counters/agent.boot_changes/min",
                "above every counter's range"},
        Refusal{"counter_min_2_to_64",  // one past UINT64_MAX
                {{"expect",
                  {{"counters", {{"agent.boot_changes", {{"min", 18446744073709551616.0}}}}}}}},
                "/expect/counters/agent.boot_changes/min",
                "above every counter's range"},
        // Checks that cannot fail, or cannot pass (review, session 32).
        Refusal{"boots_empty",
                {{"expect", {{"boots", Json::array()}}}},
                "/expect/boots",
                "checks nothing"},
        Refusal{"boots_exactly_empty",
                {{"expect", {{"boots_exactly", Json::array()}}}},
                "/expect/boots_exactly",
                "would fail every run"},
        Refusal{"min_reuse_hits_zero",
                {{"expect", {{"min_reuse_hits", 0}}}},
                "/expect/min_reuse_hits",
                "0 checks nothing"},
        Refusal{"boot_not_a_string",
                {{"expect", {{"boots", Json::array({1})}}}},
                "/expect/boots/0",
                "expected a regular expression"},
        Refusal{"boots_not_an_array",
                {{"expect", {{"boots", "^boot$"}}}},
                "/expect/boots",
                "expected an array"},
        Refusal{"min_reuse_hits_string",
                {{"expect", {{"min_reuse_hits", "x"}}}},
                "/expect/min_reuse_hits",
                "expected an integer"},
        Refusal{"min_reuse_hits_negative",
                {{"expect", {{"min_reuse_hits", -1}}}},
                "/expect/min_reuse_hits",
                "expected an integer"},
        Refusal{"min_reuse_hits_fraction",
                {{"expect", {{"min_reuse_hits", 1.5}}}},
                "/expect/min_reuse_hits",
                "expected an integer"},
        Refusal{"counter_min_string",
                {{"expect", {{"counters", {{"agent.boot_changes", {{"min", "1"}}}}}}}},
                "/expect/counters/agent.boot_changes/min",
                "expected a number >= 0"},
        Refusal{"counter_bare_number",
                {{"expect", {{"counters", {{"agent.boot_changes", 1}}}}}},
                "/expect/counters/agent.boot_changes",
                "{\"min\": N, \"max\": N}"},
        Refusal{"counter_unknown_key",
                {{"expect", {{"counters", {{"agent.boot_changes", {{"atleast", 1}}}}}}}},
                "/expect/counters/agent.boot_changes/atleast",
                "expected one of: min, max"},
        Refusal{"counter_min_above_max",
                {{"expect", {{"counters", {{"device.resets", {{"min", 3}, {"max", 1}}}}}}}},
                "/expect/counters/device.resets/min",
                "above max"},
        Refusal{"counter_no_bounds",
                {{"expect", {{"counters", {{"device.resets", Json::object()}}}}}},
                "/expect/counters/device.resets",
                "give min, max or both"},
        Refusal{"counter_bad_path",
                {{"expect", {{"counters", {{"device~resets", {{"min", 1}}}}}}}},
                "/expect/counters/device~0resets",  // RFC 6901: '~' is ~0
                "dotted counter path"},
        Refusal{"counter_no_such_counter",
                {{"expect", {{"counters", {{"device.hit", {{"min", 1}}}}}}}},
                "/expect/counters/device.hit",
                "no counter device.hit; device has device.demand_read_fills"},
        Refusal{"counter_no_such_section",
                {{"expect", {{"counters", {{"nic.bytes", {{"min", 1}}}}}}}},
                "/expect/counters/nic.bytes",
                "no counter section 'nic'; counters are under agent., device."},
        Refusal{"counter_refusal_code_unknown",
                {{"expect", {{"counters", {{"agent.hints_refused.bad_rnage", {{"max", 0}}}}}}}},
                "/expect/counters/agent.hints_refused.bad_rnage",
                "'bad_rnage' is not a key of agent.hints_refused; write "
                "agent.hints_refused.<an error code such as bad_range>"},
        Refusal{"counter_family_itself",
                {{"expect", {{"counters", {{"agent.hints_accepted", {{"min", 1}}}}}}}},
                "/expect/counters/agent.hints_accepted",
                "agent has agent.boot_changes"},
        Refusal{"unknown_expectation",
                {{"expect", {{"min_hits", 3}}}},
                "/expect/min_hits",
                "expected one of: boots, boots_exactly, counters, min_reuse_hits"},
        Refusal{"boots_and_boots_exactly",
                {{"expect",
                  {{"boots", Json::array({"^a$"})}, {"boots_exactly", Json::array({"^a$"})}}}},
                "/expect/boots_exactly",
                "give boots (these in order, others between) or boots_exactly"},
        Refusal{"boots_exactly_not_a_regex",
                {{"expect", {{"boots_exactly", Json::array({"(("})}}}},
                "/expect/boots_exactly/0",
                "is not a regular expression"},
        Refusal{"fault_on_no_such_node",
                fault({{"kind", "drop_connections"}, {"at_s", 1}, {"node", "mem9"}}),
                "/faults/0/node", "expected one of: dir, gpu0, mem0"},
        Refusal{"device_fault_elsewhere", fault({{"kind", "reset"}, {"at_s", 1}, {"node", "gpu0"}}),
                "/faults/0/node", "acts on a memory node (mem0), not 'gpu0'"},
        Refusal{"delay_without_extra", fault({{"kind", "delay"}, {"at_s", 1}, {"for_s", 2}}),
                "/faults/0/extra_ms", "extra_ms > 0"},
        Refusal{"delay_of_zero",
                fault({{"kind", "delay"}, {"at_s", 1}, {"for_s", 2}, {"extra_ms", 0}}),
                "/faults/0/extra_ms", "milliseconds > 0"},
        Refusal{"time_limit_before_the_default_start_window",
                {{"time_limit_s", 1}},
                "/workload/start_window_s",
                "a start window of 2 s is not before the run's time limit of 1 s"},
        Refusal{"store_past_the_requests",
                {{"workload", {{"conversations", 1}, {"turns", 1}}},
                 {"faults", Json::array({{{"kind", "reset"}, {"during_store", 5}}})}},
                "/faults/0/during_store",
                "the workload has 1 requests and each stores at most once"},
        Refusal{"delay_under_a_tick",
                fault({{"kind", "delay"}, {"at_s", 1}, {"for_s", 2}, {"extra_ms", 1e-320}}),
                "/faults/0/extra_ms", "at least 0.000001 (1 ns"},
        // Under a tick, a time ran as its rounding: two sweep values as one point
        // (session-33 scenario review).
        Refusal{"at_under_a_tick", fault({{"kind", "reset"}, {"at_s", 1.0000000001}}),
                "/faults/0/at_s", "whole nanoseconds"},
        Refusal{"extra_under_a_tick",
                fault({{"kind", "delay"}, {"at_s", 1}, {"for_s", 2}, {"extra_ms", 1.0000001}}),
                "/faults/0/extra_ms", "whole nanoseconds"},
        Refusal{"after_under_a_tick",
                fault({{"kind", "reset"}, {"during_load", 1}, {"after_ms", 0.0000004}}),
                "/faults/0/after_ms", "whole nanoseconds"},
        Refusal{"think_time_under_a_tick",
                {{"workload", {{"think_time_s", 1e-10}}}},
                "/workload/think_time_s",
                "whole nanoseconds"},
        Refusal{"extra_on_a_reset", fault({{"kind", "reset"}, {"at_s", 1}, {"extra_ms", 5}}),
                "/faults/0/extra_ms", "only a delay fault"},
        Refusal{"duration_of_an_instant_fault",
                fault({{"kind", "reset"}, {"at_s", 1}, {"for_s", 5}}), "/faults/0/for_s",
                "instant"},
        Refusal{"at_and_during_load", fault({{"kind", "reset"}, {"at_s", 1}, {"during_load", 2}}),
                "/faults/0/during_load", "give one of at_s, during_load and during_store"},
        Refusal{"at_and_during_store", fault({{"kind", "reset"}, {"at_s", 1}, {"during_store", 2}}),
                "/faults/0/during_store", "give one of at_s, during_load and during_store"},
        Refusal{"load_and_store",
                fault({{"kind", "reset"}, {"during_load", 1}, {"during_store", 2}}),
                "/faults/0/during_store", "drop the others"},
        Refusal{"store_zero", fault({{"kind", "reset"}, {"during_store", 0}}),
                "/faults/0/during_store", "expected an integer in 1..1000000"},
        Refusal{"store_not_a_number", fault({{"kind", "reset"}, {"during_store", "2"}}),
                "/faults/0/during_store", "expected an integer"},
        Refusal{"no_time_nor_load", fault({{"kind", "reset"}}), "/faults/0/at_s",
                "the during_load-th KV load or the during_store-th KV store"},
        Refusal{"load_zero", fault({{"kind", "reset"}, {"during_load", 0}}),
                "/faults/0/during_load", "expected an integer in 1..1000000"},
        Refusal{"load_not_an_integer", fault({{"kind", "reset"}, {"during_load", 1.5}}),
                "/faults/0/during_load", "expected an integer"},
        Refusal{"recording_log_over_the_agents_region_table",
                {{"extension",
                  {{"name", "recording"},
                   {"config", {{"log", "/var/lib/rcxl-agent/./regions.json"}}}}}},
                "/extension/config/log",
                "is the agent's region table"},
        // The simulated node has / and /var/lib/rcxl-agent: a log elsewhere
        // failed the run at its start (exit 1), not here (session-33 review).
        Refusal{"recording_log_in_a_directory_the_node_lacks",
                {{"extension", {{"name", "recording"}, {"config", {{"log", "/nodir/rec.log"}}}}}},
                "/extension/config/log",
                "/nodir does not exist on this simulated node"},
        Refusal{"recording_log_relative_into_a_directory",
                {{"extension",
                  {{"name", "recording"}, {"config", {{"log", "var/lib/rcxl-agent/x.log"}}}}}},
                "/extension/config/log",
                "does not exist on this simulated node"},
        Refusal{"recording_log_a_parent_directory",
                {{"extension", {{"name", "recording"}, {"config", {{"log", "/var"}}}}}},
                "/extension/config/log",
                "/var: is a directory"},
        Refusal{
            "recording_log_a_directory",
            {{"extension", {{"name", "recording"}, {"config", {{"log", "/var/lib/rcxl-agent/"}}}}}},
            "/extension/config/log",
            "/var/lib/rcxl-agent/: is a directory"},
        Refusal{"hints_on_arrival_without_read_hints",
                {{"client", {{"read_hint_on_arrival", true}}}},
                "/client/read_hint_on_arrival",
                "set \"read_hints\": true as well"},
        Refusal{"load_past_the_reuse_turns",  // a first turn never loads
                {{"workload", {{"conversations", 2}, {"turns", 3}}},
                 {"faults", Json::array({{{"kind", "reset"}, {"during_load", 5}}})}},
                "/faults/0/during_load",
                "the workload has 4 reuse turns"},
        Refusal{"load_without_reuse_turns",
                {{"workload", {{"conversations", 4}, {"turns", 1}}},
                 {"faults", Json::array({{{"kind", "reset"}, {"during_load", 1}}})}},
                "/faults/0/during_load",
                "has 0 reuse turns"},
        Refusal{"min_reuse_hits_past_the_reuse_turns",
                {{"workload", {{"conversations", 4}, {"turns", 1}}},
                 {"expect", {{"min_reuse_hits", 1}}}},
                "/expect/min_reuse_hits",
                "the workload has 0 reuse turns"},
        Refusal{"start_window_and_pauses_past_the_time_limit",
                {{"workload", {{"turns", 3}, {"start_window_s", 599}, {"think_time_s", 299}}}},
                "/workload/think_time_s",
                "plus a conversation's pauses ((turns - 1) x think_time_s) = 1197 s"},
        Refusal{"after_ms_on_a_timed_fault",
                fault({{"kind", "reset"}, {"at_s", 1}, {"after_ms", 2}}), "/faults/0/after_ms",
                "only a fault with during_load or during_store takes after_ms"},
        Refusal{"after_ms_negative",
                fault({{"kind", "reset"}, {"during_load", 1}, {"after_ms", -1}}),
                "/faults/0/after_ms", "milliseconds in 0..60000"},
        Refusal{"after_ms_too_long",
                fault({{"kind", "reset"}, {"during_load", 1}, {"after_ms", 60001}}),
                "/faults/0/after_ms", "milliseconds in 0..60000"},
        Refusal{"topology_not_an_object", {{"topology", 2}}, "/topology", "expected an object"},
        Refusal{"agent_not_an_object", {{"agent", 2}}, "/agent", "expected an object"},
        Refusal{"agent_unknown_key",
                {{"agent", {{"generation_poll_s", 1}}}},
                "/agent/generation_poll_s",
                "memory_generation_poll_s"},
        Refusal{"agent_poll_zero",
                {{"agent", {{"memory_generation_poll_s", 0}}}},
                "/agent/memory_generation_poll_s",
                "0.001..86400"},
        Refusal{"agent_poll_not_a_number",
                {{"agent", {{"memory_generation_poll_s", "1"}}}},
                "/agent/memory_generation_poll_s",
                "expected seconds"},
        Refusal{"agent_grace_negative",
                {{"agent", {{"memory_generation_grace_s", -1}}}},
                "/agent/memory_generation_grace_s",
                "expected seconds"},
        Refusal{"agent_sweep_under_a_millisecond",
                {{"agent", {{"sweep_interval_s", 0.0001}}}},
                "/agent/sweep_interval_s",
                "0.001..86400"},
        Refusal{"agent_no_hint_requests",
                {{"agent", {{"max_hint_requests", 0}}}},
                "/agent/max_hint_requests",
                "1..4294967295"},
        Refusal{"agent_hint_requests_past_32_bits",
                {{"agent", {{"max_hint_requests", 4294967296ull}}}},
                "/agent/max_hint_requests",
                "1..4294967295"},
        Refusal{"memory_profiles_not_an_array",
                {{"topology", {{"memory_nodes", 2}, {"memory_profiles", "all_dram"}}}},
                "/topology/memory_profiles",
                "expected an array of 2 profile names, one per memory node"},
        Refusal{"memory_profiles_one_short",
                {{"topology", {{"memory_nodes", 2}, {"memory_profiles", {"all_dram"}}}}},
                "/topology/memory_profiles",
                "(memory_nodes is 2)"},
        Refusal{"memory_profiles_not_a_name",
                {{"topology", {{"memory_nodes", 2}, {"memory_profiles", {"all_dram", 3}}}}},
                "/topology/memory_profiles/1",
                "expected a profile name"},
        Refusal{"memory_profiles_empty_name",
                {{"topology", {{"memory_profiles", {""}}}}},
                "/topology/memory_profiles/0",
                "expected a profile name"},
        Refusal{"topology_unknown_field",
                {{"topology", {{"gpus", 2}}}},
                "/topology/gpus",
                "expected one of: gpu_nodes, memory_nodes, memory_profiles"},
        Refusal{"no_gpu_nodes",
                {{"topology", {{"gpu_nodes", 0}}}},
                "/topology/gpu_nodes",
                "expected an integer in 1..8"},
        Refusal{"too_many_memory_nodes",
                {{"topology", {{"memory_nodes", 9}}}},
                "/topology/memory_nodes",
                "expected an integer in 1..8"},
        Refusal{"fault_on_a_memory_node_not_there",
                fault({{"kind", "reset"}, {"at_s", 1}, {"node", "mem1"}}), "/faults/0/node",
                "no node 'mem1'; expected one of: mem0"},
        Refusal{"device_fault_on_a_gpu_node",
                {{"topology", {{"memory_nodes", 2}}},
                 {"faults", Json::array({{{"kind", "reset"}, {"at_s", 1}, {"node", "gpu0"}}})}},
                "/faults/0/node",
                "acts on a memory node (mem0, mem1), not 'gpu0'"},
        Refusal{"by_node_with_one_node_of_each",
                {{"expect", {{"counters", {{"by_node.mem0.device.resets", {{"min", 1}}}}}}}},
                "/expect/counters/by_node.mem0.device.resets",
                "with one of each, write the total, e.g. device.resets"},
        Refusal{"by_node_of_a_node_not_there",
                {{"topology", {{"gpu_nodes", 2}}},
                 {"expect", {{"counters", {{"by_node.gpu2.kv.short_loads", {{"min", 1}}}}}}}},
                "/expect/counters/by_node.gpu2.kv.short_loads",
                "no node gpu2 in this run: topology has 2 GPU node(s)"},
        Refusal{"by_node_section_of_the_other_kind",
                {{"topology", {{"gpu_nodes", 2}}},
                 {"expect", {{"counters", {{"by_node.gpu1.device.hits", {{"min", 1}}}}}}}},
                "/expect/counters/by_node.gpu1.device.hits",
                "a gpu node has kv., scheduler., worker. counters"},
        Refusal{"by_node_not_a_node",
                {{"topology", {{"gpu_nodes", 2}}},
                 {"expect", {{"counters", {{"by_node.dir.kv.short_loads", {{"min", 1}}}}}}}},
                "/expect/counters/by_node.dir.kv.short_loads",
                "write by_node.<node>.<counter>"},
        Refusal{"no_time_to_run", {{"time_limit_s", 0}}, "/time_limit_s", "seconds > 0"},
        // Each message's range holds only what it takes (session-33 review).
        Refusal{"time_limit_negative",
                {{"time_limit_s", -5}},
                "/time_limit_s",
                "expected seconds > 0, at most 86400"},
        Refusal{"min_reuse_hits_past_the_turns",
                {{"workload", {{"conversations", 2}, {"turns", 2}}},
                 {"expect", {{"min_reuse_hits", 3}}}},
                "/expect/min_reuse_hits",
                "pick 1..2 or raise"},
        Refusal{"min_reuse_hits_without_reuse_turns",
                {{"workload", {{"conversations", 2}, {"turns", 1}}},
                 {"expect", {{"min_reuse_hits", 1}}}},
                "/expect/min_reuse_hits",
                "0 reuse turns (turns 2.. of each conversation); raise turns"},
        Refusal{"unknown_extension",
                {{"extension", {{"name", "cxl_sd"}}}},
                "/extension/name",
                "expected one of: cxl_ssd, none, recording"},
        Refusal{"extension_config_key",
                {{"extension", {{"name", "cxl_ssd"}, {"config", {{"poll_us", 5}}}}}},
                "/extension/config/poll_us",
                "unknown key 'poll_us'"},
        // The pointer names the key at fault, not only the config (session 27).
        Refusal{
            "extension_config_value",
            {{"extension",
              {{"name", "cxl_ssd"}, {"config", {{"write_wait_poll_us", 10}, {"zzz_unused", 1}}}}}},
            "/extension/config/zzz_unused",
            "unknown key 'zzz_unused'"},
        Refusal{"extension_config_value_out_of_range",
                {{"extension", {{"name", "cxl_ssd"}, {"config", {{"write_wait_poll_us", 0}}}}}},
                "/extension/config/write_wait_poll_us",
                "must be 1..1e6"},
        Refusal{"recording_config_key",
                {{"extension", {{"name", "recording"}, {"config", {{"nope", 1}}}}}},
                "/extension/config/nope",
                "unknown key 'nope'"},
        // Fuzzing (session 12): echoed names stay one line; a typo is no action.
        Refusal{"unknown_extension_with_controls",
                {{"extension", {{"name", "\x1b[31m\nFAKE"}}}},
                "/extension/name",
                "unknown extension '\\x1b[31m\\nFAKE'"},
        Refusal{"recording_unknown_action",
                {{"extension",
                  {{"name", "recording"}, {"config", {{"actions", {"read_hint", "raed_hint"}}}}}}},
                "/extension/config/actions",
                "actions/1 'raed_hint' is no action"},
        Refusal{"config_for_none",
                {{"extension", {{"name", "none"}, {"config", {{"a", 1}}}}}},
                "/extension/config/a",
                "takes no config"},
        // Hunt H3: std::regex backtracks; these never finish on a boot.
        Refusal{"boot_repeated_group_of_repeats",
                {{"expect", {{"boots", Json::array({"^(.*)*(.*)*(.*)*(.*)*X$"})}}}},
                "/expect/boots/0",
                "repeats a group that itself repeats or alternates"},
        Refusal{"boot_repeated_group_of_alternatives",
                {{"expect", {{"boots", Json::array({"^boot-(?:m|me|mem)+0:1$"})}}}},
                "/expect/boots/0",
                "boots are short strings such as boot-mem0:2"},
        Refusal{"boot_counted_group_of_repeats",
                {{"expect", {{"boots", Json::array({"^(a+b?){2,}$"})}}}},
                "/expect/boots/0",
                "repeats a group"},
        Refusal{"boot_outer_group_repeats_inner_repeat",
                {{"expect", {{"boots", Json::array({"((a)*)+"})}}}},
                "/expect/boots/0",
                "repeats a group"},
        Refusal{"boot_too_many_repetitions",
                {{"expect", {{"boots", Json::array({".*.*.*.*.*.*.*X"})}}}},
                "/expect/boots/0",
                "has 7 repetitions and alternations (at most 6"},
        // Fuzzing (session 12): std::regex reads a count into an int that wraps,
        // so a{4294967296} matched like a{0} and the expectation passed.
        Refusal{"boot_repeat_count_that_wraps",
                {{"expect", {{"boots", Json::array({"^boot-mem0:1a{4294967296}$"})}}}},
                "/expect/boots/0",
                "repeats something more than 256 times"},
        Refusal{"boot_repeat_count_over_256",
                {{"expect", {{"boots", Json::array({"^(?:ab){2,257}$"})}}}},
                "/expect/boots/0",
                "repeats something more than 256 times"},
        Refusal{"boot_stacked_repeat_counts",
                {{"expect", {{"boots", Json::array({"^boot-mem0:1a{1}{4294967296}$"})}}}},
                "/expect/boots/0",
                "repeats a repetition"},
        Refusal{"boot_stacked_counts_multiply",
                {{"expect", {{"boots", Json::array({"^a{10}{20}$"})}}}},
                "/expect/boots/0",
                "repeats a repetition"},
        Refusal{"boot_pattern_too_long",
                {{"expect", {{"boots", Json::array({std::string(257, 'a')})}}}},
                "/expect/boots/0",
                "is longer than 256 characters; boots are short strings"},
        Refusal{"too_many_boot_patterns",
                {{"expect", {{"boots", Json(std::vector<std::string>(65, "^b$"))}}}},
                "/expect/boots",
                "at most 64"},
        // Hunt W4: a fault the run's time limit cuts off never happens.
        Refusal{
            "fault_after_time_limit",
            {{"time_limit_s", 60}, {"faults", Json::array({{{"kind", "reset"}, {"at_s", 60}}})}},
            "/faults/0/at_s",
            "is not before the run's time limit of 60 s"},
        Refusal{"fault_after_default_time_limit",
                fault({{"kind", "partition"}, {"at_s", 700}, {"for_s", 1}, {"node", "gpu0"}}),
                "/faults/0/at_s", "time limit of 600 s (time_limit_s)"},
        // Hunt W11: only cxl_ssd follows the device's generation.
        Refusal{"reset_under_recording",
                {{"extension", {{"name", "recording"}}},
                 {"faults", Json::array({{{"kind", "reset"}, {"at_s", 4}}})}},
                "/faults/0/kind",
                "the extension 'recording' cannot tell"},
        Refusal{"unknown_generation_under_none",
                {{"extension", {{"name", "none"}}},
                 {"faults",
                  Json::array({{{"kind", "unknown_generation"}, {"at_s", 4}, {"for_s", 1}}})}},
                "/faults/0/kind",
                "use the extension cxl_ssd or drop this fault"},
        // Hunt H2/H4: counts a run can hold.
        Refusal{"prompt_tokens_past_a_context",
                {{"workload", {{"first_prompt_tokens", {2000000000, 2147483647}}}}},
                "/workload/first_prompt_tokens",
                "hi <= 1048576 tokens (a 1M-token context"},
        Refusal{"conversation_context_past_a_context",
                {{"workload", {{"turns", 1000}, {"output_tokens", {1000, 2000}}}}},
                "/workload",
                "a conversation's context reaches 2180820 tokens"},
        Refusal{"conversations_past_a_finishing_run",
                {{"workload", {{"conversations", 10001}}}},
                "/workload/conversations",
                "1..10000 (the engine scans"},
        // The store experiment (PAPER P4) as a workload kind (session 30).
        Refusal{"workload_kind_unknown",
                {{"workload", {{"kind", "stores"}}}},
                "/workload/kind",
                "expected \"serving\" (the chat workload, the default) or \"store\""},
        Refusal{"serving_field_in_a_store_workload",  // it would do nothing
                {{"workload", {{"kind", "store"}, {"turns", 3}}}},
                "/workload/turns",
                "unknown field for kind store; expected one of: kind, stores, chunks_per_store"},
        Refusal{"store_field_in_a_serving_workload",
                {{"workload", {{"stores", 3}}}},
                "/workload/stores",
                "unknown field for kind serving; expected one of: kind, conversations"},
        Refusal{"no_stores",
                {{"workload", {{"kind", "store"}, {"stores", 0}}}},
                "/workload/stores",
                "expected an integer in 1..1048576"},
        Refusal{"stores_times_chunks_past_any_pool",
                {{"workload", {{"kind", "store"}, {"stores", 2048}, {"chunks_per_store", 1024}}}},
                "/workload",
                "stores x chunks_per_store = 2097152 chunks; at most 1048576"},
        Refusal{"load_fault_in_a_store_workload",
                {{"workload", {{"kind", "store"}}},
                 {"faults", Json::array({{{"kind", "reset"}, {"during_load", 1}}})}},
                "/faults/0/during_load",
                "loads nothing, so this fault would never happen; use during_store or at_s"},
        Refusal{"store_fault_past_the_stores",
                {{"workload", {{"kind", "store"}, {"stores", 4}}},
                 {"faults", Json::array({{{"kind", "reset"}, {"during_store", 5}}})}},
                "/faults/0/during_store",
                "the workload has 4 stores (stores x gpu_nodes); pick 1..4"},
        Refusal{"reuse_hits_of_a_store_workload",
                {{"workload", {{"kind", "store"}}}, {"expect", {{"min_reuse_hits", 1}}}},
                "/expect/min_reuse_hits",
                "serves no turn; bound worker.stores or kv.failed_stores"}),
    [](const ::testing::TestParamInfo<Refusal>& info) { return info.param.what; });

// SPEC R8: what the refusals above allow is kept as typed values.
TEST(ScenarioFile, R8_ExpectIsReadIntoTypedValues) {
  Json j = minimal();
  j["expect"] = {
      {"boots", Json::array({"^boot-mem0:1$", ".*:unknown"})},
      {"counters", {{"device.resets", {{"min", 1}}}, {"agent.boot_changes", {{"max", 0}}}}},
      {"min_reuse_hits", 4}};
  j["faults"] = Json::array(
      {{{"kind", "delay"}, {"at_s", 1}, {"for_s", 2}, {"extra_ms", 1500}, {"node", "gpu0"}}});
  j["extension"] = {{"name", "cxl_ssd"}, {"config", {{"write_wait_poll_us", 50}}}};
  auto sc = parse_scenario(j, "t.json");
  ASSERT_TRUE(sc.ok()) << sc.status().ToString();
  ASSERT_EQ(sc->expect.boots.size(), 2u);
  EXPECT_TRUE(std::regex_match("boot-mem0:unknown", sc->expect.boots[1].re));
  ASSERT_EQ(sc->expect.counters.size(), 2u);
  EXPECT_EQ(sc->expect.counters[0].path, "agent.boot_changes");  // sorted by path
  EXPECT_EQ(sc->expect.counters[0].max, 0.0);
  EXPECT_FALSE(sc->expect.counters[0].min.has_value());
  EXPECT_EQ(sc->expect.counters[1].min, 1.0);
  EXPECT_EQ(sc->expect.min_reuse_hits, 4u);
  EXPECT_EQ(sc->faults[0].extra, std::chrono::milliseconds(1500));
  EXPECT_EQ(sc->faults[0].node, "gpu0");
}

// SPEC R8: a null count is refused too (merge_patch above cannot write a null).
TEST(ScenarioFile, R8_NullMinReuseHitsIsRefused) {
  Json j = minimal();
  j["expect"] = {{"min_reuse_hits", nullptr}};
  auto sc = parse_scenario(j, "t.json");
  ASSERT_FALSE(sc.ok());
  EXPECT_NE(sc.status().message().find("/expect/min_reuse_hits"), std::string::npos);
}

// SPEC R8, hunt C2: a 60 KB nested pattern crashed std::regex (recursion);
// it is refused by its length, and the message shows only its start.
TEST(ScenarioFile, R8_HugeBootPatternRefusedWithoutEchoingIt) {
  Json j = minimal();
  const std::string nested = std::string(30000, '(') + std::string(30000, ')');
  j["expect"] = {{"boots", Json::array({nested})}};
  auto sc = parse_scenario(j, "t.json");
  ASSERT_FALSE(sc.ok());
  EXPECT_EQ(sc.status().code(), ErrorCode::kBadRequest);
  EXPECT_NE(sc.status().message().find("t.json: /expect/boots/0: '((((("), std::string::npos);
  EXPECT_NE(sc.status().message().find("(60000 characters)"), std::string::npos);
  EXPECT_LT(sc.status().message().size(), 400u) << sc.status().message();
}

// SPEC R8: what a boot pattern needs stays accepted: classes, escaped
// parentheses, an optional group, a few repetitions.
TEST(ScenarioFile, R8_OrdinaryBootPatternsAreAccepted) {
  for (const char* pattern :
       {"^boot-mem0:[0-9]+~[0-9]+$", ".*:unknown", "^boot-mem0:1(~1)?$", "^boot-(mem0|mem1):2$",
        "\\(a*\\)*", "[(]a*[)]+", "^b{1,3}-.*$", "(?:boot)-mem0:.+"}) {
    Json j = minimal();
    j["expect"] = {{"boots", Json::array({pattern})}};
    auto sc = parse_scenario(j, "t.json");
    EXPECT_TRUE(sc.ok()) << pattern << ": " << sc.status().ToString();
  }
}

// SPEC R8: a document that is not an object says so without an empty pointer.
TEST(ScenarioFile, R8_TopLevelNotAnObjectNamesTheDocument) {
  auto sc = parse_scenario(Json::array({1}), "x.json");
  ASSERT_FALSE(sc.ok());
  EXPECT_EQ(sc.status().message(), "x.json: the document: expected an object");
}

// SPEC R8: a name echoed in a message stays on one line.
TEST(ScenarioFile, R8_ControlCharactersInEchoedNamesAreEscaped) {
  Json j = minimal();
  j["faults"] = Json::array({{{"kind", "re\nset\x01"}, {"at_s", 1}}});
  auto sc = parse_scenario(j, "t.json");
  ASSERT_FALSE(sc.ok());
  EXPECT_NE(sc.status().message().find("'re\\nset\\x01'"), std::string::npos)
      << sc.status().message();
  j = minimal();
  j["x\ny"] = 1;
  sc = parse_scenario(j, "t.json");
  ASSERT_FALSE(sc.ok());
  EXPECT_EQ(sc.status().message().rfind("t.json: /x\\ny: unknown field", 0), 0u)
      << sc.status().message();
  j = minimal();
  j["workload"] = {{"x\ty", 1}};
  sc = parse_scenario(j, "t.json");
  ASSERT_FALSE(sc.ok());
  EXPECT_NE(sc.status().message().find("/workload/x\\ty: unknown field"), std::string::npos)
      << sc.status().message();
  // An extension's config keys too (the extensions' own checks).
  for (const char* ext : {"recording", "cxl_ssd"}) {
    SCOPED_TRACE(ext);
    j = minimal();
    j["extension"] = {{"name", ext}, {"config", {{"a\x1b[2Jb\nc", 1}}}};
    sc = parse_scenario(j, "t.json");
    ASSERT_FALSE(sc.ok());
    EXPECT_NE(sc.status().message().find("'a\\x1b[2Jb\\nc'"), std::string::npos)
        << sc.status().message();
  }
}

TEST(JsonDocument, R8_PrintableEscapesAndCuts) {
  EXPECT_EQ(printable("a\nb\tc\x7f"), "a\\nb\\tc\\x7f");
  EXPECT_EQ(printable(std::string(100, 'x'), 10), "xxxxxxxxxx... (100 characters)");
  // A cut never splits a UTF-8 character ("é" is two bytes).
  EXPECT_EQ(printable("ab\xc3\xa9", 3), "ab... (4 characters)");
}

// SPEC R8, hunt H5: `run /dev/zero` read 4 GB and a FIFO blocked for ever.
// Only a regular file of at most 16 MiB is read.
class ReadDocumentFile : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = std::filesystem::temp_directory_path() /
           ("rcxl_read_document_" + std::to_string(::getpid()));
    std::filesystem::create_directories(dir_);
  }
  void TearDown() override { std::filesystem::remove_all(dir_); }
  std::string path(const char* name) const { return (dir_ / name).string(); }
  std::filesystem::path dir_;
};

TEST_F(ReadDocumentFile, R8_ReadsARegularFile) {
  std::ofstream(path("ok.json")) << "{\"name\": \"t\"}";
  auto text = read_document_file(path("ok.json"));
  ASSERT_TRUE(text.ok()) << text.status().ToString();
  EXPECT_EQ(*text, "{\"name\": \"t\"}");
}

TEST_F(ReadDocumentFile, R8_RefusesWhatIsNotASmallRegularFile) {
  ASSERT_EQ(::mkfifo(path("fifo").c_str(), 0600), 0);
  std::ofstream(path("big.json")).put('{');
  std::filesystem::resize_file(path("big.json"), kMaxDocumentBytes + 1);  // sparse
  struct Case {
    std::string path;
    ErrorCode code;
    std::string says;
  };
  const Case cases[] = {
      {"/dev/zero", ErrorCode::kBadRequest, "/dev/zero: is not a regular file"},
      {path("fifo"), ErrorCode::kBadRequest, "fifo: is not a regular file (a FIFO"},
      {dir_.string(), ErrorCode::kBadRequest, ": is a directory; name a .json file"},
      {path("big.json"), ErrorCode::kBadRequest, "big.json: larger than 16 MiB"},
      {path("none.json"), ErrorCode::kNotFound, "none.json: no such file"},
  };
  for (const auto& c : cases) {
    auto text = read_document_file(c.path);
    ASSERT_FALSE(text.ok()) << c.path;
    EXPECT_EQ(text.status().code(), c.code) << c.path;
    EXPECT_NE(text.status().message().find(c.says), std::string::npos) << text.status().message();
    EXPECT_EQ(text.status().message().rfind(c.path, 0), 0u) << text.status().message();
  }
}

TEST(ScenarioFile, NameIsRequired) {
  auto sc = parse_scenario(Json::object(), "x.json");
  ASSERT_FALSE(sc.ok());
  EXPECT_NE(sc.status().message().find("/name"), std::string::npos);
}

// SPEC R8: the counter catalogue that `expect` paths are checked against.
TEST(RunCounters, R8_FamiliesTakeTheirKeysAndNothingElse) {
  const auto& fixed = fixed_counter_paths();
  EXPECT_TRUE(std::is_sorted(fixed.begin(), fixed.end()));  // looked up by binary search
  EXPECT_TRUE(check_counter_path("agent.hints_accepted.read_promote").ok());
  EXPECT_TRUE(check_counter_path("agent.hints_refused.too_many_hint_requests").ok());
  EXPECT_FALSE(check_counter_path("agent.hints_accepted.bad_range").ok());  // a code, not an action
  EXPECT_FALSE(check_counter_path("agent.hints_refused.ok").ok());
  EXPECT_FALSE(check_counter_path("agent.hints_refused.bad_range.x").ok());
  EXPECT_FALSE(check_counter_path("device").ok());
  const Json counters = {{"agent", {{"hints_refused", {{"bad_range", 2}}}}}};
  EXPECT_EQ(counter_value(counters, "agent.hints_refused.bad_range"), 2.0);
  EXPECT_EQ(counter_value(counters, "agent.hints_refused.refused"), 0.0);
  EXPECT_FALSE(counter_value(counters, "agent.hints_accepted.read_hint").has_value());
  EXPECT_FALSE(counter_value(counters, "agent.maps").has_value());
  // Keys are taken as they are, not as JSON-pointer text; a non-number is no counter.
  const Json odd = {{"a~b", {{"c/d", 3}}}, {"agent", {{"hints_refused", {{"bad_range", "x"}}}}}};
  EXPECT_EQ(counter_value(odd, "a~b.c/d"), 3.0);
  EXPECT_FALSE(counter_value(odd, "agent.hints_refused.bad_range").has_value());
}

// Every counter an `expect` block may name has a row in docs/scenarios.md.
TEST(RunCounters, R8_EveryCounterIsExplainedInTheDocs) {
  std::ifstream in(std::string(RCXL_SOURCE_DIR) + "/docs/scenarios.md");
  ASSERT_TRUE(in) << "docs/scenarios.md";
  std::stringstream text;
  text << in.rdbuf();
  const std::string doc = text.str();
  const auto from = doc.find("### The counters");
  ASSERT_NE(from, std::string::npos);
  const std::string table = doc.substr(from, doc.find("\n## ", from) - from);
  for (const auto& path : fixed_counter_paths()) {
    EXPECT_NE(table.find("| `" + path + "` |"), std::string::npos) << path;
  }
  EXPECT_NE(table.find("| `agent.hints_accepted.<action>` |"), std::string::npos);
  EXPECT_NE(table.find("| `agent.hints_refused.<code>` |"), std::string::npos);
  // And every row of the table names a counter (no stale or misspelled rows).
  const std::regex row(R"(\n\| `([a-z_.]+?)(\.<(action|code)>)?` \|)");
  std::size_t rows = 0;
  for (auto it = std::sregex_iterator(table.begin(), table.end(), row);
       it != std::sregex_iterator(); ++it) {
    ++rows;
    const std::string path = (*it)[1].str() + ((*it)[3] == "action" ? ".read_hint"
                                               : (*it)[3] == "code" ? ".bad_range"
                                                                    : "");
    EXPECT_TRUE(check_counter_path(path).ok()) << (*it)[0].str();
  }
  EXPECT_EQ(rows, fixed_counter_paths().size() + 2);
}

}  // namespace
}  // namespace rcxl::scenarios
