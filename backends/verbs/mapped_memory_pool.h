// Shared part of the pools that are plain mappings: bounds-checked copies.
#pragma once

#include <cstring>

#include "core/runtime/memory_pool.h"

namespace rcxl::verbs {

class MappedMemoryPool : public runtime::MemoryPool {
 public:
  std::uint64_t size() const override { return size_; }
  std::byte* mapped() override { return base_; }

  Status read(std::uint64_t offset, std::span<std::byte> out) const override {
    if (!in_bounds(offset, out.size())) return out_of_bounds(offset, out.size());
    if (!out.empty()) std::memcpy(out.data(), base_ + offset, out.size());
    return {};
  }

  Status write(std::uint64_t offset, std::span<const std::byte> in) override {
    if (!in_bounds(offset, in.size())) return out_of_bounds(offset, in.size());
    if (!in.empty()) std::memcpy(base_ + offset, in.data(), in.size());
    return {};
  }

 protected:
  MappedMemoryPool(std::byte* base, std::uint64_t size) : base_(base), size_(size) {}

  bool in_bounds(std::uint64_t offset, std::uint64_t length) const {
    return offset <= size_ && length <= size_ - offset;
  }
  Status out_of_bounds(std::uint64_t offset, std::uint64_t length) const {
    return Error(ErrorCode::kBadRange, "range [" + std::to_string(offset) + ", +" +
                                           std::to_string(length) + ") outside pool of " +
                                           std::to_string(size_) + " bytes");
  }

  std::byte* base_;
  std::uint64_t size_;
};

}  // namespace rcxl::verbs
