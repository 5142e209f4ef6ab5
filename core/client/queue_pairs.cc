#include "core/client/queue_pairs.h"

namespace rcxl::client {

std::string QueuePairs::endpoint(const std::string& agent) const {
  auto address = runtime::Address::Parse(agent);
  runtime::Address a = address.ok() ? *address : runtime::Address{agent, 0};
  return config_.nic_endpoint ? config_.nic_endpoint(a) : a.host;
}

void QueuePairs::get(const std::string& agent, Ready ready) {
  if (auto it = qps_.find(agent); it != qps_.end()) return ready(it->second);
  auto& waiting = waiting_[agent];
  waiting.push_back(std::move(ready));
  if (waiting.size() > 1) return;
  std::weak_ptr<bool> alive = alive_;
  nic_.connect_with_proof(endpoint(agent), strand_, proof_of_ ? proof_of_(agent) : std::string(),
                          [this, alive, agent](Result<std::shared_ptr<runtime::QueuePair>> qp) {
                            if (alive.expired()) return;
                            if (qp.ok()) qps_[agent] = *qp;
                            auto waiting = std::move(waiting_[agent]);
                            waiting_.erase(agent);
                            for (auto& w : waiting) w(qp);
                          });
}

}  // namespace rcxl::client
