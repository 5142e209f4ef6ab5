// A way onto a strand for replies that come from another strand, which its
// owner closes before the strand goes: a reply after that is dropped instead
// of reaching a destroyed strand (a directory reply that outlived the hint
// thread crashed rcxl-kv at exit). Thread-safe.
#pragma once

#include <mutex>
#include <utility>

#include "core/runtime/strand.h"

namespace rcxl::runtime {

class StrandGate {
 public:
  explicit StrandGate(Strand& strand) : strand_(&strand) {}
  StrandGate(const StrandGate&) = delete;
  StrandGate& operator=(const StrandGate&) = delete;

  // Runs `task` on the strand, or drops it once the gate is closed.
  void post(Task task) {
    {
      std::lock_guard lock(mu_);
      if (strand_ != nullptr) {
        strand_->post(std::move(task));
        return;
      }
    }
    // Dropped here, outside the lock: its captures may take locks of their own.
  }
  // True when the caller runs on the strand and the gate is open.
  bool running_here() const {
    std::lock_guard lock(mu_);
    return strand_ != nullptr && strand_->running_here();
  }
  // After it returns no post reaches the strand.
  void close() {
    std::lock_guard lock(mu_);
    strand_ = nullptr;
  }

 private:
  mutable std::mutex mu_;
  Strand* strand_;
};

}  // namespace rcxl::runtime
