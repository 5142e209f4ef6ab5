#include "core/client/queue_pairs.h"

#include <algorithm>

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
  auto connect = [this, alive, agent](std::string proof) {
    if (alive.expired()) return;
    nic_.connect_with_proof(endpoint(agent), strand_, std::move(proof),
                            [this, alive, agent](Result<std::shared_ptr<runtime::QueuePair>> qp) {
                              if (alive.expired()) return;
                              if (qp.ok()) qps_[agent] = *qp;
                              auto waiting = std::move(waiting_[agent]);
                              waiting_.erase(agent);
                              for (auto& w : waiting) w(qp);
                            });
  };
  if (!proof_of_) return connect(std::string());
  proof_of_(agent, std::move(connect));
}

void QueuePairs::forget_if_broken(const std::string& agent, const runtime::QueuePair* qp,
                                  const std::vector<Status>& statuses) {
  // Other failures (a gone registration, an unreachable peer) leave a QP that
  // reconnects by itself on the next post, with the proof it has.
  const bool broken = std::any_of(statuses.begin(), statuses.end(), [](const Status& s) {
    return s.code() == ErrorCode::kUnauthenticated;
  });
  if (auto it = qps_.find(agent); broken && it != qps_.end() && it->second.get() == qp) {
    qps_.erase(it);
  }
}

}  // namespace rcxl::client
