#include "scenarios/scenario_extensions.h"

#include <algorithm>
#include <filesystem>
#include <functional>
#include <map>

#include "core/extension/recording_extension.h"
#include "devices/cxl_ssd_model/cxl_ssd_extension.h"
#include "scenarios/json_document.h"

namespace rcxl::scenarios {
namespace {

using Json = nlohmann::json;

// Each extension's config parser, run without a device or runtime.
const std::map<std::string, std::function<Status(const Json&)>>& config_checks() {
  static const std::map<std::string, std::function<Status(const Json&)>> kChecks = {
      {"none",
       [](const Json& config) -> Status {
         if (config.is_null() || config.empty()) return {};
         return Error(ErrorCode::kBadRequest, "the extension none takes no config; drop it");
       }},
      {"recording",
       [](const Json& config) -> Status {
         auto parsed = ext::RecordingConfig::FromJson(config);
         if (!parsed.ok()) return parsed.status();
         // Its files are the simulated node's, which start empty: the agent
         // could never read a generation and would not start.
         if (parsed->generation_file) {
           return Error(ErrorCode::kBadRequest,
                        "recording's generation_file is read from the simulated memory node's "
                        "file system, which has no files, so the agent could not start; drop it "
                        "(faults of kind reset and unknown_generation need the extension cxl_ssd)");
         }
         // Judged by the simulated node's own file system as the rig makes it:
         // a log it cannot take failed the run at its start (exit 1), not
         // here (session-33 review).
         if (parsed->log) {
           sim::SimFileSystem node_files;
           make_agent_directories(node_files);
           if (Status st = node_files.check_file_path(*parsed->log); !st.ok()) {
             return Error(ErrorCode::kBadRequest,
                          "recording's log: " + st.message() +
                              "; the simulated memory node has the directories /, /var, "
                              "/var/lib and " +
                              std::filesystem::path(kAgentStateFile).parent_path().string() +
                              " (e.g. /recording.log)");
           }
         }
         // The agent's region table: the log's lines would make it unreadable
         // and every agent_restart fail.
         if (parsed->log && std::filesystem::path(*parsed->log).lexically_normal() ==
                                std::filesystem::path(kAgentStateFile)) {
           return Error(ErrorCode::kBadRequest,
                        std::string("recording's log ") + kAgentStateFile +
                            " is the agent's region table on the simulated node; log elsewhere "
                            "(e.g. /recording.log)");
         }
         return {};
       }},
      {"cxl_ssd",
       [](const Json& config) { return device::parse_cxl_ssd_extension_config(config).status(); }},
  };
  return kChecks;
}

}  // namespace

void make_agent_directories(sim::SimFileSystem& files) {
  files.make_directory(std::filesystem::path(kAgentStateFile).parent_path().string());
}

ext::ExtensionRegistry scenario_extension_registry() {
  auto registry = ext::ExtensionRegistry::WithBuiltins();
  registry.add("cxl_ssd", device::make_cxl_ssd_extension);
  return registry;
}

std::vector<std::string> scenario_extension_names() {
  return scenario_extension_registry().names();
}

Status check_scenario_extension(const std::string& name, const Json& config,
                                const std::string& origin) {
  const auto names = scenario_extension_names();
  if (std::find(names.begin(), names.end(), name) == names.end()) {
    std::string list;
    for (const auto& n : names) list += (list.empty() ? "" : ", ") + n;
    return Error(ErrorCode::kBadRequest, origin + ": /extension/name: unknown extension '" +
                                             printable(name) + "'; expected one of: " + list);
  }
  auto check = config_checks().find(name);
  if (check == config_checks().end()) return {};  // the factory checks it when the agent starts
  if (Status s = check->second(config); !s.ok()) {
    // Name the key at fault: the first one its parser refuses alone.
    std::string pointer = "/extension/config";
    if (config.is_object()) {
      for (const auto& [key, value] : config.items()) {
        if (!check->second(Json{{key, value}}).ok()) {
          pointer += "/" + pointer_token(key);
          break;
        }
      }
    }
    return Error(ErrorCode::kBadRequest, origin + ": " + pointer + ": " +
                                             printable(s.message(), 400) +
                                             " (docs/scenarios.md lists each extension's keys)");
  }
  return {};
}

}  // namespace rcxl::scenarios
