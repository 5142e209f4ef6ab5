#include "core/client/worker_connector.h"

namespace rcxl::client {

WorkerConnector::WorkerConnector(runtime::Runtime& rt, Handler& handler)
    : handler_(handler), write_behind_(rt.make_strand("write-behind")) {
  back_to_write_behind_ = std::make_shared<runtime::StrandGate>(*write_behind_);
}

WorkerConnector::~WorkerConnector() {
  back_to_write_behind_->close();
  // write_behind_ goes next (last member): queued saves are dropped, a running
  // task finishes while the other members are alive.
}

void WorkerConnector::start_load(const std::string& request, std::vector<std::string> keys,
                                 Handler::LoadDone done) {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    // Only promotes that go out are counted and remembered (R4.5: off with
    // read_promotes or read_hints off).
    if (handler_.config().effective_read_promotes() && !promoted_.count(request)) {
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
  ++*pending_saves_;
  write_behind_->post([this, items = std::move(items), done = std::move(done)]() mutable {
    saves_.push_back({std::move(items), std::move(done)});
    next_save();
  });
}

void WorkerConnector::next_save() {
  if (saving_ || saves_.empty()) return;
  saving_ = true;
  Save save = std::move(saves_.front());
  saves_.pop_front();
  // Runs on the handler's strand, maybe after this connector is gone: it
  // touches only the gate (shared) until the gate puts it on write_behind_.
  handler_.store(std::move(save.items),
                 [this, gate = back_to_write_behind_, pending = pending_saves_,
                  done = std::move(save.done)](Result<StoreResult> result) {
                   --*pending;  // before `done`, which may ask
                   if (done) done(std::move(result));
                   gate->post([this] {
                     saving_ = false;
                     next_save();
                   });
                 });
}

std::uint64_t WorkerConnector::promotes_sent() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return promotes_;
}

}  // namespace rcxl::client
