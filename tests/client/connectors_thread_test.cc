// The worker connector (SPEC R4.1) and zero copy (R1.6) on the thread runtime:
// a handler's strand, the write-behind strand, the NIC's thread and TCP all
// run at once. Teardown with work still out must neither touch what is gone
// (ASan/TSan builds catch it: `make tsan`) nor leave local registrations.
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <mutex>
#include <thread>

#include "core/client/handler.h"
#include "core/client/worker_connector.h"
#include "tests/client/thread_rig.h"

namespace rcxl::client::testing {
namespace {

using namespace std::chrono_literals;

StoreItem chunk(const std::string& key, char fill) {
  StoreItem item;
  item.key = key;
  item.bytes.assign(4096, static_cast<std::byte>(fill));
  return item;
}

// Counts callbacks from any thread; waits for a number of them.
struct Calls {
  std::mutex mu;
  std::condition_variable cv;
  std::vector<std::string> order;
  int failed = 0;

  void record(const std::string& what, bool ok) {
    std::lock_guard lock(mu);
    order.push_back(what);
    if (!ok) ++failed;
    cv.notify_all();
  }
  bool wait_for(std::size_t n) {
    std::unique_lock lock(mu);
    return cv.wait_for(lock, 30s, [&] { return order.size() >= n; });
  }
};

TEST(WorkerConnectorOnThreads, R4_1_SavesRunInOrderAndLoadBack) {
  AgentOnThreads rig;
  Handler handler(rig.d.rt, rig.config(), rig.nic);
  WorkerConnector worker(rig.d.rt, handler);
  Calls saves;
  constexpr int kSaves = 12;
  for (int i = 0; i < kSaves; ++i) {
    const std::string key = "k" + std::to_string(i);
    worker.save({chunk(key, static_cast<char>('a' + i))},
                [&, key](Result<StoreResult> r) { saves.record(key, r.ok() && r->stored == 1); });
  }
  ASSERT_TRUE(saves.wait_for(kSaves));
  EXPECT_EQ(saves.failed, 0);
  for (int i = 0; i < kSaves; ++i) EXPECT_EQ(saves.order[i], "k" + std::to_string(i));
  EXPECT_EQ(worker.pending_saves(), 0u);

  Calls loads;
  std::vector<std::vector<std::byte>> values;
  std::vector<std::string> keys;
  for (int i = 0; i < kSaves; ++i) keys.push_back("k" + std::to_string(i));
  worker.start_load("req", keys, [&](Result<LoadResult> r) {
    if (r.ok()) values = r->values;
    loads.record("load", r.ok());
  });
  ASSERT_TRUE(loads.wait_for(1));
  ASSERT_EQ(values.size(), static_cast<std::size_t>(kSaves));
  for (int i = 0; i < kSaves; ++i) {
    EXPECT_EQ(values[i], chunk("", static_cast<char>('a' + i)).bytes) << "key " << i;
  }
}

// A connector destroyed with saves queued behind one in the handler: the
// queued ones are dropped, the one in the handler still reports, and nothing
// runs on the connector after it is gone (its write-behind strand used to be
// joined only after the members its tasks use were destroyed).
TEST(WorkerConnectorOnThreads, R4_1_DestroyedWithSavesQueuedAndInFlightIsSafe) {
  constexpr int kRounds = 30;
  constexpr int kSavesPerRound = 8;
  std::vector<std::atomic<int>> done(kRounds * kSavesPerRound);  // outlives the handler
  AgentOnThreads rig(200us);
  Handler handler(rig.d.rt, rig.config(), rig.nic);
  for (int round = 0; round < kRounds; ++round) {
    auto worker = std::make_unique<WorkerConnector>(rig.d.rt, handler);
    for (int i = 0; i < kSavesPerRound; ++i) {
      const int n = round * kSavesPerRound + i;
      worker->save({chunk("r" + std::to_string(n), 'x')},
                   [&done, n](Result<StoreResult>) { ++done[n]; });
    }
    std::this_thread::sleep_for(std::chrono::microseconds(150 * (round % 7)));
    worker.reset();
  }
  // The handler still works, and finishes what the connectors handed it first.
  Calls last;
  handler.store({chunk("after", 'z')},
                [&](Result<StoreResult> r) { last.record("after", r.ok() && r->stored == 1); });
  ASSERT_TRUE(last.wait_for(1));
  EXPECT_EQ(last.failed, 0);
  int reported = 0;
  for (auto& d : done) {
    EXPECT_LE(d.load(), 1);
    reported += d.load();
  }
  EXPECT_LT(reported, kRounds * kSavesPerRound);  // queued saves were dropped
}

// Zero copy on threads: a handler destroyed while its READs and WRITEs are on
// the NIC leaves their buffers registered until the NIC is done with them
// (deregistering under a running op faults it), and then none: the
// completions it dropped deregister theirs as they go.
TEST(HandlerOnThreads, R1_6_DestroyedWhileItsRdmaRunsDeregistersOnceTheNicIsDone) {
  AgentOnThreads rig;
  Config config = rig.config();
  config.zero_copy = true;
  {
    Handler writer(rig.d.rt, config, rig.nic);
    Calls stored;
    writer.store({chunk("a", 'a')}, [&](Result<StoreResult> r) { stored.record("a", r.ok()); });
    ASSERT_TRUE(stored.wait_for(1));
    ASSERT_EQ(stored.failed, 0);
  }
  ASSERT_EQ(rig.nic.live_locals(), 0u);
  auto wait_until = [](const std::function<bool()>& ready) {
    for (int i = 0; i < 5000 && !ready(); ++i) {
      std::this_thread::sleep_for(1ms);  // test code on the thread runtime may wait
    }
    return ready();
  };
  for (bool loading : {false, true}) {
    SCOPED_TRACE(loading ? "a load's READ" : "a store's WRITE");
    auto handler = std::make_unique<Handler>(rig.d.rt, config, rig.nic);
    rig.nic.hold();
    if (loading) {
      handler->load({"a"}, [](Result<LoadResult>) {});
    } else {
      handler->store({chunk("b", 'b')}, [](Result<StoreResult>) {});
    }
    ASSERT_TRUE(wait_until([&] { return rig.nic.in_flight() > 0; }));
    handler.reset();
    EXPECT_EQ(rig.nic.live_locals(), 1u);  // the NIC still has the op
    rig.nic.release();
    EXPECT_TRUE(wait_until([&] { return rig.nic.in_flight() == 0 && rig.nic.live_locals() == 0; }));
    EXPECT_EQ(rig.nic.copies_after_deregistration(), 0);
    EXPECT_EQ(rig.nic.unknown_deregistrations(), 0);
  }
}

}  // namespace
}  // namespace rcxl::client::testing
