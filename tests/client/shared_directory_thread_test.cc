// SPEC R3.9: the hint strand's probes and the scheduler's lookups share one
// DirectoryClient. On the thread runtime (real OS threads, TCP on loopback)
// both run at once; every answer must be right and nothing may hang.
#include <gtest/gtest.h>

#include <atomic>
#include <condition_variable>
#include <future>
#include <mutex>
#include <thread>

#include "core/client/memory_hints.h"
#include "tests/client/thread_rig.h"

namespace rcxl::client {
namespace {

using testing::DirectoryOnThreads;

using namespace std::chrono_literals;

TEST(SharedDirectoryClient, R3_9_HintProbesAndSchedulerLookupsAtOnceOnThreads) {
  DirectoryOnThreads d;
  ASSERT_TRUE(d.start().ok());
  auto& rt = d.rt;
  auto& shared = d.shared;

  constexpr int kKeys = 64;
  std::vector<std::pair<std::string, directory::Location>> entries;
  for (int i = 0; i < kKeys; ++i) {
    // The agent is unreachable: hints find nobody to send to, probes still run.
    entries.push_back(
        {"k" + std::to_string(i),
         {"127.0.0.1:1", "boot", 1, "rh", static_cast<std::uint64_t>(i) * 4096, 4096}});
  }
  std::promise<Result<std::vector<bool>>> registered;
  shared->register_keys(entries, [&](auto r) { registered.set_value(std::move(r)); });
  ASSERT_TRUE(registered.get_future().get().ok());

  Config config;
  config.read_hints = true;
  config.secret = "s";
  MemoryHints hints(rt, config, *shared);

  // The scheduler: lookups from its own strand while the hint strand probes.
  auto scheduler = rt.make_strand("scheduler");
  auto scheduler_gate = std::make_shared<runtime::StrandGate>(*scheduler);
  std::mutex mu;
  std::condition_variable cv;
  int lookups_done = 0;
  int wrong = 0;
  constexpr int kLookups = 400;
  for (int i = 0; i < kLookups; ++i) {
    hints.read_hint("req" + std::to_string(i), {"k0", "k1", "k2"});
    const int n = 1 + i % kKeys;
    std::vector<std::string> keys;
    for (int k = 0; k < n; ++k) keys.push_back("k" + std::to_string(k));
    keys.push_back("missing");
    scheduler->post([&, keys, n] {
      shared->probe(
          keys, /*with_locations=*/false,
          [&, n](Result<directory::ProbeReply> reply) {
            std::lock_guard<std::mutex> lock(mu);
            if (!reply.ok() || reply->hits != static_cast<std::size_t>(n)) ++wrong;
            ++lookups_done;
            cv.notify_all();
          },
          scheduler_gate);
    });
  }
  std::unique_lock<std::mutex> lock(mu);
  ASSERT_TRUE(cv.wait_for(lock, 30s, [&] { return lookups_done == kLookups; }));
  EXPECT_EQ(wrong, 0);
  lock.unlock();
  // The hint strand's probes went through the same client.
  for (int i = 0; i < 300 && hints.stats().probes + hints.stats().dropped < kLookups; ++i) {
    std::this_thread::sleep_for(10ms);  // test code on the thread runtime may wait
  }
  EXPECT_EQ(hints.stats().probes + hints.stats().dropped, static_cast<std::uint64_t>(kLookups));
  EXPECT_GT(hints.stats().probes, 0u);
  EXPECT_GE(shared->calls(), static_cast<std::uint64_t>(kLookups) + 1 + hints.stats().probes);
}

// A hint strand that goes while its probes are still out: the shared directory
// client answers them after, and the answers must not reach the strand that is
// gone (they did: rcxl-kv crashed at exit on a reply for the hint thread).
TEST(SharedDirectoryClient, R3_9_AHintStrandDestroyedWithProbesInFlightIsSafe) {
  DirectoryOnThreads d;
  ASSERT_TRUE(d.start().ok());
  auto& rt = d.rt;
  auto& shared = d.shared;
  Config config;
  config.read_hints = true;
  config.secret = "s";
  for (int round = 0; round < 50; ++round) {
    auto hints = std::make_unique<MemoryHints>(rt, config, *shared);
    for (int i = 0; i < 20; ++i) hints->read_hint("r" + std::to_string(i), {"k0", "k1"});
    if (round % 2 == 1) std::this_thread::sleep_for(std::chrono::microseconds(200 * round));
    hints.reset();  // probes may still be out: their answers are dropped
  }
  // The client still answers; nothing left behind ran on a destroyed strand.
  std::promise<Result<directory::ProbeReply>> probed;
  shared->probe({"k0"}, false, [&](auto r) { probed.set_value(std::move(r)); });
  auto reply = probed.get_future().get();
  ASSERT_TRUE(reply.ok()) << reply.status().ToString();
  EXPECT_EQ(reply->hits, 0u);
}

}  // namespace
}  // namespace rcxl::client
