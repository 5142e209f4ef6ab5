// PAPER P4's store experiment through the whole stack (client write_hint ->
// agent -> extension -> device -> RNIC): the shipped replay and its cases.
#include <gtest/gtest.h>

#include "scenarios/embedded/embedded.h"
#include "scenarios/run_counters.h"
#include "scenarios/serving_rig.h"
#include "scenarios/store_experiment.h"
#include "scenarios/sweep.h"

namespace rcxl::scenarios {
namespace {

Scenario shipped() {
  auto sc = store_experiment();
  EXPECT_TRUE(sc.ok()) << sc.status().ToString();
  return *sc;
}

// The built-in profile a scenario names (every case here uses a shipped one).
Profile profile_of(const Scenario& sc) {
  auto profile = load_profile("", sc.profile);
  EXPECT_TRUE(profile.ok()) << profile.status().ToString();
  return profile.ok() ? *profile : Profile{};
}

double counter(const RunResult& r, const std::string& path) {
  return counter_value(r.counters, path).value_or(-1);
}

constexpr std::uint64_t kChunk = 32ull << 20;  // cxl_ssd_default: 128 KiB x 256 tokens

// Prepared: every page of every store was named by a write hint and filled
// from no flash; unprepared (an agent without the extension: no fresh trim,
// no write hints): every page is filled from flash first, and that bounds it.
TEST(StoreWorkload, P4_WriteHintsPrepareEveryPageAndUnpreparedPagesAreFilledFromFlash) {
  const Scenario prepared_sc = shipped();
  const Profile profile = profile_of(prepared_sc);
  const RunResult prepared = run_scenario(prepared_sc, profile);
  ASSERT_TRUE(prepared.status.ok()) << prepared.status.ToString();
  for (const auto& v : prepared.invariants.violations) ADD_FAILURE() << v;
  EXPECT_EQ(prepared.store.stores, 64u);
  EXPECT_EQ(prepared.store.bytes, 64 * kChunk);
  ASSERT_EQ(prepared.store.samples.size(), 64u);
  EXPECT_EQ(counter(prepared, "agent.write_waits"), 64);
  EXPECT_EQ(counter(prepared, "device.hinted_bytes_prepared"), double(64 * kChunk));
  EXPECT_EQ(counter(prepared, "device.write_allocate_fills"), 0);
  EXPECT_EQ(counter(prepared, "worker.writes_posted"), 64);
  // No faster than the wire, and the samples' times ascend to the run's length.
  EXPECT_GT(prepared.store.gbps, 0);
  EXPECT_LE(prepared.store.gbps, profile.device.nic.bytes_per_second / 1e9);
  for (std::size_t i = 1; i < prepared.store.samples.size(); ++i) {
    EXPECT_GE(prepared.store.samples[i].t_ms, prepared.store.samples[i - 1].t_ms);
  }
  EXPECT_NEAR(prepared.store.samples.back().t_ms, prepared.store.seconds * 1e3, 1e-6);

  // reproduce's two cases: the same numbers, and the unprepared one is the
  // same stores without the extension.
  const StoreCase as_reproduced = run_store_case(prepared_sc, profile, true);
  EXPECT_EQ(as_reproduced.failure, "");
  EXPECT_EQ(as_reproduced.trace_hash, prepared.trace_hash);
  const StoreCase unprepared = run_store_case(prepared_sc, profile, false);
  EXPECT_EQ(unprepared.failure, "");
  EXPECT_EQ(unprepared.store.bytes, 64 * kChunk);
  ASSERT_EQ(unprepared.store.samples.size(), 64u);
  Scenario without = prepared_sc;
  without.extension = "none";
  without.client.write_hints = false;
  without.expect = {};
  const RunResult r = run_scenario(without, profile);
  EXPECT_EQ(r.trace_hash, unprepared.trace_hash);
  EXPECT_EQ(counter(r, "device.write_allocate_fills"), double(64 * kChunk / 4096));
  EXPECT_EQ(counter(r, "agent.write_waits"), 0);
  EXPECT_EQ(counter(r, "device.hinted_bytes_prepared"), 0);
  // Page fills from flash (tR + a channel transfer each, write_allocate_depth
  // of them at a time) are far slower than the wire.
  EXPECT_LT(unprepared.store.gbps * 4, prepared.store.gbps)
      << unprepared.store.gbps << " vs " << prepared.store.gbps;
}

// A fresh region is trimmed (SPEC R2: mapped with fresh): without write hints
// its pages need no flash read either, so only an agent without the extension
// shows P4's unprepared case. The shipped expect block still tells a run
// without write hints from one with them (review, session 30).
TEST(StoreWorkload, P4_AFreshRegionsPagesNeedNoFlashReadEvenWithoutWriteHints) {
  Scenario sc = shipped();
  sc.client.write_hints = false;
  const Profile profile = profile_of(sc);
  const RunResult r = run_scenario(sc, profile);
  ASSERT_TRUE(r.status.ok()) << r.status.ToString();
  EXPECT_EQ(counter(r, "device.write_allocate_fills"), 0);
  EXPECT_EQ(counter(r, "device.hinted_bytes_prepared"), 0);
  EXPECT_EQ(counter(r, "agent.write_waits"), 0);
  EXPECT_EQ(r.invariants.violations,
            std::vector<std::string>{"expect: counter agent.write_waits = 0, wanted >= 64"});
}

// A store a reset fails moved no bytes into the pool: it counts as failed,
// its chunks not in the bandwidth, and a P4 case with one says why.
TEST(StoreWorkload, R8_FailedStoresAreCountedAndTheirBytesAreNot) {
  Scenario sc = shipped();
  sc.workload.stores = 16;
  sc.expect = {};
  Fault reset;
  reset.kind = Fault::Kind::kReset;
  reset.during_store = 8;
  reset.after = std::chrono::milliseconds(1);  // in its WRITEs (2.9 ms for 32 MiB)
  sc.faults = {reset};
  sc.agent.generation_poll = std::chrono::milliseconds(1);  // as reset_during_store
  const Profile profile = profile_of(sc);
  const RunResult r = run_scenario(sc, profile);
  ASSERT_TRUE(r.status.ok()) << r.status.ToString();
  ASSERT_EQ(r.faults_fired, std::vector<bool>{true});
  EXPECT_EQ(r.store.stores, 16u);
  EXPECT_GT(r.store.failed_stores, 0u);
  EXPECT_EQ(double(r.store.failed_stores), counter(r, "kv.failed_stores"));
  EXPECT_EQ(r.store.bytes, (16 - r.store.failed_stores) * kChunk);
  const StoreCase c = run_store_case(sc, profile, true);
  EXPECT_EQ(c.failure,
            "16 of 16 stores ended, " + std::to_string(r.store.failed_stores) + " of them failed");
}

// A store workload writes new keys only: chunks past what the pools hold
// could only fail, so the run is refused before it starts, naming the fix
// (review, session 30: 1048576 stores into a full pool ran 271 s and said ok).
TEST(StoreWorkload, R8_StoresThePoolsCannotHoldAreRefusedBeforeTheRun) {
  Scenario sc = shipped();
  sc.pool_bytes = 32 * kChunk;  // one region
  sc.workload.stores = 33;
  const Profile profile = profile_of(sc);
  const RunResult r = run_scenario(sc, profile);
  EXPECT_EQ(r.status.code(), ErrorCode::kBadRequest);
  EXPECT_NE(r.status.message().find("/workload: 33 stores x 1 chunk(s) on each of 1 GPU node(s) "
                                    "need 2 regions of 1073741824 bytes"),
            std::string::npos)
      << r.status.ToString();
  EXPECT_NE(r.status.message().find("lower stores or chunks_per_store, or raise pool_bytes"),
            std::string::npos);
  auto refused = load_scenario_profile("", sc, "s.json");
  ASSERT_FALSE(refused.ok());
  EXPECT_EQ(refused.status().message().rfind("s.json: /workload: 33 stores", 0), 0u)
      << refused.status().message();
  // Two GPU nodes need a set of regions each.
  sc.workload.stores = 32;
  EXPECT_TRUE(load_scenario_profile("", sc, "s.json").ok());
  sc.topology.gpu_nodes = 2;
  EXPECT_FALSE(load_scenario_profile("", sc, "s.json").ok());
  sc.topology.memory_nodes = 2;
  EXPECT_TRUE(load_scenario_profile("", sc, "s.json").ok());
}

// Each GPU node stores its own keys: two engines make twice the stores into
// one memory node, and share its RNIC.
TEST(StoreWorkload, TwoEnginesStoreTheirOwnChunks) {
  Scenario sc = shipped();
  sc.topology.gpu_nodes = 2;
  sc.workload.stores = 8;
  sc.expect = {};
  const Profile profile = profile_of(sc);
  const RunResult r = run_scenario(sc, profile);
  ASSERT_TRUE(r.status.ok()) << r.status.ToString();
  for (const auto& v : r.invariants.violations) ADD_FAILURE() << v;
  EXPECT_EQ(r.store.stores, 16u);
  EXPECT_EQ(r.store.samples.size(), 16u);
  EXPECT_EQ(counter(r, "worker.stores"), 16);
  EXPECT_EQ(counter(r, "kv.failed_stores"), 0);
  EXPECT_EQ(counter(r, "device.hinted_bytes_prepared"), double(16 * kChunk));
  EXPECT_LE(r.store.gbps, profile.device.nic.bytes_per_second / 1e9);
}

// A sweep compares serving runs; a store workload has no TTFT to compare.
TEST(StoreWorkload, R8_ASweepOfAStoreWorkloadIsRefused) {
  SweepOptions options;
  options.scenario = Json::parse(*embedded_file("replays/store_bandwidth.json"));
  options.scenario_path = "store.json";
  options.write_files = false;
  auto r = sweep(options);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), ErrorCode::kBadRequest);
  EXPECT_NE(r.status().message().find("store.json: /workload/kind: a sweep compares serving runs"),
            std::string::npos)
      << r.status().message();
}

}  // namespace
}  // namespace rcxl::scenarios
