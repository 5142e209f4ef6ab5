#include "core/client/scheduler_connector.h"

namespace rcxl::client {

void SchedulerConnector::on_request_arrival(const std::string& request,
                                            std::vector<std::string> keys) {
  if (!handler_.config().read_hint_on_arrival) return;
  hint_once(request, std::move(keys));
}

void SchedulerConnector::on_async_load_found(const std::string& request,
                                             std::vector<std::string> keys) {
  hint_once(request, std::move(keys), /*load_found=*/true);
}

void SchedulerConnector::hint_once(const std::string& request, std::vector<std::string> keys,
                                   bool load_found) {
  if (!handler_.config().read_hints) return;
  std::lock_guard<std::mutex> lock(mutex_);
  if (auto it = requests_.find(request); it != requests_.end()) {
    // A request is hinted once. But a hint on arrival may have opened nothing
    // (its keys were still being stored then): the load found now names them,
    // so they are hinted again, unless its end went already; MemoryHints
    // skips a request that is open (R3.8: when the load is first found).
    if (!load_found || !it->second.on_arrival || it->second.ended) return;
    it->second.on_arrival = false;
    ++hints_;
    handler_.hint_read(request, std::move(keys));
    return;
  }
  const std::uint64_t seq = ++seq_;
  requests_[request] = {seq, false, !load_found};
  order_[seq] = request;
  ++hints_;
  handler_.hint_read(request, std::move(keys));
  // SPEC R3.8: bounded state; the oldest request is ended and forgotten.
  while (requests_.size() > handler_.config().max_scheduler_requests) {
    const std::string oldest = order_.begin()->second;
    auto it = requests_.find(oldest);
    if (!it->second.ended) ++forced_ends_;
    end_once(it->second, oldest);
    order_.erase(order_.begin());
    requests_.erase(it);
  }
}

void SchedulerConnector::end_once(State& state, const std::string& request) {
  if (state.ended) return;
  state.ended = true;
  ++ends_;
  handler_.end_read_hint(request);
}

void SchedulerConnector::on_finished_recving(const std::string& request) {
  std::lock_guard<std::mutex> lock(mutex_);
  auto it = requests_.find(request);
  if (it != requests_.end()) end_once(it->second, request);  // kept: no second hint
}

void SchedulerConnector::on_request_finished(const std::string& request) {
  std::lock_guard<std::mutex> lock(mutex_);
  auto it = requests_.find(request);
  if (it == requests_.end()) return;
  end_once(it->second, request);  // the fallback when the load never reported done
  order_.erase(it->second.seq);
  requests_.erase(it);
}

void SchedulerConnector::lookup(const std::vector<std::string>& keys,
                                std::function<void(Result<std::size_t>)> done) {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    ++lookups_;
  }
  handler_.lookup(keys, std::move(done));
}

std::uint64_t SchedulerConnector::lookups() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return lookups_;
}

std::size_t SchedulerConnector::tracked() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return requests_.size();
}
std::uint64_t SchedulerConnector::hints_sent() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return hints_;
}
std::uint64_t SchedulerConnector::ends_sent() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return ends_;
}
std::uint64_t SchedulerConnector::forced_ends() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return forced_ends_;
}

}  // namespace rcxl::client
