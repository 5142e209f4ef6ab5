#include "apps/rcxl-kv/bench.h"

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <ostream>
#include <thread>

#include "apps/rcxl-kv/command_status.h"

namespace rcxl::kv {
namespace {

using Clock = std::chrono::steady_clock;

// Bytes of a generated key: splitmix64 over (seed, key), so any process can check them.
std::vector<std::byte> pattern(std::uint64_t seed, const std::string& key, std::uint64_t size) {
  std::uint64_t x = seed * 0x9E3779B97F4A7C15ull;
  for (unsigned char c : key) x = (x ^ c) * 0x100000001B3ull;  // FNV-1a step
  std::vector<std::byte> out(size);
  for (std::uint64_t at = 0; at < size; at += 8) {
    std::uint64_t z = (x += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    z ^= z >> 31;
    std::memcpy(out.data() + at, &z, std::min<std::uint64_t>(8, size - at));
  }
  return out;
}

std::string key_of(std::uint64_t seed, int round, std::uint64_t i) {
  return "bench/" + std::to_string(seed) + "/r" + std::to_string(round) + "/" + std::to_string(i);
}

double mib(std::uint64_t bytes) {
  return static_cast<double>(bytes) / (1 << 20);
}
double seconds_since(Clock::time_point start) {
  return std::chrono::duration<double>(Clock::now() - start).count();
}
std::string rate(std::uint64_t bytes, double s) {
  char text[64];
  std::snprintf(text, sizeof text, "%.1f MiB in %.2f s = %.2f MiB/s", mib(bytes), s,
                s > 0 ? mib(bytes) / s : 0.0);
  return text;
}

struct Phase {
  std::uint64_t bytes = 0;
  std::uint64_t hits = 0;
  std::uint64_t misses = 0;
  std::uint64_t mismatches = 0;
  std::uint64_t failures = 0;
  std::uint64_t retried_batches = 0;  // stored again after a failed WRITE
  std::uint64_t present_before = 0;   // already_present at a batch's first attempt
  double seconds = 0;                 // in the store or load calls only
};

// Stores keys [0, n) of `round`; failed items are retried (a boot change makes
// the owner give its regions back and allocate anew).
Result<Phase> store_round(KvClient& writer, std::uint64_t n, int round, std::uint64_t chunk,
                          const BenchOptions& o) {
  Phase p;
  for (std::uint64_t first = 0; first < n; first += o.batch) {
    std::vector<std::uint64_t> todo;
    for (std::uint64_t i = first; i < std::min<std::uint64_t>(n, first + o.batch); ++i) {
      todo.push_back(i);
    }
    for (int attempt = 1; !todo.empty(); ++attempt) {
      std::vector<client::StoreItem> items;
      for (auto i : todo) {
        const std::string key = key_of(o.seed, round, i);
        items.push_back({key, pattern(o.seed, key, chunk)});
      }
      // Timed: the call, not generating its bytes nor the pause before a retry.
      const auto call = Clock::now();
      auto r = writer.store(std::move(items));
      p.seconds += seconds_since(call);
      if (!r.ok()) return r.status();
      // On a retry a key may be present from the attempt before; on the first, not.
      if (attempt == 1) p.present_before += r->already_present;
      const std::uint64_t done = r->stored + r->already_present;
      if (r->failed == 0) {
        p.bytes += done * chunk;
        p.hits += done;
        break;
      }
      if (attempt >= o.store_attempts) {
        p.failures += r->failed;
        p.bytes += done * chunk;
        break;
      }
      // Which items failed is not reported per item: store the whole batch again
      // (a key already stored is already_present, first writer wins).
      ++p.retried_batches;
      std::this_thread::sleep_for(std::chrono::milliseconds(100));
    }
  }
  return p;
}

// `engine_hints`: announce each load first (read_hint + read_promote) as an
// engine would; without, the Handler hints each load as its READs start (R3.7).
Result<Phase> load_round(KvClient& reader, std::uint64_t n, int round, std::uint64_t chunk,
                         const BenchOptions& o, bool engine_hints = true) {
  Phase p;
  for (std::uint64_t first = 0; first < n; first += o.batch) {
    std::vector<std::string> keys;
    for (std::uint64_t i = first; i < std::min<std::uint64_t>(n, first + o.batch); ++i) {
      keys.push_back(key_of(o.seed, round, i));
    }
    const std::string request =
        engine_hints ? "bench-r" + std::to_string(round) + "-" + std::to_string(first) : "";
    const auto call = Clock::now();  // timed: the call, not checking its bytes
    auto r = reader.load(keys, request);
    p.seconds += seconds_since(call);
    if (!r.ok()) return r.status();
    for (std::size_t k = 0; k < r->values.size(); ++k) {
      p.bytes += r->values[k].size();
      if (r->values[k] == pattern(o.seed, keys[k], chunk)) {
        ++p.hits;
      } else {
        ++p.mismatches;
      }
    }
    p.misses += keys.size() - r->values.size();
  }
  return p;
}

void print_counts(std::ostream& out, const char* who, KvClient& c) {
  const KvCounts k = c.counts();
  out << "rcxl-kv counts " << who << ": stores=" << k.handler.stores << " loads=" << k.handler.loads
      << " writes=" << k.handler.writes_posted << " reads=" << k.handler.reads_posted
      << " boot_misses=" << k.handler.boot_misses
      << " oversized_locations=" << k.handler.oversized_locations
      << " remote_access_errors=" << k.handler.remote_access_errors
      << " regions_allocated=" << k.handler.regions_allocated
      << " pages_reclaimed=" << k.handler.pages_reclaimed
      << " lease_outlasted=" << k.handler.lease_outlasted << " boot_changes=" << k.boot_changes
      << " fresh_maps=" << k.fresh_maps << " hints_queued=" << k.hints_queued
      << " hints_dropped=" << k.hints_dropped << " hint_messages=" << k.hint_messages << " ("
      << k.hint_messages_by_action << ")" << std::endl;
}

}  // namespace

Result<BenchTotals> run_bench(KvClient& writer, KvClient& reader, std::uint64_t chunk,
                              const BenchOptions& o, std::ostream& out) {
  const std::uint64_t n = std::max<std::uint64_t>(1, (o.mib << 20) / chunk);
  BenchTotals t;
  const int rounds = o.between_rounds.empty() ? 1 : 2;
  std::uint64_t boot_changes_before = 0;
  for (int round = 1; round <= rounds; ++round) {
    if (round == 2) {
      boot_changes_before = reader.counts().boot_changes;
      out << "rcxl-kv bench: running between rounds: " << o.between_rounds << std::endl;
      if (int rc = std::system(o.between_rounds.c_str()); rc != 0) {
        return Error(ErrorCode::kIoError,
                     "--between-rounds command " + describe_command_status(rc) +
                         "; run it by hand to see why (round 2 needs it to succeed)");
      }
      std::this_thread::sleep_for(std::chrono::duration<double>(o.settle_s));
      // The old keys, read through the reader's cached mappings (old rkeys).
      // No early hint: its stale_epoch answer could tell the boot before the READ.
      auto old = load_round(reader, n, 1, chunk, o, /*engine_hints=*/false);
      if (!old.ok()) return old.status();
      t.misses_after_reset = old->misses;
      if (o.expect_reset) {
        t.stale_hits += old->hits + old->mismatches;
      } else {
        t.mismatches += old->mismatches;  // no reset: the old keys keep their bytes
      }
      out << "rcxl-kv bench round 1 keys after the command: hits " << old->hits << " misses "
          << old->misses << " mismatches " << old->mismatches << std::endl;
      print_counts(out, "reader", reader);
    }
    auto stored = store_round(writer, n, round, chunk, o);
    if (!stored.ok()) return stored.status();
    const double store_s = stored->seconds;
    auto loaded = load_round(reader, n, round, chunk, o);
    if (!loaded.ok()) return loaded.status();
    const double load_s = loaded->seconds;
    t.keys_stored += stored->hits - std::min(stored->hits, stored->present_before);
    t.keys_present_before += stored->present_before;
    t.store_failures += stored->failures;
    t.hits += loaded->hits;
    t.misses += loaded->misses;
    t.mismatches += loaded->mismatches;
    out << "rcxl-kv bench round " << round << ": " << n << " keys of " << chunk << " bytes; stored "
        << rate(stored->bytes, store_s) << " (failed " << stored->failures
        << ", batches stored again " << stored->retried_batches << "); loaded "
        << rate(loaded->bytes, load_s) << "; hits " << loaded->hits << " misses " << loaded->misses
        << " mismatches " << loaded->mismatches << std::endl;
  }
  if (rounds == 2) {
    // The directory dropped the old boot's locations: still misses, no stale bytes.
    auto old = load_round(reader, n, 1, chunk, o);
    if (!old.ok()) return old.status();
    if (o.expect_reset) {
      t.stale_hits += old->hits + old->mismatches;
    } else {
      t.mismatches += old->mismatches;
    }
    out << "rcxl-kv bench round 1 keys at the end: hits " << old->hits << " misses " << old->misses
        << " mismatches " << old->mismatches << std::endl;
  }
  // Misses alone prove no reset (a directory restart forgets keys too): the
  // reader must have heard of a new boot by the end (its first READs after the
  // command may fail on the old rkey before any reply tells it).
  if (rounds == 2 && o.expect_reset) {
    t.reset_not_seen = reader.counts().boot_changes == boot_changes_before;
  }
  if (t.keys_present_before > 0) {
    out << "rcxl-kv bench: " << t.keys_present_before
        << " keys were in the directory before this run stored them (an earlier bench with "
           "--seed "
        << o.seed
        << "?): their WRITEs were given back and the loads checked older bytes; give another "
           "--seed"
        << std::endl;
  }
  if (t.reset_not_seen) {
    out << "rcxl-kv bench: --expect-reset, but the reader saw no boot change across the command: "
           "its misses prove no reset (was the memory node reset?)"
        << std::endl;
  }
  print_counts(out, "writer", writer);
  print_counts(out, "reader", reader);
  out << "rcxl-kv bench totals: keys_stored=" << t.keys_stored << " hits=" << t.hits
      << " misses=" << t.misses << " mismatches=" << t.mismatches
      << " store_failures=" << t.store_failures << " misses_after_reset=" << t.misses_after_reset
      << " stale_hits=" << t.stale_hits << " keys_present_before=" << t.keys_present_before
      << " result=" << (t.ok() && t.misses == 0 ? "ok" : "FAILED") << std::endl;
  return t;
}

}  // namespace rcxl::kv
