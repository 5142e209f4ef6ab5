// A Nic that passes every call to another: tests override the one call they
// need to fail, hold or count (registrations, connects, queue pairs).
#pragma once

#include <memory>
#include <span>
#include <string>

#include "core/runtime/nic.h"

namespace rcxl::testing {

class ForwardingNic : public runtime::Nic {
 public:
  explicit ForwardingNic(runtime::Nic& inner) : inner_(inner) {}
  Result<runtime::Registration> register_memory(runtime::MemoryPool& pool, std::uint64_t offset,
                                                std::uint64_t length, unsigned access) override {
    return inner_.register_memory(pool, offset, length, access);
  }
  Status deregister(const runtime::Registration& r) override { return inner_.deregister(r); }
  std::string endpoint() const override { return inner_.endpoint(); }
  bool moves_data() const override { return inner_.moves_data(); }
  bool check_connects(ConnectCheck check) override {
    return inner_.check_connects(std::move(check));
  }
  void connect(const std::string& endpoint, runtime::Strand& strand, ConnectHandler done) override {
    connect_with_proof(endpoint, strand, std::string(), std::move(done));
  }
  void connect_with_proof(const std::string& endpoint, runtime::Strand& strand, std::string proof,
                          ConnectHandler done) override {
    inner_.connect_with_proof(endpoint, strand, std::move(proof), std::move(done));
  }
  bool needs_local_registration() const override { return inner_.needs_local_registration(); }
  Status register_local(std::span<std::byte> buffer) override {
    return inner_.register_local(buffer);
  }
  Status deregister_local(std::span<std::byte> buffer) override {
    return inner_.deregister_local(buffer);
  }

 protected:
  runtime::Nic& inner_;
};

}  // namespace rcxl::testing
