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
  // Bytes reach the medium (after access_ready). For a WRITE these are only the
  // bytes past a payload-sampled op's payload, which reach it without their
  // values (the payload itself went through MemoryPool::write, which marks its
  // own pages): a device marks them dirty. Telling it the payload's pages too
  // would re-dirty, without bytes, a page evicted since write() kept its bytes.
  virtual void accessed(std::uint64_t /*offset*/, std::uint64_t /*length*/, bool /*write*/,
                        runtime::Instant /*at*/) {}
  // Some of [offset, offset + length) lost its bytes (a device's poison): a READ
  // of it fails rather than return other bytes, also past a sampled payload.
  virtual bool lost(std::uint64_t /*offset*/, std::uint64_t /*length*/) const { return false; }
};

}  // namespace rcxl::sim
