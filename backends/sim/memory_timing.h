// How a simulated memory tells the sim RNIC when bytes can be accessed. A
// DRAM-fronted CXL-SSD answers "after the fill"; plain DRAM answers "now".
#pragma once

#include <cstdint>

#include "core/runtime/clock.h"

namespace rcxl::sim {

class MemoryTiming {
 public:
  virtual ~MemoryTiming() = default;
  // An RDMA access to pool bytes [offset, offset + length) arrives at `at`: when
  // may its bytes be read (or written)? May start fills; must not go back in time.
  virtual runtime::Instant access_ready(std::uint64_t offset, std::uint64_t length, bool write,
                                        runtime::Instant at) = 0;
  // Bytes reach the medium (after access_ready): a device marks them dirty.
  virtual void accessed(std::uint64_t /*offset*/, std::uint64_t /*length*/, bool /*write*/,
                        runtime::Instant /*at*/) {}
};

}  // namespace rcxl::sim
