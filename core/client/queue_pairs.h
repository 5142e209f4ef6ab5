// One RDMA queue pair per agent's NIC, connected on first use and shared by
// every READ and WRITE of the owner's strand. Strand-confined.
#pragma once

#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "core/client/config.h"
#include "core/runtime/nic.h"

namespace rcxl::client {

class QueuePairs {
 public:
  using Ready = std::function<void(Result<std::shared_ptr<runtime::QueuePair>>)>;
  // Gives the connect proof an agent asks for (its hello says so), else empty,
  // or why there is none (the hello failed): asynchronous, since a proof of a
  // closed control connection must be made anew.
  using ProofOf =
      std::function<void(const std::string& agent, std::function<void(Result<std::string>)> give)>;
  // The agent refused a connect with the proof of the control connection's live hello.
  using Refused = std::function<void(const std::string& agent)>;
  // A connect to the agent's RDMA endpoint (`endpoint`, as the NIC reaches it)
  // failed: it is not tried again until `until` (unreachable_backoff later).
  using Unreachable = std::function<void(const std::string& agent, const std::string& endpoint,
                                         runtime::Instant until)>;
  QueuePairs(runtime::Nic& nic, runtime::Strand& strand, const runtime::Clock& clock,
             const Config& config, ProofOf proof_of = nullptr, Refused refused = nullptr,
             Unreachable unreachable = nullptr)
      : nic_(nic),
        strand_(strand),
        clock_(clock),
        config_(config),
        proof_of_(std::move(proof_of)),
        refused_(std::move(refused)),
        unreachable_(std::move(unreachable)) {}
  ~QueuePairs() { *alive_ = false; }

  // The agent's queue pair, connected on first use. An agent whose RDMA
  // endpoint could not be reached is not tried again for unreachable_backoff:
  // each READ or WRITE would pay a connect attempt (on verbs, seconds of
  // address and route resolution) that fails the same way.
  void get(const std::string& agent, Ready ready);
  // The agent's boot moved (a restart, a reset): its endpoint may be back, and
  // a connect begun before fails no backoff.
  void forget_unreachable(const std::string& agent);
  // Why the agent's endpoint is not tried now (in its backoff), if it is not.
  std::optional<Status> unreachable(const std::string& agent);
  // After a post through `qp`: a connection whose reconnect the agent refused
  // (kUnauthenticated: its proof names a control connection since replaced),
  // or whose every op failed unavailable (the peer is gone), is dropped while
  // it is still the one kept, so the next use connects anew with the current
  // proof (and an endpoint not reached is backed off from).
  void forget_if_broken(const std::string& agent, const runtime::QueuePair* qp,
                        const std::vector<Status>& statuses);

 private:
  std::string endpoint(const std::string& agent) const;

  runtime::Nic& nic_;
  runtime::Strand& strand_;
  const runtime::Clock& clock_;
  const Config& config_;
  ProofOf proof_of_;
  Refused refused_;
  Unreachable unreachable_;
  std::map<std::string, runtime::Instant> unreachable_until_;
  std::map<std::string, std::uint64_t> generation_;  // boot changes seen per agent
  std::map<std::string, std::shared_ptr<runtime::QueuePair>> qps_;
  std::map<std::string, std::vector<Ready>> waiting_;
  std::shared_ptr<bool> alive_ = std::make_shared<bool>(true);
};

}  // namespace rcxl::client
