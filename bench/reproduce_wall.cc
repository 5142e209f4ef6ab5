// Wall time of the main job (issue #6: `rcxl-sim reproduce` <= 20 s on the
// 2-core machine): one seed_serving run on the CXL-SSD profile against the same
// run on all-DRAM (the baseline of this run), the CXL-SSD with eager write-back
// (device.idle_write_back), and optionally the whole
// reproduce. Prints wall and CPU seconds and simulated / wall time. A timed
// main, not Google Benchmark: one run takes seconds and is deterministic.
#include <CLI/CLI.hpp>
#include <chrono>
#include <cstdio>
#include <ctime>
#include <string>

#include "scenarios/embedded/embedded.h"
#include "scenarios/reproduce.h"
#include "scenarios/scenario.h"
#include "scenarios/serving_rig.h"

namespace {

using rcxl::scenarios::Profile;
using rcxl::scenarios::Scenario;

struct Timed {
  double wall_s = 0;
  double cpu_s = 0;  // process CPU: on a loaded shared machine the steadier number
};

template <typename Fn>
Timed timed(Fn&& fn) {
  const auto wall0 = std::chrono::steady_clock::now();
  const std::clock_t cpu0 = std::clock();
  fn();
  Timed t;
  t.wall_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - wall0).count();
  t.cpu_s = static_cast<double>(std::clock() - cpu0) / CLOCKS_PER_SEC;
  return t;
}

struct Row {
  std::string name;
  Timed time;
  double virtual_s = 0;
  std::string hash;
};

// `eager`: the profile's device writes dirty pages back in idle channel time.
bool run_one(const Scenario& scenario, const std::string& profile_name, Row& row,
             bool eager = false) {
  auto profile = rcxl::scenarios::load_profile("", profile_name);
  if (!profile.ok()) {
    std::fprintf(stderr, "reproduce_wall: %s\n", profile.status().message().c_str());
    return false;
  }
  if (eager) profile->device.device.idle_write_back = true;
  rcxl::scenarios::RunResult result;
  row.name = eager ? "  +idle_wb" : profile_name;
  row.time = timed([&] { result = rcxl::scenarios::run_scenario(scenario, *profile); });
  row.virtual_s = result.virtual_seconds;
  row.hash = result.trace_hash;
  return result.status.ok();
}

void print_row(const Row& r, double baseline_wall) {
  std::printf("%-16s %8.2f %8.2f %10.1f %12.1fx %10.2fx  %.16s\n", r.name.c_str(), r.time.wall_s,
              r.time.cpu_s, r.virtual_s, r.virtual_s / r.time.wall_s, r.time.wall_s / baseline_wall,
              r.hash.c_str());
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"wall time of a seed_serving run (CXL-SSD vs all-DRAM) and of rcxl-sim reproduce"};
  std::uint64_t seed = 1;
  bool whole = false;
  int pairs = 5;
  int threads = 2;
  app.add_option("--seed", seed, "seed of the single runs");
  app.add_flag("--reproduce", whole, "also time the whole reproduce (~20-50 s)");
  app.add_option("--pairs", pairs, "pairs of the reproduce")->check(CLI::Range(1, 50));
  app.add_option("--threads", threads, "threads of the reproduce")->check(CLI::Range(1, 64));
  CLI11_PARSE(app, argc, argv);

  auto text = rcxl::scenarios::embedded_file("replays/seed_serving.json");
  if (!text) {
    std::fprintf(stderr, "reproduce_wall: seed_serving.json is not embedded\n");
    return 2;
  }
  auto scenario = rcxl::scenarios::parse_scenario(nlohmann::json::parse(*text), "seed_serving");
  if (!scenario.ok()) {
    std::fprintf(stderr, "reproduce_wall: %s\n", scenario.status().message().c_str());
    return 2;
  }
  scenario->seed = seed;

  Row dram;
  Row cxl;
  Row eager;
  if (!run_one(*scenario, "all_dram", dram) || !run_one(*scenario, scenario->profile, cxl) ||
      !run_one(*scenario, scenario->profile, eager, true)) {
    std::fprintf(stderr, "reproduce_wall: a run failed\n");
    return 1;
  }
  std::printf("seed_serving seed %llu (48 conversations x 6 turns)\n",
              static_cast<unsigned long long>(seed));
  std::printf("%-16s %8s %8s %10s %13s %11s  %s\n", "profile", "wall s", "cpu s", "virtual s",
              "sim/wall", "vs dram", "trace hash");
  print_row(dram, dram.time.wall_s);
  print_row(cxl, dram.time.wall_s);
  print_row(eager, dram.time.wall_s);

  if (whole) {
    rcxl::scenarios::ReproduceOptions options;
    options.pairs = pairs;
    options.threads = threads;
    options.out_dir = "/tmp/reproduce_wall";
    nlohmann::json runs;
    const Timed t = timed([&] {
      auto report = rcxl::scenarios::reproduce(options);
      if (report.ok()) runs = report->json["runs"];
    });
    if (runs.is_null()) {
      std::fprintf(stderr, "reproduce_wall: reproduce failed\n");
      return 1;
    }
    // Its virtual time: each serving run it made simulates about what the runs above did.
    int dram_runs = 0, cxl_runs = 0;
    for (const auto& [name, r] : runs.items()) {
      (name == "all_dram" ? dram_runs : cxl_runs) += static_cast<int>(r["mean_load_ms"].size());
    }
    const double virtual_s = cxl_runs * cxl.virtual_s + dram_runs * dram.virtual_s;
    std::printf(
        "reproduce (%d pairs, %d threads, %d CXL-SSD + %d all-DRAM runs): %.2f s wall, %.2f s "
        "cpu, ~%.0f s virtual, sim/wall ~%.0fx, %.2fx the single CXL-SSD run\n",
        pairs, threads, cxl_runs, dram_runs, t.wall_s, t.cpu_s, virtual_s, virtual_s / t.wall_s,
        t.wall_s / cxl.time.wall_s);
  }
  return 0;
}
