// The agent's boot (SPEC R6, PROTOCOL.md "Boot"): `<boot_id>`, `<boot_id>:<gen>`,
// `<boot_id>:unknown`, `<boot_id>:<gen>~<n>`. Pure state: the agent feeds it each
// generation read and acts when it says the boot changed.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#include "core/runtime/clock.h"

namespace rcxl::agent {

// Why `generation` cannot be part of a boot, or empty when it can: 1 to 64
// characters 0x21..0x7e (printable ASCII but the space), neither ':' nor '~' (they delimit the
// boot's parts, so `3~1` then `3` would repeat a boot), and not `unknown`.
std::string unusable_generation(const std::string& generation);

class BootTracker {
 public:
  enum class Change { kNone, kGeneration, kUnknown, kKnownAgain };

  // `has_generation` false: the boot is the boot id forever (no hook).
  BootTracker(std::string boot_id, bool has_generation, runtime::Duration grace);

  // Before start: the unknown periods an earlier process of this node boot saw
  // (the region table file), so the `~n` of the boot continues, never repeats.
  void restore_unknown_periods(std::uint64_t n);
  // The first read, at start; must tell a generation.
  void start(std::string generation);
  // One read's result (nullopt = the extension cannot tell) at `now`.
  Change observe(const std::optional<std::string>& generation, runtime::Instant now);

  const std::string& boot() const { return boot_; }
  bool unknown() const { return unknown_; }
  // Bumped on every boot change: a map compares it before and after.
  std::uint64_t sequence() const { return sequence_; }
  std::uint64_t unknown_periods() const { return unknown_periods_; }

 private:
  void update_boot();

  std::string boot_id_;
  bool has_generation_;
  runtime::Duration grace_;
  std::string generation_;
  bool unknown_ = false;
  std::optional<runtime::Instant> failing_since_;
  std::uint64_t unknown_periods_ = 0;
  std::uint64_t sequence_ = 0;
  std::string boot_;
};

}  // namespace rcxl::agent
