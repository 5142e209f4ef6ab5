// A device + NIC profile (scenarios/profiles/*.json): the one set of physical
// parameters every simulated figure comes from. Each parameter is a number or
// {"value": number, "source": "where it comes from"}.
#pragma once

#include <nlohmann/json.hpp>
#include <string>

#include "backends/sim/sim_nic.h"
#include "core/runtime/status.h"
#include "devices/cxl_ssd_model/cxl_ssd_params.h"

namespace rcxl::device {

struct DeviceProfile {
  std::string name;
  CxlSsdParams device;
  sim::NicParams nic;
};

// Validates `device` and `nic` (unknown keys too) and names the bad field in a
// bad_request error. Other top-level sections (engine, workload) are not read.
Result<DeviceProfile> load_device_profile(const nlohmann::json& profile);

}  // namespace rcxl::device
