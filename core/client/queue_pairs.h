// One RDMA queue pair per agent's NIC, connected on first use and shared by
// every READ and WRITE of the owner's strand. Strand-confined.
#pragma once

#include <functional>
#include <map>
#include <memory>
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
  QueuePairs(runtime::Nic& nic, runtime::Strand& strand, const Config& config,
             ProofOf proof_of = nullptr, Refused refused = nullptr)
      : nic_(nic),
        strand_(strand),
        config_(config),
        proof_of_(std::move(proof_of)),
        refused_(std::move(refused)) {}
  ~QueuePairs() { *alive_ = false; }

  void get(const std::string& agent, Ready ready);
  // After a post through `qp`: a connection whose reconnect the agent refused
  // (kUnauthenticated: its proof names a control connection since replaced)
  // is dropped while it is still the one kept, so the next use connects anew
  // with the current proof.
  void forget_if_broken(const std::string& agent, const runtime::QueuePair* qp,
                        const std::vector<Status>& statuses);

 private:
  std::string endpoint(const std::string& agent) const;

  runtime::Nic& nic_;
  runtime::Strand& strand_;
  const Config& config_;
  ProofOf proof_of_;
  Refused refused_;
  std::map<std::string, std::shared_ptr<runtime::QueuePair>> qps_;
  std::map<std::string, std::vector<Ready>> waiting_;
  std::shared_ptr<bool> alive_ = std::make_shared<bool>(true);
};

}  // namespace rcxl::client
