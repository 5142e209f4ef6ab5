// An epoll loop on one thread: the I/O side of the TCP transport. Every fd it
// watches is touched only on its thread; other threads hand it commands.
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <thread>
#include <utility>
#include <vector>

namespace rcxl::verbs {

class Reactor {
 public:
  using SteadyTime = std::chrono::steady_clock::time_point;
  using TimerKey = std::pair<SteadyTime, std::uint64_t>;

  // Something that owns a watched fd.
  class Handler {
   public:
    virtual ~Handler() = default;
    virtual void on_events(std::uint32_t events) = 0;
    // The reactor is stopping (its thread has ended): release the fd.
    virtual void on_stop() = 0;
  };

  // Throws std::system_error when epoll or eventfd cannot be created.
  Reactor();
  ~Reactor();
  Reactor(const Reactor&) = delete;
  Reactor& operator=(const Reactor&) = delete;

  // Thread-safe: runs `command` on the reactor thread, in call order. Once
  // stop() has begun the command is dropped and the answer is false.
  bool run(std::function<void()> command);
  // Joins the thread, runs the commands already queued, then tells every handler
  // to let go. Idempotent.
  void stop();
  bool in_reactor_thread() const { return std::this_thread::get_id() == thread_.get_id(); }

  // --- reactor thread only
  // Watches `fd`; the reactor keeps `handler` alive until remove().
  std::uint64_t add(int fd, std::uint32_t events, std::shared_ptr<Handler> handler);
  void modify(std::uint64_t registration, int fd, std::uint32_t events);
  void remove(std::uint64_t registration, int fd);
  TimerKey call_after(std::chrono::nanoseconds delay, std::function<void()> fn);
  void cancel_timer(const TimerKey& key) { timers_.erase(key); }

 private:
  void loop();
  int next_timeout_ms() const;
  void run_commands();
  void run_due_timers();

  int epoll_fd_ = -1;
  int wake_fd_ = -1;
  std::thread thread_;
  std::mutex mu_;  // guards commands_, stopping_, stopped_
  std::vector<std::function<void()>> commands_;
  bool stopping_ = false;
  bool stopped_ = false;
  std::mutex stop_mu_;  // one stop() at a time
  std::map<std::uint64_t, std::shared_ptr<Handler>> handlers_;
  std::uint64_t next_registration_ = 1;  // 0 is the wake fd
  std::map<TimerKey, std::function<void()>> timers_;
  std::uint64_t next_timer_ = 1;
};

}  // namespace rcxl::verbs
