// Page-exact state of the device's DRAM cache: per-page flags, pin counts, fill
// completion times and an intrusive LRU list, in chunks allocated on first use
// so a pool of tens of GiB costs memory only where it is touched.
#pragma once

#include <array>
#include <cstdint>
#include <memory>
#include <vector>

namespace rcxl::device {

class PageTable {
 public:
  using Page = std::uint32_t;
  static constexpr Page kNone = UINT32_MAX;
  enum Flag : std::uint8_t {
    kResident = 1,   // has a DRAM frame (possibly still filling: see ready_at)
    kDirty = 2,      // DRAM holds bytes newer than flash
    kTrimmed = 4,    // flash holds no copy: a miss needs no flash read (reads zeros)
    kInLru = 8,      // resident and evictable (not pinned)
    kHasBytes = 16,  // dirty with its bytes stored (payload-sampled writes store none)
  };

  explicit PageTable(std::uint64_t pages);

  std::uint64_t pages() const { return pages_; }
  // Flags of a page never touched are 0: not resident, flash-backed.
  std::uint8_t flags(Page p) const {
    const Chunk* c = chunks_[p >> kChunkShift].get();
    return c ? c->flags[p & kChunkMask] : 0;
  }
  std::uint8_t& flags_mut(Page p) { return chunk(p).flags[p & kChunkMask]; }
  std::int64_t ready_at(Page p) const {
    const Chunk* c = chunks_[p >> kChunkShift].get();
    return c ? c->ready_at[p & kChunkMask] : 0;
  }
  void set_ready_at(Page p, std::int64_t t) { chunk(p).ready_at[p & kChunkMask] = t; }
  std::uint16_t pins(Page p) const {
    const Chunk* c = chunks_[p >> kChunkShift].get();
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
  Page lru_back() const { return tail_; }

  // Reset: every page loses its frame, pin and dirt; trimmed stays (flash state).
  void drop_all_frames();

 private:
  static constexpr int kChunkShift = 15;  // 32768 pages = 128 MiB of 4 KiB pages
  static constexpr Page kChunkPages = Page{1} << kChunkShift;
  static constexpr Page kChunkMask = kChunkPages - 1;
  struct Chunk {
    std::array<std::uint8_t, kChunkPages> flags{};
    std::array<std::uint16_t, kChunkPages> pins{};
    std::array<std::int64_t, kChunkPages> ready_at{};
    std::array<Page, kChunkPages> prev{};
    std::array<Page, kChunkPages> next{};
  };
  Chunk& chunk(Page p) {
    auto& c = chunks_[p >> kChunkShift];
    if (!c) c = std::make_unique<Chunk>();
    return *c;
  }

  std::uint64_t pages_;
  std::vector<std::unique_ptr<Chunk>> chunks_;
  Page head_ = kNone;
  Page tail_ = kNone;
};

}  // namespace rcxl::device
