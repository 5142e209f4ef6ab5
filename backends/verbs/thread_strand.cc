#include "backends/verbs/thread_strand.h"

#include <pthread.h>

#include <algorithm>
#include <atomic>

namespace rcxl::verbs {

bool StrandQueue::post(runtime::Task task) {
  {
    std::lock_guard lock(mu_);
    if (stopped_) return false;  // `task` is destroyed outside the lock, below
    tasks_.push_back(std::move(task));
  }
  wake_.notify_one();
  return true;
}

runtime::TimerId StrandQueue::post_after(runtime::Duration delay, runtime::Task task) {
  const SteadyTime deadline =
      std::chrono::steady_clock::now() + std::max(delay, runtime::Duration::zero());
  runtime::TimerId id;
  {
    std::lock_guard lock(mu_);
    id = next_timer_++;
    if (stopped_) return id;
    timers_.emplace(std::make_pair(deadline, id), std::move(task));
    timer_deadlines_.emplace(id, deadline);
  }
  wake_.notify_one();
  return id;
}

bool StrandQueue::cancel(runtime::TimerId id) {
  runtime::Task dropped;  // destroyed after the lock is released
  std::lock_guard lock(mu_);
  auto it = timer_deadlines_.find(id);
  if (it == timer_deadlines_.end()) return false;
  auto timer = timers_.find({it->second, id});
  dropped = std::move(timer->second);
  timers_.erase(timer);
  timer_deadlines_.erase(it);
  return true;
}

bool StrandQueue::running_here() const {
  std::lock_guard lock(mu_);
  return thread_id_ == std::this_thread::get_id();
}

void StrandQueue::move_due_timers(SteadyTime now) {
  while (!timers_.empty() && timers_.begin()->first.first <= now) {
    auto node = timers_.extract(timers_.begin());
    timer_deadlines_.erase(node.key().second);
    tasks_.push_back(std::move(node.mapped()));
  }
}

void StrandQueue::run() {
  std::unique_lock lock(mu_);
  thread_id_ = std::this_thread::get_id();
  while (!stopped_) {
    move_due_timers(std::chrono::steady_clock::now());
    if (!tasks_.empty()) {
      runtime::Task task = std::move(tasks_.front());
      tasks_.pop_front();
      lock.unlock();
      task();
      task = nullptr;  // captured state dies outside the lock too
      lock.lock();
      continue;
    }
    if (timers_.empty()) {
      wake_.wait(lock);
    } else {
      // A copy: wait_until reads its deadline again after waking, when cancel()
      // or stop() may have freed the timer node it came from (ASan).
      const SteadyTime next = timers_.begin()->first.first;
      wake_.wait_until(lock, next);
    }
  }
  thread_id_ = {};  // ids are reused by later threads
}

void StrandQueue::stop() {
  std::deque<runtime::Task> tasks;
  std::map<std::pair<SteadyTime, runtime::TimerId>, runtime::Task> timers;
  {
    std::lock_guard lock(mu_);
    stopped_ = true;
    tasks.swap(tasks_);
    timers.swap(timers_);
    timer_deadlines_.clear();
  }
  wake_.notify_all();
  // Dropped tasks may post elsewhere (or here: refused) as they die.
}

ThreadStrand::ThreadStrand(std::string name)
    : name_(std::move(name)), queue_(std::make_shared<StrandQueue>()) {
  thread_ = std::thread([queue = queue_] { queue->run(); });
  // Linux thread names are at most 15 characters; shows in gdb and top.
  pthread_setname_np(thread_.native_handle(), name_.substr(0, 15).c_str());
}

namespace {
std::atomic<std::uint64_t> g_destroyed_on_own_thread{0};
}  // namespace

std::uint64_t ThreadStrand::destroyed_on_own_thread() {
  return g_destroyed_on_own_thread.load();
}

ThreadStrand::~ThreadStrand() {
  queue_->stop();
  if (thread_.get_id() == std::this_thread::get_id()) {
    ++g_destroyed_on_own_thread;
    thread_.detach();  // misuse (see the header): the loop ends after this task
  } else {
    thread_.join();
  }
}

StrandPoster make_strand_poster(runtime::Strand& strand) {
  if (auto* thread_strand = dynamic_cast<ThreadStrand*>(&strand)) {
    return [queue = thread_strand->queue()](runtime::Task task) { queue->post(std::move(task)); };
  }
  return [&strand](runtime::Task task) { strand.post(std::move(task)); };
}

}  // namespace rcxl::verbs
