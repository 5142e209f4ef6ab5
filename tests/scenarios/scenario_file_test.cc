// Scenario files: valid ones parse; each mistake names the file, the JSON
// pointer and the fix (docs/scenarios.md).
#include <gtest/gtest.h>

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

TEST(ScenarioFile, NameIsRequired) {
  auto sc = parse_scenario(Json::object(), "x.json");
  ASSERT_FALSE(sc.ok());
  EXPECT_NE(sc.status().message().find("/name"), std::string::npos);
}

}  // namespace
}  // namespace rcxl::scenarios
