// `rcxl-sim reproduce --set NAME=VALUE`: a what-if on the seed's table. The
// setting reaches every profile reproduce runs; a bad one is a coded error
// naming --set and the fix, before anything runs.
#include <gtest/gtest.h>

#include "scenarios/reproduce.h"

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
      {"idle_write_back=0,1", "takes one value"},
      {"flash_read_ns=3X", "K, M, G or T"},
      {"/device/channels=0", "device.channels"},
      {"/device/tR=3", "device.tR"},
      {"idle_write_back", "--set idle_write_back: expected NAME=VALUE"},
      {"=1", "--set =1: expected NAME=VALUE"},
      {"/device/idle_write_back=2", "device.idle_write_back' must lie in [0, 1]"},
      {"hint_lead_ms=-1", "scheduler_to_worker_us: expected a number in 0..10000000"},
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
}

}  // namespace
}  // namespace rcxl::scenarios
