#include "core/agent/region_allocator.h"

#include <iterator>

namespace rcxl::agent {

RegionAllocator::RegionAllocator(std::uint64_t pool_size) {
  const std::uint64_t usable = pool_size / kAlignment * kAlignment;
  if (usable > 0) free_[0] = usable;
  free_bytes_ = usable;
}

std::optional<std::uint64_t> RegionAllocator::allocate(std::uint64_t size) {
  if (size == 0 || size % kAlignment != 0) return std::nullopt;
  for (auto it = free_.begin(); it != free_.end(); ++it) {
    if (it->second < size) continue;
    const std::uint64_t offset = it->first;
    const std::uint64_t rest = it->second - size;
    free_.erase(it);
    if (rest > 0) free_[offset + size] = rest;
    free_bytes_ -= size;
    return offset;
  }
  return std::nullopt;
}

bool RegionAllocator::reserve(std::uint64_t offset, std::uint64_t size) {
  if (size == 0) return false;
  auto it = free_.upper_bound(offset);
  if (it == free_.begin()) return false;
  --it;
  const std::uint64_t start = it->first;
  const std::uint64_t end = it->first + it->second;
  if (offset + size < offset || offset + size > end) return false;
  free_.erase(it);
  if (offset > start) free_[start] = offset - start;
  if (offset + size < end) free_[offset + size] = end - offset - size;
  free_bytes_ -= size;
  return true;
}

void RegionAllocator::release(std::uint64_t offset, std::uint64_t size) {
  auto [it, inserted] = free_.emplace(offset, size);
  if (!inserted) return;  // already free: a bug upstream, never double-count
  free_bytes_ += size;
  auto next = std::next(it);
  if (next != free_.end() && it->first + it->second == next->first) {
    it->second += next->second;
    free_.erase(next);
  }
  if (it != free_.begin()) {
    auto prev = std::prev(it);
    if (prev->first + prev->second == it->first) {
      prev->second += it->second;
      free_.erase(it);
    }
  }
}

}  // namespace rcxl::agent
