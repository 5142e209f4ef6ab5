// ThreadStrand: the thread runtime's serial executor (DESIGN.md "the one rule":
// each Strand is one OS thread). Order, timers, cancel, destruction.
#include "backends/verbs/thread_strand.h"

#include <gtest/gtest.h>

#include <atomic>
#include <future>
#include <thread>
#include <vector>

#include "core/runtime/strand_gate.h"
#include "tests/runtime/blocking_wait.h"

namespace rcxl::verbs {
namespace {

using namespace std::chrono_literals;
using testing::get_or_abort;
using testing::run_on;

TEST(ThreadStrand, RunsTasksInPostOrder) {
  ThreadStrand strand("order");
  std::vector<int> order;
  for (int i = 0; i < 1000; ++i) strand.post([&order, i] { order.push_back(i); });
  run_on(strand, [] {});
  ASSERT_EQ(order.size(), 1000u);
  for (int i = 0; i < 1000; ++i) EXPECT_EQ(order[i], i);
}

TEST(ThreadStrand, TasksFromManyThreadsNeverOverlap) {
  ThreadStrand strand("serial");
  std::atomic<int> inside{0};
  std::atomic<bool> overlapped{false};
  int count = 0;  // unsynchronized on purpose: the strand is the lock
  std::vector<std::thread> posters;
  for (int t = 0; t < 4; ++t) {
    posters.emplace_back([&] {
      for (int i = 0; i < 500; ++i) {
        strand.post([&] {
          if (inside.fetch_add(1) != 0) overlapped = true;
          ++count;
          inside.fetch_sub(1);
        });
      }
    });
  }
  for (auto& poster : posters) poster.join();
  run_on(strand, [] {});
  EXPECT_FALSE(overlapped);
  EXPECT_EQ(count, 2000);
}

TEST(ThreadStrand, RunningHereOnlyOnItsOwnThread) {
  ThreadStrand one("one");
  ThreadStrand two("two");
  EXPECT_FALSE(one.running_here());
  bool on_one = false;
  bool two_from_one = true;
  run_on(one, [&] {
    on_one = one.running_here();
    two_from_one = two.running_here();
  });
  EXPECT_TRUE(on_one);
  EXPECT_FALSE(two_from_one);
}

TEST(ThreadStrand, TimersFireInDeadlineOrderThenSetOrder) {
  ThreadStrand strand("timers");
  // Hold the strand until every timer is due, so only the ordering is tested.
  std::promise<void> gate;
  std::shared_future<void> open = gate.get_future().share();
  strand.post([open] { open.wait(); });
  std::vector<int> order;
  strand.post_after(600ms, [&] { order.push_back(3); });
  strand.post_after(200ms, [&] { order.push_back(1); });
  strand.post_after(400ms, [&] { order.push_back(2); });
  strand.post_after(200ms, [&] { order.push_back(11); });
  std::promise<void> last;
  auto done = last.get_future();
  strand.post_after(650ms, [&] { last.set_value(); });
  std::this_thread::sleep_for(700ms);
  gate.set_value();
  get_or_abort(done, "timers");
  EXPECT_EQ(order, (std::vector<int>{1, 11, 2, 3}));
}

TEST(ThreadStrand, CancelledTimerNeverRuns) {
  ThreadStrand strand("cancel");
  std::atomic<bool> ran{false};
  const runtime::TimerId id = strand.post_after(20ms, [&] { ran = true; });
  EXPECT_TRUE(strand.cancel(id));
  EXPECT_FALSE(strand.cancel(id));
  std::promise<void> later;
  auto done = later.get_future();
  strand.post_after(60ms, [&] { later.set_value(); });
  get_or_abort(done, "later timer");
  EXPECT_FALSE(ran);
}

// The strand's thread sleeps until its earliest timer; cancelling that timer,
// or destroying the strand, frees the timer while the thread waits on it. The
// wait must not read the freed deadline afterwards (it did: ASan found a
// heap-use-after-free when an agent went with its sweep timer pending).
TEST(ThreadStrand, CancellingOrDroppingTheTimerItSleepsOnIsSafe) {
  for (int round = 0; round < 50; ++round) {
    ThreadStrand strand("sleeper");
    const runtime::TimerId id = strand.post_after(1h, [] {});
    std::this_thread::sleep_for(200us);  // let the thread go to sleep on it
    EXPECT_TRUE(strand.cancel(id));
    std::promise<void> ran;
    auto done = ran.get_future();
    strand.post([&] { ran.set_value(); });
    get_or_abort(done, "task after the cancel");
    strand.post_after(1h, [] {});  // pending when the strand goes
    std::this_thread::sleep_for(200us);
  }
}

TEST(ThreadStrand, CancelAfterTheTimerRanIsFalse) {
  ThreadStrand strand("fired");
  std::promise<void> fired;
  auto done = fired.get_future();
  const runtime::TimerId id = strand.post_after(1ms, [&] { fired.set_value(); });
  get_or_abort(done, "timer");
  EXPECT_FALSE(strand.cancel(id));
}

TEST(ThreadStrand, StrandsPostToEachOther) {
  ThreadStrand a("a");
  ThreadStrand b("b");
  std::promise<int> finished;
  auto result = finished.get_future();
  std::function<void(int)> bounce = [&](int n) {
    if (n == 1000) return finished.set_value(n);
    runtime::Strand& next = (n % 2 == 0) ? b : a;
    next.post([&bounce, n] { bounce(n + 1); });
  };
  a.post([&] { bounce(0); });
  EXPECT_EQ(get_or_abort(result, "ping-pong"), 1000);
}

// The destructor's contract: pending tasks and timers are dropped, not run.
TEST(ThreadStrand, DestroyWhileBusyDropsPendingTasksAndTimers) {
  auto strand = std::make_unique<ThreadStrand>("doomed");
  auto queue = strand->queue();
  std::promise<void> gate;
  std::shared_future<void> open = gate.get_future().share();
  std::promise<void> entered;
  auto busy = entered.get_future();
  strand->post([&entered, open] {
    entered.set_value();
    open.wait();
  });
  get_or_abort(busy, "gate task");
  std::atomic<bool> ran{false};
  auto witness = std::make_shared<int>(0);
  strand->post([&ran, witness] { ran = true; });
  strand->post_after(1ms, [&ran, witness] { ran = true; });
  std::thread destroyer([&] { strand.reset(); });
  // The queue refuses posts once the destructor has stopped it.
  while (queue->post([] {})) std::this_thread::yield();
  gate.set_value();
  destroyer.join();
  EXPECT_FALSE(ran);
  EXPECT_EQ(witness.use_count(), 1);  // the dropped tasks were destroyed
  EXPECT_FALSE(queue->post([] {}));
}

TEST(ThreadStrand, PosterOutlivesItsStrandSafely) {
  auto strand = std::make_unique<ThreadStrand>("short-lived");
  StrandPoster post = make_strand_poster(*strand);
  strand.reset();
  bool ran = false;
  post([&] { ran = true; });  // dropped, not a use-after-free
  EXPECT_FALSE(ran);
}

// runtime::StrandGate: posts reach the strand until the gate is closed, none
// after; a reply racing the close is either run or dropped, never lost halfway.
TEST(StrandGate, PostsReachTheStrandUntilClosedAndNoneAfter) {
  auto strand = std::make_unique<ThreadStrand>("gated");
  auto gate = std::make_shared<runtime::StrandGate>(*strand);
  std::atomic<int> ran{0};
  gate->post([&ran] { ++ran; });
  run_on(*strand, [&gate] { EXPECT_TRUE(gate->running_here()); });
  EXPECT_EQ(ran.load(), 1);
  EXPECT_FALSE(gate->running_here());  // the test thread is not the strand
  gate->close();
  gate->post([&ran] { ++ran; });
  run_on(*strand, [&gate] { EXPECT_FALSE(gate->running_here()); });
  strand.reset();  // the gate outlives its strand: a post now is dropped
  gate->post([&ran] { ++ran; });
  EXPECT_EQ(ran.load(), 1);
}

}  // namespace
}  // namespace rcxl::verbs
