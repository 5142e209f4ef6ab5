#include "core/agent/boot_tracker.h"

namespace rcxl::agent {

std::string unusable_generation(const std::string& generation) {
  constexpr std::size_t kMaxGeneration = 64;
  if (generation.empty()) return "it is empty";
  if (generation.size() > kMaxGeneration) {
    return "it is " + std::to_string(generation.size()) + " bytes long (at most " +
           std::to_string(kMaxGeneration) + ")";
  }
  for (const char c : generation) {
    if (c < 0x21 || c > 0x7e) return "it holds a byte that is not printable ASCII";
    if (c == ':' || c == '~') return std::string("it holds '") + c + "', which delimits the boot";
  }
  if (generation == "unknown") return "'unknown' is the boot of an unknown period";
  return "";
}

BootTracker::BootTracker(std::string boot_id, bool has_generation, runtime::Duration grace)
    : boot_id_(std::move(boot_id)), has_generation_(has_generation), grace_(grace) {
  update_boot();
}

void BootTracker::restore_unknown_periods(std::uint64_t n) {
  unknown_periods_ = n;
  update_boot();
}

void BootTracker::start(std::string generation) {
  generation_ = std::move(generation);
  update_boot();
}

BootTracker::Change BootTracker::observe(const std::optional<std::string>& generation,
                                         runtime::Instant now) {
  if (!has_generation_) return Change::kNone;
  if (generation) {
    failing_since_.reset();
    if (unknown_) {
      unknown_ = false;
      generation_ = *generation;
      ++sequence_;
      update_boot();
      return Change::kKnownAgain;
    }
    if (*generation == generation_) return Change::kNone;
    generation_ = *generation;
    ++sequence_;
    update_boot();
    return Change::kGeneration;
  }
  if (unknown_) return Change::kNone;
  // SPEC R6.4: within the grace a failed read keeps the old generation.
  if (!failing_since_) failing_since_ = now;
  if (now - *failing_since_ < grace_) return Change::kNone;
  unknown_ = true;
  ++unknown_periods_;
  ++sequence_;
  update_boot();
  return Change::kUnknown;
}

void BootTracker::update_boot() {
  if (!has_generation_) {
    boot_ = boot_id_;
  } else if (unknown_) {
    boot_ = boot_id_ + ":unknown";
  } else {
    boot_ = boot_id_ + ":" + generation_;
    if (unknown_periods_ > 0) boot_ += "~" + std::to_string(unknown_periods_);
  }
}

}  // namespace rcxl::agent
