#include "scenarios/batch_runner.h"

#include <algorithm>
#include <atomic>
#include <cstdio>
#include <exception>
#include <mutex>
#include <thread>

namespace rcxl::scenarios {

std::string RunSummary::failure() const {
  if (!status.ok()) return status.ToString();
  return violations.empty() ? "" : violations.front();
}

RunSummary summarize(const RunResult& r) {
  RunSummary s;
  s.status = r.status;
  s.ttft_ms = mean_reuse_ttft_ms(r.records);
  s.load_ms = mean_load_ms(r.records);
  for (const auto& rec : r.records) {
    if (rec.reuse_turn() && rec.answered()) s.ttfts.push_back(runtime::to_millis(rec.ttft()));
    if (rec.loaded() && rec.load_finished()) s.loads.push_back(runtime::to_millis(rec.load_time()));
  }
  s.violations = r.invariants.violations;
  // A run whose fault never came tests nothing its file says (as `rcxl-sim run` fails it).
  for (std::size_t i = 0; r.status.ok() && i < r.faults_fired.size(); ++i) {
    if (!r.faults_fired[i]) {
      s.violations.push_back("FAULT NEVER HAPPENED: /faults/" + std::to_string(i) +
                             " (its time, load or store never came)");
    }
  }
  s.counters = r.counters;
  s.virtual_s = r.virtual_seconds;
  s.wall_s = r.wall_seconds;
  s.trace_hash = r.trace_hash;
  return s;
}

std::string mean_ms_text(const std::vector<double>& over, double mean) {
  if (over.empty()) return "n/a";
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.2f ms", mean);
  return buf;
}

void run_parallel(std::size_t jobs, int threads, const std::function<void(std::size_t)>& run,
                  const std::function<void(std::size_t, std::size_t)>& done) {
  std::atomic<std::size_t> next{0};
  std::mutex done_mu;
  std::size_t finished = 0;
  std::exception_ptr failure;  // the first run that threw; no job starts after it
  auto worker = [&] {
    for (std::size_t j = next++; j < jobs; j = next++) {
      try {
        run(j);
        std::lock_guard<std::mutex> lock(done_mu);
        ++finished;
        if (done) done(j, finished);
      } catch (...) {
        // Escaping a thread it would abort the program without a word.
        std::lock_guard<std::mutex> lock(done_mu);
        if (!failure) failure = std::current_exception();
        next = jobs;
        return;
      }
    }
  };
  std::vector<std::thread> pool;
  const std::size_t n = std::min<std::size_t>(static_cast<std::size_t>(std::max(1, threads)),
                                              std::max<std::size_t>(1, jobs));
  for (std::size_t t = 0; t < n; ++t) pool.emplace_back(worker);
  for (auto& t : pool) t.join();
  if (failure) std::rethrow_exception(failure);
}

}  // namespace rcxl::scenarios
