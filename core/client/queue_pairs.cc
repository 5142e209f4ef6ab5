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
  if (auto why = unreachable(agent)) return ready(*why);
  auto& waiting = waiting_[agent];
  waiting.push_back(std::move(ready));
  if (waiting.size() > 1) return;
  std::weak_ptr<bool> alive = alive_;
  // `connected`: the NIC's connect answered (not a missing proof). A boot
  // change since the connect began is news its failure predates.
  auto finish = [this, agent, generation = generation_[agent]](
                    const Result<std::shared_ptr<runtime::QueuePair>>& qp, bool connected) {
    if (qp.ok()) qps_[agent] = *qp;
    // Refused with the proof of the live hello: the agent does not know that
    // connection (a reconnect refused after a post only had an older proof).
    if (!qp.ok() && qp.status().code() == ErrorCode::kUnauthenticated && refused_) {
      refused_(agent);
    }
    // Nothing listens there, or it does not answer. (A control connection that
    // failed, leaving no proof, is the control path's to back off from.)
    if (!qp.ok() && connected && generation == generation_[agent] &&
        (qp.status().code() == ErrorCode::kUnavailable ||
         qp.status().code() == ErrorCode::kTimeout)) {
      const runtime::Instant until = clock_.now() + config_.unreachable_backoff;
      unreachable_until_[agent] = until;
      if (unreachable_) unreachable_(agent, endpoint(agent), until);
    }
    auto waiting = std::move(waiting_[agent]);
    waiting_.erase(agent);
    for (auto& w : waiting) w(qp);
  };
  auto connect = [this, alive, agent, finish](Result<std::string> proof) {
    if (alive.expired()) return;
    if (!proof.ok()) return finish(proof.status(), false);  // no control connection, no proof
    nic_.connect_with_proof(endpoint(agent), strand_, std::move(proof).value(),
                            [alive, finish](Result<std::shared_ptr<runtime::QueuePair>> qp) {
                              if (!alive.expired()) finish(qp, true);
                            });
  };
  if (!proof_of_) return connect(std::string());
  proof_of_(agent, std::move(connect));
}

std::optional<Status> QueuePairs::unreachable(const std::string& agent) {
  auto it = unreachable_until_.find(agent);
  if (it == unreachable_until_.end()) return std::nullopt;
  if (clock_.now() >= it->second) {
    unreachable_until_.erase(it);
    return std::nullopt;
  }
  return Error(ErrorCode::kUnavailable,
               "the RDMA endpoint of " + agent + " (" + endpoint(agent) +
                   ") could not be reached: not tried again for " +
                   std::to_string(runtime::to_millis(it->second - clock_.now())) +
                   " ms (unreachable_backoff)");
}

void QueuePairs::forget_unreachable(const std::string& agent) {
  unreachable_until_.erase(agent);
  ++generation_[agent];
}

void QueuePairs::forget_if_broken(const std::string& agent, const runtime::QueuePair* qp,
                                  const std::vector<Status>& statuses) {
  // A reconnect the agent refused, or a peer gone (every op unavailable: its
  // reconnect failed too): the next use connects anew through get(), with the
  // current proof, and an endpoint that cannot be reached is backed off from.
  // A gone registration (remote access, the flushed ops after it) keeps the QP.
  // A post whose ops were all flushed by another post's failure drops a
  // healthy QP too: it costs one connect, and starts no backoff.
  const bool refused = std::any_of(statuses.begin(), statuses.end(), [](const Status& s) {
    return s.code() == ErrorCode::kUnauthenticated;
  });
  const bool gone =
      !statuses.empty() && std::all_of(statuses.begin(), statuses.end(), [](const Status& s) {
        return s.code() == ErrorCode::kUnavailable;
      });
  const bool broken = refused || gone;
  if (auto it = qps_.find(agent); broken && it != qps_.end() && it->second.get() == qp) {
    qps_.erase(it);
  }
}

}  // namespace rcxl::client
