// One simulated deployment of the seed's measurement: a GPU node running the
// serving-engine model over rcxl's scheduler and worker connectors, a memory
// node (agent + CXL-SSD device model + region extension), a directory node.
// Every component is the real core code; only the ground is simulated.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "backends/sim/sim_network.h"
#include "backends/sim/sim_nic.h"
#include "core/runtime/status.h"
#include "devices/cxl_ssd_model/cxl_ssd_device.h"
#include "devices/cxl_ssd_model/device_profile.h"
#include "scenarios/engine/engine_model.h"
#include "scenarios/scenario.h"

namespace rcxl::scenarios {

// The physical classes of one run: device, NIC, engine, control network.
struct Profile {
  device::DeviceProfile device;
  EngineParams engine;
  sim::LinkParams control_link;  // TCP control plane (hello, map, hints, directory)
  // By memory node, from topology.memory_profiles (attach_memory_profiles);
  // empty: every memory node has `device.device`.
  std::vector<device::CxlSsdParams> memory_devices;
};

// Loads <profiles_dir>/<name>.json (device + nic + engine + control_link), or
// the copy compiled into the binary when profiles_dir is empty.
Result<Profile> load_profile(const std::string& profiles_dir, const std::string& name);
// The same file as JSON, before it is checked (sweeps edit it first); `origin`
// gets where it came from, for error messages.
Result<nlohmann::json> load_profile_document(const std::string& profiles_dir,
                                             const std::string& name,
                                             std::string* origin = nullptr);
Result<Profile> profile_from_json(const nlohmann::json& j, const std::string& origin);
// A client allocates its regions in units of this many KV chunks.
inline constexpr std::uint64_t kChunksPerRegion = 32;
std::uint64_t region_bytes(const Profile& profile);
// Every memory node's pool must hold one region, or every store fails.
Status check_pools_hold_a_region(const Scenario& scenario, const Profile& profile);
// A store workload writes new keys only, so each GPU node's worker needs
// regions for all of its chunks: past what the pools hold, stores only fail.
Status check_pools_hold_the_stores(const Scenario& scenario, const Profile& profile);
// The regions a store workload needs over all GPU nodes (0 for serving).
std::uint64_t regions_for_the_stores(const Scenario& scenario);
// Fills profile.memory_devices from the profiles that the scenario's
// topology.memory_profiles names: a memory node takes its profile's device;
// that profile's nic and control_link must be `profile`'s (one fabric), and
// its engine is not used (engines run on GPU nodes).
Status attach_memory_profiles(const std::string& profiles_dir, const Scenario& scenario,
                              Profile& profile);
// The scenario's profile with its memory nodes' devices attached and its
// pools checked; `origin` (the scenario's file) prefixes errors about the scenario.
Result<Profile> load_scenario_profile(const std::string& profiles_dir, const Scenario& scenario,
                                      const std::string& origin = "");

struct RunOptions {
  bool record_trace_file = false;
  std::string trace_path;
  // Bytes of each KV chunk that are real (its key); the rest is timed
  // and changes device page state but is not stored (docs/simulator.md).
  std::uint32_t payload_sample_bytes = 64;
  // About once a wall second: requests done, virtual and wall time (for runs
  // longer than a second; the CLI prints it on stderr). Never changes the run.
  std::function<void(const std::string&)> progress;
};

// What invariants saw; a run with any violation fails.
struct InvariantReport {
  std::uint64_t stale_reads = 0;        // a hit whose bytes are not the latest store of its key
  std::uint64_t open_hints_at_end = 0;  // hint requests the agent still had open
  std::vector<std::string> violations;  // people-readable, one per kind
};

// A store workload's bandwidth (PAPER P4): its bytes over the time from the
// first store's start to the last one's end, on every GPU node together.
struct StoreRun {
  std::uint64_t stores = 0;         // stores that ended, failed ones too
  std::uint64_t failed_stores = 0;  // of them, those with a chunk not stored
  std::uint64_t bytes = 0;          // of the chunks stored
  double seconds = 0;
  double gbps = 0;
  struct Sample {
    double t_ms = 0;  // a store's end, from the first start
    double gbps = 0;  // its stored bytes over the time since its engine's previous end
  };
  std::vector<Sample> samples;  // by end, then GPU node
};

struct RunResult {
  Status status;  // the run itself (deadlock, time limit, setup)
  std::vector<RequestRecord> records;
  InvariantReport invariants;
  std::vector<std::string> boots_seen;  // distinct boots the agent advertised, in order
  std::vector<bool> faults_fired;       // by the scenario's fault index
  std::uint64_t loads_started = 0;      // KV loads the engine started
  std::uint64_t stores_started = 0;     // KV stores the engine started
  StoreRun store;                       // a store workload's (workload.kind "store")
  nlohmann::json counters;              // device, agent, client counters
  std::string trace_hash;
  double virtual_seconds = 0;
  // When the workload's last turn was answered (before the run's 50 ms settle).
  double workload_seconds = 0;
  double wall_seconds = 0;
};

RunResult run_scenario(const Scenario& scenario, const Profile& profile,
                       const RunOptions& options = {});

// Checks a scenario's `expect` block against a run; each failure is one line
// naming the expectation, what was wanted and what the run did.
std::vector<std::string> check_expectations(const Expectations& expect, const RunResult& run);

// Mean TTFT (ms) over reuse turns; mean KV load time (ms) over loads.
double mean_reuse_ttft_ms(const std::vector<RequestRecord>& records);
double mean_load_ms(const std::vector<RequestRecord>& records);

}  // namespace rcxl::scenarios
