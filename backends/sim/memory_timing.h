// How a simulated memory tells the sim RNIC when bytes can be accessed. A
// DRAM-fronted CXL-SSD answers "after the fill"; plain DRAM answers "now".
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>

#include "core/runtime/clock.h"

namespace rcxl::sim {

class MemoryTiming {
 public:
  virtual ~MemoryTiming() = default;
  // An RDMA access to pool bytes [offset, offset + length) arrives at `at`: when
  // may its bytes be read (or written)? May start fills; must not go back in time.
  virtual runtime::Instant access_ready(std::uint64_t offset, std::uint64_t length, bool write,
                                        runtime::Instant at) = 0;
  // A READ's bytes reached the wire (after access_ready).
  virtual void accessed(std::uint64_t /*offset*/, std::uint64_t /*length*/, bool /*write*/,
                        runtime::Instant /*at*/) {}
  // A WRITE of [offset, offset + length) lands (after access_ready): `payload`
  // holds its first bytes (all of them, or a sampled op's kept ones); the rest
  // reach the medium without their values. Page by page, as a device takes it.
  // False: the memory only keeps bytes, the RNIC stores the payload through MemoryPool::write.
  virtual bool land_write(std::uint64_t /*offset*/, std::uint64_t /*length*/,
                          std::span<const std::byte> /*payload*/, runtime::Instant /*at*/) {
    return false;
  }
  // Some of [offset, offset + length) lost its bytes (a device's poison): a READ
  // of it fails rather than return other bytes, also past a sampled payload.
  virtual bool lost(std::uint64_t /*offset*/, std::uint64_t /*length*/) const { return false; }
};

}  // namespace rcxl::sim
