// Zero copy (Config::zero_copy): the local buffers of one post, registered with
// the NIC while its RDMA runs. Deregistered when the post completes, or when
// its completion is dropped unrun (a handler destroyed mid-RDMA): a NIC drops a
// completion only once its ops ended or their queue pair is gone, so the
// buffers are never deregistered under a running op, and never left
// registered for a later buffer at the same address to be posted through.
#pragma once

#include <memory>
#include <span>
#include <vector>

#include "core/runtime/nic.h"

namespace rcxl::client {

class LocalRegistration {
 public:
  // Registers each op's buffer; one that cannot be registered still moves,
  // through the NIC's staging copy. `owner` holds the buffers: it is let go
  // only after they are deregistered. The NIC must outlive this.
  LocalRegistration(runtime::Nic& nic, const std::vector<runtime::RdmaOp>& ops,
                    std::shared_ptr<const void> owner);
  ~LocalRegistration() { release(); }
  LocalRegistration(const LocalRegistration&) = delete;
  LocalRegistration& operator=(const LocalRegistration&) = delete;

  // Deregisters every buffer (once; later calls do nothing).
  void release();
  std::size_t buffers() const { return buffers_.size(); }

 private:
  runtime::Nic& nic_;
  std::vector<std::span<std::byte>> buffers_;
  std::shared_ptr<const void> owner_;
};

}  // namespace rcxl::client
