// A Strand on one OS thread: a task queue and a timer set behind a mutex.
#pragma once

#include <chrono>
#include <condition_variable>
#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <utility>

#include "core/runtime/strand.h"

namespace rcxl::verbs {

// The queue a strand's thread drains. Shared, so that I/O threads holding it can
// still post after the strand is gone (the task is then dropped, never run).
class StrandQueue {
 public:
  using SteadyTime = std::chrono::steady_clock::time_point;

  // False (and the task dropped) once the strand has stopped.
  bool post(runtime::Task task);
  runtime::TimerId post_after(runtime::Duration delay, runtime::Task task);
  bool cancel(runtime::TimerId id);
  // The strand thread's loop: runs tasks and due timers until stop().
  void run();
  // Stops the loop and drops every pending task and timer.
  void stop();
  bool running_here() const;

 private:
  // Moves due timers to the task queue so a busy queue cannot starve them.
  void move_due_timers(SteadyTime now);

  mutable std::mutex mu_;
  std::condition_variable wake_;
  std::deque<runtime::Task> tasks_;
  // (deadline, id): ties fire in the order they were set.
  std::map<std::pair<SteadyTime, runtime::TimerId>, runtime::Task> timers_;
  std::map<runtime::TimerId, SteadyTime> timer_deadlines_;
  runtime::TimerId next_timer_ = 1;
  bool stopped_ = false;
  std::thread::id thread_id_;
};

// One OS thread per strand (DESIGN.md: the thread runtime maps strands to threads).
// Destroying the strand stops its thread and drops pending tasks and timers. A
// strand must not be destroyed from inside one of its own tasks (its thread is
// then detached rather than joined, and finishes the running task first).
class ThreadStrand final : public runtime::Strand {
 public:
  explicit ThreadStrand(std::string name);
  ~ThreadStrand() override;
  ThreadStrand(const ThreadStrand&) = delete;
  ThreadStrand& operator=(const ThreadStrand&) = delete;

  const std::string& name() const override { return name_; }
  void post(runtime::Task task) override { queue_->post(std::move(task)); }
  runtime::TimerId post_after(runtime::Duration delay, runtime::Task task) override {
    return queue_->post_after(delay, std::move(task));
  }
  bool cancel(runtime::TimerId id) override { return queue_->cancel(id); }
  bool running_here() const override { return queue_->running_here(); }
  // Strands destroyed from one of their own tasks since the process started
  // (the misuse above; tests check their owners never do it).
  static std::uint64_t destroyed_on_own_thread();
  // I/O threads hold the queue, not the strand: posting after the strand is gone is safe.
  std::shared_ptr<StrandQueue> queue() const { return queue_; }

 private:
  std::string name_;
  std::shared_ptr<StrandQueue> queue_;
  std::thread thread_;
};

// Posts onto `strand` from any thread. For a ThreadStrand it holds the queue, so
// it stays safe after the strand is destroyed (the task is dropped); any other
// strand must outlive the poster.
using StrandPoster = std::function<void(runtime::Task)>;
StrandPoster make_strand_poster(runtime::Strand& strand);

}  // namespace rcxl::verbs
