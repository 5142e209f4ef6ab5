// PAPER P4: store bandwidth into pages the device has not prepared (each page
// filled from flash first) vs pages a write hint prepared, measured on the
// simulator through the sim RNIC with one profile.
#pragma once

#include <cstdint>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "devices/cxl_ssd_model/cxl_ssd_device.h"
#include "devices/cxl_ssd_model/device_profile.h"

namespace rcxl::device {

struct StoreBandwidthOptions {
  std::uint64_t total_bytes = 256ull << 20;
  std::uint64_t write_bytes = 64ull << 10;  // one RDMA WRITE
  std::uint64_t batch_bytes = 4ull << 20;   // one post; its completion is a sample
  std::uint64_t seed = 1;
};

struct BandwidthSample {
  double t_ms = 0;  // completion of a batch, from the first post
  double gbps = 0;  // that batch's bytes over the time since the previous one
};

struct StoreBandwidthRun {
  double gbps = 0;
  double elapsed_ms = 0;
  std::vector<BandwidthSample> samples;
  CxlSsdCounters counters;
  bool ok = false;      // every WRITE completed without error and the bytes are in
  std::string failure;  // why not, when !ok
};

struct StoreBandwidthResult {
  StoreBandwidthRun unprepared;
  StoreBandwidthRun prepared;
};

// One run per case, each in its own SimWorld (memory node "mem", GPU node "gpu").
StoreBandwidthRun run_store_bandwidth(const DeviceProfile& profile,
                                      const StoreBandwidthOptions& options, bool prepared);
StoreBandwidthResult measure_store_bandwidth(const DeviceProfile& profile,
                                             const StoreBandwidthOptions& options = {});
// {"unprepared_gbps":..,"prepared_gbps":..,"unprepared":{..samples..},"prepared":{..}}
nlohmann::json to_json(const StoreBandwidthResult& result);

}  // namespace rcxl::device
