#include "devices/cxl_ssd_model/page_table.h"

namespace rcxl::device {

PageTable::PageTable(std::uint64_t pages)
    : pages_(pages), chunks_((pages + kChunkPages - 1) / kChunkPages) {}

void PageTable::lru_push_front(Page p) {
  Entry& e = entry(p);
  if (!(e.flags & kInLru)) push_front(p, e);
}

void PageTable::lru_remove(Page p) {
  Entry& e = entry(p);
  if (e.flags & kInLru) unlink(p, e);
}

bool PageTable::lru_touch_run(Page first, Page last) {
  Entry* back = find_mut(last);
  if (!back || !(back->flags & kInLru)) return false;
  Entry& front = *back;
  // Links join only pages on the LRU, so the chain last, last-1, .., first is on it.
  for (Page p = last; p != first; --p) {
    if (back->next != p - 1) return false;
    back = &entry(p - 1);
  }
  if (head_ == last) return true;
  // Unlink the segment (it is not the head, so front.prev exists), then relink at the front.
  entry(front.prev).next = back->next;
  if (back->next != kNone) {
    entry(back->next).prev = front.prev;
  } else {
    tail_ = front.prev;
  }
  front.prev = kNone;
  back->next = head_;
  entry(head_).prev = first;
  head_ = last;
  return true;
}

void PageTable::push_front(Page p, Entry& e) {
  e.flags |= kInLru;
  e.prev = kNone;
  e.next = head_;
  if (head_ != kNone) entry(head_).prev = p;
  head_ = p;
  if (tail_ == kNone) tail_ = p;
}

void PageTable::unlink(Page /*p*/, Entry& e) {
  e.flags &= static_cast<std::uint8_t>(~kInLru);
  if (e.prev != kNone) {
    entry(e.prev).next = e.next;
  } else {
    head_ = e.next;
  }
  if (e.next != kNone) {
    entry(e.next).prev = e.prev;
  } else {
    tail_ = e.prev;
  }
}

void PageTable::drop_all_frames() {
  for (auto& c : chunks_) {
    if (!c) continue;
    for (Entry& e : *c) {
      e.flags &= kTrimmed | kFlashBytes;
      e.pins = 0;
      e.ready_at = 0;
    }
  }
  head_ = tail_ = kNone;
}

}  // namespace rcxl::device
