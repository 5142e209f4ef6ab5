// topology.memory_profiles (issue #6 item 1): each memory node takes its
// device from a profile of its own, so one run can mix an all-DRAM node with a
// CXL-SSD; the fabric (nic, control_link) stays the scenario profile's.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <utility>
#include <vector>

#include "scenarios/embedded/embedded.h"
#include "scenarios/serving_rig.h"
#include "tests/scratch_dir.h"

namespace rcxl::scenarios {
namespace {

using Json = nlohmann::json;

Json two_nodes(const Json& profiles) {
  return {{"name", "mixed"},
          {"topology", {{"memory_nodes", 2}, {"memory_profiles", profiles}}},
          {"client", {{"read_hints", false}}},
          {"workload",
           {{"conversations", 8},
            {"turns", 3},
            {"first_prompt_tokens", {4000, 8000}},
            {"start_window_s", 0.5}}}};
}

Scenario parsed(const Json& j) {
  auto sc = parse_scenario(j, "mixed.json");
  EXPECT_TRUE(sc.ok()) << sc.status().ToString();
  return sc.ok() ? *sc : Scenario{};
}

double device_misses(const RunResult& r, const std::string& node) {
  return r.counters["by_node"][node]["device"]["misses"].get<double>();
}

TEST(MemoryProfiles, R8_EachMemoryNodeHasItsOwnProfilesDevice) {
  const Scenario sc = parsed(two_nodes({"all_dram", "cxl_ssd_default"}));
  auto profile = load_scenario_profile("", sc);
  ASSERT_TRUE(profile.ok()) << profile.status().ToString();
  ASSERT_EQ(profile->memory_devices.size(), 2u);
  EXPECT_TRUE(profile->memory_devices[0].all_resident);
  EXPECT_FALSE(profile->memory_devices[1].all_resident);
  const RunResult r = run_scenario(sc, *profile);
  ASSERT_TRUE(r.status.ok()) << r.status.ToString();
  EXPECT_TRUE(r.invariants.violations.empty());
  // The DRAM node never misses; the CXL-SSD's pages start on flash.
  EXPECT_EQ(device_misses(r, "mem0"), 0.0);
  EXPECT_GT(device_misses(r, "mem1"), 0.0);

  // The other way round, the other node misses.
  const Scenario swapped = parsed(two_nodes({"cxl_ssd_default", "all_dram"}));
  const RunResult s = run_scenario(swapped, *load_scenario_profile("", swapped));
  ASSERT_TRUE(s.status.ok()) << s.status.ToString();
  EXPECT_GT(device_misses(s, "mem0"), 0.0);
  EXPECT_EQ(device_misses(s, "mem1"), 0.0);
}

// A profile whose KV chunk cannot be stored (under the 64 bytes a chunk keeps
// real, or 32 of them not whole pages, which alloc refuses) is refused naming
// the field; it ran before, every store failed, and the run said ok.
TEST(MemoryProfiles, R8_AnEngineWhoseChunksCannotBeStoredIsRefused) {
  Json j = Json::parse(*embedded_file("profiles/cxl_ssd_default.json"));
  for (const auto& [kv, tokens] :
       std::vector<std::pair<int, int>>{{1, 16}, {100, 16}, {4097, 16}}) {
    SCOPED_TRACE(std::to_string(kv) + " x " + std::to_string(tokens));
    j["engine"]["kv_bytes_per_token"]["value"] = kv;
    j["engine"]["chunk_tokens"]["value"] = tokens;
    auto p = profile_from_json(j, "odd.json");
    ASSERT_FALSE(p.ok());
    EXPECT_EQ(p.status().message().rfind("odd.json: /engine/kv_bytes_per_token: a KV chunk of " +
                                             std::to_string(kv * tokens) + " bytes",
                                         0),
              0u)
        << p.status().message();
  }
  j["engine"]["kv_bytes_per_token"]["value"] = 8;  // 128-byte chunks: whole pages per region
  j["engine"]["chunk_tokens"]["value"] = 16;
  EXPECT_TRUE(profile_from_json(j, "odd.json").ok());
}

// A mistyped key beside value and source is refused: a "vlaue" override was
// dropped silently while the same typo under control_link was refused
// (session 27 review).
TEST(MemoryProfiles, R8_AnEngineFieldWithAKeyBesideValueAndSourceIsRefused) {
  Json j = Json::parse(*embedded_file("profiles/cxl_ssd_default.json"));
  j["engine"]["chunk_tokens"]["vlaue"] = 512;
  auto p = profile_from_json(j, "odd.json");
  ASSERT_FALSE(p.ok());
  EXPECT_EQ(p.status().message().rfind("odd.json: /engine/chunk_tokens: unknown key 'vlaue'", 0),
            0u)
      << p.status().message();
}

// A profile name or path with control characters is named on one line
// (session 27 review: "x\ny" printed a three-line error).
TEST(MemoryProfiles, R8_AProfileNameIsEscapedInItsMessages) {
  for (const std::string& dir : {std::string(), std::string("/nonexistent-dir")}) {
    auto p = load_profile(dir, "x\ny\x1b[2J");
    ASSERT_FALSE(p.ok());
    const std::string& m = p.status().message();
    EXPECT_EQ(m.find('\n'), std::string::npos) << m;
    EXPECT_EQ(m.find('\x1b'), std::string::npos) << m;
    EXPECT_NE(m.find("x\\ny"), std::string::npos) << m;
  }
}

// A copied profile whose name was not changed loaded under its file's name
// without a word (audit, session 29): the name must be the file's.
TEST(MemoryProfiles, R8_AProfileWhoseNameIsNotItsFilesIsRefused) {
  const auto dir = testing::fresh_dir("memory_profiles", "name_mismatch");
  Json profile = Json::parse(*embedded_file("profiles/cxl_ssd_default.json"));
  profile["name"] = "other";
  std::ofstream(dir / "mine.json") << profile.dump();
  const Status refused = load_profile(dir.string(), "mine").status();
  EXPECT_EQ(refused.code(), ErrorCode::kBadRequest);
  EXPECT_THAT(refused.message(),
              ::testing::HasSubstr("mine.json: /name: 'other' is not the file's name; write "
                                   "\"mine\""));
  profile["name"] = "mine";
  std::ofstream(dir / "mine.json") << profile.dump();
  EXPECT_TRUE(load_profile(dir.string(), "mine").ok());
}

// A key the profile does not take is named one line, escaped: a message drives
// no terminal (session-24 review: ESC and newline came through raw).
TEST(MemoryProfiles, R8_AnUnknownKeyIsEscapedInTheMessage) {
  const Json base = Json::parse(*embedded_file("profiles/cxl_ssd_default.json"));
  Json engine = base;
  engine["engine"]["x\x1b[2J\ny"] = {{"value", 1}, {"source", "s"}};
  Json unsourced = base;
  unsourced["engine"]["x\x1b[2J\ny"] = 1;
  Json device = base;
  device["device"]["page_bytes"]["sourc\x1b]0;t\x07e"] = "s";
  for (const Json& j : {engine, unsourced, device}) {
    auto p = profile_from_json(j, "odd.json");
    ASSERT_FALSE(p.ok());
    const std::string& m = p.status().message();
    EXPECT_EQ(m.find('\n'), std::string::npos) << m;
    EXPECT_EQ(m.find('\x1b'), std::string::npos) << m;
    EXPECT_EQ(m.find('\x07'), std::string::npos) << m;
  }
}

// Naming the scenario's own profile for every node is the run without memory_profiles.
TEST(MemoryProfiles, R8_TheScenarioProfileForEveryNodeChangesNothing) {
  Json plain = two_nodes({"cxl_ssd_default", "cxl_ssd_default"});
  const Scenario named = parsed(plain);
  plain["topology"].erase("memory_profiles");
  const Scenario unnamed = parsed(plain);
  const RunResult a = run_scenario(named, *load_scenario_profile("", named));
  const RunResult b = run_scenario(unnamed, *load_scenario_profile("", unnamed));
  ASSERT_TRUE(a.status.ok()) << a.status.ToString();
  EXPECT_EQ(a.trace_hash, b.trace_hash);
}

TEST(MemoryProfiles, R8_AnUnknownProfileIsRefusedNamingTheNode) {
  const Scenario sc = parsed(two_nodes({"all_dram", "no_such_profile"}));
  auto profile = load_scenario_profile("", sc);
  ASSERT_FALSE(profile.ok());
  EXPECT_EQ(profile.status().code(), ErrorCode::kBadRequest);
  EXPECT_NE(profile.status().message().find(
                "/topology/memory_profiles/1 ('no_such_profile', mem1): no built-in profile"),
            std::string::npos)
      << profile.status().message();
}

// A node's profile gives its device only: another RNIC class is refused, not ignored.
TEST(MemoryProfiles, R8_AnotherNicOrControlLinkIsRefused) {
  const auto dir = rcxl::testing::fresh_dir("rcxl_memory_profiles", "nic");
  std::filesystem::create_directories(dir);
  Json base = Json::parse(*embedded_file("profiles/cxl_ssd_default.json"));
  std::ofstream(dir / "cxl_ssd_default.json") << base.dump();
  Json fast_nic = base;
  fast_nic["name"] = "fast_nic";
  fast_nic["nic"]["bytes_per_second"]["value"] = 23.5e9;
  std::ofstream(dir / "fast_nic.json") << fast_nic.dump();
  Json slow_link = base;
  slow_link["name"] = "slow_link";
  slow_link["control_link"]["latency_ns"]["value"] = 50000;
  std::ofstream(dir / "slow_link.json") << slow_link.dump();

  for (const char* other : {"fast_nic", "slow_link"}) {
    const Scenario sc = parsed(two_nodes({"cxl_ssd_default", other}));
    auto profile = load_scenario_profile(dir.string(), sc);
    ASSERT_FALSE(profile.ok()) << other;
    const std::string what = std::string(other) == "fast_nic" ? "its nic" : "its control_link";
    EXPECT_NE(
        profile.status().message().find(what + " differs from the one of the scenario profile"),
        std::string::npos)
        << profile.status().message();
  }
  std::filesystem::remove_all(dir);
}

// A run given a profile without the named devices attached refuses to start
// rather than quietly giving every node the scenario profile's device.
TEST(MemoryProfiles, R8_ARunWithoutTheNamedDevicesRefusesToStart) {
  const Scenario sc = parsed(two_nodes({"all_dram", "cxl_ssd_default"}));
  auto profile = load_profile("", sc.profile);
  ASSERT_TRUE(profile.ok());
  const RunResult r = run_scenario(sc, *profile);
  EXPECT_EQ(r.status.code(), ErrorCode::kBadRequest);
  EXPECT_NE(r.status.message().find("load the profile with load_scenario_profile"),
            std::string::npos)
      << r.status.message();
}

}  // namespace
}  // namespace rcxl::scenarios
