#include "devices/cxl_ssd_model/page_table.h"

#include <algorithm>

namespace rcxl::device {

PageTable::PageTable(std::uint64_t pages)
    : pages_(pages), chunks_((pages + kChunkPages - 1) / kChunkPages) {}

void PageTable::lru_push_front(Page p) {
  Chunk& c = chunk(p);
  if (!(c.flags[p & kChunkMask] & kInLru)) push_front(p, c, p & kChunkMask);
}

void PageTable::lru_remove(Page p) {
  Chunk& c = chunk(p);
  if (c.flags[p & kChunkMask] & kInLru) unlink(p, c, p & kChunkMask);
}

PageTable::Page PageTable::lru_pop_back() {
  if (tail_ == kNone) return kNone;
  // The back page is its run's lowest: no lookup of the page's run needed.
  Run& run = runs_[tail_];
  const Page p = run.first;
  chunk(p).flags[p & kChunkMask] &= static_cast<std::uint8_t>(~kInLru);
  if (run.first == run.last) {
    const std::uint32_t r = tail_;
    unlink_run(r);
    free_run(r);
  } else {
    ++run.first;
  }
  return p;
}

void PageTable::pin_range(Page first, Page end) {
  for (Page p = first; p < end;) {
    Chunk& c = chunk(p);
    const Page stop = std::min<Page>(end, (p | kChunkMask) + 1);
    for (; p < stop; ++p) {
      const Page i = p & kChunkMask;
      if (c.pins[i] < UINT16_MAX) ++c.pins[i];
      if (c.flags[i] & kInLru) unlink(p, c, i);
    }
  }
}

void PageTable::unpin_range(Page first, Page end) {
  for (Page p = first; p < end;) {
    Chunk& c = chunk(p);
    const Page stop = std::min<Page>(end, (p | kChunkMask) + 1);
    for (; p < stop; ++p) {
      const Page i = p & kChunkMask;
      if (c.pins[i] > 0 && --c.pins[i] == 0 && (c.flags[i] & kResident)) push_front(p, c, i);
    }
  }
}

bool PageTable::lru_touch_run(Page first, Page last) {
  const Chunk* back = find(last);
  if (!back || !(back->flags[last & kChunkMask] & kInLru)) return false;
  auto run_of = [this](Page p) { return find(p)->run[p & kChunkMask]; };
  const std::uint32_t top_run = run_of(last);
  // The chain last, last-1, .., first must be consecutive on the list: inside a
  // run it is; across runs the next run must end right below this one.
  for (std::uint32_t r = top_run; first < runs_[r].first;) {
    const std::uint32_t n = runs_[r].next;
    if (n == kNone || runs_[n].last + 1 != runs_[r].first) return false;
    r = n;
  }
  if (top_run == head_ && runs_[head_].last == last) return true;  // already in front
  // Cut the segment out of its runs, make it one run, move that to the front.
  if (runs_[top_run].last > last) split_before(top_run, last + 1);
  if (const std::uint32_t rf = run_of(first); runs_[rf].first < first) split_before(rf, first);
  std::uint32_t keep = run_of(last);
  const std::uint32_t bottom = run_of(first);
  if (keep != bottom) {
    // Several runs: the largest keeps its node, the others are relabelled into it.
    for (std::uint32_t r = runs_[keep].next;; r = runs_[r].next) {
      if (runs_[r].last - runs_[r].first > runs_[keep].last - runs_[keep].first) keep = r;
      if (r == bottom) break;
    }
    const std::uint32_t top = run_of(last);
    for (std::uint32_t r = top;;) {
      const std::uint32_t n = runs_[r].next;
      if (r != keep) {
        label(keep, runs_[r].first, runs_[r].last);
        unlink_run(r);
        free_run(r);
      }
      if (r == bottom) break;
      r = n;
    }
    runs_[keep].first = first;
    runs_[keep].last = last;
  }
  unlink_run(keep);
  link_front(keep);
  return true;
}

void PageTable::push_front(Page p, Chunk& c, Page i) {
  c.flags[i] |= kInLru;
  // Pages pushed in ascending order grow the front run.
  if (head_ != kNone && runs_[head_].last + 1 == p) {
    runs_[head_].last = p;
    c.run[i] = head_;
    return;
  }
  const std::uint32_t r = new_run(p, p);
  c.run[i] = r;
  link_front(r);
}

void PageTable::unlink(Page p, Chunk& c, Page i) {
  c.flags[i] &= static_cast<std::uint8_t>(~kInLru);
  const std::uint32_t r = c.run[i];
  Run& run = runs_[r];
  if (run.first == run.last) {
    unlink_run(r);
    free_run(r);
  } else if (p == run.first) {
    ++run.first;
  } else if (p == run.last) {
    --run.last;
  } else {
    split_before(r, p + 1);
    --runs_[c.run[i]].last;  // the lower part, which now ends at p
  }
}

std::uint32_t PageTable::split_before(std::uint32_t r, Page at) {
  const Page first = runs_[r].first;
  const Page last = runs_[r].last;
  if (last - at + 1 <= at - first) {
    const std::uint32_t upper = new_run(at, last);
    runs_[r].last = at - 1;
    link_after(runs_[r].prev, upper);
    label(upper, at, last);
    return upper;
  }
  const std::uint32_t lower = new_run(first, at - 1);
  runs_[r].first = at;
  link_after(r, lower);
  label(lower, first, at - 1);
  return r;
}

std::uint32_t PageTable::new_run(Page first, Page last) {
  std::uint32_t r;
  if (!free_runs_.empty()) {
    r = free_runs_.back();
    free_runs_.pop_back();
  } else {
    r = static_cast<std::uint32_t>(runs_.size());
    runs_.emplace_back();
  }
  runs_[r] = Run{first, last, kNone, kNone};
  return r;
}

void PageTable::free_run(std::uint32_t r) {
  free_runs_.push_back(r);
}

void PageTable::link_front(std::uint32_t r) {
  runs_[r].prev = kNone;
  runs_[r].next = head_;
  if (head_ != kNone) runs_[head_].prev = r;
  head_ = r;
  if (tail_ == kNone) tail_ = r;
}

void PageTable::link_after(std::uint32_t at, std::uint32_t r) {
  if (at == kNone) return link_front(r);
  const std::uint32_t n = runs_[at].next;
  runs_[r].prev = at;
  runs_[r].next = n;
  runs_[at].next = r;
  if (n != kNone) {
    runs_[n].prev = r;
  } else {
    tail_ = r;
  }
}

void PageTable::unlink_run(std::uint32_t r) {
  const Run& run = runs_[r];
  if (run.prev != kNone) {
    runs_[run.prev].next = run.next;
  } else {
    head_ = run.next;
  }
  if (run.next != kNone) {
    runs_[run.next].prev = run.prev;
  } else {
    tail_ = run.prev;
  }
}

void PageTable::label(std::uint32_t r, Page first, Page last) {
  for (Page p = first;; ++p) {
    chunk(p).run[p & kChunkMask] = r;
    if (p == last) break;
  }
}

void PageTable::drop_all_frames() {
  for (auto& c : chunks_) {
    if (!c) continue;
    for (auto& f : c->flags) f &= kTrimmed | kFlashBytes;
    c->pins.fill(0);
    c->ready_at.fill(0);
  }
  runs_.clear();
  free_runs_.clear();
  head_ = tail_ = kNone;
}

}  // namespace rcxl::device
