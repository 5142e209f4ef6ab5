#include "scenarios/configurations.h"

namespace rcxl::scenarios {

// The configurations the seed compared (PAPER.md), plus one it did not.
const std::vector<Configuration>& configurations() {
  static const std::vector<Configuration> kConfigs = [] {
    ClientSettings hints;
    hints.read_hints = true;  // write hints, waits and promotes follow (SPEC R4)
    ClientSettings waits_off = hints;
    waits_off.write_wait_ms = 0;
    // The replaced design #124 gated every RDMA transfer: a round trip before each
    // READ batch (a read_hint of its ranges) and before each store's WRITEs (a
    // write_wait of its pages, which write hints turn on); no scheduler hints,
    // no promotes (docs/reproduce.md).
    ClientSettings gated;
    gated.gate_reads = true;
    gated.write_hints = true;
    ClientSettings none;
    return std::vector<Configuration>{
        {"all_dram", "device DRAM holds everything", "all_dram", hints},
        {"hints", "CXL-SSD, read hints", "cxl_ssd_default", hints},
        {"gated", "CXL-SSD, per-READ gate (#124)", "cxl_ssd_default", gated},
        {"waits_off", "CXL-SSD, hints, write waits off", "cxl_ssd_default", waits_off},
        {"no_hints", "CXL-SSD, no hints", "cxl_ssd_default", none},
    };
  }();
  return kConfigs;
}

Result<Configuration> find_configuration(const std::string& name) {
  std::string known;
  for (const auto& c : configurations()) {
    if (c.name == name) return c;
    known += (known.empty() ? "" : ", ") + c.name;
  }
  return Error(ErrorCode::kBadRequest,
               "unknown configuration '" + name + "'; expected one of: " + known);
}

Json client_json(const ClientSettings& client) {
  Json j = {{"read_hints", client.read_hints},
            {"read_hint_on_arrival", client.read_hint_on_arrival},
            {"gate_reads", client.gate_reads}};
  // A wait is a write hint that waits: without write hints it asks nothing.
  if (client.write_hints.value_or(client.read_hints)) j["write_wait_ms"] = client.write_wait_ms;
  if (client.write_hints) j["write_hints"] = *client.write_hints;
  if (client.read_promotes) j["read_promotes"] = *client.read_promotes;
  return j;
}

}  // namespace rcxl::scenarios
