// `rcxl-sim reproduce` as a process (issue #6): the figures' pairs, the
// no-hint configuration only with --beyond, and bad arguments refused.
#include <gtest/gtest.h>

#include <chrono>
#include <filesystem>
#include <nlohmann/json.hpp>
#include <string>

#include "tests/child_process.h"

namespace {

using namespace std::chrono_literals;
using rcxl::testing::ChildProcess;

// PAPER.md method: P1-P3 over --pairs, P5 over --p5-pairs (the seed's 3 by
// default), the no-hint run (beyond the seed) only when asked for.
TEST(SimProcess, R8_ReproduceRunsEachFigureOnItsOwnPairs) {
  const auto out = std::filesystem::temp_directory_path() / "rcxl_sim_process_test";
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
  // Two pairs give a t-interval; one pair a mean and no interval (not a zero-width one).
  ASSERT_TRUE(j["P1"]["ci"].is_array());
  EXPECT_LT(j["P1"]["ci"][0].get<double>(), j["P1"]["ci"][1].get<double>());
  EXPECT_TRUE(j["P5"]["ci"].is_null());
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

TEST(SimProcess, R8_ReproduceRefusesPairsOutOfRange) {
  for (const char* bad : {"--pairs=0", "--p5-pairs=0", "--pairs=x"}) {
    auto child = ChildProcess::Start({RCXL_SIM_BINARY, "reproduce", bad, "--quiet"});
    const std::string err = child.read_all_err();
    EXPECT_NE(child.wait_exit(10s), 0) << bad;
    EXPECT_NE(err.find(std::string(bad).substr(0, std::string(bad).find('='))), std::string::npos)
        << bad << ": " << err;
  }
}

}  // namespace
