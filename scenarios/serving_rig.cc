#include "scenarios/serving_rig.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <functional>
#include <map>
#include <optional>
#include <regex>
#include <sstream>

#include "backends/sim/sim_network.h"
#include "backends/sim/sim_world.h"
#include "core/agent/agent.h"
#include "core/client/handler.h"
#include "core/client/scheduler_connector.h"
#include "core/client/worker_connector.h"
#include "core/directory/directory_server.h"
#include "core/protocol/messages.h"
#include "scenarios/checked_extension.h"
#include "scenarios/checked_nic.h"
#include "scenarios/checked_runtime.h"
#include "scenarios/embedded/embedded.h"
#include "scenarios/engine/store_workload.h"
#include "scenarios/invariant_monitor.h"
#include "scenarios/json_document.h"
#include "scenarios/rcxl_engine_kv.h"
#include "scenarios/run_counters.h"
#include "scenarios/scenario_extensions.h"

namespace rcxl::scenarios {
Status attach_memory_profiles(const std::string& profiles_dir, const Scenario& scenario,
                              Profile& profile) {
  profile.memory_devices.clear();
  const auto& names = scenario.topology.memory_profiles;
  for (std::size_t i = 0; i < names.size(); ++i) {
    const std::string where = "/topology/memory_profiles/" + std::to_string(i) + " ('" +
                              printable(names[i]) + "', " + memory_node_name(static_cast<int>(i)) +
                              ")";
    auto node = load_profile(profiles_dir, names[i]);
    if (!node.ok()) {
      profile.memory_devices.clear();
      return Error(ErrorCode::kBadRequest, where + ": " + node.status().message());
    }
    const bool same_nic = node->device.nic == profile.device.nic;
    if (!same_nic || !(node->control_link == profile.control_link)) {
      profile.memory_devices.clear();
      return Error(ErrorCode::kBadRequest,
                   where + ": its " + (same_nic ? "control_link" : "nic") +
                       " differs from the one of the scenario profile '" + scenario.profile +
                       "'; a memory node takes only its device from its own profile (the "
                       "fabric and control network are one): make them the same");
    }
    profile.memory_devices.push_back(node->device.device);
  }
  return {};
}

std::uint64_t region_bytes(const Profile& profile) {
  return profile.engine.kv_bytes_per_token *
         static_cast<std::uint64_t>(profile.engine.chunk_tokens) * kChunksPerRegion;
}

namespace {

// A chunk keeps its first RunOptions::payload_sample_bytes real (its key), and
// a region of kChunksPerRegion chunks is allocated in whole 4 KiB pages
// (PROTOCOL alloc): other sizes make every store fail.
Status check_chunks_can_be_stored(const EngineParams& engine) {
  const std::uint64_t kSample = RunOptions{}.payload_sample_bytes;
  // So that a region of kChunksPerRegion chunks is a size alloc takes.
  constexpr std::uint64_t kUnit = protocol::kRegionAlignment / kChunksPerRegion;
  const std::uint64_t chunk = engine.kv_bytes_per_token * std::uint64_t(engine.chunk_tokens);
  if (chunk >= kSample && chunk % kUnit == 0) return {};
  return Error(ErrorCode::kBadRequest,
               "/engine/kv_bytes_per_token: a KV chunk of " + std::to_string(chunk) +
                   " bytes (kv_bytes_per_token x chunk_tokens) cannot be stored: it must be at "
                   "least " +
                   std::to_string(kSample) + " bytes (the key the simulator keeps of it) and a " +
                   "multiple of " + std::to_string(kUnit) + " (regions of " +
                   std::to_string(kChunksPerRegion) +
                   " chunks are allocated in whole 4096-byte pages): e.g. kv_bytes_per_token a "
                   "multiple of 8 and chunk_tokens a multiple of 16");
}

}  // namespace

namespace {

// Memory node `i`'s pool: the scenario's pool_bytes or its device, the smaller.
std::uint64_t pool_of(const Scenario& scenario, const Profile& profile, int i) {
  const auto& device = profile.memory_devices.empty()
                           ? profile.device.device
                           : profile.memory_devices[static_cast<std::size_t>(i)];
  return std::min<std::uint64_t>(device.capacity_bytes, scenario.pool_bytes);
}

}  // namespace

std::uint64_t regions_for_the_stores(const Scenario& scenario) {
  const WorkloadParams& w = scenario.workload;
  if (w.kind != WorkloadKind::kStore) return 0;
  // Each worker fills its own regions; its last one may be part full.
  const std::uint64_t chunks =
      static_cast<std::uint64_t>(w.stores) * static_cast<std::uint64_t>(w.chunks_per_store);
  const std::uint64_t per_node = (chunks + kChunksPerRegion - 1) / kChunksPerRegion;
  return per_node * static_cast<std::uint64_t>(scenario.topology.gpu_nodes);
}

Status check_pools_hold_a_region(const Scenario& scenario, const Profile& profile) {
  const std::uint64_t region = region_bytes(profile);
  for (int i = 0; i < scenario.topology.memory_nodes; ++i) {
    const std::uint64_t pool = pool_of(scenario, profile, i);
    if (pool >= region) continue;
    return Error(ErrorCode::kBadRequest,
                 "/pool_bytes: memory node " + memory_node_name(i) + "'s pool of " +
                     std::to_string(pool) + " bytes (pool_bytes, or the device's capacity_bytes " +
                     "if smaller) cannot hold one region of " + std::to_string(region) +
                     " bytes (" + std::to_string(kChunksPerRegion) +
                     " KV chunks: engine.kv_bytes_per_token x chunk_tokens x " +
                     std::to_string(kChunksPerRegion) +
                     "), so every store would fail; give it at least " + std::to_string(region));
  }
  return {};
}

Status check_pools_hold_the_stores(const Scenario& scenario, const Profile& profile) {
  const WorkloadParams& w = scenario.workload;
  const std::uint64_t region = region_bytes(profile);
  std::uint64_t held = 0;
  for (int i = 0; i < scenario.topology.memory_nodes; ++i) {
    held += pool_of(scenario, profile, i) / region;
  }
  const std::uint64_t needed = regions_for_the_stores(scenario);
  if (needed <= held) return {};
  return Error(ErrorCode::kBadRequest,
               "/workload: " + std::to_string(w.stores) + " stores x " +
                   std::to_string(w.chunks_per_store) + " chunk(s) on each of " +
                   std::to_string(scenario.topology.gpu_nodes) + " GPU node(s) need " +
                   std::to_string(needed) + " regions of " + std::to_string(region) + " bytes (" +
                   std::to_string(kChunksPerRegion) +
                   " chunks each, a GPU node's own), and the pools hold " + std::to_string(held) +
                   " (pool_bytes, or the device's capacity_bytes if smaller, per memory node): "
                   "the rest could only fail; lower stores or chunks_per_store, or raise "
                   "pool_bytes");
}

Result<Profile> load_scenario_profile(const std::string& profiles_dir, const Scenario& scenario,
                                      const std::string& origin) {
  auto profile = load_profile(profiles_dir, scenario.profile);
  if (!profile.ok()) return profile.status();
  for (Status s : {attach_memory_profiles(profiles_dir, scenario, *profile),
                   check_pools_hold_a_region(scenario, *profile),
                   check_pools_hold_the_stores(scenario, *profile)}) {
    if (s.ok()) continue;
    // These name a pointer into the scenario: say which file.
    return Error(s.code(), origin.empty() ? s.message() : origin + ": " + s.message());
  }
  return profile;
}

namespace {

using Json = nlohmann::json;
using namespace std::chrono_literals;

constexpr char kSecret[] = "rcxl-sim-secret";
constexpr std::uint16_t kAgentPort = 7000;
constexpr std::uint16_t kDirectoryPort = 7100;

// {"k": {"value": v, "source": "..."}} -> {"k": v}; a value without a source is refused.
Result<Json> unwrap_sourced(const Json& section, const std::string& pointer) {
  if (!section.is_object()) return Error(ErrorCode::kBadRequest, pointer + ": expected an object");
  Json out = Json::object();
  for (const auto& [key, v] : section.items()) {
    if (!v.is_object() || !v.contains("value") || !v.contains("source") ||
        !v["source"].is_string() || v["source"].get<std::string>().empty()) {
      return Error(ErrorCode::kBadRequest,
                   pointer + "/" + pointer_token(key) +
                       ": expected {\"value\": ..., \"source\": \"where it comes from\"}");
    }
    // A mistyped key beside them (a "vlaue" override) would be dropped silently.
    for (const auto& [inner, unused] : v.items()) {
      if (inner != "value" && inner != "source") {
        return Error(ErrorCode::kBadRequest, pointer + "/" + pointer_token(key) +
                                                 ": unknown key '" + printable(inner) +
                                                 "'; expected only value and source");
      }
    }
    out[key] = v["value"];
  }
  return out;
}

}  // namespace

Result<Profile> profile_from_json(const Json& j, const std::string& origin) {
  Profile p;
  auto dev = device::load_device_profile(j);
  if (!dev.ok()) return Error(ErrorCode::kBadRequest, origin + ": " + dev.status().message());
  p.device = dev.value();
  if (j.contains("engine")) {
    auto plain = unwrap_sourced(j["engine"], "/engine");
    if (!plain.ok()) return Error(ErrorCode::kBadRequest, origin + ": " + plain.status().message());
    auto engine = engine_params_from_json(*plain);
    if (!engine.ok())
      return Error(ErrorCode::kBadRequest, origin + ": " + engine.status().message());
    p.engine = engine.value();
  }
  if (Status s = check_chunks_can_be_stored(p.engine); !s.ok()) {
    return Error(ErrorCode::kBadRequest, origin + ": " + s.message());
  }
  if (j.contains("control_link")) {
    // Read and bounded by load_device_profile; here only its sources are required.
    auto plain = unwrap_sourced(j["control_link"], "/control_link");
    if (!plain.ok()) return Error(ErrorCode::kBadRequest, origin + ": " + plain.status().message());
  }
  p.control_link = p.device.control_link;
  return p;
}

Result<Json> load_profile_document(const std::string& profiles_dir, const std::string& name,
                                   std::string* origin_out) {
  std::string text;
  std::string origin;
  // Names and paths reach messages escaped (one line each); files open by the raw path.
  constexpr std::size_t kWholePath = 4096;
  if (profiles_dir.empty()) {
    origin = "profiles/" + printable(name, kWholePath) + ".json (built in)";
    auto embedded = embedded_file("profiles/" + name + ".json");
    if (!embedded) {
      std::string known;
      for (const auto& f : embedded_files()) {
        if (f.path.rfind("profiles/", 0) == 0)
          known += (known.empty() ? "" : ", ") + std::string(f.path);
      }
      return Error(ErrorCode::kNotFound, "no built-in profile '" + printable(name, kWholePath) +
                                             "' (have: " + known +
                                             "); pass --profiles DIR for your own");
    }
    text = std::string(*embedded);
  } else {
    const std::string path = profiles_dir + "/" + name + ".json";
    origin = printable(path, kWholePath);
    auto read = read_document_file(path);
    if (!read.ok() && read.status().code() == ErrorCode::kNotFound) {
      // The user named the directory, not this file: say which file it needs.
      const bool shipped = embedded_file("profiles/" + name + ".json").has_value();
      return Error(ErrorCode::kNotFound,
                   origin + ": no such file; --profiles " + printable(profiles_dir, kWholePath) +
                       " needs a profile named '" + printable(name, kWholePath) + "'" +
                       (shipped ? " (copy the shipped scenarios/profiles/" +
                                      printable(name, kWholePath) + ".json there)"
                                : ""));
    }
    if (!read.ok()) {
      // Its message starts with the path (read_document_file).
      const std::string& m = read.status().message();
      return Error(read.status().code(),
                   origin + (m.rfind(path, 0) == 0 ? m.substr(path.size()) : ": " + m));
    }
    text = std::move(read).value();
  }
  auto j = parse_json_document(text, origin);
  if (!j.ok()) return j.status();
  if (origin_out) *origin_out = origin;
  return j;
}

Result<Profile> load_profile(const std::string& profiles_dir, const std::string& name) {
  std::string origin;
  auto j = load_profile_document(profiles_dir, name, &origin);
  if (!j.ok()) return j.status();
  auto profile = profile_from_json(*j, origin);
  // A profile is named by its file: a copy whose name was not changed would
  // be reported under the other profile's name.
  if (profile.ok() && j->contains("name") && (*j)["name"] != name) {
    return Error(ErrorCode::kBadRequest,
                 origin + ": /name: '" + printable((*j)["name"].get<std::string>()) +
                     "' is not the file's name; write \"" + printable(name) +
                     "\" (a profile is named by its file)");
  }
  return profile;
}

namespace {

// Mean of `value` (ms) over the records `counts` keeps; 0 when none does.
template <typename Counts, typename Value>
double mean_ms(const std::vector<RequestRecord>& records, Counts counts, Value value) {
  double sum = 0;
  std::size_t n = 0;
  for (const auto& r : records) {
    if (!counts(r)) continue;
    sum += runtime::to_millis(value(r));
    ++n;
  }
  return n ? sum / static_cast<double>(n) : 0;
}

}  // namespace

double mean_reuse_ttft_ms(const std::vector<RequestRecord>& records) {
  return mean_ms(
      records, [](const RequestRecord& r) { return r.reuse_turn() && r.answered(); },
      [](const RequestRecord& r) { return r.ttft(); });
}

double mean_load_ms(const std::vector<RequestRecord>& records) {
  return mean_ms(
      records, [](const RequestRecord& r) { return r.loaded() && r.load_finished(); },
      [](const RequestRecord& r) { return r.load_time(); });
}

namespace {

// Everything of one run, torn down in reverse order of construction.
class Deployment {
 public:
  Deployment(const Scenario& sc, const Profile& profile, const RunOptions& options)
      : sc_(sc),
        profile_(profile),
        options_(options),
        world_(sc.seed),
        fabric_(world_, profile.device.nic) {}

  ~Deployment() {
    for (auto& g : gpus_) {
      g->engine.reset();
      g->store.reset();
      g->kv.reset();
      g->worker.reset();
      g->scheduler.reset();
      g->worker_handler.reset();
      g->scheduler_handler.reset();
    }
    for (auto& m : mems_) {
      if (m->agent) m->agent->stop();
      m->agent.reset();
    }
    if (directory_) directory_->stop();
  }

  Status build() {
    world_.network().set_default_link(profile_.control_link);
    if (options_.record_trace_file && !world_.trace().open_file(options_.trace_path)) {
      return Error(ErrorCode::kIoError, "cannot write the trace to " + options_.trace_path);
    }
    // Directory node.
    dir_node_ = &world_.add_node(kDirectoryNode);
    dir_strand_ = dir_node_->make_strand("directory");
    directory::DirectoryServerOptions dopts;
    dopts.secret = kSecret;
    directory_ = std::make_unique<directory::DirectoryServer>(*dir_node_, *dir_strand_, dopts);
    if (auto a = directory_->start({"dir", kDirectoryPort}); !a.ok()) return a.status();
    if (profile_.memory_devices.size() != sc_.topology.memory_profiles.size()) {
      return Error(ErrorCode::kBadRequest, "topology.memory_profiles names " +
                                               std::to_string(sc_.topology.memory_profiles.size()) +
                                               " profiles but the run has the devices of " +
                                               std::to_string(profile_.memory_devices.size()) +
                                               ": load the profile with load_scenario_profile");
    }
    if (auto s = check_pools_hold_a_region(sc_, profile_); !s.ok()) return s;
    if (auto s = check_pools_hold_the_stores(sc_, profile_); !s.ok()) return s;
    for (int i = 0; i < sc_.topology.memory_nodes; ++i) {
      if (auto s = build_memory_node(i); !s.ok()) return s;
    }
    client::Config base;
    base.directory = {"dir", kDirectoryPort};
    for (const auto& m : mems_) base.agents.push_back({m->node->name(), kAgentPort});
    base.secret = kSecret;
    base.chunk_size_bytes = profile_.engine.kv_bytes_per_token *
                            static_cast<std::uint64_t>(profile_.engine.chunk_tokens);
    base.region_size_bytes = region_bytes(profile_);
    base.payload_sample_bytes = options_.payload_sample_bytes;
    base.read_hints = sc_.client.read_hints;
    base.write_hints = sc_.client.write_hints;
    base.read_promotes = sc_.client.read_promotes;
    base.write_wait_ms = sc_.client.write_wait_ms;
    base.read_hint_on_arrival = sc_.client.read_hint_on_arrival;
    base.gate_reads = sc_.client.gate_reads;
    // Drawn once for the whole run: every engine sees the same conversations.
    auto rnd = world_.random("workload");
    const auto workload = sc_.workload.kind == WorkloadKind::kServing
                              ? make_workload(sc_.workload, *rnd)
                              : std::vector<ConversationSpec>{};
    for (int i = 0; i < sc_.topology.gpu_nodes; ++i) build_gpu_node(i, base, workload);
    schedule_faults();
    return {};
  }

  RunResult run() {
    RunResult out;
    const auto wall0 = std::chrono::steady_clock::now();
    for (auto& g : gpus_) {
      if (g->engine) g->engine->start();
      if (g->store) g->store->start();
    }
    std::uint64_t steps = 0;
    auto last_report = wall0;
    out.status = world_.run_until(
        [&] {
          // The wall clock is read only every 4 Ki events and decides nothing in the run.
          if (options_.progress && (++steps & 0xfff) == 0) {
            const auto now = std::chrono::steady_clock::now();
            if (now - last_report >= std::chrono::seconds(1)) {
              last_report = now;
              report_progress(now - wall0);
            }
          }
          return engines_done();
        },
        runtime::Instant(sc_.time_limit));
    if (out.status.code() == ErrorCode::kTimeout) {
      out.status = Error(ErrorCode::kTimeout,
                         out.status.message() +
                             " before the workload ended (the scenario's time_limit_s: raise it "
                             "if the run needs longer)");
    }
    out.workload_seconds = runtime::to_seconds(world_.loop().now());
    // Let ends, closes and write-backs settle before the end-of-run checks.
    if (out.status.ok()) world_.run_for(50ms);
    out.wall_seconds =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - wall0).count();
    out.virtual_seconds = runtime::to_seconds(world_.loop().now());
    for (const auto& g : gpus_) {
      if (g->engine) {
        const auto& r = g->engine->records();
        out.records.insert(out.records.end(), r.begin(), r.end());
      }
      out.invariants.stale_reads += g->kv->stale_reads();
    }
    out.store = store_run();
    out.boots_seen = boots_;
    out.faults_fired = fired_;
    out.loads_started = loads_started_;
    out.stores_started = stores_started_;
    if (out.invariants.stale_reads > 0) {
      out.invariants.violations.push_back(std::to_string(out.invariants.stale_reads) +
                                          " load(s) returned bytes that are not the key's");
    }
    out.counters = counters();
    out.invariants.open_hints_at_end =
        out.counters.value("/agent/open_hint_requests"_json_pointer, std::uint64_t{0});
    if (out.status.ok() && out.invariants.open_hints_at_end > 0) {
      out.invariants.violations.push_back(std::to_string(out.invariants.open_hints_at_end) +
                                          " hint request(s) still open at the agent after the run");
    }
    check_invariants(out);
    out.trace_hash = world_.trace().hash_hex();
    if (options_.record_trace_file && !world_.trace().file_complete() && out.status.ok()) {
      // The run itself is fine, but the file the user asked for is not the trace.
      out.status =
          Error(ErrorCode::kIoError, "the trace could not be written to " + options_.trace_path +
                                         " (disk full or an I/O error); the file is "
                                         "incomplete: free space or choose another file");
    }
    for (auto& failure : check_expectations(sc_.expect, out)) {
      out.invariants.violations.push_back("expect: " + failure);
    }
    return out;
  }

 private:
  // One memory node: its device is its agent's pool and its RNIC's timing.
  struct MemoryNode {
    sim::SimNode* node = nullptr;
    sim::SimNic* nic = nullptr;
    // Declared before everything that uses it, so it goes last.
    std::unique_ptr<InvariantMonitor> monitor;
    std::unique_ptr<CheckedNic> checked_nic;
    std::unique_ptr<CheckedRuntime> checked_runtime;  // the agent's, its wire watched
    std::unique_ptr<device::CxlSsdDevice> device;
    std::unique_ptr<agent::Agent> agent;
    std::string restart_failure;
  };
  // One GPU node: a serving engine with its scheduler and worker processes.
  struct GpuNode {
    sim::SimNode* node = nullptr;
    sim::SimNic* nic = nullptr;
    std::unique_ptr<CheckedNic> checked_nic;
    std::unique_ptr<client::Handler> scheduler_handler;
    std::unique_ptr<client::Handler> worker_handler;
    std::unique_ptr<client::SchedulerConnector> scheduler;
    std::unique_ptr<client::WorkerConnector> worker;
    std::unique_ptr<RcxlEngineKv> kv;
    std::unique_ptr<EngineModel> engine;   // serving workload
    std::unique_ptr<StoreWorkload> store;  // store workload
  };

  Status build_memory_node(int index) {
    const std::string name = memory_node_name(index);
    auto m = std::make_unique<MemoryNode>();
    m->node = &world_.add_node(name);
    m->nic = &fabric_.add_nic(name);
    InvariantLimits limits;
    limits.max_hint_requests = sc_.agent.max_hint_requests;
    m->monitor = std::make_unique<InvariantMonitor>(m->node->clock(), limits);
    m->checked_nic = std::make_unique<CheckedNic>(*m->nic, m->node->clock(), *m->monitor);
    m->checked_runtime = std::make_unique<CheckedRuntime>(*m->node, *m->monitor);
    device::CxlSsdParams dp = profile_.memory_devices.empty()
                                  ? profile_.device.device
                                  : profile_.memory_devices[static_cast<std::size_t>(index)];
    dp.capacity_bytes = std::min<std::uint64_t>(dp.capacity_bytes, sc_.pool_bytes);
    m->device = std::make_unique<device::CxlSsdDevice>(world_.loop(), dp);
    mems_.push_back(std::move(m));
    return start_agent(*mems_.back());
  }

  void build_gpu_node(int index, const client::Config& base,
                      const std::vector<ConversationSpec>& workload) {
    auto g = std::make_unique<GpuNode>();
    const std::string name = gpu_node_name(index);
    g->node = &world_.add_node(name);
    g->nic = &fabric_.add_nic(name);
    // An op's books are those of the memory node it reaches.
    g->checked_nic =
        std::make_unique<CheckedNic>(*g->nic, g->node->clock(), *mems_.front()->monitor,
                                     [this](const std::string& endpoint) -> InvariantMonitor* {
                                       for (auto& m : mems_) {
                                         if (m->nic->endpoint() == endpoint)
                                           return m->monitor.get();
                                       }
                                       return nullptr;
                                     });
    client::Config sched_cfg = base;
    client::Config worker_cfg = base;
    // One GPU node keeps the names it always had (and so its trace hashes).
    const std::string suffix = index == 0 ? "" : "-" + name;
    sched_cfg.client_name = "scheduler" + suffix;
    worker_cfg.client_name = "worker" + suffix;
    // Engine i starts its regions on memory node i (mod their count): the
    // engines spread over the memory nodes from their first store.
    worker_cfg.first_agent = static_cast<std::size_t>(index);
    g->scheduler_handler = std::make_unique<client::Handler>(*g->node, sched_cfg, *g->checked_nic);
    g->worker_handler = std::make_unique<client::Handler>(*g->node, worker_cfg, *g->checked_nic);
    g->scheduler = std::make_unique<client::SchedulerConnector>(*g->scheduler_handler);
    g->worker = std::make_unique<client::WorkerConnector>(*g->node, *g->worker_handler);
    g->kv = std::make_unique<RcxlEngineKv>(*g->scheduler, *g->worker, base.chunk_size_bytes,
                                           options_.payload_sample_bytes);
    if (sc_.workload.kind == WorkloadKind::kStore) {
      g->store = std::make_unique<StoreWorkload>(*g->node, *g->kv, sc_.workload,
                                                 base.chunk_size_bytes, index);
    } else {
      g->engine = std::make_unique<EngineModel>(*g->node, *g->kv, profile_.engine, workload, index,
                                                sc_.topology.gpu_nodes);
    }
    gpus_.push_back(std::move(g));
  }

  bool engines_done() const {
    for (const auto& g : gpus_) {
      if (g->engine ? !g->engine->done() : !g->store->done()) return false;
    }
    return true;
  }

  StoreRun store_run() const {
    StoreRun out;
    std::optional<runtime::Instant> first, last;
    for (const auto& g : gpus_) {
      if (!g->store) continue;
      out.stores += g->store->stores_done();
      out.failed_stores += g->store->stores_failed();
      out.bytes += g->store->bytes_stored();
      first = std::min(first.value_or(g->store->first_start()), g->store->first_start());
      last = std::max(last.value_or(g->store->last_end()), g->store->last_end());
    }
    if (!first) return out;
    out.seconds = runtime::to_seconds(*last - *first);
    // Bytes per nanosecond is GB/s.
    out.gbps = *last > *first
                   ? static_cast<double>(out.bytes) / static_cast<double>((*last - *first).count())
                   : 0.0;
    std::vector<std::pair<runtime::Instant, StoreRun::Sample>> all;
    for (const auto& g : gpus_) {
      if (!g->store) continue;
      for (const auto& s : g->store->samples()) {
        all.push_back({s.end, {runtime::to_millis(s.end - *first), s.gbps}});
      }
    }
    std::stable_sort(all.begin(), all.end(),
                     [](const auto& a, const auto& b) { return a.first < b.first; });
    for (const auto& [end, sample] : all) out.samples.push_back(sample);
    return out;
  }

  void report_progress(std::chrono::steady_clock::duration wall) {
    std::size_t done = 0;
    for (const auto& g : gpus_) {
      if (g->store) done += g->store->stores_done();
      if (!g->engine) continue;
      for (const auto& r : g->engine->records()) done += r.finished.count() > 0;
    }
    // Each engine makes its own stores; the conversations are shared out.
    const bool stores = sc_.workload.kind == WorkloadKind::kStore;
    const auto total = static_cast<std::size_t>(requests_of(sc_.workload, sc_.topology.gpu_nodes));
    char line[160];
    std::snprintf(line, sizeof line, "%s: %zu/%zu %s done, %.1f s virtual, %.1f s wall",
                  printable(sc_.name, 60).c_str(), done, total, stores ? "stores" : "requests",
                  runtime::to_seconds(world_.loop().now()),
                  std::chrono::duration<double>(wall).count());
    options_.progress(line);
  }

  // Issue #6 item 6: the monitors' books, checked at the end of every run.
  void check_invariants(RunResult& out) {
    // The clients' own bounds, in books of their own (no memory node's).
    InvariantMonitor client_books(gpus_.front()->node->clock(), InvariantLimits{});
    for (const auto& g : gpus_) {
      for (client::Handler* h : {g->scheduler_handler.get(), g->worker_handler.get()}) {
        const client::Config& c = h->config();
        client_books.check_write_wait(c.client_name, h->stats().longest_write_wait,
                                      std::chrono::milliseconds(c.write_wait_ms) + c.reply_timeout);
        const client::MemoryHintsStats hs = h->hints().stats();
        client_books.check_client_hints(c.client_name, hs.max_queued_hints, hs.max_open_requests);
      }
    }
    for (auto& v : client_books.violations()) out.invariants.violations.push_back(v);
    for (const auto& m : mems_) {
      if (out.status.ok()) m->monitor->check_all_hints_closed();
      // With one memory node its lines read as they always did.
      const std::string where = mems_.size() > 1 ? m->node->name() + ": " : "";
      for (auto& v : m->monitor->violations()) out.invariants.violations.push_back(where + v);
    }
  }

  Status start_agent(MemoryNode& m) {
    // As the package installs it (packaging/): the table's directory exists
    // (before the extension, which may log there).
    make_agent_directories(m.node->files());
    const auto registry = scenario_extension_registry();
    ext::ExtensionContext ctx{m.node, m.device.get()};
    Json config = sc_.extension_config;
    auto extension = registry.create(sc_.extension, ctx, config);
    if (!extension.ok()) {
      return Error(extension.status().code(),
                   "extension '" + sc_.extension + "': " + extension.status().message());
    }
    // `none` creates no extension: the agent then runs without one (nothing to watch).
    std::unique_ptr<ext::RegionExtension> checked;
    if (*extension) {
      checked = std::make_unique<CheckedExtension>(std::move(extension).value(), *m.monitor);
    }
    agent::AgentConfig ac;
    ac.listen = {{m.node->name(), kAgentPort}};
    ac.auth_secret = kSecret;
    ac.boot_id = "boot-" + m.node->name();
    ac.generation_poll = sc_.agent.generation_poll;
    ac.generation_grace = sc_.agent.generation_grace;
    ac.sweep_interval = sc_.agent.sweep_interval;
    ac.max_hint_requests = sc_.agent.max_hint_requests;
    ac.state_file = kAgentStateFile;
    // Every change, however short-lived (a sampler would miss one, and its
    // timer filled the trace of a long idle run: session 31 review).
    ac.on_boot_change = [this, node = m.node->name(),
                         monitor = m.monitor.get()](const std::string& boot) {
      monitor->on_boot_change(boot);
      note_boot(node, boot);
    };
    m.agent = std::make_unique<agent::Agent>(*m.checked_runtime, *m.device, *m.checked_nic,
                                             std::move(checked), ac);
    if (Status st = m.agent->start(); !st.ok()) return st;
    // A started (or restarted) agent's first boot is no change: noted here.
    const std::string boot = m.agent->boot();
    note_boot(m.node->name(), boot);
    m.monitor->on_boot(boot);
    return {};
  }

  void schedule_faults() {
    fault_strand_ = mems_.front()->node->make_strand("faults");
    fired_.assign(sc_.faults.size(), false);
    for (std::size_t i = 0; i < sc_.faults.size(); ++i) {
      const Fault& f = sc_.faults[i];
      if (f.during_load == 0 && f.during_store == 0) {
        fault_strand_->post_after(f.at, [this, i] { fire(i); });
      }
    }
    // Load- and store-triggered faults: armed when the run's N-th one starts, on any engine.
    for (auto& g : gpus_) {
      g->kv->on_load_start([this](std::uint64_t) {
        const std::uint64_t nth = ++loads_started_;
        arm_faults([nth](const Fault& f) { return f.during_load == nth; });
      });
      g->kv->on_store_start([this](std::uint64_t) {
        const std::uint64_t nth = ++stores_started_;
        arm_faults([nth](const Fault& f) { return f.during_store == nth; });
      });
    }
  }

  void arm_faults(const std::function<bool(const Fault&)>& now_due) {
    for (std::size_t i = 0; i < sc_.faults.size(); ++i) {
      if (!now_due(sc_.faults[i])) continue;
      fault_strand_->post_after(sc_.faults[i].after, [this, i] { fire(i); });
    }
  }

  void fire(std::size_t index) {
    // Past the workload's end (the settle) no load or store meets it: it never happened.
    if (engines_done()) return;
    fired_[index] = true;
    apply(sc_.faults[index]);
  }

  MemoryNode* memory_node(const std::string& name) {
    for (auto& m : mems_) {
      if (m->node->name() == name) return m.get();
    }
    return nullptr;
  }

  void apply(const Fault& f) {
    // Where and how long: on an idle node nothing else in the trace would tell them apart.
    world_.trace().record(world_.loop().now().count(), "scenario fault " + fault_kind_name(f.kind) +
                                                           " " + f.node + " " +
                                                           std::to_string(f.duration.count()));
    auto& net = world_.network();
    MemoryNode* m = memory_node(f.node);  // checked when the file was read
    switch (f.kind) {
      case Fault::Kind::kReset:
        m->device->reset();
        break;
      case Fault::Kind::kUnknown:
        m->device->script_unknown_period(world_.loop().now(), world_.loop().now() + f.duration);
        break;
      case Fault::Kind::kDropConnections:
        net.drop_connections(f.node);
        break;
      // Overlapping faults on one node each last their own period: a node heals
      // when its last partition ends, and delays add up while they overlap.
      case Fault::Kind::kPartition:
        ++partitions_[f.node];
        net.partition(f.node);
        fault_strand_->post_after(f.duration, [this, &net, node = f.node] {
          if (--partitions_[node] == 0) net.heal(node);
        });
        break;
      case Fault::Kind::kDelay:
        extra_delays_[f.node] += f.extra;
        net.set_extra_delay(f.node, extra_delays_[f.node]);
        fault_strand_->post_after(f.duration, [this, &net, node = f.node, extra = f.extra] {
          net.set_extra_delay(node, extra_delays_[node] -= extra);
        });
        break;
      case Fault::Kind::kAgentRestart:
        // An agent a failed restart left down just starts (a second restart).
        if (m->agent) m->agent->stop();
        m->agent.reset();
        // Its queue pairs and registrations went with the process (the RNIC's
        // verbs resources are its own); the monitor judges by that, not by
        // what the agent's stop deregistered.
        m->nic->end_process();
        m->monitor->on_process_end();
        m->restart_failure.clear();
        if (auto s = start_agent(*m); !s.ok()) {
          // The agent stays down (R6.2: a start that cannot tell the generation
          // stops); its counters go with it, the failure is reported instead.
          m->restart_failure = s.ToString();
          m->agent.reset();
          m->nic->set_accepting(false);  // nothing listens for RDMA connects
        } else {
          m->nic->set_accepting(true);
        }
        break;
    }
  }

  void note_boot(const std::string& node, const std::string& boot) {
    std::string& last = last_boot_[node];
    if (last != boot) boots_.push_back(boot);
    last = boot;
  }

  // One memory node's numbers: its device, agent and what its extension was told.
  static Json memory_counters(const MemoryNode& m) {
    const auto& d = m.device->counters();
    Json j;
    j["device"] = {{"hits", d.hits},
                   {"misses", d.misses},
                   {"fills", d.fills},
                   {"write_allocate_fills", d.write_allocate_fills},
                   {"demand_read_fills", d.demand_read_fills},
                   {"merged_misses", d.merged_misses},
                   {"evictions", d.evictions},
                   {"write_backs", d.write_backs},
                   {"idle_write_backs", d.idle_write_backs},
                   {"hinted_bytes_prepared", d.hinted_bytes_prepared},
                   {"resets", d.resets}};
    j["extension"] = {{"connection_closed_calls", m.monitor->connection_closed_calls()},
                      {"requests_open_at_close", m.monitor->requests_open_at_close()}};
    if (m.agent) j["agent"] = agent_metrics_json(*m.agent);
    return j;
  }

  // One GPU node's numbers: its worker, scheduler and engine KV layer.
  static Json gpu_counters(const GpuNode& g) {
    const auto ws = g.worker_handler->stats();
    Json j;
    j["worker"] = {{"loads", ws.loads},
                   {"stores", ws.stores},
                   {"reads_posted", ws.reads_posted},
                   {"writes_posted", ws.writes_posted},
                   {"boot_misses", ws.boot_misses},
                   {"remote_access_errors", ws.remote_access_errors},
                   {"longest_write_wait_ms", runtime::to_millis(ws.longest_write_wait)}};
    j["scheduler"] = {{"hints_sent", g.scheduler->hints_sent()},
                      {"ends_sent", g.scheduler->ends_sent()},
                      {"lookups", g.scheduler->lookups()}};
    // Reuse turns answered whose lookup found none of their prefix (its
    // store had not landed, or it was lost): they recomputed it all. A turn
    // a time limit cut off before its lookup ended is not counted.
    std::uint64_t without_hits = 0;
    if (g.engine) {
      for (const auto& r : g.engine->records()) {
        without_hits += r.reuse_turn() && r.answered() && r.hit_chunks == 0;
      }
    }
    j["kv"] = {{"failed_loads", g.kv->failed_loads()},
               {"failed_stores", g.kv->failed_stores()},
               {"short_loads", g.kv->short_loads()},
               {"missed_chunks", g.kv->missed_chunks()},
               {"reuse_turns_without_hits", without_hits}};
    return j;
  }

  // Totals over nodes: counts and gauges add up; a longest is the longest.
  static void add_into(Json& total, const Json& part, const std::string& key = "") {
    if (part.is_object()) {
      if (!total.is_object()) total = Json::object();
      for (const auto& [k, v] : part.items()) add_into(total[k], v, k);
    } else if (total.is_null()) {
      total = part;
    } else if (key == "longest_write_wait_ms") {
      total = std::max(total.get<double>(), part.get<double>());
    } else if (total.is_number_unsigned() && part.is_number_unsigned()) {
      total = total.get<std::uint64_t>() + part.get<std::uint64_t>();
    } else {
      total = total.get<double>() + part.get<double>();
    }
  }

  Json counters() const {
    Json j = Json::object();
    Json by_node = Json::object();
    for (const auto& m : mems_) {
      const Json node = memory_counters(*m);
      add_into(j, node);
      by_node[m->node->name()] = node;
    }
    for (const auto& g : gpus_) {
      const Json node = gpu_counters(*g);
      add_into(j, node);
      by_node[g->node->name()] = node;
    }
    // Only with more than one node of a kind (docs/scenarios.md, `by_node`).
    if (mems_.size() > 1 || gpus_.size() > 1) j["by_node"] = by_node;
    std::string failures;
    for (const auto& m : mems_) {
      if (m->restart_failure.empty()) continue;
      failures += (failures.empty() ? "" : "; ") +
                  (mems_.size() > 1 ? m->node->name() + ": " : std::string()) + m->restart_failure;
    }
    if (!failures.empty()) j["agent_restart_failure"] = failures;
    return j;
  }

  static Json agent_metrics_json(const agent::Agent& a) {
    const auto m = a.metrics();
    return {{"maps", m.maps},
            {"maps_refused", m.maps_refused},
            {"boot_changes", m.boot_changes},
            {"unknown_periods", m.unknown_periods},
            {"open_hint_requests", m.open_hint_requests},
            {"connections_closed", m.connections_closed},
            {"hint_requests_closed_by_disconnect", m.hint_requests_closed_by_disconnect},
            {"hint_requests_closed_by_boot_change", m.hint_requests_closed_by_boot_change},
            {"write_waits", m.write_waits},
            {"hints_accepted", m.hints_accepted},
            {"hints_refused", m.hints_refused}};
  }

  const Scenario& sc_;
  const Profile& profile_;
  RunOptions options_;
  sim::SimWorld world_;
  sim::SimFabric fabric_;
  sim::SimNode* dir_node_ = nullptr;
  std::unique_ptr<runtime::Strand> dir_strand_;
  std::unique_ptr<directory::DirectoryServer> directory_;
  std::vector<std::unique_ptr<MemoryNode>> mems_;  // before gpus_: their NICs' books outlive them
  std::vector<std::unique_ptr<GpuNode>> gpus_;
  std::unique_ptr<runtime::Strand> fault_strand_;
  std::vector<bool> fired_;                                // by fault index
  std::map<std::string, int> partitions_;                  // in force, by node
  std::map<std::string, runtime::Duration> extra_delays_;  // their sum, by node
  std::uint64_t loads_started_ = 0;
  std::uint64_t stores_started_ = 0;
  std::vector<std::string> boots_;
  std::map<std::string, std::string> last_boot_;  // by memory node
};

}  // namespace

namespace {

// 1, not 1.000000: a bound reads as it was written.
std::string bound_text(double v) {
  char buf[40];
  std::snprintf(buf, sizeof buf, v == std::floor(v) && v < 9.2e18 ? "%.0f" : "%.15g", v);
  return buf;
}

}  // namespace

std::vector<std::string> check_expectations(const Expectations& expect, const RunResult& run) {
  std::vector<std::string> failures;
  std::string seen;
  for (const auto& b : run.boots_seen) seen += (seen.empty() ? "" : ", ") + printable(b, 200);
  // Each pattern must match a later boot than the previous one did; exactly:
  // the next boot, and no boot is left over.
  std::size_t at = 0;
  for (const auto& pattern : expect.boots) {
    while (at < run.boots_seen.size() && !std::regex_match(run.boots_seen[at], pattern.re) &&
           !expect.boots_exactly) {
      ++at;
    }
    if (at == run.boots_seen.size()) {
      failures.push_back("no boot" + (expect.boots_exactly ? " " + std::to_string(at + 1) : "") +
                         " matching '" + printable(pattern.text, 200) +
                         "' in order; boots seen: " + seen);
      break;
    }
    if (!std::regex_match(run.boots_seen[at], pattern.re)) {
      failures.push_back("boot " + std::to_string(at + 1) + " '" +
                         printable(run.boots_seen[at], 200) + "' does not match '" +
                         printable(pattern.text, 200) + "'; boots seen: " + seen);
      break;
    }
    ++at;
  }
  if (expect.boots_exactly && failures.empty() && at < run.boots_seen.size()) {
    failures.push_back("boots_exactly: " + std::to_string(run.boots_seen.size()) + " boots seen, " +
                       std::to_string(expect.boots.size()) + " expected; boots seen: " + seen);
  }
  for (const auto& c : expect.counters) {
    // Paths were checked against run_counters.h when the file was read; a run
    // without an agent (its restart failed) still has no agent counters.
    const auto v = counter_value(run.counters, c.path);
    if (!v) {
      failures.push_back("counter " + c.path + " is not in this run's counters");
      continue;
    }
    if (c.min && *v < *c.min) {
      failures.push_back("counter " + c.path + " = " + bound_text(*v) +
                         ", wanted >= " + bound_text(*c.min));
    }
    if (c.max && *v > *c.max) {
      failures.push_back("counter " + c.path + " = " + bound_text(*v) +
                         ", wanted <= " + bound_text(*c.max));
    }
  }
  if (expect.min_reuse_hits) {
    std::uint64_t hits = 0;
    for (const auto& r : run.records) hits += r.reuse_turn() && r.loaded_chunks > 0;
    if (hits < *expect.min_reuse_hits) {
      failures.push_back("reuse turns that loaded KV: " + std::to_string(hits) +
                         ", wanted >= " + std::to_string(*expect.min_reuse_hits));
    }
  }
  return failures;
}

RunResult run_scenario(const Scenario& scenario, const Profile& profile,
                       const RunOptions& options) {
  Deployment d(scenario, profile, options);
  if (Status s = d.build(); !s.ok()) {
    RunResult r;
    r.status = s;
    return r;
  }
  return d.run();
}

}  // namespace rcxl::scenarios
