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

double counter(const RunResult& r, const std::string& path) {
  return counter_value(r.counters, path).value_or(-1);
}

constexpr std::uint64_t kChunk = 32ull << 20;  // cxl_ssd_default: 128 KiB x 256 tokens

// Prepared: every page of every store was named by a write hint and filled
// from no flash; unprepared (an agent without the extension: no fresh trim,
// no write hints): every page is filled from flash first, and that bounds it.
TEST(StoreWorkload, P4_WriteHintsPrepareEveryPageAndUnpreparedPagesAreFilledFromFlash) {
  const Scenario prepared_sc = shipped();
  auto profile = load_profile("", prepared_sc.profile);
  ASSERT_TRUE(profile.ok());
  const RunResult prepared = run_scenario(prepared_sc, *profile);
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
  EXPECT_LE(prepared.store.gbps, profile->device.nic.bytes_per_second / 1e9);
  for (std::size_t i = 1; i < prepared.store.samples.size(); ++i) {
    EXPECT_GE(prepared.store.samples[i].t_ms, prepared.store.samples[i - 1].t_ms);
  }
  EXPECT_NEAR(prepared.store.samples.back().t_ms, prepared.store.seconds * 1e3, 1e-6);

  // reproduce's two cases: the same numbers, and the unprepared one is the
  // same stores without the extension.
  const StoreCase as_reproduced = run_store_case(prepared_sc, *profile, true);
  EXPECT_EQ(as_reproduced.failure, "");
  EXPECT_EQ(as_reproduced.trace_hash, prepared.trace_hash);
  const StoreCase unprepared = run_store_case(prepared_sc, *profile, false);
  EXPECT_EQ(unprepared.failure, "");
  EXPECT_EQ(unprepared.store.bytes, 64 * kChunk);
  ASSERT_EQ(unprepared.store.samples.size(), 64u);
  Scenario without = prepared_sc;
  without.extension = "none";
  without.client.write_hints = false;
  without.expect = {};
  const RunResult r = run_scenario(without, *profile);
  EXPECT_EQ(r.trace_hash, unprepared.trace_hash);
  EXPECT_EQ(counter(r, "device.write_allocate_fills"), double(64 * kChunk / 4096));
  EXPECT_EQ(counter(r, "agent.write_waits"), 0);
  EXPECT_EQ(counter(r, "device.hinted_bytes_prepared"), 0);
  // Page fills from flash (tR + a channel transfer each, write_allocate_depth
  // of them at a time) are far slower than the wire.
  EXPECT_LT(unprepared.store.gbps * 4, prepared.store.gbps)
      << unprepared.store.gbps << " vs " << prepared.store.gbps;
}

// A case that did not run whole says why instead of giving a bandwidth.
TEST(StoreWorkload, R8_AStoreCaseThatFailedSaysWhy) {
  Scenario sc = shipped();
  sc.pool_bytes = 32 * kChunk;  // one region: the 33rd store finds no room
  sc.workload.stores = 40;
  sc.expect = {};
  auto profile = load_profile("", sc.profile);
  ASSERT_TRUE(profile.ok());
  const StoreCase c = run_store_case(sc, *profile, false);
  EXPECT_EQ(c.failure, "40 of 40 stores ended, 8 of them failed");
}

// A fresh region is trimmed (SPEC R2: mapped with fresh): without write hints
// its pages need no flash read either, so only an agent without the extension
// shows P4's unprepared case.
TEST(StoreWorkload, P4_AFreshRegionsPagesNeedNoFlashReadEvenWithoutWriteHints) {
  Scenario sc = shipped();
  sc.client.write_hints = false;
  sc.expect = {};
  auto profile = load_profile("", sc.profile);
  ASSERT_TRUE(profile.ok());
  const RunResult r = run_scenario(sc, *profile);
  ASSERT_TRUE(r.status.ok()) << r.status.ToString();
  EXPECT_EQ(counter(r, "device.write_allocate_fills"), 0);
  EXPECT_EQ(counter(r, "device.hinted_bytes_prepared"), 0);
  EXPECT_EQ(counter(r, "agent.write_waits"), 0);
}

// Stores the pool cannot take fail and are counted; the shipped expect
// block (kv.failed_stores <= 0) then fails the run.
TEST(StoreWorkload, R8_StoresPastAFullPoolAreCountedFailedAndFailTheExpectations) {
  Scenario sc = shipped();
  sc.pool_bytes = 32 * kChunk;  // one region
  sc.workload.stores = 40;
  auto profile = load_profile("", sc.profile);
  ASSERT_TRUE(profile.ok());
  const RunResult r = run_scenario(sc, *profile);
  ASSERT_TRUE(r.status.ok()) << r.status.ToString();
  EXPECT_EQ(r.store.stores, 40u);
  EXPECT_EQ(counter(r, "kv.failed_stores"), 8);
  bool named = false;
  for (const auto& v : r.invariants.violations) {
    named = named || v.find("kv.failed_stores = 8, wanted <= 0") != std::string::npos;
  }
  EXPECT_TRUE(named) << "violations: " << r.invariants.violations.size();
}

// Each GPU node stores its own keys: two engines make twice the stores into
// one memory node, and share its RNIC.
TEST(StoreWorkload, TwoEnginesStoreTheirOwnChunks) {
  Scenario sc = shipped();
  sc.topology.gpu_nodes = 2;
  sc.workload.stores = 8;
  sc.expect = {};
  auto profile = load_profile("", sc.profile);
  ASSERT_TRUE(profile.ok());
  const RunResult r = run_scenario(sc, *profile);
  ASSERT_TRUE(r.status.ok()) << r.status.ToString();
  for (const auto& v : r.invariants.violations) ADD_FAILURE() << v;
  EXPECT_EQ(r.store.stores, 16u);
  EXPECT_EQ(r.store.samples.size(), 16u);
  EXPECT_EQ(counter(r, "worker.stores"), 16);
  EXPECT_EQ(counter(r, "kv.failed_stores"), 0);
  EXPECT_EQ(counter(r, "device.hinted_bytes_prepared"), double(16 * kChunk));
  EXPECT_LE(r.store.gbps, profile->device.nic.bytes_per_second / 1e9);
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
