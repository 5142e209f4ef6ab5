// The knobs of the simulated CXL-SSD (a DRAM cache in front of low-latency
// flash). Every default is explained, with its source, in docs/device-model.md.
#pragma once

#include <cstdint>

#include "core/runtime/clock.h"

namespace rcxl::device {

struct CxlSsdParams {
  std::uint64_t capacity_bytes = 64ull << 30;  // the pool the agent carves regions from
  std::uint64_t page_bytes = 4096;             // DRAM cache line of the device (host page)
  std::uint64_t dram_cache_bytes = 16ull << 30;
  // Every page starts resident and is never evicted (the all-DRAM baseline).
  bool all_resident = false;
  // Load-to-use of the device DRAM behind CXL.mem, paid by every access.
  runtime::Duration dram_access = std::chrono::nanoseconds(200);
  // Flash array read of one page into the die's page register (tR).
  runtime::Duration flash_read = std::chrono::nanoseconds(3000);
  // Flash program of one program unit (tPROG); write-back pays it per unit.
  runtime::Duration flash_program = std::chrono::nanoseconds(100000);
  std::uint64_t program_unit_bytes = 16384;
  std::uint32_t channels = 16;
  std::uint32_t ways = 4;  // dies per channel: channels x ways parallel units
  double channel_bytes_per_second = 1.2e9;
  // The controller's backend (flash -> DRAM) bandwidth shared by all fills.
  double internal_bytes_per_second = 13e9;
  // Write misses the controller keeps outstanding: posted writes apply in
  // order, so a write to a non-resident page waits for its fill.
  std::uint32_t write_allocate_depth = 2;
  // Demand read misses in flight: the RNIC's DMA read window (bytes in flight,
  // sized for host-DRAM latency) in pages. Hinted prefetches are not bound by it.
  std::uint32_t read_miss_depth = 8;
  // Bytes of read-hinted ranges pinned at once; what does not fit waits.
  std::uint64_t hinted_bytes_cap = 4ull << 30;
  // Dirty pages are written back while their flash channel is idle (eager
  // write-back), so an eviction mostly finds a clean victim; off, a dirty page
  // is written back only when it is evicted.
  bool idle_write_back = false;
  // How far ahead of now queued prefetch fills are committed to flash units.
  runtime::Duration prefetch_horizon = std::chrono::nanoseconds(20000);
  // A reset poisons the pages whose newest bytes it lost (CXL 2.0 poison: a
  // read of one fails). Off, the device has no poison handling and a later
  // read returns the page's older flash copy (zeros after a trim): what-if
  // runs, and tests that plant a stale-bytes bug.
  bool poison_lost_pages = true;
};

}  // namespace rcxl::device
