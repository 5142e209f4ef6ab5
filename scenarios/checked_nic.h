// A Nic that passes every call to the real one and shows registrations,
// deregistrations and op completions to the InvariantMonitor, so "RDMA through
// a dropped registration never succeeds" is checked against books of its own.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "core/runtime/clock.h"
#include "core/runtime/nic.h"
#include "scenarios/invariant_monitor.h"

namespace rcxl::scenarios {

class CheckedNic final : public runtime::Nic {
 public:
  CheckedNic(runtime::Nic& inner, const runtime::Clock& clock, InvariantMonitor& monitor)
      : inner_(inner), clock_(clock), monitor_(monitor) {}

  Result<runtime::Registration> register_memory(runtime::MemoryPool& pool, std::uint64_t offset,
                                                std::uint64_t length, unsigned access) override;
  Status deregister(const runtime::Registration& registration) override;
  std::string endpoint() const override { return inner_.endpoint(); }
  bool moves_data() const override { return inner_.moves_data(); }
  void connect(const std::string& endpoint, runtime::Strand& strand, ConnectHandler done) override;
  Status register_local(std::span<std::byte> buffer) override {
    return inner_.register_local(buffer);
  }
  Status deregister_local(std::span<std::byte> buffer) override {
    return inner_.deregister_local(buffer);
  }

 private:
  runtime::Nic& inner_;
  const runtime::Clock& clock_;
  InvariantMonitor& monitor_;
};

}  // namespace rcxl::scenarios
