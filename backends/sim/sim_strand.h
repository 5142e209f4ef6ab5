// A virtual thread on the event loop: tasks and timers of one strand run in order.
#pragma once

#include <memory>
#include <set>
#include <string>

#include "backends/sim/event_loop.h"
#include "core/runtime/strand.h"

namespace rcxl::sim {

class SimWorld;

class SimStrand final : public runtime::Strand {
 public:
  SimStrand(SimWorld& world, std::string name);
  ~SimStrand() override;

  const std::string& name() const override { return name_; }
  void post(runtime::Task task) override;
  runtime::TimerId post_after(runtime::Duration delay, runtime::Task task) override;
  bool cancel(runtime::TimerId id) override;
  bool running_here() const override;
  // Runs `task` now, as this strand (the sim has one real thread).
  void run_inline(const runtime::Task& task) {
    if (*alive_) run(task);
  }
  // False once the strand is destroyed: events captured earlier check it.
  std::shared_ptr<bool> alive_token() const { return alive_; }
  // Timers still pending (deadlock reports).
  std::size_t pending_timers() const { return timers_.size(); }

 private:
  void run(const runtime::Task& task);

  SimWorld& world_;
  std::string name_;
  std::set<EventLoop::EventId> timers_;
  // Tasks scheduled before the strand died must not run after.
  std::shared_ptr<bool> alive_ = std::make_shared<bool>(true);
};

}  // namespace rcxl::sim
