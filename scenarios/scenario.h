// A scenario file: topology, device profile, extension, client configuration,
// workload, faults and `expect` assertions (schema: docs/scenarios.md). Every
// error names the file, the JSON pointer and what would be right.
#pragma once

#include <cstdint>
#include <nlohmann/json.hpp>
#include <optional>
#include <regex>
#include <string>
#include <vector>

#include "core/runtime/clock.h"
#include "core/runtime/status.h"
#include "scenarios/engine/workload.h"

namespace rcxl::scenarios {

using Json = nlohmann::json;

struct Fault {
  enum class Kind {
    kReset,            // the device loses its DRAM contents; generation bumps
    kUnknown,          // the generation cannot be told for `duration`
    kDropConnections,  // every connection of `node` dies
    kAgentRestart,     // the agent process restarts; memory survives
    kPartition,        // `node` unreachable for `duration`
    kDelay,            // `extra` one-way delay on `node` for `duration`
  };
  Kind kind = Kind::kReset;
  runtime::Duration at{0};  // from the start, when during_load and during_store are 0
  // N > 0: fires `after` past the start of the run's N-th KV load instead (a
  // fault that must land while a load is in flight, whatever the timing).
  std::uint64_t during_load = 0;
  // N > 0: fires `after` past the start of the run's N-th KV store (a fault
  // that must meet a store's write wait, whatever the timing).
  std::uint64_t during_store = 0;
  runtime::Duration after{0};
  runtime::Duration duration{0};
  runtime::Duration extra{0};
  std::string node = "mem0";  // one of kDirectoryNode, kGpuNode, kMemoryNode
};

struct ClientSettings {
  bool read_hints = false;
  std::optional<bool> write_hints;
  std::optional<bool> read_promotes;
  std::uint32_t write_wait_ms = 50;
  bool read_hint_on_arrival = false;
  bool gate_reads = false;
};

// Bounds on one number of the run's counters JSON.
struct CounterBounds {
  std::string path;  // as written: "agent.boot_changes" (scenarios/run_counters.h)
  std::optional<double> min;
  std::optional<double> max;
};

// A regular expression an advertised boot must match (ECMAScript syntax).
struct BootPattern {
  std::string text;
  std::regex re;
};

// The `expect` block, checked when the file is read so a mistake in it is
// refused before the run, not reported after it.
struct Expectations {
  std::vector<BootPattern> boots;       // matched in order by later and later boots
  bool boots_exactly = false;           // boots_exactly: one boot per pattern, no other
  std::vector<CounterBounds> counters;  // sorted by path
  std::optional<std::uint64_t> min_reuse_hits;
};

// The nodes of the simulated deployment (serving_rig.cc builds them): faults name one.
inline constexpr const char* kDirectoryNode = "dir";
inline constexpr const char* kGpuNode = "gpu0";
inline constexpr const char* kMemoryNode = "mem0";

// How many of each node the run has: one directory, GPU nodes gpu0.. (each a
// serving engine with its scheduler and worker), memory nodes mem0.. (each an
// agent in front of its own device). The hardware classes (NIC, links, device)
// are the profile's; a memory node may take its device from a profile of its own.
struct Topology {
  static constexpr int kMaxNodes = 8;  // of each kind: enough for contention questions
  int gpu_nodes = 1;
  int memory_nodes = 1;
  // By memory node: the profile whose `device` it has (one per node); empty:
  // every node has the scenario profile's device.
  std::vector<std::string> memory_profiles;
};
inline std::string gpu_node_name(int i) {
  return "gpu" + std::to_string(i);
}
inline std::string memory_node_name(int i) {
  return "mem" + std::to_string(i);
}

// The simulated agents' SPEC R7 settings, the same on every memory node;
// defaults are rcxl-agent's.
struct AgentSettings {
  runtime::Duration generation_poll = std::chrono::milliseconds(100);
  runtime::Duration generation_grace = std::chrono::seconds(2);
  runtime::Duration sweep_interval = std::chrono::seconds(1);
  std::uint32_t max_hint_requests = 4096;
};

struct Scenario {
  std::string name;
  std::string description;
  std::uint64_t seed = 1;
  std::string profile = "cxl_ssd_default";  // scenarios/profiles/<profile>.json
  std::string extension = "cxl_ssd";        // "none", "recording", "cxl_ssd"
  Json extension_config = Json::object();
  Topology topology;
  std::uint64_t pool_bytes = 64ull << 30;  // per memory node
  AgentSettings agent;
  ClientSettings client;
  WorkloadParams workload;
  std::vector<Fault> faults;
  Expectations expect;
  // Virtual-time limit of the run.
  runtime::Duration time_limit = std::chrono::seconds(600);
};

// `origin` names the file in errors ("scenarios/reset_during_load.json").
Result<Scenario> parse_scenario(const Json& j, const std::string& origin);
std::string fault_kind_name(Fault::Kind kind);

}  // namespace rcxl::scenarios
