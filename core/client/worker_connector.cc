#include "core/client/worker_connector.h"

namespace rcxl::client {

WorkerConnector::WorkerConnector(runtime::Runtime& rt, Handler& handler)
    : handler_(handler), write_behind_(rt.make_strand("write-behind")) {}

WorkerConnector::~WorkerConnector() {
  *alive_ = false;
}

void WorkerConnector::start_load(const std::string& request, std::vector<std::string> keys,
                                 Handler::LoadDone done) {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    if (!promoted_.count(request)) {
      const std::uint64_t seq = ++seq_;
      promoted_[request] = seq;
      promoted_order_[seq] = request;
      ++promotes_;
      // R4.5: before the first READ of the load; the extension matches it by id.
      handler_.promote_read(request);
      while (promoted_.size() > handler_.config().max_scheduler_requests) {
        promoted_.erase(promoted_order_.begin()->second);
        promoted_order_.erase(promoted_order_.begin());
      }
    }
  }
  // The scheduler hinted this request: the load does not hint itself (R3.8).
  handler_.load(std::move(keys), std::move(done), /*engine_hinted=*/true);
}

void WorkerConnector::on_request_finished(const std::string& request) {
  std::lock_guard<std::mutex> lock(mutex_);
  auto it = promoted_.find(request);
  if (it == promoted_.end()) return;
  promoted_order_.erase(it->second);
  promoted_.erase(it);
}

void WorkerConnector::save(std::vector<StoreItem> items, Handler::StoreDone done) {
  std::weak_ptr<bool> alive = alive_;
  write_behind_->post([this, alive, items = std::move(items), done = std::move(done)]() mutable {
    if (alive.expired()) return;
    saves_.push_back({std::move(items), std::move(done)});
    next_save();
  });
}

void WorkerConnector::next_save() {
  if (saving_ || saves_.empty()) return;
  saving_ = true;
  Save save = std::move(saves_.front());
  saves_.pop_front();
  std::weak_ptr<bool> alive = alive_;
  handler_.store(std::move(save.items),
                 [this, alive, done = std::move(save.done)](Result<StoreResult> result) {
                   if (done) done(std::move(result));
                   if (alive.expired()) return;
                   write_behind_->post([this, alive] {
                     if (alive.expired()) return;
                     saving_ = false;
                     next_save();
                   });
                 });
}

std::size_t WorkerConnector::pending_saves() const {
  // Read between runs in sim; approximate elsewhere.
  return saves_.size() + (saving_ ? 1 : 0);
}

std::uint64_t WorkerConnector::promotes_sent() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return promotes_;
}

}  // namespace rcxl::client
