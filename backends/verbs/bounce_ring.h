// Allocates staging space for work requests in a registered buffer, first in
// first out: an RC send queue completes in posting order, so space is always
// given back oldest first and a ring never fragments.
#pragma once

#include <cstdint>
#include <deque>
#include <optional>

namespace rcxl::verbs {

class BounceRing {
 public:
  explicit BounceRing(std::uint64_t capacity) : capacity_(capacity) {}

  // Offset of `length` contiguous bytes, or nullopt until older ones are released.
  std::optional<std::uint64_t> allocate(std::uint64_t length) {
    if (length == 0 || length > capacity_) return std::nullopt;
    std::uint64_t offset = 0;
    if (!used_.empty()) {
      const std::uint64_t start = used_.front().offset;
      const std::uint64_t end = used_.back().offset + used_.back().length;
      if (used_.back().offset >= start) {  // one run [start, end): room after it, or before it
        if (capacity_ - end >= length) {
          offset = end;
        } else if (start >= length) {
          offset = 0;
        } else {
          return std::nullopt;
        }
      } else {  // wrapped: the free gap is [end, start)
        if (start - end < length) return std::nullopt;
        offset = end;
      }
    }
    used_.push_back({offset, length});
    return offset;
  }

  // Gives back the oldest allocation.
  void release_oldest() {
    if (!used_.empty()) used_.pop_front();
  }

  void clear() { used_.clear(); }
  bool empty() const { return used_.empty(); }
  std::uint64_t capacity() const { return capacity_; }

 private:
  struct Span {
    std::uint64_t offset;
    std::uint64_t length;
  };
  std::uint64_t capacity_;
  std::deque<Span> used_;
};

}  // namespace rcxl::verbs
