// A test NIC for the thread runtime that moves bytes by copying inside this
// process, so client code runs on real threads without RDMA (the host kernel
// has none; verbs tests need the VM). The memory side registers pool ranges;
// an initiator's ops are copied to or from them on the NIC's own thread after
// `latency` (or once the test releases them, see hold()), and completions go
// to the strand given at connect, as the verbs NIC does. Each op fails or
// succeeds alone (no RC error state). Counts local registrations (zero copy)
// and an op whose buffer was registered when posted but not when copied.
#pragma once

#include <map>
#include <memory>
#include <mutex>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "backends/verbs/thread_strand.h"
#include "core/runtime/nic.h"

namespace rcxl::client::testing {

class LoopbackNic final : public runtime::Nic {
 public:
  explicit LoopbackNic(runtime::Duration latency = runtime::Duration::zero())
      : state_(std::make_shared<State>()), latency_(latency) {}
  ~LoopbackNic() override {
    std::vector<runtime::Task> dropped;  // ops still held: their completions go unrun
    {
      std::lock_guard lock(state_->mu);
      dropped.swap(state_->waiting);
    }
  }
  LoopbackNic(const LoopbackNic&) = delete;
  LoopbackNic& operator=(const LoopbackNic&) = delete;

  Result<runtime::Registration> register_memory(runtime::MemoryPool& pool, std::uint64_t offset,
                                                std::uint64_t length, unsigned access) override {
    std::lock_guard lock(state_->mu);
    const std::uint32_t rkey = state_->next_rkey++;
    state_->remote[rkey] = {&pool, offset, length, access};
    return runtime::Registration{offset, rkey, length};
  }
  Status deregister(const runtime::Registration& r) override {
    std::lock_guard lock(state_->mu);
    if (state_->remote.erase(r.rkey) == 0) return Error(ErrorCode::kNotFound, "no such rkey");
    return {};
  }
  std::string endpoint() const override { return "loopback"; }
  bool needs_local_registration() const override { return true; }
  void connect(const std::string& endpoint, runtime::Strand& strand, ConnectHandler done) override {
    auto qp = std::make_shared<Qp>(state_, worker_.queue(), verbs::make_strand_poster(strand),
                                   latency_, endpoint);
    strand.post([qp, done = std::move(done)] { done(std::shared_ptr<runtime::QueuePair>(qp)); });
  }
  Status register_local(std::span<std::byte> buffer) override {
    std::lock_guard lock(state_->mu);
    ++state_->locals_registered;
    state_->live_locals.insert(buffer.data());
    return {};
  }
  Status deregister_local(std::span<std::byte> buffer) override {
    std::lock_guard lock(state_->mu);
    if (state_->live_locals.erase(buffer.data()) == 0) {
      ++state_->unknown_deregistrations;
      return Error(ErrorCode::kNotFound, "local buffer not registered");
    }
    return {};
  }

  // Posted ops wait (not copied, not completed) until release().
  void hold() {
    std::lock_guard lock(state_->mu);
    state_->held = true;
  }
  void release() {
    std::vector<runtime::Task> go;
    {
      std::lock_guard lock(state_->mu);
      state_->held = false;
      go.swap(state_->waiting);
    }
    for (auto& task : go) worker_.post(std::move(task));
  }

  int locals_registered() const {
    std::lock_guard lock(state_->mu);
    return state_->locals_registered;
  }
  std::size_t live_locals() const {
    std::lock_guard lock(state_->mu);
    return state_->live_locals.size();
  }
  // Ops posted and not yet copied.
  int in_flight() const {
    std::lock_guard lock(state_->mu);
    return state_->in_flight;
  }
  int unknown_deregistrations() const {
    std::lock_guard lock(state_->mu);
    return state_->unknown_deregistrations;
  }
  // Ops whose buffer was deregistered while they ran (a NIC would fault).
  int copies_after_deregistration() const {
    std::lock_guard lock(state_->mu);
    return state_->copies_after_deregistration;
  }

 private:
  struct Remote {
    runtime::MemoryPool* pool = nullptr;
    std::uint64_t offset = 0;
    std::uint64_t length = 0;
    unsigned access = 0;
  };
  // Shared with the queue pairs, which the client may keep after the NIC.
  struct State {
    mutable std::mutex mu;
    std::map<std::uint32_t, Remote> remote;
    std::uint32_t next_rkey = 1;
    int locals_registered = 0;
    std::set<const std::byte*> live_locals;
    int unknown_deregistrations = 0;
    int copies_after_deregistration = 0;
    int in_flight = 0;
    bool held = false;
    std::vector<runtime::Task> waiting;  // posted while held
  };

  class Qp final : public runtime::QueuePair {
   public:
    Qp(std::shared_ptr<State> state, std::shared_ptr<verbs::StrandQueue> worker,
       verbs::StrandPoster poster, runtime::Duration latency, std::string peer)
        : state_(std::move(state)),
          worker_(std::move(worker)),
          poster_(std::move(poster)),
          latency_(latency),
          peer_(std::move(peer)) {}
    void post(std::vector<runtime::RdmaOp> ops, CompletionHandler done) override {
      std::vector<bool> registered;
      {
        std::lock_guard lock(state_->mu);
        for (const auto& op : ops) registered.push_back(state_->live_locals.count(op.local.data()));
      }
      const int n = static_cast<int>(ops.size());
      runtime::Task run = [state = state_, poster = poster_, ops = std::move(ops), registered,
                           done = std::move(done)]() mutable {
        std::vector<Status> statuses;
        for (std::size_t i = 0; i < ops.size(); ++i) {
          statuses.push_back(copy(*state, ops[i], registered[i]));
        }
        {
          std::lock_guard lock(state->mu);
          state->in_flight -= static_cast<int>(ops.size());
        }
        poster([done = std::move(done), statuses = std::move(statuses)] { done(statuses); });
      };
      {
        std::lock_guard lock(state_->mu);
        state_->in_flight += n;
        if (state_->held) {
          state_->waiting.push_back(std::move(run));
          return;
        }
      }
      worker_->post_after(latency_, std::move(run));
    }
    std::string peer() const override { return peer_; }

   private:
    static Status copy(State& state, const runtime::RdmaOp& op, bool was_registered) {
      std::lock_guard lock(state.mu);
      if (was_registered && !state.live_locals.count(op.local.data())) {
        ++state.copies_after_deregistration;
      }
      auto it = state.remote.find(op.rkey);
      const std::uint64_t length = op.wire_length();
      if (length != op.local.size()) return Error(ErrorCode::kBadRequest, "sampled op");
      if (it == state.remote.end() || op.remote_addr < it->second.offset ||
          op.remote_addr - it->second.offset > it->second.length ||
          length > it->second.length - (op.remote_addr - it->second.offset)) {
        return Error(ErrorCode::kRemoteAccess, "no registration covers the range");
      }
      if (op.kind == runtime::RdmaOp::Kind::kRead) {
        return it->second.pool->read(op.remote_addr, op.local);
      }
      return it->second.pool->write(op.remote_addr, op.local);
    }

    std::shared_ptr<State> state_;
    std::shared_ptr<verbs::StrandQueue> worker_;
    verbs::StrandPoster poster_;
    runtime::Duration latency_;
    std::string peer_;
  };

  std::shared_ptr<State> state_;
  runtime::Duration latency_;
  verbs::ThreadStrand worker_{"loopback-nic"};
};

}  // namespace rcxl::client::testing
