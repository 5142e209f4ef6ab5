// Many independent simulator runs on a few OS threads (reproduce, sweep). Each
// run owns its SimWorld, so a run's result depends only on its inputs, never
// on the thread count or on which thread ran it.
#pragma once

#include <cstddef>
#include <functional>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "core/runtime/status.h"
#include "scenarios/serving_rig.h"

namespace rcxl::scenarios {

// What reports keep of one run.
struct RunSummary {
  Status status;
  double ttft_ms = 0;         // mean over reuse turns
  double load_ms = 0;         // mean over loads
  std::vector<double> ttfts;  // every reuse turn's TTFT (ms), in request order
  std::vector<double> loads;  // every load's time (ms), in request order
  std::vector<std::string> violations;
  nlohmann::json counters;
  double virtual_s = 0;
  double wall_s = 0;       // for progress lines only: it differs between runs
  std::string trace_hash;  // the run's fingerprint: the same on any thread count

  bool ok() const { return status.ok() && violations.empty(); }
  // The run's status, else its first invariant violation; "" when ok.
  std::string failure() const;
};

RunSummary summarize(const RunResult& r);

// "12.34 ms", or "n/a" when the mean is over no requests (`over` is empty).
std::string mean_ms_text(const std::vector<double>& over, double mean);

// Calls run(i) for every i in [0, jobs) on `threads` threads, jobs taken in
// index order; then done(i, finished_so_far) under a lock (progress lines).
// A run (or done) that throws stops the batch: no job starts after it, and
// the first exception is rethrown here once the running ones finish.
void run_parallel(std::size_t jobs, int threads, const std::function<void(std::size_t)>& run,
                  const std::function<void(std::size_t, std::size_t)>& done);

}  // namespace rcxl::scenarios
