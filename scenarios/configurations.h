// The named configurations `reproduce` and `sweep` compare (docs/reproduce.md):
// which profile and which client knobs each one runs with.
#pragma once

#include <string>
#include <vector>

#include "core/runtime/status.h"
#include "scenarios/scenario.h"

namespace rcxl::scenarios {

struct Configuration {
  std::string name;     // all_dram, hints, gated, waits_off, no_hints
  std::string label;    // for legends
  std::string profile;  // scenarios/profiles/<profile>.json
  ClientSettings client;
};

// In the order reproduce runs and reports them.
const std::vector<Configuration>& configurations();
// By name; an unknown name is refused with the list of known ones.
Result<Configuration> find_configuration(const std::string& name);
// The client settings as a scenario file's `client` object (docs/scenarios.md).
Json client_json(const ClientSettings& client);

}  // namespace rcxl::scenarios
