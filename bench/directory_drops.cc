// Directory drops (docs/performance.md): drop_region and boot_changed find
// their keys through an index by place (agent, region, read handle, boot)
// instead of walking every key. Baseline in the same run: that walk, over a
// std::map of the same keys and locations (what each drop cost before).
#include <benchmark/benchmark.h>

#include <cstdio>
#include <map>
#include <string>

#include "bench/directory_keys.h"
#include "core/directory/directory.h"

namespace {

using rcxl::bench::key_of;
using rcxl::bench::kKeysPerRegion;
using rcxl::bench::location_of;
using rcxl::directory::Directory;
using rcxl::directory::DirectoryOptions;
using rcxl::directory::Location;

void register_region(Directory& d, std::uint64_t region) {
  for (std::uint64_t i = region * kKeysPerRegion; i < (region + 1) * kKeysPerRegion; ++i) {
    (void)d.register_key(key_of(i), location_of(i));
  }
}

void fill(Directory& d, std::uint64_t keys) {
  for (std::uint64_t r = 0; r < keys / kKeysPerRegion; ++r) register_region(d, r);
}

// One region's keys dropped (and, untimed, registered again) per iteration.
void BM_DropRegionIndexed(benchmark::State& state) {
  const auto keys = static_cast<std::uint64_t>(state.range(0));
  Directory d(DirectoryOptions{.max_keys = keys});
  fill(d, keys);
  std::uint64_t region = 0;
  for (auto _ : state) {
    const std::uint64_t r = region++ % (keys / kKeysPerRegion);
    benchmark::DoNotOptimize(d.drop_region("mem0:7000", r, "rh" + std::to_string(r)));
    state.PauseTiming();
    register_region(d, r);
    state.ResumeTiming();
  }
}
BENCHMARK(BM_DropRegionIndexed)->Arg(1 << 18)->Arg(1 << 20)->Unit(benchmark::kMicrosecond);

// The walk a drop did before: every key's location compared.
void BM_DropRegionScanBaseline(benchmark::State& state) {
  const auto keys = static_cast<std::uint64_t>(state.range(0));
  std::map<std::string, Location> all;
  for (std::uint64_t i = 0; i < keys; ++i) all.emplace(key_of(i), location_of(i));
  std::uint64_t region = 0;
  for (auto _ : state) {
    const std::uint64_t r = region++ % (keys / kKeysPerRegion);
    const std::string handle = "rh" + std::to_string(r);
    std::size_t found = 0;
    for (const auto& [key, l] : all) {
      if (l.agent == "mem0:7000" && l.region == r && l.read_handle == handle) ++found;
    }
    benchmark::DoNotOptimize(found);
  }
}
BENCHMARK(BM_DropRegionScanBaseline)->Arg(1 << 18)->Arg(1 << 20)->Unit(benchmark::kMicrosecond);

// A boot_changed that finds nothing to drop (the common report): the agent's
// places are looked at, not its keys.
void BM_BootChangedNothingToDrop(benchmark::State& state) {
  const auto keys = static_cast<std::uint64_t>(state.range(0));
  Directory d(DirectoryOptions{.max_keys = keys});
  fill(d, keys);
  std::uint64_t n = 0;
  for (auto _ : state) {
    benchmark::DoNotOptimize(d.boot_changed("mem0:7000", "boot-x" + std::to_string(n + 1),
                                            "boot-x" + std::to_string(n)));
    ++n;
  }
}
BENCHMARK(BM_BootChangedNothingToDrop)->Arg(1 << 18)->Arg(1 << 20)->Unit(benchmark::kMicrosecond);

}  // namespace
