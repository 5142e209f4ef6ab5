// Plain simulated DRAM: sparse real bytes, always ready (the all-DRAM baseline).
#pragma once

#include <array>
#include <cstdint>
#include <memory>
#include <unordered_map>

#include "core/runtime/memory_pool.h"

namespace rcxl::sim {

// Sparse page store: untouched pages read as zeros. Looked up, never iterated.
class SparseBytes {
 public:
  static constexpr std::uint64_t kPage = 4096;
  void read(std::uint64_t offset, std::span<std::byte> out) const;
  void write(std::uint64_t offset, std::span<const std::byte> in);
  // Forgets pages wholly inside [offset, offset + length) (they read as zeros).
  void drop(std::uint64_t offset, std::uint64_t length);
  std::size_t resident_pages() const { return pages_.size(); }

 private:
  using Page = std::array<std::byte, kPage>;
  std::unordered_map<std::uint64_t, std::unique_ptr<Page>> pages_;  // lookup only
};

class SimMemoryPool : public runtime::MemoryPool {
 public:
  explicit SimMemoryPool(std::uint64_t size) : size_(size) {}
  std::uint64_t size() const override { return size_; }
  std::string describe() const override;
  Status read(std::uint64_t offset, std::span<std::byte> out) const override;
  Status write(std::uint64_t offset, std::span<const std::byte> in) override;

 protected:
  Status check(std::uint64_t offset, std::uint64_t length) const;

 private:
  std::uint64_t size_;
  SparseBytes bytes_;
};

}  // namespace rcxl::sim
