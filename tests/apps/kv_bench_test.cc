// rcxl-kv bench against a real agent and directory on threads (LoopbackNic
// moves the bytes): what it calls verified must have been checked.
#include <gtest/gtest.h>

#include <future>
#include <sstream>
#include <thread>
#include <vector>

#include "apps/rcxl-kv/bench.h"
#include "tests/client/thread_rig.h"

namespace rcxl::kv {
namespace {

using client::testing::AgentOnThreads;

BenchOptions small_bench() {
  BenchOptions o;
  o.mib = 1;  // 256 keys of 4 KiB
  o.settle_s = 0;
  return o;
}

Result<BenchTotals> bench(AgentOnThreads& rig, const BenchOptions& o, std::string* text = nullptr) {
  client::Config config = rig.config();
  config.region_size_bytes = 4 << 20;
  KvClient writer(rig.d.rt, config, rig.nic, std::chrono::seconds(20));
  KvClient reader(rig.d.rt, config, rig.nic, std::chrono::seconds(20));
  std::ostringstream out;
  auto totals = run_bench(writer, reader, config.chunk_size_bytes, o, out);
  if (text) *text = out.str();
  return totals;
}

// A second bench of the same --seed found every key present (first writer
// wins): its WRITEs were given back and the loads checked the first run's
// bytes, yet it said result=ok (review, session 26).
TEST(KvBench, R1_1_ARunWhoseKeysWereAlreadyThereIsNotCalledVerified) {
  AgentOnThreads rig;
  auto first = bench(rig, small_bench());
  ASSERT_TRUE(first.ok()) << first.status().ToString();
  EXPECT_TRUE(first->ok());
  EXPECT_EQ(first->keys_stored, 256u);
  std::string text;
  auto again = bench(rig, small_bench(), &text);
  ASSERT_TRUE(again.ok()) << again.status().ToString();
  EXPECT_EQ(again->keys_present_before, 256u);
  EXPECT_EQ(again->keys_stored, 0u);
  EXPECT_FALSE(again->ok());
  EXPECT_NE(text.find("give another --seed"), std::string::npos) << text;
  BenchOptions other = small_bench();
  other.seed = 2;
  auto fresh = bench(rig, other);
  ASSERT_TRUE(fresh.ok());
  EXPECT_TRUE(fresh->ok());
}

// --expect-reset took any miss as a reset: a command that resets nothing
// while the old keys leave the directory (as a directory restart forgets
// them) passed (review, session 26).
TEST(KvBench, R6_1_ExpectResetNeedsTheReaderToSeeTheBootChange) {
  AgentOnThreads rig;
  BenchOptions o = small_bench();
  o.between_rounds = "sleep 1";
  o.expect_reset = true;
  // While the command runs, round 1's keys leave the directory; the node is not reset.
  std::thread eraser([&] {
    std::this_thread::sleep_for(std::chrono::milliseconds(300));
    std::vector<std::string> keys;
    for (int i = 0; i < 256; ++i) keys.push_back("bench/1/r1/" + std::to_string(i));
    std::promise<void> erased;
    rig.d.shared->erase(keys, [&](Result<std::size_t>) { erased.set_value(); });
    erased.get_future().wait();
  });
  std::string text;
  auto r = bench(rig, o, &text);
  eraser.join();
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(r->misses_after_reset, 256u) << text;
  EXPECT_EQ(r->stale_hits, 0u) << text;
  EXPECT_TRUE(r->reset_not_seen) << text;
  EXPECT_FALSE(r->ok());
}

}  // namespace
}  // namespace rcxl::kv
