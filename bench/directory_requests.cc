// The directory's hot path (docs/performance.md): a load's lookup of a
// prefix of 28 keys (a 28-chunk KV load, the seed workload's longest) and its
// lease's release, and a store's register of 28 new keys, at 1M keys. Each
// touches the LRU, the lease tables and the place index. Baseline in the same
// run: the same finds and inserts in a bare std::map of keys to locations,
// the floor any ordered directory pays.
#include <benchmark/benchmark.h>

#include <cstdio>
#include <map>
#include <string>
#include <vector>

#include "bench/directory_keys.h"
#include "core/directory/directory.h"

namespace {

using rcxl::bench::key_of;
using rcxl::bench::kKeysPerRegion;
using rcxl::bench::location_of;
using rcxl::directory::Directory;
using rcxl::directory::DirectoryOptions;
using rcxl::directory::Location;

constexpr std::uint64_t kKeys = 1 << 20;
constexpr std::uint64_t kPrefix = 28;  // chunks of one load

// kPrefix keys from `first` on (wrapping around the directory's keys).
std::vector<std::string> prefix_at(std::uint64_t first) {
  std::vector<std::string> keys;
  for (std::uint64_t i = 0; i < kPrefix; ++i) keys.push_back(key_of((first + i) % kKeys));
  return keys;
}

// kPrefix keys never registered yet, from `next` on.
std::vector<std::string> keys_from(std::uint64_t next) {
  std::vector<std::string> keys;
  for (std::uint64_t i = 0; i < kPrefix; ++i) keys.push_back(key_of(next + i));
  return keys;
}

// One load: lookup of 28 keys (all hits) and the release of its lease.
void BM_LookupAndRelease(benchmark::State& state) {
  Directory d(DirectoryOptions{.max_keys = kKeys});
  for (std::uint64_t i = 0; i < kKeys; ++i) (void)d.register_key(key_of(i), location_of(i));
  std::uint64_t first = 0;
  for (auto _ : state) {
    state.PauseTiming();
    const auto keys = prefix_at(first);
    first += 7919;  // a prime stride: prefixes all over the key space
    state.ResumeTiming();
    auto found = d.lookup(keys, rcxl::runtime::Instant(0));
    if (found.locations.size() != kPrefix) state.SkipWithError("a lookup missed");
    (void)d.release(found.lease.id);
  }
  state.SetItemsProcessed(state.iterations() * kPrefix);
}
BENCHMARK(BM_LookupAndRelease)->Unit(benchmark::kMicrosecond);

// The floor: 28 finds in a bare map, each copying the location out.
void BM_LookupBaseline(benchmark::State& state) {
  std::map<std::string, Location> all;
  for (std::uint64_t i = 0; i < kKeys; ++i) all.emplace(key_of(i), location_of(i));
  std::uint64_t first = 0;
  for (auto _ : state) {
    state.PauseTiming();
    const auto keys = prefix_at(first);
    first += 7919;
    state.ResumeTiming();
    std::vector<Location> out;
    for (const auto& k : keys) out.push_back(all.find(k)->second);
    benchmark::DoNotOptimize(out);
  }
  state.SetItemsProcessed(state.iterations() * kPrefix);
}
BENCHMARK(BM_LookupBaseline)->Unit(benchmark::kMicrosecond);

// The timed loop of the register benchmarks: a store of kPrefix new keys per
// iteration, from `next` on.
void register_stores(benchmark::State& state, Directory& d, std::uint64_t next) {
  for (auto _ : state) {
    state.PauseTiming();
    const auto fresh = keys_from(next);
    state.ResumeTiming();
    for (std::uint64_t i = 0; i < kPrefix; ++i) {
      (void)d.register_key(fresh[i], location_of(next + i));
    }
    next += kPrefix;
  }
  state.SetItemsProcessed(state.iterations() * kPrefix);
}

// One store: 28 new keys registered into a full directory (each evicts the
// least recently used key, whose page is kept for reclaim).
void BM_RegisterIntoAFullDirectory(benchmark::State& state) {
  Directory d(DirectoryOptions{.max_keys = kKeys});
  for (std::uint64_t i = 0; i < kKeys; ++i) (void)d.register_key(key_of(i), location_of(i));
  register_stores(state, d, kKeys);
}
BENCHMARK(BM_RegisterIntoAFullDirectory)->Unit(benchmark::kMicrosecond);

// The floor: 28 inserts into a bare map and 28 erasures of its oldest keys.
void BM_RegisterBaseline(benchmark::State& state) {
  std::map<std::string, Location> all;
  for (std::uint64_t i = 0; i < kKeys; ++i) all.emplace(key_of(i), location_of(i));
  std::uint64_t next = kKeys;
  for (auto _ : state) {
    state.PauseTiming();
    const auto fresh = keys_from(next);
    state.ResumeTiming();
    for (std::uint64_t i = 0; i < kPrefix; ++i) {
      all.emplace(fresh[i], location_of(next + i));
      all.erase(all.begin());  // fixed-width hex keys: the first is the oldest
    }
    next += kPrefix;
  }
  state.SetItemsProcessed(state.iterations() * kPrefix);
}
BENCHMARK(BM_RegisterBaseline)->Unit(benchmark::kMicrosecond);

// A register over capacity while the oldest keys are all leased (readers hold
// them, e.g. one that died with a large lease): state.range(0) leased keys,
// 4096 evictable ones after them. Eviction passes the leased keys by; before
// session 24 it walked them on every register (21 s for 1000 registers past
// 100k leased keys). Compare with range 0 of the same run.
void BM_RegisterPastLeasedKeys(benchmark::State& state) {
  const auto leased = static_cast<std::uint64_t>(state.range(0));
  constexpr std::uint64_t kEvictable = 4096;
  Directory d(
      DirectoryOptions{.max_keys = leased + kEvictable, .lease_ttl = std::chrono::hours(1)});
  for (std::uint64_t i = 0; i < leased; i += kPrefix) {
    std::vector<std::string> keys;
    for (std::uint64_t k = i; k < std::min(i + kPrefix, leased); ++k) {
      (void)d.register_key(key_of(k), location_of(k));
      keys.push_back(key_of(k));
    }
    (void)d.lookup(keys, rcxl::runtime::Instant(0));  // held for the whole run
  }
  for (std::uint64_t i = leased; i < leased + kEvictable; ++i) {
    (void)d.register_key(key_of(i), location_of(i));
  }
  register_stores(state, d, leased + kEvictable);
}
BENCHMARK(BM_RegisterPastLeasedKeys)
    ->Arg(0)
    ->Arg(10000)
    ->Arg(100000)
    ->Unit(benchmark::kMicrosecond);

}  // namespace
