// Bounded blocking waits for tests on the thread runtime: tests may block, core
// may not. A wait that runs out is a hung test: it aborts with a message rather
// than leave a task referring to a dead stack frame.
#pragma once

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <functional>
#include <future>
#include <thread>

#include "core/runtime/strand.h"

namespace rcxl::testing {

inline constexpr auto kTestTimeout = std::chrono::seconds(20);

template <typename T>
T get_or_abort(std::future<T>& future, const char* what) {
  if (future.wait_for(kTestTimeout) != std::future_status::ready) {
    std::fprintf(stderr, "test hung: %s\n", what);
    std::abort();
  }
  return future.get();
}

// Runs `fn` on `strand` and returns after it ran.
inline void run_on(runtime::Strand& strand, const std::function<void()>& fn) {
  std::promise<void> done;
  auto future = done.get_future();
  strand.post([&] {
    fn();
    done.set_value();
  });
  get_or_abort(future, "run_on");
}

// Evaluates `condition` on `strand` until it holds (true) or the test timeout
// passes (false). For effects that land on another thread at an unknown moment.
inline bool eventually(runtime::Strand& strand, const std::function<bool()>& condition) {
  const auto deadline = std::chrono::steady_clock::now() + kTestTimeout;
  while (std::chrono::steady_clock::now() < deadline) {
    bool holds = false;
    run_on(strand, [&] { holds = condition(); });
    if (holds) return true;
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  return false;
}

}  // namespace rcxl::testing
