// First-fit allocator over pool offsets: regions are 4096-aligned extents.
#pragma once

#include <cstdint>
#include <map>
#include <optional>

namespace rcxl::agent {

class RegionAllocator {
 public:
  static constexpr std::uint64_t kAlignment = 4096;

  // Usable bytes: `pool_size` rounded down to the alignment.
  explicit RegionAllocator(std::uint64_t pool_size);
  // The lowest free offset with `size` bytes (a multiple of the alignment).
  std::optional<std::uint64_t> allocate(std::uint64_t size);
  // Takes exactly [offset, offset + size) out of a free extent (a region table
  // loaded at start); false when any of it is not free.
  bool reserve(std::uint64_t offset, std::uint64_t size);
  // Returns an extent; neighbours merge.
  void release(std::uint64_t offset, std::uint64_t size);
  std::uint64_t free_bytes() const { return free_bytes_; }

 private:
  std::map<std::uint64_t, std::uint64_t> free_;  // offset -> length
  std::uint64_t free_bytes_ = 0;
};

}  // namespace rcxl::agent
