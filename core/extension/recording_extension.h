// The built-in `recording` extension (SPEC R2.5): logs every hook call as one
// JSON line and answers as its config says. For tests and operators' smoke tests.
#pragma once

#include <atomic>
#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "core/extension/region_extension.h"
#include "core/runtime/logger.h"

namespace rcxl::ext {

struct RecordingConfig {
  std::vector<std::string> actions = default_hint_actions();
  std::optional<std::string> generation_file;
  std::optional<std::string> log;
  std::set<std::uint64_t> refuse_regions;
  std::set<std::uint64_t> fail_mapped_regions;
  std::uint64_t retire_refusals = 0;  // per region
  Json write_wait_result = nullptr;
  std::uint64_t write_wait_delay_ms = 0;
  // Request names whose first read_hint fails (extension_failed at the
  // agent); their later ones are taken: a client's split hints under test.
  std::set<std::string> fail_first_read_hint_of;

  // Unknown keys and mistyped values are bad_request.
  static Result<RecordingConfig> FromJson(const Json& config);
};

class RecordingExtension final : public RegionExtension {
 public:
  RecordingExtension(runtime::Runtime& runtime, RecordingConfig config);
  ~RecordingExtension() override;

  std::string name() const override { return "recording"; }
  Status validate_access(const RegionInfo& region) override;
  Status mapped(const RegionInfo& region, bool fresh) override;
  bool retire(const RegionInfo& region) override;
  Status hint(const Hint& hint) override;
  void close() override;
  bool has_memory_generation() const override { return config_.generation_file.has_value(); }
  std::optional<std::string> memory_generation() override;
  Status connection_closed(std::uint64_t conn) override;
  std::vector<std::string> hint_actions() const override { return config_.actions; }
  void write_wait(const WriteWait& wait, WriteWaitDone done) override;

  static ExtensionFactory Factory();

 private:
  void record(const nlohmann::ordered_json& line);

  runtime::Runtime& runtime_;
  runtime::Logger log_;
  RecordingConfig config_;
  // A log it cannot append to (disk full, directory gone) loses lines: said
  // once per streak, and again when it recovers.
  std::atomic<bool> log_failing_{false};
  std::unique_ptr<runtime::Strand> timer_strand_;  // write_wait_delay_ms, never blocking
  std::mutex mu_;
  std::set<std::string> failed_read_hints_;                // of fail_first_read_hint_of, under mu_
  std::map<std::uint64_t, std::uint64_t> retire_refused_;  // region -> refusals so far
};

// [[region, offset, length], …] as in the wire format.
Json ranges_to_json(const std::vector<Range>& ranges);

}  // namespace rcxl::ext
