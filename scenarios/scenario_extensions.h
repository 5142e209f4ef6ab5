// The region extensions a scenario can name (`extension.name`), and the check
// of a name and its config before anything runs (docs/scenarios.md).
#pragma once

#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "backends/sim/sim_file_system.h"
#include "core/extension/extension_registry.h"
#include "core/runtime/status.h"

namespace rcxl::scenarios {

// Where the serving rig's agents keep their region table (it survives an
// agent restart, as with the real unit's state directory).
inline constexpr char kAgentStateFile[] = "/var/lib/rcxl-agent/regions.json";

// A memory node's files before its agent starts: the state file's directory
// (and its parents), as the package installs it (packaging/).
void make_agent_directories(sim::SimFileSystem& files);

// `none`, `recording` and `cxl_ssd`: what the serving rig's agent can load.
ext::ExtensionRegistry scenario_extension_registry();

// Sorted names of scenario_extension_registry().
std::vector<std::string> scenario_extension_names();

// kBadRequest, naming `origin` and /extension/name or /extension/config, when
// `name` is not one of the above or `config` is not what it takes.
Status check_scenario_extension(const std::string& name, const nlohmann::json& config,
                                const std::string& origin);

}  // namespace rcxl::scenarios
