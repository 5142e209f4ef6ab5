#include "devices/cxl_ssd_model/page_table.h"

#include <algorithm>

namespace rcxl::device {

PageTable::PageTable(std::uint64_t pages)
    : pages_(pages), chunks_((pages + kChunkPages - 1) / kChunkPages) {}

std::uint64_t PageTable::unpinned_pages(Page first, Page end) const {
  std::uint64_t n = 0;
  for (Page p = first; p < end;) {
    const Chunk* c = find(p);
    const Page stop = chunk_stop(p, end);
    if (!c) {
      n += stop - p;  // never touched: no pins
      p = stop;
      continue;
    }
    for (; p < stop; ++p) n += c->pins[p & kChunkMask] == 0;
  }
  return n;
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

void PageTable::label(std::uint32_t r, Page first, Page last) {
  for (Page p = first;; ++p) {
    chunk(p).run[p & kChunkMask] = r;
    if (p == last) break;
  }
}

void PageTable::drop_all_frames(bool poison_dirty) {
  for (auto& c : chunks_) {
    if (!c) continue;
    for (auto& f : c->flags) {
      // DRAM held its only copy.
      const Flags lost = (poison_dirty && (f & kDirty)) ? kPoisoned : 0;
      f = static_cast<Flags>((f & (kTrimmed | kFlashBytes | kPoisoned)) | lost);
    }
    c->pins.fill(0);
    c->ready_at.fill(0);
  }
  runs_.clear();
  free_runs_.clear();
  head_ = tail_ = kNone;
  extra_pins_.clear();
}

bool PageTable::take_extra_pin(Page p) {
  auto it = extra_pins_.find(p);
  if (it == extra_pins_.end()) return false;
  if (--it->second == 0) extra_pins_.erase(it);
  return true;
}

}  // namespace rcxl::device
