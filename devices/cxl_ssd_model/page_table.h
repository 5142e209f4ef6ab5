// Page-exact state of the device's DRAM cache: per-page flags, pin counts, fill
// completion times and an LRU order, in chunks allocated on first use so a pool
// of tens of GiB costs memory only where it is touched. The LRU is a list of
// runs of neighbouring pages (a range filled or unpinned in page order is one
// run), so a 32 MiB range costs one list node, not 8192; the order it keeps is
// exactly that of a list of single pages.
#pragma once

#include <algorithm>
#include <array>
#include <cstdint>
#include <map>
#include <memory>
#include <vector>

namespace rcxl::device {

class PageTable {
 public:
  using Page = std::uint32_t;
  static constexpr Page kNone = UINT32_MAX;
  using Flags = std::uint8_t;
  enum Flag : Flags {
    kResident = 1,   // has a DRAM frame (possibly still filling: see ready_at)
    kDirty = 2,      // DRAM holds bytes newer than flash
    kTrimmed = 4,    // flash holds no copy: a miss needs no flash read (reads zeros)
    kInLru = 8,      // resident and evictable (not pinned)
    kHasBytes = 16,  // dirty with its bytes stored (payload-sampled writes store none)
    // The same bit on a page that is not dirty: a write hint's frame whose
    // contents were never brought in, so a READ, or a WRITE of part of the
    // page, must read flash first (R4.1: a write hint gives no leave to change
    // the pages). One bit for both keeps the flags one byte a page (two bytes
    // made serving runs ~20% slower); see no_contents().
    kNoContents = 16,
    // The flash byte store may hold bytes of this page (set on every store
    // there, cleared when they are dropped): eviction skips the drop without it.
    kFlashBytes = 32,
    kWriteBackQueued = 64,  // waits in a channel's idle write-back queue
    // Lost in a reset while dirty: reads fail until a write or a trim (CXL
    // poison; only with CxlSsdParams::poison_lost_pages).
    kPoisoned = 128,
  };

  // A write hint's frame without contents (kNoContents on a clean page).
  static bool no_contents(Flags f) { return (f & (kNoContents | kDirty)) == kNoContents; }

  explicit PageTable(std::uint64_t pages);

  std::uint64_t pages() const { return pages_; }
  // Flags of a page never touched are 0: not resident, flash-backed.
  Flags flags(Page p) const {
    const Chunk* c = find(p);
    return c ? c->flags[p & kChunkMask] : 0;
  }
  Flags& flags_mut(Page p) { return chunk(p).flags[p & kChunkMask]; }
  std::int64_t ready_at(Page p) const {
    const Chunk* c = find(p);
    return c ? c->ready_at[p & kChunkMask] : 0;
  }
  void set_ready_at(Page p, std::int64_t t) { chunk(p).ready_at[p & kChunkMask] = t; }
  // Pins held, up to 65535 (the rest are counted apart: see extra_pins_).
  std::uint16_t pins(Page p) const {
    const Chunk* c = find(p);
    return c ? c->pins[p & kChunkMask] : 0;
  }
  std::uint16_t& pins_mut(Page p) { return chunk(p).pins[p & kChunkMask]; }

  // LRU: front = most recently used; only unpinned resident pages are on it.
  void lru_push_front(Page p);
  void lru_remove(Page p);
  void lru_touch(Page p) {
    lru_remove(p);
    lru_push_front(p);
  }
  // Within the back run the lowest page went in first.
  Page lru_back() const { return tail_ == kNone ? kNone : runs_[tail_].first; }
  // Takes lru_back() off the LRU (an eviction) and returns it, kNone when empty.
  Page lru_pop_back();
  // When pages first..last sit on the LRU as one segment, last nearest the
  // front (what touching or filling them in ascending order leaves), moves the
  // segment to the front at once: the same order as lru_touch(p) for p
  // ascending. Otherwise false, and nothing changes.
  bool lru_touch_run(Page first, Page last);
  // One more pin; a pinned page leaves the LRU.
  void pin(Page p) { pin_range(p, p + 1); }
  // One pin less; a resident page whose last pin went joins the LRU front.
  void unpin(Page p) { unpin_range(p, p + 1); }
  // pin(p) / unpin(p) for p = first .. end-1 in order, one chunk lookup per chunk.
  // Each returns how many pages it changed between pinned and unpinned (the
  // device counts pinned DRAM once per page, however many hints hold it).
  std::uint64_t pin_range(Page first, Page end);
  std::uint64_t unpin_range(Page first, Page end);
  // Pages of first .. end-1 without a pin: what pinning them would add.
  std::uint64_t unpinned_pages(Page first, Page end) const;
  // LRU list nodes in use (tests: runs really merge).
  std::size_t lru_runs() const { return runs_.size() - free_runs_.size(); }

  // Reset: every page loses its frame, pin and dirt; trimmed, flash-bytes and
  // poisoned stay (flash state). With `poison_dirty` pages dirty in DRAM become
  // kPoisoned; without, they fall back to their flash copy.
  void drop_all_frames(bool poison_dirty);

 private:
  static constexpr int kChunkShift = 15;  // 32768 pages = 128 MiB of 4 KiB pages
  static constexpr Page kChunkPages = Page{1} << kChunkShift;
  static constexpr Page kChunkMask = kChunkPages - 1;
  // Where the chunk holding `p` ends within [p, end): in 64 bits, since in the
  // last chunk of a table of ~2^32 pages (p | kChunkMask) + 1 wraps to 0.
  static Page chunk_stop(Page p, Page end) {
    return static_cast<Page>(std::min<std::uint64_t>(end, (std::uint64_t{p} | kChunkMask) + 1));
  }
  // Page state as one array per field: the page loops (fills, evictions,
  // pins) each read one field of neighbouring pages, so a cache line serves
  // 64 pages' flags instead of 4 pages' whole records.
  struct Chunk {
    std::array<Flags, kChunkPages> flags{};
    std::array<std::uint16_t, kChunkPages> pins{};
    std::array<std::uint32_t, kChunkPages> run{};  // its LRU run while kInLru
    std::array<std::int64_t, kChunkPages> ready_at{};
  };
  // Pages first..last on the LRU, last nearest the front (a list node).
  struct Run {
    Page first = 0;
    Page last = 0;
    std::uint32_t prev = kNone;  // towards the front
    std::uint32_t next = kNone;  // towards the back
  };
  const Chunk* find(Page p) const { return chunks_[p >> kChunkShift].get(); }
  Chunk& chunk(Page p) {
    auto& c = chunks_[p >> kChunkShift];
    if (!c) c = std::make_unique<Chunk>();
    return *c;
  }
  // Puts page i of chunk c (page p), not on the LRU, at its front.
  void push_front(Page p, Chunk& c, Page i);
  // Takes page i of chunk c (page p), on the LRU, off it.
  void unlink(Page p, Chunk& c, Page i);
  std::uint32_t new_run(Page first, Page last);
  void free_run(std::uint32_t r);
  void link_front(std::uint32_t r);
  void link_after(std::uint32_t at, std::uint32_t r);  // r goes right behind `at`
  void unlink_run(std::uint32_t r);
  void label(std::uint32_t r, Page first, Page last);
  // Splits run r before page `at` (first < at <= last) into [first, at-1] and
  // [at, last], the upper part in front; the smaller part gets a new node and
  // is relabelled. Returns the node holding [at, last].
  std::uint32_t split_before(std::uint32_t r, Page at);
  // One of page p's pins past 65535 ends; false when it has none.
  bool take_extra_pin(Page p);

  std::uint64_t pages_;
  std::vector<std::unique_ptr<Chunk>> chunks_;
  std::vector<Run> runs_;
  std::vector<std::uint32_t> free_runs_;
  std::uint32_t head_ = kNone;  // runs
  std::uint32_t tail_ = kNone;
  // Pins past the 65535 a page's own count holds: a 16-bit count keeps the
  // pin array small, and a page under that many hints must still stay pinned
  // until the last one ends. Ordered (sim paths iterate only ordered maps).
  std::map<Page, std::uint64_t> extra_pins_;
};

// The per-page paths, inline: the device's loops call them for every page.

inline void PageTable::lru_push_front(Page p) {
  Chunk& c = chunk(p);
  if (!(c.flags[p & kChunkMask] & kInLru)) push_front(p, c, p & kChunkMask);
}

inline void PageTable::lru_remove(Page p) {
  Chunk& c = chunk(p);
  if (c.flags[p & kChunkMask] & kInLru) unlink(p, c, p & kChunkMask);
}

inline PageTable::Page PageTable::lru_pop_back() {
  if (tail_ == kNone) return kNone;
  // The back page is its run's lowest: no lookup of the page's run needed.
  Run& run = runs_[tail_];
  const Page p = run.first;
  chunk(p).flags[p & kChunkMask] &= static_cast<Flags>(~kInLru);
  if (run.first == run.last) {
    const std::uint32_t r = tail_;
    unlink_run(r);
    free_run(r);
  } else {
    ++run.first;
  }
  return p;
}

inline std::uint64_t PageTable::pin_range(Page first, Page end) {
  std::uint64_t newly_pinned = 0;
  for (Page p = first; p < end;) {
    Chunk& c = chunk(p);
    const Page stop = chunk_stop(p, end);
    for (; p < stop; ++p) {
      const Page i = p & kChunkMask;
      newly_pinned += c.pins[i] == 0;
      if (c.pins[i] < UINT16_MAX) {
        ++c.pins[i];
      } else {
        ++extra_pins_[p];
      }
      if (c.flags[i] & kInLru) unlink(p, c, i);
    }
  }
  return newly_pinned;
}

inline std::uint64_t PageTable::unpin_range(Page first, Page end) {
  std::uint64_t unpinned = 0;
  for (Page p = first; p < end;) {
    Chunk& c = chunk(p);
    const Page stop = chunk_stop(p, end);
    for (; p < stop; ++p) {
      const Page i = p & kChunkMask;
      if (c.pins[i] == 0) continue;
      if (c.pins[i] == UINT16_MAX && take_extra_pin(p)) continue;
      if (--c.pins[i] != 0) continue;
      ++unpinned;
      if (!(c.flags[i] & kResident)) continue;
      push_front(p, c, i);
      // The pages after it that join too extend the same front run.
      const std::uint32_t r = head_;
      Page q = p + 1;
      for (; q < stop; ++q) {
        const Page j = q & kChunkMask;
        if (c.pins[j] != 1 || !(c.flags[j] & kResident)) break;
        c.pins[j] = 0;
        c.flags[j] |= kInLru;
        c.run[j] = r;
      }
      unpinned += q - 1 - p;
      runs_[r].last = q - 1;
      p = q - 1;
    }
  }
  return unpinned;
}

inline void PageTable::push_front(Page p, Chunk& c, Page i) {
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

inline void PageTable::unlink(Page p, Chunk& c, Page i) {
  c.flags[i] &= static_cast<Flags>(~kInLru);
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

inline std::uint32_t PageTable::new_run(Page first, Page last) {
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

inline void PageTable::free_run(std::uint32_t r) {
  free_runs_.push_back(r);
}

inline void PageTable::link_front(std::uint32_t r) {
  runs_[r].prev = kNone;
  runs_[r].next = head_;
  if (head_ != kNone) runs_[head_].prev = r;
  head_ = r;
  if (tail_ == kNone) tail_ = r;
}

inline void PageTable::unlink_run(std::uint32_t r) {
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

}  // namespace rcxl::device
