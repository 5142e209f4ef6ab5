#include "scenarios/serving_rig.h"

#include <chrono>
#include <cmath>
#include <cstdio>
#include <fstream>
#include <regex>
#include <sstream>

#include "backends/sim/sim_network.h"
#include "backends/sim/sim_world.h"
#include "core/agent/agent.h"
#include "core/client/handler.h"
#include "core/client/scheduler_connector.h"
#include "core/client/worker_connector.h"
#include "core/directory/directory_server.h"
#include "scenarios/checked_extension.h"
#include "scenarios/checked_nic.h"
#include "scenarios/embedded/embedded.h"
#include "scenarios/invariant_monitor.h"
#include "scenarios/json_document.h"
#include "scenarios/rcxl_engine_kv.h"
#include "scenarios/run_counters.h"
#include "scenarios/scenario_extensions.h"

namespace rcxl::scenarios {
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
      return Error(
          ErrorCode::kBadRequest,
          pointer + "/" + key + ": expected {\"value\": ..., \"source\": \"where it comes from\"}");
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
  if (profiles_dir.empty()) {
    origin = "profiles/" + name + ".json (built in)";
    auto embedded = embedded_file("profiles/" + name + ".json");
    if (!embedded) {
      std::string known;
      for (const auto& f : embedded_files()) {
        if (f.path.rfind("profiles/", 0) == 0)
          known += (known.empty() ? "" : ", ") + std::string(f.path);
      }
      return Error(ErrorCode::kNotFound, "no built-in profile '" + name + "' (have: " + known +
                                             "); pass --profiles DIR for your own");
    }
    text = std::string(*embedded);
  } else {
    origin = profiles_dir + "/" + name + ".json";
    auto read = read_document_file(origin);
    if (!read.ok()) return read.status();
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
  return profile_from_json(*j, origin);
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
    engine_.reset();
    kv_.reset();
    worker_.reset();
    scheduler_.reset();
    worker_handler_.reset();
    scheduler_handler_.reset();
    if (agent_) agent_->stop();
    agent_.reset();
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
    // Memory node: the device is the agent's pool and the RNIC's timing.
    mem_node_ = &world_.add_node(kMemoryNode);
    mem_nic_ = &fabric_.add_nic("mem0");
    InvariantLimits limits;
    limits.max_hint_requests = agent::AgentConfig{}.max_hint_requests;
    monitor_ = std::make_unique<InvariantMonitor>(mem_node_->clock(), limits);
    checked_mem_nic_ = std::make_unique<CheckedNic>(*mem_nic_, mem_node_->clock(), *monitor_);
    device::CxlSsdParams dp = profile_.device.device;
    dp.capacity_bytes = std::min<std::uint64_t>(dp.capacity_bytes, sc_.pool_bytes);
    device_ = std::make_unique<device::CxlSsdDevice>(world_.loop(), dp);
    if (auto s = start_agent(); !s.ok()) return s;
    // GPU node: scheduler and worker processes, each with its own Handler.
    gpu_node_ = &world_.add_node(kGpuNode);
    gpu_nic_ = &fabric_.add_nic("gpu0");
    checked_gpu_nic_ = std::make_unique<CheckedNic>(*gpu_nic_, gpu_node_->clock(), *monitor_);
    client::Config base;
    base.directory = {"dir", kDirectoryPort};
    base.agents = {{"mem0", kAgentPort}};
    base.secret = kSecret;
    base.chunk_size_bytes = profile_.engine.kv_bytes_per_token *
                            static_cast<std::uint64_t>(profile_.engine.chunk_tokens);
    base.region_size_bytes = base.chunk_size_bytes * 32;
    base.payload_sample_bytes = options_.payload_sample_bytes;
    base.read_hints = sc_.client.read_hints;
    base.write_hints = sc_.client.write_hints;
    base.read_promotes = sc_.client.read_promotes;
    base.write_wait_ms = sc_.client.write_wait_ms;
    base.read_hint_on_arrival = sc_.client.read_hint_on_arrival;
    base.gate_reads = sc_.client.gate_reads;
    client::Config sched_cfg = base;
    sched_cfg.client_name = "scheduler";
    client::Config worker_cfg = base;
    worker_cfg.client_name = "worker";
    scheduler_handler_ =
        std::make_unique<client::Handler>(*gpu_node_, sched_cfg, *checked_gpu_nic_);
    worker_handler_ = std::make_unique<client::Handler>(*gpu_node_, worker_cfg, *checked_gpu_nic_);
    scheduler_ = std::make_unique<client::SchedulerConnector>(*scheduler_handler_);
    worker_ = std::make_unique<client::WorkerConnector>(*gpu_node_, *worker_handler_);
    kv_ = std::make_unique<RcxlEngineKv>(*scheduler_, *worker_, base.chunk_size_bytes,
                                         options_.payload_sample_bytes);
    auto rnd = world_.random("workload");
    engine_ = std::make_unique<EngineModel>(*gpu_node_, *kv_, profile_.engine,
                                            make_workload(sc_.workload, *rnd));
    schedule_faults();
    return {};
  }

  RunResult run() {
    RunResult out;
    const auto wall0 = std::chrono::steady_clock::now();
    engine_->start();
    watch_boots();
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
          return engine_->done();
        },
        runtime::Instant(sc_.time_limit));
    // Let ends, closes and write-backs settle before the end-of-run checks.
    if (out.status.ok()) world_.run_for(50ms);
    out.wall_seconds =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - wall0).count();
    out.virtual_seconds = runtime::to_seconds(world_.loop().now());
    out.records = engine_->records();
    out.boots_seen = boots_;
    out.faults_fired = fired_;
    out.loads_started = kv_->loads_started();
    out.invariants.stale_reads = kv_->stale_reads();
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
    for (auto& failure : check_expectations(sc_.expect, out)) {
      out.invariants.violations.push_back("expect: " + failure);
    }
    return out;
  }

 private:
  void report_progress(std::chrono::steady_clock::duration wall) {
    std::size_t done = 0;
    for (const auto& r : engine_->records()) done += r.finished.count() > 0;
    const std::size_t total = static_cast<std::size_t>(sc_.workload.conversations) *
                              static_cast<std::size_t>(sc_.workload.turns);
    char line[160];
    std::snprintf(line, sizeof line, "%s: %zu/%zu requests done, %.1f s virtual, %.1f s wall",
                  sc_.name.c_str(), done, total, runtime::to_seconds(world_.loop().now()),
                  std::chrono::duration<double>(wall).count());
    options_.progress(line);
  }

  // Issue #6 item 6: the monitor's books, checked at the end of every run.
  void check_invariants(RunResult& out) {
    for (const client::Handler* h : {scheduler_handler_.get(), worker_handler_.get()}) {
      const client::Config& c = h->config();
      monitor_->check_write_wait(c.client_name, h->stats().longest_write_wait,
                                 std::chrono::milliseconds(c.write_wait_ms) + c.reply_timeout);
    }
    if (out.status.ok()) monitor_->check_all_hints_closed();
    for (auto& v : monitor_->violations()) out.invariants.violations.push_back(v);
  }

  Status start_agent() {
    const auto registry = scenario_extension_registry();
    ext::ExtensionContext ctx{mem_node_, device_.get()};
    Json config = sc_.extension_config;
    auto extension = registry.create(sc_.extension, ctx, config);
    if (!extension.ok()) {
      return Error(extension.status().code(),
                   "extension '" + sc_.extension + "': " + extension.status().message());
    }
    // `none` creates no extension: the agent then runs without one (nothing to watch).
    std::unique_ptr<ext::RegionExtension> checked;
    if (*extension) {
      checked = std::make_unique<CheckedExtension>(std::move(extension).value(), *monitor_);
    }
    agent::AgentConfig ac;
    ac.listen = {{"mem0", kAgentPort}};
    ac.auth_secret = kSecret;
    ac.boot_id = "boot-mem0";
    // The region table survives an agent restart, as with the real unit's state dir.
    ac.state_file = "/var/lib/rcxl-agent/regions.json";
    ac.on_boot_change = [this](const std::string& boot) { monitor_->on_boot_change(boot); };
    agent_ = std::make_unique<agent::Agent>(*mem_node_, *device_, *checked_mem_nic_,
                                            std::move(checked), ac);
    return agent_->start();
  }

  void schedule_faults() {
    fault_strand_ = mem_node_->make_strand("faults");
    fired_.assign(sc_.faults.size(), false);
    for (std::size_t i = 0; i < sc_.faults.size(); ++i) {
      const Fault& f = sc_.faults[i];
      if (f.during_load == 0) fault_strand_->post_after(f.at, [this, i] { fire(i); });
    }
    // Load-triggered faults: armed when the engine starts the N-th load.
    kv_->on_load_start([this](std::uint64_t nth) {
      for (std::size_t i = 0; i < sc_.faults.size(); ++i) {
        if (sc_.faults[i].during_load != nth) continue;
        fault_strand_->post_after(sc_.faults[i].after, [this, i] { fire(i); });
      }
    });
  }

  void fire(std::size_t index) {
    fired_[index] = true;
    apply(sc_.faults[index]);
  }

  void apply(const Fault& f) {
    world_.trace().record(world_.loop().now().count(), "scenario fault " + fault_kind_name(f.kind));
    auto& net = world_.network();
    switch (f.kind) {
      case Fault::Kind::kReset:
        device_->reset();
        break;
      case Fault::Kind::kUnknown:
        device_->script_unknown_period(world_.loop().now(), world_.loop().now() + f.duration);
        break;
      case Fault::Kind::kDropConnections:
        net.drop_connections(f.node);
        break;
      case Fault::Kind::kPartition:
        net.partition(f.node);
        fault_strand_->post_after(f.duration, [&net, node = f.node] { net.heal(node); });
        break;
      case Fault::Kind::kDelay:
        net.set_extra_delay(f.node, f.extra);
        fault_strand_->post_after(f.duration,
                                  [&net, node = f.node] { net.set_extra_delay(node, {}); });
        break;
      case Fault::Kind::kAgentRestart:
        agent_->stop();
        agent_.reset();
        if (auto s = start_agent(); !s.ok()) {
          // The agent stays down (R6.2: a start that cannot tell the generation
          // stops); its counters go with it, the failure is reported instead.
          restart_failure_ = s.ToString();
          agent_.reset();
        }
        break;
    }
  }

  // Samples the agent's boot: every distinct value, in order.
  void watch_boots() {
    if (!boot_strand_) boot_strand_ = mem_node_->make_strand("boot-watch");
    if (agent_) {
      const std::string b = agent_->boot();
      if (boots_.empty() || boots_.back() != b) boots_.push_back(b);
      monitor_->on_boot(b);
    }
    if (!engine_->done()) boot_strand_->post_after(10ms, [this] { watch_boots(); });
  }

  Json counters() const {
    const auto& d = device_->counters();
    const auto ws = worker_handler_->stats();
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
    j["worker"] = {{"loads", ws.loads},
                   {"stores", ws.stores},
                   {"reads_posted", ws.reads_posted},
                   {"writes_posted", ws.writes_posted},
                   {"boot_misses", ws.boot_misses},
                   {"remote_access_errors", ws.remote_access_errors},
                   {"longest_write_wait_ms", runtime::to_millis(ws.longest_write_wait)}};
    j["scheduler"] = {{"hints_sent", scheduler_->hints_sent()},
                      {"ends_sent", scheduler_->ends_sent()},
                      {"lookups", scheduler_->lookups()}};
    j["kv"] = {{"failed_loads", kv_->failed_loads()},
               {"failed_stores", kv_->failed_stores()},
               {"short_loads", kv_->short_loads()},
               {"missed_chunks", kv_->missed_chunks()}};
    j["extension"] = {{"connection_closed_calls", monitor_->connection_closed_calls()},
                      {"requests_open_at_close", monitor_->requests_open_at_close()}};
    if (agent_) j["agent"] = agent_metrics_json(*agent_);
    if (!restart_failure_.empty()) j["agent_restart_failure"] = restart_failure_;
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
  sim::SimNode* mem_node_ = nullptr;
  sim::SimNode* gpu_node_ = nullptr;
  sim::SimNic* mem_nic_ = nullptr;
  sim::SimNic* gpu_nic_ = nullptr;
  // Declared before everything that uses them, so they go last.
  std::unique_ptr<InvariantMonitor> monitor_;
  std::unique_ptr<CheckedNic> checked_mem_nic_;
  std::unique_ptr<CheckedNic> checked_gpu_nic_;
  std::unique_ptr<runtime::Strand> dir_strand_;
  std::unique_ptr<runtime::Strand> fault_strand_;
  std::vector<bool> fired_;  // by fault index
  std::unique_ptr<runtime::Strand> boot_strand_;
  std::unique_ptr<directory::DirectoryServer> directory_;
  std::unique_ptr<device::CxlSsdDevice> device_;
  std::unique_ptr<agent::Agent> agent_;
  std::unique_ptr<client::Handler> scheduler_handler_;
  std::unique_ptr<client::Handler> worker_handler_;
  std::unique_ptr<client::SchedulerConnector> scheduler_;
  std::unique_ptr<client::WorkerConnector> worker_;
  std::unique_ptr<RcxlEngineKv> kv_;
  std::unique_ptr<EngineModel> engine_;
  std::vector<std::string> boots_;
  std::string restart_failure_;
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
  // Each pattern must match a later boot than the previous one did.
  std::size_t at = 0;
  for (const auto& pattern : expect.boots) {
    while (at < run.boots_seen.size() && !std::regex_match(run.boots_seen[at], pattern.re)) ++at;
    if (at == run.boots_seen.size()) {
      std::string seen;
      for (const auto& b : run.boots_seen) seen += (seen.empty() ? "" : ", ") + b;
      failures.push_back("no boot matching '" + pattern.text + "' in order; boots seen: " + seen);
      break;
    }
    ++at;
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
