// A device + NIC profile (scenarios/profiles/*.json): the one set of physical
// parameters every simulated figure comes from. Each parameter is a number or
// {"value": number, "source": "where it comes from"}.
#pragma once

#include <nlohmann/json.hpp>
#include <string>

#include "backends/sim/sim_network.h"
#include "backends/sim/sim_nic.h"
#include "core/runtime/status.h"
#include "devices/cxl_ssd_model/cxl_ssd_params.h"

namespace rcxl::device {

struct DeviceProfile {
  std::string name;
  CxlSsdParams device;
  sim::NicParams nic;
  sim::LinkParams control_link;  // the TCP control plane (hello, map, hints, directory)
};

// Validates the profile's top level (name, description, device, nic, engine,
// control_link: a misspelled section is refused, not ignored) and reads
// `device`, `nic` and `control_link`: unknown keys, booleans where numbers
// are meant, fractions where whole numbers are meant and values outside
// physical ranges are refused, naming the field, in a bad_request error.
// `engine` is read by scenarios/engine/engine_params.h.
Result<DeviceProfile> load_device_profile(const nlohmann::json& profile);

}  // namespace rcxl::device
