// The simulated world: one event loop, one seed, a network, nodes. A run is a
// seed (after TigerBeetle's VOPR): same scenario + seed => same trace hash.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <set>
#include <string>
#include <string_view>

#include "backends/sim/event_loop.h"
#include "backends/sim/sim_file_system.h"
#include "backends/sim/trace.h"
#include "core/runtime/runtime.h"
#include "core/runtime/status.h"

namespace rcxl::sim {

class SimNetwork;
class SimStrand;
class SimNode;

class SimWorld {
 public:
  explicit SimWorld(std::uint64_t seed);
  ~SimWorld();
  SimWorld(const SimWorld&) = delete;
  SimWorld& operator=(const SimWorld&) = delete;

  std::uint64_t seed() const { return seed_; }
  EventLoop& loop() { return loop_; }
  Trace& trace() { return trace_; }
  SimNetwork& network() { return *network_; }
  // A node (a machine): its own transport address space and random streams.
  SimNode& add_node(const std::string& name);
  SimNode* node(const std::string& name);
  // A random stream of the world itself (fault schedules, workloads).
  std::unique_ptr<runtime::RandomSource> random(std::string_view stream) const;

  // Runs until `done()`; an idle loop before that is a deadlock (kInternal,
  // naming the live strands), passing `limit` a kTimeout.
  Status run_until(const std::function<bool()>& done,
                   runtime::Instant limit = runtime::Instant::max());
  void run_for(runtime::Duration d) { loop_.run_for(d); }

  // Log lines at or above this level go to stderr, stamped with virtual time.
  void set_log_level(runtime::LogLevel level) { log_level_ = level; }
  runtime::LogLevel log_level() const { return log_level_; }
  // Prints a node's log line. The same line again at once (an outage's
  // retries) is counted instead: the line once more, with how many, comes
  // before the next different line, or when the world ends.
  void print_log(runtime::LogLevel level, std::string_view node, std::string_view component,
                 std::string_view message);

  // Bookkeeping of SimStrand.
  SimStrand* current_strand() const { return current_; }
  void set_current_strand(SimStrand* s) { current_ = s; }
  void strand_created(SimStrand* s) { strands_.insert(s); }
  void strand_destroyed(SimStrand* s) { strands_.erase(s); }
  std::string describe_strands() const;

 private:
  std::uint64_t seed_;
  EventLoop loop_;
  Trace trace_;
  std::unique_ptr<SimNetwork> network_;
  std::map<std::string, std::unique_ptr<SimNode>> nodes_;
  std::set<SimStrand*> strands_;  // pointer order is only used for membership
  SimStrand* current_ = nullptr;
  runtime::LogLevel log_level_ = runtime::LogLevel::kWarn;
  void print_log_repeats();
  std::string last_log_line_;  // level, node, component and message, without the time
  std::uint64_t log_repeats_ = 0;
  runtime::Instant last_repeat_at_{};
};

// One simulated machine, seen by core as its Runtime.
class SimNode final : public runtime::Runtime, private runtime::LogSink {
 public:
  SimNode(SimWorld& world, std::string name);
  ~SimNode() override;

  const std::string& name() const { return name_; }
  SimWorld& world() { return world_; }
  runtime::Clock& clock() override { return world_.loop(); }
  std::unique_ptr<runtime::Strand> make_strand(std::string name) override;
  runtime::Transport& transport() override { return *transport_; }
  std::unique_ptr<runtime::RandomSource> random(std::string_view stream) override;
  runtime::LogSink& log_sink() override { return *this; }
  runtime::FileSystem& file_system() override { return files_; }
  SimFileSystem& files() { return files_; }

 private:
  void log(runtime::LogLevel level, std::string_view component, std::string_view message) override;
  bool enabled(runtime::LogLevel level) const override { return level >= world_.log_level(); }

  SimWorld& world_;
  std::string name_;
  std::unique_ptr<runtime::Transport> transport_;
  SimFileSystem files_;
  std::map<std::string, int> random_uses_;  // forks per stream name, in fork order
};

}  // namespace rcxl::sim
