// Simulated CXL-SSD page accesses per wall-clock second (goal: >= 10 M on one
// core), so a serving scenario with GiB of KV costs milliseconds, not minutes.
#include <benchmark/benchmark.h>

#include "devices/cxl_ssd_model/cxl_ssd_device.h"

namespace rcxl::device {
namespace {

constexpr std::uint64_t kPage = 4096;
constexpr std::uint64_t kSegment = 256 * 1024;  // the sim RNIC's stream segment

CxlSsdParams params(std::uint64_t dram_bytes) {
  CxlSsdParams p;
  p.capacity_bytes = 64ull << 30;
  p.dram_cache_bytes = dram_bytes;
  return p;
}

// READs of resident pages (LRU touch per page).
void BM_HitPages(benchmark::State& state) {
  sim::EventLoop loop;
  CxlSsdDevice d(loop, params(1ull << 30));
  const std::uint64_t span = 256ull << 20;
  for (std::uint64_t o = 0; o < span; o += kSegment)
    (void)d.access_ready(o, kSegment, false, Instant{0});
  std::uint64_t at = 0;
  Instant now{1'000'000'000};
  for (auto _ : state) {
    benchmark::DoNotOptimize(d.access_ready(at, kSegment, false, now));
    at = (at + kSegment) % span;
  }
  state.SetItemsProcessed(state.iterations() * (kSegment / kPage));
}
BENCHMARK(BM_HitPages);

// A stream larger than the cache: every page misses, fills and evicts a dirty page.
void BM_MissFillEvictPages(benchmark::State& state) {
  sim::EventLoop loop;
  CxlSsdDevice d(loop, params(64ull << 20));
  std::uint64_t at = 0;
  Instant now{0};
  for (auto _ : state) {
    benchmark::DoNotOptimize(d.access_ready(at, kSegment, true, now));
    d.accessed(at, kSegment, true, now);
    at = (at + kSegment) % (8ull << 30);
    // The device's clock moves too: what it keeps of write-backs still
    // leaving DRAM is dropped once they are done, as in a run.
    loop.run_for(std::chrono::microseconds(25));
    now = loop.now();
  }
  state.SetItemsProcessed(state.iterations() * (kSegment / kPage));
}
BENCHMARK(BM_MissFillEvictPages);

// A write hint preparing 1 GiB, then the WRITE over it: the P4 "prepared" path.
void BM_PrepareAndWriteGiB(benchmark::State& state) {
  for (auto _ : state) {
    sim::EventLoop loop;
    CxlSsdDevice d(loop, params(16ull << 30));
    const PoolRange r{0, 1ull << 30};
    (void)d.prepare_write(1, std::span(&r, 1));
    for (std::uint64_t o = 0; o < r.length; o += kSegment) {
      benchmark::DoNotOptimize(d.access_ready(o, kSegment, true, Instant{0}));
      d.accessed(o, kSegment, true, Instant{0});
    }
  }
  state.SetItemsProcessed(state.iterations() * 3 * ((1ull << 30) / kPage));
}
BENCHMARK(BM_PrepareAndWriteGiB)->Unit(benchmark::kMillisecond);

// A read hint over 1 GiB, prefetched through the queue (one event per half horizon).
void BM_PrefetchGiB(benchmark::State& state) {
  for (auto _ : state) {
    sim::EventLoop loop;
    CxlSsdDevice d(loop, params(16ull << 30));
    const PoolRange r{0, 1ull << 30};
    (void)d.prefetch(1, std::span(&r, 1), true);
    loop.run_until([] { return false; });
    benchmark::DoNotOptimize(d.resident_pages());
  }
  state.SetItemsProcessed(state.iterations() * ((1ull << 30) / kPage));
}
BENCHMARK(BM_PrefetchGiB)->Unit(benchmark::kMillisecond);

}  // namespace
}  // namespace rcxl::device
