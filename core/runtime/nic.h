// Nic port: RDMA memory registration (memory side) and one-sided READ/WRITE
// (initiator side). ibverbs + rdma_cm in production, the sim RNIC in sim.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "core/runtime/memory_pool.h"
#include "core/runtime/status.h"
#include "core/runtime/strand.h"

namespace rcxl::runtime {

enum Access : unsigned {
  kAccessLocalWrite = 1u << 0,
  kAccessRemoteRead = 1u << 1,
  kAccessRemoteWrite = 1u << 2,
};

// What a map reply tells the client: where the bytes are and the key to reach them.
struct Registration {
  std::uint64_t addr = 0;
  std::uint32_t rkey = 0;
  std::uint64_t length = 0;
};

struct RdmaOp {
  enum class Kind { kRead, kWrite };
  Kind kind = Kind::kRead;
  std::span<std::byte> local;  // READ fills it; WRITE sends it
  std::uint64_t remote_addr = 0;
  std::uint32_t rkey = 0;
  // Bytes on the wire; 0 means local.size(). Larger than local.size() only on
  // the simulator, for payload-sampled bulk runs: the bytes past `local` are
  // timed and change device page state, but are not stored (docs/simulator.md).
  // Shorter than local.size() is refused (bad_request) by every NIC, and so
  // is an op of no bytes (verbs posts no work request for it, which checks no
  // rkey, while the sim checked one: neither is what a caller means).
  std::uint64_t length = 0;

  std::uint64_t wire_length() const { return length ? length : local.size(); }
};

// A reliable connection to one memory node's NIC. Dropping the last handle
// closes it once the ops posted on it have completed: their handlers still
// run with their own results (both NICs).
class QueuePair {
 public:
  using CompletionHandler = std::function<void(std::vector<Status> per_op)>;
  virtual ~QueuePair() = default;
  // Posts ops in order; `done` runs on the strand given at connect, once all
  // completed. A registration that is gone completes with kRemoteAccess.
  virtual void post(std::vector<RdmaOp> ops, CompletionHandler done) = 0;
  virtual std::string peer() const = 0;
};

class Nic {
 public:
  using ConnectHandler = std::function<void(Result<std::shared_ptr<QueuePair>>)>;
  // Memory side: whether an initiator's connect proof (its rdma_cm private
  // data, padding included) lets its queue pair in. Runs on a NIC thread.
  using ConnectCheck = std::function<bool(std::string_view proof)>;
  // rdma_cm carries at most 56 bytes of private data in an RC connect.
  static constexpr std::size_t kMaxConnectProofBytes = 56;
  virtual ~Nic() = default;

  // --- memory side
  // Exposes pool bytes [offset, offset + length) to remote peers.
  virtual Result<Registration> register_memory(MemoryPool& pool, std::uint64_t offset,
                                               std::uint64_t length, unsigned access) = 0;
  // From now on RDMA through this registration fails with kRemoteAccess.
  virtual Status deregister(const Registration& registration) = 0;
  // How initiators reach this NIC ("none" when it moves no data).
  virtual std::string endpoint() const = 0;
  // False for `--nic none`: maps answer rkey 0 and no data moves.
  virtual bool moves_data() const { return true; }
  // From now on a connect whose proof `check` refuses is rejected (nullptr: no
  // check). False when this NIC cannot check, and nothing changes.
  virtual bool check_connects(ConnectCheck check) {
    (void)check;
    return false;
  }

  // --- initiator side
  virtual void connect(const std::string& endpoint, Strand& strand, ConnectHandler done) = 0;
  // The same with a proof for a memory side that checks connects (at most
  // kMaxConnectProofBytes). A NIC that cannot send one connects without it.
  virtual void connect_with_proof(const std::string& endpoint, Strand& strand, std::string proof,
                                  ConnectHandler done) {
    (void)proof;
    this->connect(endpoint, strand, std::move(done));
  }
  // Zero copy: ops whose local buffer lies inside a registered buffer are posted
  // straight from it; others may go through a staging copy. Deregister only once
  // no posted op uses the buffer. A NIC that needs no local registration (the
  // sim RNIC) says so here, and accepts and ignores both calls.
  virtual bool needs_local_registration() const { return false; }
  virtual Status register_local(std::span<std::byte> buffer) {
    (void)buffer;
    return {};
  }
  virtual Status deregister_local(std::span<std::byte> buffer) {
    (void)buffer;
    return {};
  }
};

}  // namespace rcxl::runtime
