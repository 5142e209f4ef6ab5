#include "backends/sim/sim_strand.h"

#include "backends/sim/sim_world.h"

namespace rcxl::sim {

SimStrand::SimStrand(SimWorld& world, std::string name) : world_(world), name_(std::move(name)) {
  world_.strand_created(this);
}

SimStrand::~SimStrand() {
  *alive_ = false;
  for (auto id : timers_) world_.loop().cancel(id);
  world_.strand_destroyed(this);
}

void SimStrand::run(const runtime::Task& task) {
  SimStrand* previous = world_.current_strand();
  world_.set_current_strand(this);
  task();
  world_.set_current_strand(previous);
}

void SimStrand::post(runtime::Task task) {
  world_.loop().schedule_after(runtime::Duration(0),
                               [this, alive = alive_, task = std::move(task)] {
                                 if (*alive) run(task);
                               });
}

runtime::TimerId SimStrand::post_after(runtime::Duration delay, runtime::Task task) {
  auto id = std::make_shared<EventLoop::EventId>(0);
  *id = world_.loop().schedule_after(delay, [this, alive = alive_, id, task = std::move(task)] {
    if (!*alive) return;
    timers_.erase(*id);
    world_.trace().record(world_.loop().now().count(), "timer " + name_);
    run(task);
  });
  timers_.insert(*id);
  return *id;
}

bool SimStrand::cancel(runtime::TimerId id) {
  if (timers_.erase(id) == 0) return false;
  return world_.loop().cancel(id);
}

bool SimStrand::running_here() const {
  return world_.current_strand() == this;
}

}  // namespace rcxl::sim
