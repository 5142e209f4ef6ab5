// PAPER P4: unprepared stores are bound by page-by-page fills, prepared ones by the NIC.
#include "devices/cxl_ssd_model/store_bandwidth.h"

#include <gtest/gtest.h>

#include <fstream>

namespace rcxl::device {
namespace {

DeviceProfile default_profile() {
  std::ifstream in(std::string(RCXL_SOURCE_DIR) + "/scenarios/profiles/cxl_ssd_default.json");
  auto p = load_device_profile(nlohmann::json::parse(in));
  EXPECT_TRUE(p.ok());
  return p.value();
}

TEST(StoreBandwidth, P4_UnpreparedIsBoundByPageFillsPreparedByTheNic) {
  const DeviceProfile profile = default_profile();
  StoreBandwidthOptions options;
  options.total_bytes = 32ull << 20;
  options.batch_bytes = 2ull << 20;
  const auto result = measure_store_bandwidth(profile, options);
  ASSERT_TRUE(result.unprepared.ok);
  ASSERT_TRUE(result.prepared.ok);
  // Page-by-page bound: write_allocate_depth fills of (tR + one page over a channel) at a time.
  sim::EventLoop loop;
  CxlSsdDevice probe(loop, profile.device);
  const double fill_ns = static_cast<double>(probe.flash().uncontended_read().count());
  const double fill_bound =
      profile.device.write_allocate_depth * profile.device.page_bytes / fill_ns;
  EXPECT_LE(result.unprepared.gbps, fill_bound * 1.001);
  EXPECT_GE(result.unprepared.gbps, fill_bound * 0.9);
  EXPECT_EQ(result.unprepared.counters.write_allocate_fills, options.total_bytes / 4096);
  const double nic_gbps = profile.nic.bytes_per_second / 1e9;
  EXPECT_LE(result.prepared.gbps, nic_gbps);
  EXPECT_GE(result.prepared.gbps, nic_gbps * 0.8);
  EXPECT_EQ(result.prepared.counters.fills, 0u);
  EXPECT_EQ(result.unprepared.samples.size(), 16u);
  const auto j = to_json(result);
  EXPECT_EQ(j["unprepared_gbps"].get<double>(), result.unprepared.gbps);
}

// A device-level store that did not run whole is named, never read as 0 GB/s.
TEST(StoreBandwidth, R8_AStoreThatDoesNotFitSaysWhy) {
  DeviceProfile profile = default_profile();
  profile.device.capacity_bytes = 64 << 20;
  StoreBandwidthOptions o;
  o.total_bytes = 128 << 20;
  const auto run = run_store_bandwidth(profile, o, false);
  EXPECT_FALSE(run.ok);
  EXPECT_NE(run.failure.find("does not fit the device's 67108864"), std::string::npos)
      << run.failure;
}

}  // namespace
}  // namespace rcxl::device
