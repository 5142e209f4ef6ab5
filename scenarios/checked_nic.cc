#include "scenarios/checked_nic.h"

namespace rcxl::scenarios {

namespace {

class CheckedQueuePair final : public runtime::QueuePair {
 public:
  CheckedQueuePair(std::shared_ptr<runtime::QueuePair> inner, const runtime::Clock& clock,
                   InvariantMonitor& monitor)
      : inner_(std::move(inner)), clock_(clock), monitor_(monitor) {}

  void post(std::vector<runtime::RdmaOp> ops, CompletionHandler done) override {
    const runtime::Instant posted = clock_.now();
    // Copies of the ops' addressing (the local spans stay the caller's).
    std::vector<runtime::RdmaOp> seen;
    seen.reserve(ops.size());
    for (const auto& op : ops) seen.push_back({op.kind, {}, op.remote_addr, op.rkey, op.length});
    InvariantMonitor* monitor = &monitor_;
    inner_->post(std::move(ops), [monitor, posted, seen = std::move(seen),
                                  done = std::move(done)](std::vector<Status> per_op) {
      for (std::size_t i = 0; i < per_op.size() && i < seen.size(); ++i) {
        monitor->on_completion(seen[i], posted, per_op[i]);
      }
      done(std::move(per_op));
    });
  }
  std::string peer() const override { return inner_->peer(); }

 private:
  std::shared_ptr<runtime::QueuePair> inner_;
  const runtime::Clock& clock_;
  InvariantMonitor& monitor_;
};

}  // namespace

Result<runtime::Registration> CheckedNic::register_memory(runtime::MemoryPool& pool,
                                                          std::uint64_t offset,
                                                          std::uint64_t length, unsigned access) {
  auto r = inner_.register_memory(pool, offset, length, access);
  if (r.ok()) monitor_.on_register(r.value());
  return r;
}

Status CheckedNic::deregister(const runtime::Registration& registration) {
  Status s = inner_.deregister(registration);
  if (s.ok()) monitor_.on_deregister(registration);
  return s;
}

void CheckedNic::connect(const std::string& endpoint, runtime::Strand& strand,
                         ConnectHandler done) {
  connect_with_proof(endpoint, strand, std::string(), std::move(done));
}

void CheckedNic::connect_with_proof(const std::string& endpoint, runtime::Strand& strand,
                                    std::string proof, ConnectHandler done) {
  InvariantMonitor* routed = route_ ? route_(endpoint) : nullptr;
  InvariantMonitor& books = routed ? *routed : monitor_;
  inner_.connect_with_proof(
      endpoint, strand, std::move(proof),
      [this, &books, done = std::move(done)](Result<std::shared_ptr<runtime::QueuePair>> qp) {
        if (!qp.ok()) return done(std::move(qp));
        done(std::shared_ptr<runtime::QueuePair>(
            std::make_shared<CheckedQueuePair>(std::move(qp).value(), clock_, books)));
      });
}

}  // namespace rcxl::scenarios
