// MemoryPool port: the node memory an agent carves regions from (anon, file or
// DAX through libpmem2; a device model's byte store in sim).
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <string>

#include "core/runtime/status.h"

namespace rcxl::runtime {

class MemoryPool {
 public:
  virtual ~MemoryPool() = default;
  virtual std::uint64_t size() const = 0;
  // What backs it, for logs ("anon 1 GiB", "dax /dev/dax0.0").
  virtual std::string describe() const = 0;
  // Host-side copies (tests, tools, the sim RNIC). Offsets are bounds-checked.
  virtual Status read(std::uint64_t offset, std::span<std::byte> out) const = 0;
  virtual Status write(std::uint64_t offset, std::span<const std::byte> in) = 0;
  // Make written bytes durable where the medium needs it (pmem); no-op elsewhere.
  virtual Status persist(std::uint64_t /*offset*/, std::uint64_t /*length*/) { return {}; }
  // Direct mapping when there is one (verbs registers it); nullptr in sim.
  virtual std::byte* mapped() { return nullptr; }
};

}  // namespace rcxl::runtime
