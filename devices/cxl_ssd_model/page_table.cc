#include "devices/cxl_ssd_model/page_table.h"

namespace rcxl::device {

PageTable::PageTable(std::uint64_t pages)
    : pages_(pages), chunks_((pages + kChunkPages - 1) / kChunkPages) {}

void PageTable::lru_push_front(Page p) {
  Chunk& c = chunk(p);
  const Page i = p & kChunkMask;
  if (c.flags[i] & kInLru) return;
  c.flags[i] |= kInLru;
  c.prev[i] = kNone;
  c.next[i] = head_;
  if (head_ != kNone) chunk(head_).prev[head_ & kChunkMask] = p;
  head_ = p;
  if (tail_ == kNone) tail_ = p;
}

void PageTable::lru_remove(Page p) {
  Chunk& c = chunk(p);
  const Page i = p & kChunkMask;
  if (!(c.flags[i] & kInLru)) return;
  c.flags[i] &= static_cast<std::uint8_t>(~kInLru);
  const Page prev = c.prev[i];
  const Page next = c.next[i];
  if (prev != kNone) {
    chunk(prev).next[prev & kChunkMask] = next;
  } else {
    head_ = next;
  }
  if (next != kNone) {
    chunk(next).prev[next & kChunkMask] = prev;
  } else {
    tail_ = prev;
  }
}

void PageTable::drop_all_frames() {
  for (auto& c : chunks_) {
    if (!c) continue;
    for (Page i = 0; i < kChunkPages; ++i) {
      c->flags[i] &= kTrimmed;
      c->pins[i] = 0;
      c->ready_at[i] = 0;
    }
  }
  head_ = tail_ = kNone;
}

}  // namespace rcxl::device
