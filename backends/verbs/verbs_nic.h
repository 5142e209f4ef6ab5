// The Nic port on real RDMA (rdma-core): memory registration with ibv_reg_mr,
// an rdma_cm listener that accepts RC queue pairs (memory side), and RC queue
// pairs that post READ/WRITE work requests (initiator side). SoftRoCE in CI,
// RNICs in production (docs/hardware.md).
//
// Threads: one event thread per NIC waits on the rdma_cm event channel, the
// completion channel and a wake-up eventfd; it owns every cm id, QP and CQ, so
// verbs objects are never touched from two threads. Completions are posted to
// the strand given at connect.
#pragma once

#include <cstdint>
#include <memory>
#include <span>
#include <string>

#include "core/runtime/nic.h"

namespace rcxl::verbs {

// rdma_cm port the memory side listens on unless told otherwise; the client
// connects to the agent's host at this port when given a host alone.
inline constexpr std::uint16_t kDefaultRdmaCmPort = 7471;

struct VerbsNicOptions {
  std::string device;  // "rxe0", "mlx5_0"
  // Memory side: accept queue pairs on "IP" or "IP:PORT" (a port here wins
  // over listen_port). Empty = the device's IPv4 address from its RoCE GID table.
  std::string listen_address;
  std::uint16_t listen_port = kDefaultRdmaCmPort;  // 0 = any free port
  bool listen = true;                              // false for initiator-only NICs (clients)
  // Send queue depth per queue pair (capped by the device).
  std::uint32_t max_send_wr = 256;
  // Registered staging buffer per queue pair for local buffers not registered
  // with register_local(); work requests carry at most max_wr_bytes each.
  std::uint64_t bounce_bytes_per_qp = 16ull << 20;
  std::uint64_t max_wr_bytes = 1ull << 20;
  int resolve_timeout_ms = 2000;
};

namespace internal {
class NicCore;
}

class VerbsNic final : public runtime::Nic {
 public:
  // Opens the device, allocates a PD, starts the event thread and the listener.
  static Result<std::unique_ptr<VerbsNic>> open(VerbsNicOptions options);
  // Fails pending ops with kUnavailable, then tears down QPs, CQs, cm ids, MRs
  // and the PD. Queue pairs may outlive the NIC; their posts then fail.
  ~VerbsNic() override;
  VerbsNic(const VerbsNic&) = delete;
  VerbsNic& operator=(const VerbsNic&) = delete;

  Result<runtime::Registration> register_memory(runtime::MemoryPool& pool, std::uint64_t offset,
                                                std::uint64_t length, unsigned access) override;
  Status deregister(const runtime::Registration& registration) override;
  // "IP:PORT" of the rdma_cm listener ("none" when not listening).
  std::string endpoint() const override;
  // `endpoint` is "HOST:PORT", "[IPv6]:PORT" or a host alone (port
  // kDefaultRdmaCmPort). A host name is resolved here, on the caller's thread.
  void connect(const std::string& endpoint, runtime::Strand& strand, ConnectHandler done) override;
  void connect_with_proof(const std::string& endpoint, runtime::Strand& strand, std::string proof,
                          ConnectHandler done) override;
  bool check_connects(ConnectCheck check) override;

  // Zero-copy: ops whose local buffer lies inside a buffer registered here are
  // posted straight from it instead of through the staging buffer.
  bool needs_local_registration() const override { return true; }
  Status register_local(std::span<std::byte> buffer) override;
  Status deregister_local(std::span<std::byte> buffer) override;

  const std::string& device() const;

 private:
  explicit VerbsNic(std::shared_ptr<internal::NicCore> core) : core_(std::move(core)) {}
  std::shared_ptr<internal::NicCore> core_;
};

// Names of the RDMA devices this host has (empty without rdma-core devices).
std::vector<std::string> rdma_device_names();

}  // namespace rcxl::verbs
