#include "backends/sim/sim_world.h"

#include <algorithm>
#include <cstdio>
#include <vector>

#include "backends/sim/sim_network.h"
#include "backends/sim/sim_strand.h"

namespace rcxl::sim {

SimWorld::SimWorld(std::uint64_t seed)
    : seed_(seed), network_(std::make_unique<SimNetwork>(*this)) {
  trace_.record(0, "seed " + std::to_string(seed));
}

SimWorld::~SimWorld() {
  nodes_.clear();
  network_.reset();
  print_log_repeats();
}

void SimWorld::print_log(runtime::LogLevel level, std::string_view node, std::string_view component,
                         std::string_view message) {
  static constexpr const char* kLevels[] = {"trace", "debug", "info", "warn", "error"};
  std::string line = "[" + std::string(kLevels[static_cast<int>(level)]) + "] ";
  line.append(node).append("/").append(component).append(": ").append(message);
  if (line == last_log_line_) {
    ++log_repeats_;
    last_repeat_at_ = loop_.now();
    return;
  }
  print_log_repeats();
  std::fprintf(stderr, "[%12.6f ms] %s\n", runtime::to_millis(loop_.now()), line.c_str());
  last_log_line_ = std::move(line);
}

void SimWorld::print_log_repeats() {
  if (log_repeats_ == 0) return;
  // The line again, so other output in between (progress) cannot make it ambiguous.
  std::fprintf(stderr, "[%12.6f ms] %s (%llu more time%s since, the last at this time)\n",
               runtime::to_millis(last_repeat_at_), last_log_line_.c_str(),
               static_cast<unsigned long long>(log_repeats_), log_repeats_ == 1 ? "" : "s");
  log_repeats_ = 0;
}

SimNode& SimWorld::add_node(const std::string& name) {
  auto& slot = nodes_[name];
  if (!slot) slot = std::make_unique<SimNode>(*this, name);
  return *slot;
}

SimNode* SimWorld::node(const std::string& name) {
  auto it = nodes_.find(name);
  return it == nodes_.end() ? nullptr : it->second.get();
}

std::unique_ptr<runtime::RandomSource> SimWorld::random(std::string_view stream) const {
  return std::make_unique<runtime::DeterministicRandom>(
      runtime::DeterministicRandom::fork_seed(seed_, stream));
}

std::string SimWorld::describe_strands() const {
  std::vector<std::string> names;
  for (const SimStrand* s : strands_) {
    names.push_back(s->name() + (s->pending_timers() ? " (timers pending)" : ""));
  }
  std::sort(names.begin(), names.end());
  std::string out;
  for (const auto& n : names) out += (out.empty() ? "" : ", ") + n;
  return out.empty() ? "none" : out;
}

Status SimWorld::run_until(const std::function<bool()>& done, runtime::Instant limit) {
  if (loop_.run_until(done, limit)) return {};
  if (loop_.idle()) {
    return Error(
        ErrorCode::kInternal,
        "deadlock at t=" + std::to_string(loop_.now().count()) +
            "ns: no events left and the run is not done; live strands: " + describe_strands());
  }
  char at[64];
  std::snprintf(at, sizeof at, "%.3f s", runtime::to_seconds(loop_.now()));
  return Error(ErrorCode::kTimeout, std::string("virtual time limit reached at ") + at);
}

SimNode::SimNode(SimWorld& world, std::string name)
    : world_(world), name_(std::move(name)), transport_(world.network().make_transport(name_)) {}

SimNode::~SimNode() = default;

std::unique_ptr<runtime::Strand> SimNode::make_strand(std::string name) {
  return std::make_unique<SimStrand>(world_, name_ + "/" + name);
}

std::unique_ptr<runtime::RandomSource> SimNode::random(std::string_view stream) {
  // A second user of a stream name on this node (a restarted agent, another
  // handler) gets a stream of its own, as a process drawing from the OS would:
  // its handles and challenges must not repeat the first one's.
  const int uses = ++random_uses_[std::string(stream)];
  std::string name = name_ + "/" + std::string(stream);
  if (uses > 1) name += "#" + std::to_string(uses);
  return world_.random(name);
}

void SimNode::log(runtime::LogLevel level, std::string_view component, std::string_view message) {
  world_.print_log(level, name_, component, message);
}

}  // namespace rcxl::sim
