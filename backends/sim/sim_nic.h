// The simulated RNIC: registrations with rkeys, RC queue pairs, READ/WRITE that
// move real bytes with latency + bandwidth, and ask the target memory (a
// MemoryTiming, when it is one) when each range can be accessed. Line rate is
// per port and direction, shared by the port's queue pairs: a transfer books
// the sender's TX and the receiver's RX in the first gap both have at or
// after its QP's turn, a segment at a time while others stream on the port
// (they take turns), so GPU nodes reading one memory node share its port. With one
// active QP per port (the seed's data path: one QP per peer) this is the QP's
// own line rate. A QP's requests leave and execute in order (RC): a READ
// posted behind a WRITE waits for its data and sees its bytes; completions
// come in posting order; a failed op flushes the ops behind it (error state).
#pragma once

#include <algorithm>
#include <cstdint>
#include <map>
#include <memory>
#include <string>

#include "backends/sim/port_timeline.h"
#include "backends/sim/sim_world.h"
#include "core/runtime/nic.h"

namespace rcxl::sim {

struct NicParams {
  // One-way NIC-to-NIC latency incl. switch and PCIe (~2-3 us RoCE/IB class).
  runtime::Duration latency = std::chrono::nanoseconds(2500);
  // 100 Gb/s line rate with protocol overhead (perftest ~94 Gb/s on 100G IB).
  double bytes_per_second = 11.75e9;
  // Per work request cost in the NIC pipeline.
  runtime::Duration per_op = std::chrono::nanoseconds(100);
  // Granularity at which a transfer streams against device readiness.
  std::uint64_t stream_segment_bytes = std::uint64_t{256} * 1024;

  bool operator==(const NicParams&) const = default;
};

class SimNic;

// All NICs of a world and the registrations they expose.
class SimFabric {
 public:
  SimFabric(SimWorld& world, NicParams params = {}) : world_(world), params_(params) {}
  ~SimFabric();
  SimNic& add_nic(const std::string& node);
  SimNic* nic(const std::string& node);
  const NicParams& params() const { return params_; }
  void set_params(const NicParams& params) { params_ = params; }
  SimWorld& world() { return world_; }
  // Counters for tests and invariants.
  std::uint64_t remote_access_errors() const { return remote_access_errors_; }
  void count_remote_access_error() { ++remote_access_errors_; }

 private:
  SimWorld& world_;
  NicParams params_;
  std::map<std::string, std::unique_ptr<SimNic>> nics_;
  std::uint64_t remote_access_errors_ = 0;
};

class SimNic final : public runtime::Nic {
 public:
  struct Exposed {
    runtime::MemoryPool* pool = nullptr;
    std::uint64_t pool_offset = 0;
    runtime::Registration reg;
    unsigned access = 0;
  };

  SimNic(SimFabric& fabric, std::string node) : fabric_(fabric), node_(std::move(node)) {}

  Result<runtime::Registration> register_memory(runtime::MemoryPool& pool, std::uint64_t offset,
                                                std::uint64_t length, unsigned access) override;
  Status deregister(const runtime::Registration& registration) override;
  std::string endpoint() const override { return node_; }
  void connect(const std::string& endpoint, runtime::Strand& strand, ConnectHandler done) override;
  void connect_with_proof(const std::string& endpoint, runtime::Strand& strand, std::string proof,
                          ConnectHandler done) override;
  bool check_connects(ConnectCheck check) override {
    connect_check_ = std::move(check);
    return true;
  }

  // Whether a connect carrying `proof` (padded as rdma_cm pads it) is accepted.
  bool accepts_proof(std::string_view proof) const {
    return !connect_check_ || connect_check_(proof);
  }
  // The registration `rkey` names, if it covers [addr, addr + length) with `access`.
  const Exposed* find(std::uint32_t rkey, std::uint64_t addr, std::uint64_t length,
                      unsigned access) const;
  std::size_t registrations() const { return exposed_.size(); }
  const std::string& node() const { return node_; }
  SimFabric& fabric() { return fabric_; }

  // The port's two directions; a transfer books the sender's TX and the receiver's RX.
  PortTimeline& tx() { return tx_; }
  PortTimeline& rx() { return rx_; }

  // The process that owns this NIC's queue pairs ended (an agent restart):
  // they and its memory registrations are gone, their ops fail `unavailable`, and rdma_cm tells
  // each peer (a DREQ) one way later, so a peer's next post reconnects. While `accepting` is false
  // (the process is down) nothing listens: connects fail, ops too.
  void end_process();
  void set_accepting(bool on) { accepting_ = on; }
  bool accepting() const { return accepting_; }
  std::uint64_t process_count() const { return process_count_; }
  runtime::Instant process_ended_at() const { return process_ended_at_; }

 private:
  SimFabric& fabric_;
  std::string node_;
  std::map<std::uint32_t, Exposed> exposed_;
  ConnectCheck connect_check_;  // memory side: connects it refuses are rejected
  std::uint32_t next_rkey_ = 0x100;
  std::uint64_t process_count_ = 0;  // processes ended: QPs of an earlier one are gone
  runtime::Instant process_ended_at_{0};
  bool accepting_ = true;
  PortTimeline tx_;
  PortTimeline rx_;
};

}  // namespace rcxl::sim
