// The engine connector roles (SPEC R3.8, R4.5): the scheduler hints once and
// ends once, bounded state; the worker promotes at load start and stores on
// its write-behind strand.
#include <gtest/gtest.h>

#include "core/client/scheduler_connector.h"
#include "core/client/worker_connector.h"
#include "tests/client/client_rig.h"

namespace rcxl::client::testing {
namespace {

const Json kAllActions = {"read_hint", "read_hint_end", "write_hint", "read_promote"};

struct RoleRig {
  ClientRig rig;
  MemoryNode& mem = rig.add_memory("mem", {{"actions", kAllActions}});
  Handler* scheduler_handler = nullptr;
  Handler* worker_handler = nullptr;

  explicit RoleRig(bool on_arrival = false) {
    Config sc = rig.config();
    sc.read_hints = true;
    sc.read_hint_on_arrival = on_arrival;
    scheduler_handler = &rig.handler(sc);
    Config wc = rig.config();
    wc.read_hints = true;
    worker_handler = &rig.handler(wc);
    EXPECT_EQ(rig.store(*worker_handler, {item("a", "1"), item("b", "2")})->stored, 2u);
    rig.settle(*worker_handler);
  }
  std::size_t hints(const std::string& request) {
    rig.settle(*scheduler_handler);
    std::size_t n = 0;
    for (const auto& l : mem.log("hint", "read_hint")) n += l["request"] == request;
    return n;
  }
  std::size_t ends(const std::string& request) {
    rig.settle(*scheduler_handler);
    std::size_t n = 0;
    for (const auto& l : mem.log("hint", "read_hint_end")) n += l["request"] == request;
    return n;
  }
};

TEST(SchedulerConnector, R3_8_HintsARequestOnceAndEndsItOnceAtFinishedRecving) {
  RoleRig s;
  SchedulerConnector scheduler(*s.scheduler_handler);
  scheduler.on_request_arrival("q", {"a", "b"});  // not on arrival by default
  EXPECT_EQ(s.hints("q"), 0u);
  scheduler.on_async_load_found("q", {"a", "b"});
  scheduler.on_async_load_found("q", {"a", "b"});
  EXPECT_EQ(s.hints("q"), 1u);
  scheduler.on_finished_recving("q");
  EXPECT_EQ(s.ends("q"), 1u);
  scheduler.on_async_load_found("q", {"a", "b"});  // still known: no second hint
  scheduler.on_request_finished("q");
  EXPECT_EQ(s.hints("q"), 1u);
  EXPECT_EQ(s.ends("q"), 1u);
  EXPECT_EQ(scheduler.tracked(), 0u);
}

// The scheduler's lookups answer how many leading keys hit, and are counted
// (the simulator reports them as scheduler.lookups).
TEST(SchedulerConnector, R3_8_LookupCountsLeadingHits) {
  RoleRig s;
  SchedulerConnector scheduler(*s.scheduler_handler);
  std::vector<std::size_t> hits;
  scheduler.lookup({"a", "b", "c"}, [&](Result<std::size_t> r) { hits.push_back(r.value()); });
  scheduler.lookup({"c", "a"}, [&](Result<std::size_t> r) { hits.push_back(r.value()); });
  s.rig.settle(*s.scheduler_handler);
  EXPECT_EQ(hits, (std::vector<std::size_t>{2, 0}));
  EXPECT_EQ(scheduler.lookups(), 2u);
}

TEST(SchedulerConnector, R3_8_RequestFinishedIsTheFallbackEnd) {
  RoleRig s;
  SchedulerConnector scheduler(*s.scheduler_handler);
  scheduler.on_async_load_found("p", {"a"});
  EXPECT_EQ(s.hints("p"), 1u);
  scheduler.on_request_finished("p");
  EXPECT_EQ(s.ends("p"), 1u);
}

TEST(SchedulerConnector, R3_8_HintOnArrivalWhenConfigured) {
  RoleRig s(/*on_arrival=*/true);
  SchedulerConnector scheduler(*s.scheduler_handler);
  scheduler.on_request_arrival("r", {"a"});
  EXPECT_EQ(s.hints("r"), 1u);  // at arrival, before the load is found
  scheduler.on_async_load_found("r", {"a"});
  EXPECT_EQ(s.hints("r"), 1u);  // and not again
}

// SPEC R3.8 ("when it first finds its asynchronous load, or on arrival"): a
// hint on arrival that opened nothing (the previous turn's keys were still
// being stored) kept the load found later from hinting, so the load went
// unhinted (review, session 28). It hints again; one that opened already is
// not sent twice, and an ended request is not hinted again.
TEST(SchedulerConnector, R3_8_AnArrivalHintThatOpenedNothingIsFollowedByTheLoadsHint) {
  RoleRig s(/*on_arrival=*/true);
  SchedulerConnector scheduler(*s.scheduler_handler);
  scheduler.on_request_arrival("r", {"c"});  // "c" is not stored yet
  EXPECT_EQ(s.hints("r"), 0u);
  ASSERT_EQ(s.rig.store(*s.worker_handler, {item("c", "3")})->stored, 1u);
  scheduler.on_async_load_found("r", {"c"});
  EXPECT_EQ(s.hints("r"), 1u);
  scheduler.on_async_load_found("r", {"c"});
  EXPECT_EQ(s.hints("r"), 1u);
  scheduler.on_finished_recving("r");
  EXPECT_EQ(s.ends("r"), 1u);
  // Ended on arrival's hint alone: the load found after gives no new hint.
  scheduler.on_request_arrival("e", {"c"});
  EXPECT_EQ(s.hints("e"), 1u);
  scheduler.on_finished_recving("e");
  scheduler.on_async_load_found("e", {"c"});
  EXPECT_EQ(s.hints("e"), 1u);
  EXPECT_EQ(s.ends("e"), 1u);
}

TEST(SchedulerConnector, R3_8_StateForAtMost65536RequestsOldestEnded) {
  static_assert(kMaxSchedulerRequests == 65536, "SPEC R3.8");
  RoleRig s;
  SchedulerConnector scheduler(*s.scheduler_handler);
  const std::size_t total = kMaxSchedulerRequests + 100;
  for (std::size_t i = 0; i < total; ++i) {
    scheduler.on_async_load_found("r" + std::to_string(i), {"missing"});
  }
  EXPECT_EQ(scheduler.tracked(), kMaxSchedulerRequests);
  EXPECT_EQ(scheduler.forced_ends(), 100u);
  EXPECT_EQ(scheduler.hints_sent(), total);
  EXPECT_EQ(scheduler.ends_sent(), 100u);
  // The oldest are forgotten: r0 may be hinted again; the newest may not.
  // (One sum for both let a bound that ended the newest pass: session-33 audit.)
  scheduler.on_async_load_found("r0", {"a"});
  EXPECT_EQ(scheduler.hints_sent(), total + 1);
  scheduler.on_async_load_found("r" + std::to_string(total - 1), {"a"});
  EXPECT_EQ(scheduler.hints_sent(), total + 1);
}

TEST(WorkerConnector, R4_5_PromotesOncePerRequestAtLoadStartAndDoesNotHint) {
  RoleRig s;
  WorkerConnector worker(s.rig.gpu, *s.worker_handler);
  std::optional<Result<LoadResult>> first;
  worker.start_load("q", {"a", "b"}, [&](auto r) { first = std::move(r); });
  auto loaded = s.rig.wait(first);
  ASSERT_EQ(loaded->values.size(), 2u);
  std::optional<Result<LoadResult>> second;
  worker.start_load("q", {"a"}, [&](auto r) { second = std::move(r); });
  ASSERT_TRUE(s.rig.wait(second).ok());
  s.rig.settle(*s.worker_handler);
  EXPECT_EQ(worker.promotes_sent(), 1u);
  auto promotes = s.mem.log("hint", "read_promote");
  ASSERT_EQ(promotes.size(), 1u);
  EXPECT_EQ(promotes[0]["request"], "q");
  EXPECT_TRUE(s.mem.log("hint", "read_hint").empty());  // only the scheduler hints loads
}

// promotes_sent() counted a promote the handler never sent (review, session 32).
TEST(WorkerConnector, R4_5_PromotesOffSendsAndCountsNone) {
  RoleRig s;
  Config c = s.rig.config();
  c.read_hints = true;
  c.read_promotes = false;
  Handler& quiet = s.rig.handler(c);
  WorkerConnector worker(s.rig.gpu, quiet);
  std::optional<Result<LoadResult>> loaded;
  worker.start_load("q", {"a", "b"}, [&](auto r) { loaded = std::move(r); });
  ASSERT_EQ(s.rig.wait(loaded)->values.size(), 2u);
  s.rig.settle(quiet);
  EXPECT_TRUE(s.mem.log("hint", "read_promote").empty());
  EXPECT_EQ(worker.promotes_sent(), 0u);
}

TEST(WorkerConnector, R4_1_SavesRunInOrderOnTheWriteBehindStrandWithWriteHints) {
  RoleRig s;
  WorkerConnector worker(s.rig.gpu, *s.worker_handler);
  std::vector<std::string> order;
  for (int i = 0; i < 3; ++i) {
    worker.save({item("s" + std::to_string(i), "v")}, [&, i](Result<StoreResult> r) {
      EXPECT_TRUE(r.ok());
      order.push_back("s" + std::to_string(i));
    });
  }
  ASSERT_TRUE(s.rig.world.run_until([&] { return order.size() == 3; }).ok());
  EXPECT_EQ(order, (std::vector<std::string>{"s0", "s1", "s2"}));
  s.rig.settle(*s.worker_handler);
  EXPECT_EQ(s.mem.log("hint", "write_hint").size(), 4u);  // the setup's store + 3
}

}  // namespace
}  // namespace rcxl::client::testing
