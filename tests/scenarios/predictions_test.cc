// PAPER.md, beyond the seed: the profile's predictions on the serving model
// move in the physically right direction when one parameter moves. The seed's
// serving workload, shortened to 8 conversations x 3 turns (a KV working set of
// ~7.6 GiB), so each run takes a fraction of a second.
#include <gtest/gtest.h>

#include <map>
#include <string>

#include "scenarios/sweep.h"

namespace rcxl::scenarios {
namespace {

SweepParam param(const std::string& spec) {
  auto p = parse_sweep_param(spec);
  EXPECT_TRUE(p.ok()) << p.status().ToString();
  return p.ok() ? *p : SweepParam{};
}

// The summaries of one grid, by point and configuration, one per seed.
struct Results {
  std::map<std::pair<std::size_t, std::string>, std::vector<RunSummary>> runs;
  std::size_t size() const { return runs.size(); }
  // Means over the seeds.
  double ttft(std::size_t point, const std::string& config) const {
    return mean(point, config, &RunSummary::ttft_ms);
  }
  double load(std::size_t point, const std::string& config) const {
    return mean(point, config, &RunSummary::load_ms);
  }
  double mean(std::size_t point, const std::string& config, double RunSummary::*field) const {
    const auto& runs_here = runs.at({point, config});
    double sum = 0;
    for (const auto& s : runs_here) sum += s.*field;
    return sum / static_cast<double>(runs_here.size());
  }
};

Results run_grid(std::vector<SweepParam> params, std::vector<std::string> configs,
                 std::optional<int> conversations = 8, int seeds = 1) {
  SweepOptions o;
  o.params = std::move(params);
  o.configs = std::move(configs);
  o.conversations = conversations;
  o.seeds = seeds;
  o.turns = 3;
  o.write_files = false;
  auto r = sweep(o);
  EXPECT_TRUE(r.ok()) << r.status().ToString();
  Results out;
  if (!r.ok()) return out;
  for (const auto& f : r->failures) ADD_FAILURE() << f;
  for (const auto& run : r->runs) out.runs[{run.point, run.config}].push_back(run.summary);
  return out;
}

// More DRAM in front of flash: fewer demand misses without hints, down to the
// all-DRAM result once the working set fits; hints gain where it does not.
TEST(Predictions, R8_MoreDramCacheShrinksTheNoHintGap) {
  auto r = run_grid({param("dram_cache_bytes=2G,4G,8G")}, {"all_dram", "hints", "no_hints"});
  ASSERT_EQ(r.size(), 9u);
  const double dram = r.ttft(0, "all_dram");
  for (std::size_t p = 0; p < 3; ++p) EXPECT_EQ(r.ttft(p, "all_dram"), dram);
  EXPECT_GT(r.ttft(0, "no_hints"), r.ttft(1, "no_hints"));
  EXPECT_GT(r.ttft(1, "no_hints"), r.ttft(2, "no_hints"));
  EXPECT_GT(r.load(0, "no_hints"), r.load(1, "no_hints"));
  EXPECT_EQ(r.ttft(2, "no_hints"), dram);  // 8 GiB holds the working set
  EXPECT_LT(r.ttft(1, "hints"), r.ttft(1, "no_hints"));
  EXPECT_LT(r.load(1, "hints"), r.load(1, "no_hints"));
  EXPECT_GE(r.ttft(1, "hints"), dram);
}

// Slower flash (TLC-class tR) makes loads that miss the DRAM cache slower, and
// never makes hinted ones faster.
TEST(Predictions, R8_SlowerFlashWidensTheGap) {
  auto r = run_grid({param("dram_cache_bytes=4G"), param("flash_read_ns=3000,30000")},
                    {"hints", "no_hints"});
  ASSERT_EQ(r.size(), 4u);
  EXPECT_GT(r.ttft(1, "no_hints"), r.ttft(0, "no_hints"));
  EXPECT_GT(r.load(1, "no_hints"), r.load(0, "no_hints"));
  EXPECT_GE(r.load(1, "hints"), r.load(0, "hints"));
  // The gain from hints grows with tR.
  EXPECT_GT(r.ttft(1, "no_hints") - r.ttft(1, "hints"), r.ttft(0, "no_hints") - r.ttft(0, "hints"));
}

// More conversations in flight: a larger working set against the same cache.
// Two conversations (~1.9 GiB of KV) fit in 4 GiB and lose nothing without
// hints; sixteen (~15 GiB) do not, and their loads miss. (Between those the
// means move with which prompts the conversations drew: 16 loads are few.)
TEST(Predictions, R8_MoreConcurrencyThanTheCacheHoldsSlowsUnhintedLoads) {
  auto r = run_grid({param("dram_cache_bytes=4G"), param("concurrency=2,16")},
                    {"all_dram", "no_hints"}, std::nullopt);
  ASSERT_EQ(r.size(), 4u);
  // Within 0.5%: without hints a store also asks no write wait, which moves
  // its WRITEs (and the loads queued behind them) by a round trip.
  EXPECT_NEAR(r.load(0, "no_hints"), r.load(0, "all_dram"), 0.005 * r.load(0, "all_dram"));
  EXPECT_NEAR(r.ttft(0, "no_hints"), r.ttft(0, "all_dram"), 0.005 * r.ttft(0, "all_dram"));
  EXPECT_GT(r.load(1, "no_hints"), 2 * r.load(1, "all_dram"));
  EXPECT_GT(r.ttft(1, "no_hints"), r.ttft(1, "all_dram"));
}

// Topology: a second memory node splits the regions (and so the READs and
// WRITEs) between two RNIC ports and two devices. Four GPU nodes sharing one
// memory node are held to its port, so the second one speeds their loads and,
// with the memory no longer the bottleneck, four GPU nodes prefilling at once
// cut TTFT below one. One GPU node is held to its own port (the same 100 Gb/s),
// so a second memory node moves its loads by little: on average over seeds,
// as one seed's loads move by a few percent with how its two QPs' READs
// interleave on the GPU's port (taking turns, where one QP serves in order).
TEST(Predictions, R8_ASecondMemoryNodeSpeedsSharedLoadsAndMoreGpuNodesCutTtft) {
  auto r = run_grid({param("gpu_nodes=1,4"), param("memory_nodes=1,2")}, {"all_dram"}, 16, 4);
  ASSERT_EQ(r.size(), 4u);
  // Points in grid order: (gpu 1, mem 1), (1, 2), (4, 1), (4, 2).
  EXPECT_LT(r.load(3, "all_dram"), 0.95 * r.load(2, "all_dram"));
  EXPECT_GT(r.load(2, "all_dram"), r.load(0, "all_dram"));  // four engines share one port
  EXPECT_NEAR(r.load(1, "all_dram"), r.load(0, "all_dram"), 0.05 * r.load(0, "all_dram"));
  EXPECT_LT(r.ttft(3, "all_dram"), r.ttft(1, "all_dram"));
}

}  // namespace
}  // namespace rcxl::scenarios
