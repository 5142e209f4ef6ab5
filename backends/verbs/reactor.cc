#include "backends/verbs/reactor.h"

#include <pthread.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <system_error>

namespace rcxl::verbs {
namespace {

constexpr int kMaxEventsPerWait = 64;
constexpr std::uint64_t kWakeRegistration = 0;

}  // namespace

Reactor::Reactor() {
  epoll_fd_ = epoll_create1(EPOLL_CLOEXEC);
  if (epoll_fd_ < 0) throw std::system_error(errno, std::generic_category(), "epoll_create1");
  wake_fd_ = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
  if (wake_fd_ < 0) {
    const int error = errno;
    ::close(epoll_fd_);
    throw std::system_error(error, std::generic_category(), "eventfd");
  }
  epoll_event event{};
  event.events = EPOLLIN;
  event.data.u64 = kWakeRegistration;
  epoll_ctl(epoll_fd_, EPOLL_CTL_ADD, wake_fd_, &event);
  thread_ = std::thread([this] { loop(); });
  pthread_setname_np(thread_.native_handle(), "rcxl-tcp");
}

Reactor::~Reactor() {
  stop();
  ::close(wake_fd_);
  ::close(epoll_fd_);
}

bool Reactor::run(std::function<void()> command) {
  {
    std::lock_guard lock(mu_);
    if (stopping_) return false;  // `command` dies outside the lock
    commands_.push_back(std::move(command));
  }
  const std::uint64_t one = 1;
  [[maybe_unused]] const ssize_t n = ::write(wake_fd_, &one, sizeof one);
  return true;
}

void Reactor::stop() {
  std::lock_guard stop_lock(stop_mu_);
  {
    std::lock_guard lock(mu_);
    if (stopped_) return;
    stopping_ = true;
  }
  const std::uint64_t one = 1;
  [[maybe_unused]] const ssize_t n = ::write(wake_fd_, &one, sizeof one);
  if (in_reactor_thread()) {
    thread_.detach();  // only reachable through misuse; the loop sees stopping_
  } else if (thread_.joinable()) {
    thread_.join();
  }
  // The thread is gone: this thread may now touch the reactor's state. Commands
  // that raced with stop() still run (a start() or connect() then gets its
  // handler called), then every handler lets go of its fd.
  std::vector<std::function<void()>> late;
  {
    std::lock_guard lock(mu_);
    late.swap(commands_);
  }
  for (auto& command : late) command();
  late.clear();
  {
    std::lock_guard lock(mu_);
    stopped_ = true;
  }
  auto handlers = std::move(handlers_);
  handlers_.clear();
  for (auto& [registration, handler] : handlers) handler->on_stop();
  timers_.clear();
}

std::uint64_t Reactor::add(int fd, std::uint32_t events, std::shared_ptr<Handler> handler) {
  const std::uint64_t registration = next_registration_++;
  epoll_event event{};
  event.events = events;
  event.data.u64 = registration;
  if (epoll_ctl(epoll_fd_, EPOLL_CTL_ADD, fd, &event) != 0) return 0;
  handlers_.emplace(registration, std::move(handler));
  return registration;
}

void Reactor::modify(std::uint64_t registration, int fd, std::uint32_t events) {
  epoll_event event{};
  event.events = events;
  event.data.u64 = registration;
  epoll_ctl(epoll_fd_, EPOLL_CTL_MOD, fd, &event);
}

void Reactor::remove(std::uint64_t registration, int fd) {
  epoll_ctl(epoll_fd_, EPOLL_CTL_DEL, fd, nullptr);
  handlers_.erase(registration);
}

Reactor::TimerKey Reactor::call_after(std::chrono::nanoseconds delay, std::function<void()> fn) {
  const TimerKey key{std::chrono::steady_clock::now() + delay, next_timer_++};
  timers_.emplace(key, std::move(fn));
  return key;
}

int Reactor::next_timeout_ms() const {
  if (timers_.empty()) return -1;
  const auto wait = timers_.begin()->first.first - std::chrono::steady_clock::now();
  if (wait <= std::chrono::nanoseconds::zero()) return 0;
  // Round up so a timer is never woken for early and spun on.
  return static_cast<int>(std::chrono::ceil<std::chrono::milliseconds>(wait).count());
}

void Reactor::run_commands() {
  std::vector<std::function<void()>> commands;
  {
    std::lock_guard lock(mu_);
    commands.swap(commands_);
  }
  for (auto& command : commands) command();
}

void Reactor::run_due_timers() {
  const auto now = std::chrono::steady_clock::now();
  while (!timers_.empty() && timers_.begin()->first.first <= now) {
    auto fn = std::move(timers_.begin()->second);
    timers_.erase(timers_.begin());
    fn();
  }
}

void Reactor::loop() {
  epoll_event events[kMaxEventsPerWait];
  for (;;) {
    {
      std::lock_guard lock(mu_);
      if (stopping_) return;
    }
    const int n = epoll_wait(epoll_fd_, events, kMaxEventsPerWait, next_timeout_ms());
    for (int i = 0; i < n; ++i) {
      const std::uint64_t registration = events[i].data.u64;
      if (registration == kWakeRegistration) {
        std::uint64_t count = 0;
        [[maybe_unused]] const ssize_t r = ::read(wake_fd_, &count, sizeof count);
        continue;
      }
      auto it = handlers_.find(registration);
      if (it == handlers_.end()) continue;  // removed earlier in this batch
      auto handler = it->second;            // may remove itself while handling
      handler->on_events(events[i].events);
    }
    run_commands();
    run_due_timers();
  }
}

}  // namespace rcxl::verbs
