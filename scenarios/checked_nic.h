// A Nic that passes every call to the real one and shows registrations,
// deregistrations and op completions to the InvariantMonitor, so "RDMA through
// a dropped registration never succeeds" is checked against books of its own.
#pragma once

#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "core/runtime/clock.h"
#include "core/runtime/nic.h"
#include "scenarios/invariant_monitor.h"

namespace rcxl::scenarios {

class CheckedNic final : public runtime::Nic {
 public:
  // The books of the node an RDMA op reaches: its registrations decide.
  using MonitorFor = std::function<InvariantMonitor*(const std::string& endpoint)>;

  // `monitor` keeps this NIC's registrations; completions of ops through a
  // queue pair go to `route(peer endpoint)` when given (a GPU node reaching
  // several memory nodes), else to `monitor`.
  CheckedNic(runtime::Nic& inner, const runtime::Clock& clock, InvariantMonitor& monitor,
             MonitorFor route = nullptr)
      : inner_(inner), clock_(clock), monitor_(monitor), route_(std::move(route)) {}

  Result<runtime::Registration> register_memory(runtime::MemoryPool& pool, std::uint64_t offset,
                                                std::uint64_t length, unsigned access) override;
  Status deregister(const runtime::Registration& registration) override;
  std::string endpoint() const override { return inner_.endpoint(); }
  bool moves_data() const override { return inner_.moves_data(); }
  void connect(const std::string& endpoint, runtime::Strand& strand, ConnectHandler done) override;
  void connect_with_proof(const std::string& endpoint, runtime::Strand& strand, std::string proof,
                          ConnectHandler done) override;
  bool check_connects(ConnectCheck check) override {
    return inner_.check_connects(std::move(check));
  }
  bool needs_local_registration() const override { return inner_.needs_local_registration(); }
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
  MonitorFor route_;
};

}  // namespace rcxl::scenarios
