// PAPER P4's store experiment in virtual time: one engine's worker stores new
// KV chunks back to back, each store starting when the one before it ended
// (the write-behind strand's order), through the same KV layer as serving.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <vector>

#include "core/runtime/runtime.h"
#include "scenarios/engine/engine_kv.h"
#include "scenarios/engine/workload.h"

namespace rcxl::scenarios {

// One store's end: when, and the bytes it stored over the time since the
// previous end (or since the first store started).
struct StoreSample {
  runtime::Instant end{0};
  double gbps = 0;
};

class StoreWorkload {
 public:
  // Engine `engine` names its chunks "e<engine>/store<i>/chunk<j>": unique
  // across engines, so each store writes new keys.
  StoreWorkload(runtime::Runtime& rt, EngineKv& kv, const WorkloadParams& params,
                std::uint64_t chunk_bytes, int engine = 0);
  ~StoreWorkload();

  void start();
  bool done() const { return stores_done_ == static_cast<std::size_t>(params_.stores); }
  std::size_t stores_done() const { return stores_done_; }
  // Stores with a chunk they did not write (a failure; never a chunk another
  // writer stored first here: every key is new).
  std::size_t stores_failed() const { return stores_failed_; }
  std::uint64_t bytes_stored() const { return bytes_; }
  runtime::Instant first_start() const { return first_start_; }
  runtime::Instant last_end() const { return last_end_; }
  const std::vector<StoreSample>& samples() const { return samples_; }

 private:
  void next_store();

  runtime::Runtime& rt_;
  EngineKv& kv_;
  WorkloadParams params_;
  std::uint64_t chunk_bytes_;
  int engine_;
  std::unique_ptr<runtime::Strand> strand_;
  std::size_t stores_done_ = 0;
  std::size_t stores_failed_ = 0;
  std::uint64_t bytes_ = 0;
  runtime::Instant first_start_{0};
  runtime::Instant last_end_{0};
  std::vector<StoreSample> samples_;
};

}  // namespace rcxl::scenarios
