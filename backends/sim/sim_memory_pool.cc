#include "backends/sim/sim_memory_pool.h"

#include <algorithm>
#include <cstring>

namespace rcxl::sim {

void SparseBytes::read(std::uint64_t offset, std::span<std::byte> out) const {
  std::uint64_t done = 0;
  while (done < out.size()) {
    const std::uint64_t at = offset + done;
    const std::uint64_t in_page = at % kPage;
    const std::uint64_t n = std::min<std::uint64_t>(kPage - in_page, out.size() - done);
    auto it = pages_.find(at / kPage);
    if (it == pages_.end()) {
      std::memset(out.data() + done, 0, n);
    } else {
      std::memcpy(out.data() + done, it->second->data() + in_page, n);
    }
    done += n;
  }
}

void SparseBytes::write(std::uint64_t offset, std::span<const std::byte> in) {
  std::uint64_t done = 0;
  while (done < in.size()) {
    const std::uint64_t at = offset + done;
    const std::uint64_t in_page = at % kPage;
    const std::uint64_t n = std::min<std::uint64_t>(kPage - in_page, in.size() - done);
    auto& page = pages_[at / kPage];
    if (!page) page = std::make_unique<Page>();  // value-initialized: zeros
    std::memcpy(page->data() + in_page, in.data() + done, n);
    done += n;
  }
}

void SparseBytes::drop(std::uint64_t offset, std::uint64_t length) {
  const std::uint64_t first = (offset + kPage - 1) / kPage;
  const std::uint64_t end = (offset + length) / kPage;
  if (end <= first) return;
  if (end - first > pages_.size()) {
    // layering: order-independent (a pure filter: the pages dropped do not depend on order)
    std::erase_if(pages_, [&](const auto& kv) { return kv.first >= first && kv.first < end; });
  } else {
    for (std::uint64_t p = first; p < end; ++p) pages_.erase(p);
  }
}

std::string SimMemoryPool::describe() const {
  return "sim dram " + std::to_string(size_) + " bytes";
}

Status SimMemoryPool::check(std::uint64_t offset, std::uint64_t length) const {
  if (offset > size_ || length > size_ - offset) {
    return Error(ErrorCode::kBadRange, "pool access past its end");
  }
  return {};
}

Status SimMemoryPool::read(std::uint64_t offset, std::span<std::byte> out) const {
  if (auto s = check(offset, out.size()); !s.ok()) return s;
  bytes_.read(offset, out);
  return {};
}

Status SimMemoryPool::write(std::uint64_t offset, std::span<const std::byte> in) {
  if (auto s = check(offset, in.size()); !s.ok()) return s;
  bytes_.write(offset, in);
  return {};
}

}  // namespace rcxl::sim
