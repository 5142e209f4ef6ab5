// A DRAM-fronted CXL-SSD on the simulator: the agent's MemoryPool (real bytes)
// and the sim RNIC's MemoryTiming (when each range may be accessed). Page-exact
// cache state, analytic flash timelines, a prefetch queue fed by hints.
#pragma once

#include <cstdint>
#include <deque>
#include <map>
#include <optional>
#include <set>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include "backends/sim/event_loop.h"
#include "backends/sim/memory_timing.h"
#include "backends/sim/sim_memory_pool.h"
#include "core/runtime/memory_pool.h"
#include "devices/cxl_ssd_model/cxl_ssd_params.h"
#include "devices/cxl_ssd_model/flash_array.h"
#include "devices/cxl_ssd_model/page_table.h"

namespace rcxl::device {

using runtime::Instant;

struct CxlSsdCounters {
  std::uint64_t hits = 0;    // pages found in DRAM and ready
  std::uint64_t misses = 0;  // pages an access found without a frame
  std::uint64_t fills = 0;   // flash reads into DRAM (demand, write-allocate, prefetch)
  std::uint64_t write_allocate_fills = 0;
  std::uint64_t demand_read_fills = 0;
  std::uint64_t zero_fills = 0;     // frames given to trimmed pages: no flash read
  std::uint64_t merged_misses = 0;  // accesses that joined a fill already in flight (MSHR)
  std::uint64_t evictions = 0;
  std::uint64_t write_backs = 0;            // dirty pages programmed to flash on eviction
  std::uint64_t idle_write_backs = 0;       // dirty pages programmed while their channel was idle
  std::uint64_t hinted_bytes_prepared = 0;  // bytes brought in or allocated for hints
  std::uint64_t overflows = 0;              // frames granted past capacity (everything pinned)
  std::uint64_t resets = 0;
};

// A range of pool bytes.
struct PoolRange {
  std::uint64_t offset = 0;
  std::uint64_t length = 0;
};

// Page state for tests and tools.
struct PageState {
  bool resident = false;
  bool dirty = false;
  bool trimmed = false;
  bool poisoned = false;     // lost in a reset (poison_lost_pages): reads fail until written
  bool no_contents = false;  // a write hint's frame, neither filled nor written yet
  std::uint16_t pins = 0;
  Instant ready_at{0};
};

class CxlSsdDevice final : public runtime::MemoryPool, public sim::MemoryTiming {
 public:
  using Tag = std::uint64_t;

  // `loop` drives queued prefetches as flash units free up (the only events).
  CxlSsdDevice(sim::EventLoop& loop, const CxlSsdParams& params);
  ~CxlSsdDevice() override;
  CxlSsdDevice(const CxlSsdDevice&) = delete;
  CxlSsdDevice& operator=(const CxlSsdDevice&) = delete;

  // --- MemoryPool: reads see DRAM where a page is dirty there, else flash.
  std::uint64_t size() const override { return params_.capacity_bytes; }
  std::string describe() const override;
  Status read(std::uint64_t offset, std::span<std::byte> out) const override;
  // Bytes land in DRAM (a frame is made if the page has none) and are dirty.
  Status write(std::uint64_t offset, std::span<const std::byte> in) override;
  // The flash copy itself, bypassing DRAM (scenario set-up: old device contents).
  Status write_flash(std::uint64_t offset, std::span<const std::byte> in);

  // --- MemoryTiming
  Instant access_ready(std::uint64_t offset, std::uint64_t length, bool write, Instant at) override;
  // A READ reached the wire: nothing to do. A WRITE: as land_write without a payload.
  void accessed(std::uint64_t offset, std::uint64_t length, bool write, Instant at) override;
  // A WRITE lands page by page: a page whose frame went since access_ready
  // gets one (no flash read if the WRITE covers it whole), a page it covers
  // whole leaves its poison, and its bytes are dirty (past a sampled payload
  // without their values: those read as zeros).
  bool land_write(std::uint64_t offset, std::uint64_t length, std::span<const std::byte> payload,
                  Instant at) override;
  // Some page of the range is poisoned (lost in a reset, not written since).
  bool lost(std::uint64_t offset, std::uint64_t length) const override;

  // --- preparation (the cxl_ssd extension)
  // A tag no caller of this device had before: an extension that replaced
  // another (an agent restart) must not join the old one's queued work.
  Tag new_tag() { return next_tag_++; }
  // Queues fills of `ranges` behind earlier ones; with `pin` their pages stay in
  // DRAM until release(tag), admitted under hinted_bytes_cap in order.
  Status prefetch(Tag tag, std::span<const PoolRange> ranges, bool pin);
  // Pages wholly inside `ranges` get a frame now without a flash read (they
  // will be overwritten); partial pages are queued for a fill.
  Status prepare_write(Tag tag, std::span<const PoolRange> ranges);
  // The same ranges again, for pages that left DRAM before their WRITE came
  // (evicted under a full DRAM): whole pages get a frame again; partial pages
  // are queued again only once `tag`'s fills were all issued, so a page
  // waiting in the queue is not queued twice. Answers how many pages it
  // framed or queued again (0: nothing had left, the device was not touched).
  Result<std::uint64_t> prepare_write_again(Tag tag, std::span<const PoolRange> ranges);
  // The tag's queued and waiting ranges go to the front, in their order; ranges
  // hinted for it later follow them there.
  void promote(Tag tag);
  // Unpins the tag's pages and drops what it still had queued.
  void release(Tag tag);
  // True when every page of the range is in DRAM and filled, or has a write
  // hint's frame: ready to be written (write_wait's question).
  bool range_ready(std::uint64_t offset, std::uint64_t length) const;
  // When every page will be in; nullopt while some page has no frame.
  std::optional<Instant> range_ready_at(std::uint64_t offset, std::uint64_t length) const;
  // Drops whole pages' contents (fresh region): no write-back, no later flash read.
  Status trim(std::uint64_t offset, std::uint64_t length);

  // --- generations
  // DRAM loses everything; pages whose only copy was dirty in DRAM are poisoned
  // (reads fail until they are written or trimmed) with poison_lost_pages, else
  // they read as their older flash copy; flash bytes stay; generation bumps.
  void reset();
  // The device cannot tell its generation in [from, to) (a scripted fault).
  void script_unknown_period(Instant from, Instant to);
  std::uint64_t generation() const { return generation_; }
  // nullopt inside a scripted unknown period.
  std::optional<std::uint64_t> observed_generation() const;

  // --- introspection
  Instant now() const { return loop_.now(); }  // the simulator's clock
  const CxlSsdParams& params() const { return params_; }
  const CxlSsdCounters& counters() const { return counters_; }
  std::uint64_t fill_queue_pages() const { return queued_pages_; }
  std::uint64_t waiting_bytes() const;
  std::uint64_t pinned_bytes() const { return pinned_bytes_; }
  std::uint64_t resident_pages() const { return resident_pages_; }
  // Frames a write hint gave whose contents never came (a walk: tests).
  std::uint64_t frames_without_contents() const;
  // Past the device's end: no page (all false).
  PageState page_state(std::uint64_t offset) const;
  // The flash timelines (P4 derivation, tests).
  const FlashArray& flash() const { return flash_; }

 private:
  using Page = PageTable::Page;
  struct PageSpan {
    Page first = 0;
    Page end = 0;
  };
  struct QueuedSpan {
    Tag tag = 0;
    PageSpan pages;
  };
  struct TagState {
    std::set<std::int64_t> queued;   // keys in queue_
    std::set<std::int64_t> waiting;  // keys in waiting_
    std::vector<PageSpan> pinned;
    bool promoted = false;  // its later ranges join the front too
    // Promoted: keys of a block of its own, so its later ranges go ahead of
    // requests promoted after it, behind its own earlier ones.
    std::int64_t next_front_key = 0;
    std::int64_t front_end = 0;
  };
  // The next key of a promoted request's block (a new block once one is used up).
  std::int64_t promoted_key(TagState& ts);

  Status check(std::uint64_t offset, std::uint64_t length) const;
  Status check(std::span<const PoolRange> ranges) const;  // every range
  // prepare_write of one range; `missing_only` queues only partial pages not in DRAM.
  void prepare_write_range(Tag tag, const PoolRange& r, bool missing_only);
  std::uint64_t page_bytes() const { return params_.page_bytes; }
  // Gives `page` a frame filled from flash starting at `start` (none if trimmed).
  Instant fill_page(Page page, Instant start);
  // A frame for `page` without reading its old bytes (a WRITE overwrites it whole).
  Instant frame_page(Page page, Instant start);
  // `bytes` at pool offset `at`, inside `page`, which has a frame: dirty in DRAM.
  void store_bytes(Page page, std::uint64_t at, std::span<const std::byte> bytes);
  // Fills a write hint's frame (resident, no contents) from flash.
  [[gnu::cold]] Instant fill_contents(Page page, Instant start);
  // A miss on such a frame at `at`: counted, filled in its kind's slot.
  [[gnu::cold]] Instant fill_frame_contents(Page p, bool write, Instant at);
  // For a READ: no frame, or a write hint's frame without contents.
  static bool needs_fill(PageTable::Flags f) {
    return !(f & PageTable::kResident) || PageTable::no_contents(f);
  }
  // A miss that waits for one of `slots` (outstanding misses of its kind).
  Instant fill_in_slot(std::vector<Instant>& slots, Page page, Instant at);
  // Frees frames until one is free for a new page at `at`; returns when the
  // last one freed is (a dirty victim's frame once its data left for flash).
  Instant make_room(Instant at);
  // Frees the frame of `page`, already taken off the LRU (writing it back if
  // dirty); returns when the frame can take other data.
  Instant evict(Page page, Instant at);
  // Programs dirty `page` to flash from `at` (bytes too); it stays resident,
  // clean. Returns when its data has left DRAM.
  Instant write_back(Page page, Instant at);
  // A write made `page` dirty at `at`; with idle_write_back it joins its channel's queue.
  void mark_dirty(Page page, Instant at);
  // Writes queued dirty pages back in the idle time of their channels before
  // `until`: only gaps already past, so no fill issued from now on waits for them.
  void write_back_idle(Instant until);
  // Before a frame goes (eviction, trim): a dirtying after it queues anew.
  void leave_dirty_queue(Page page, PageTable::Flags& f);
  void pin(const PageSpan& span);
  void unpin(const PageSpan& span);
  void enqueue(Tag tag, PageSpan span, std::int64_t key);
  void admit_waiting();
  void pump();
  // Issues the front page of the queue (with `whole_span`, then the rest of its
  // span in order) unless its die or the backend is busy past `limit`, or the
  // frame it would take is not free by then (a dirty victim whose write-back
  // waits for its die); false when it stopped there.
  bool issue_front(Instant limit, bool whole_span);
  // When the frame a fill now would take is free: now, or a dirty LRU
  // victim's write-back's end.
  Instant next_frame_free_at() const;
  // A READ missed `page` of the request being prefetched now: the prefetcher
  // commits its queue through that page at once (same order, same flash).
  bool pull_forward(Page page);
  // The next pump: in prefetch_horizon / 2, or not before `not_before`.
  void schedule_pump(Instant not_before = Instant{0});
  std::uint64_t span_bytes(const PageSpan& s) const {
    return static_cast<std::uint64_t>(s.end - s.first) * page_bytes();
  }

  sim::EventLoop& loop_;
  CxlSsdParams params_;
  std::uint64_t capacity_pages_;
  PageTable table_;
  FlashArray flash_;
  sim::SparseBytes flash_bytes_;
  sim::SparseBytes dram_bytes_;  // only pages dirty in DRAM
  std::vector<Instant> write_slots_;
  std::vector<Instant> read_slots_;
  std::uint64_t resident_pages_ = 0;
  bool any_poisoned_ = false;  // a reset poisoned pages: READs look for them
  std::uint64_t generation_ = 1;
  std::vector<std::pair<Instant, Instant>> unknown_periods_;
  CxlSsdCounters counters_;

  // Fill queue, in priority order: promoted keys are negative (in promote
  // order, from kFirstPromotedKey up), others positive (in hint order).
  std::map<std::int64_t, QueuedSpan> queue_;
  std::map<std::int64_t, QueuedSpan> waiting_;  // pinned spans not yet under the cap
  std::map<Tag, TagState> tags_;
  std::int64_t next_back_key_ = 1;
  static constexpr std::int64_t kFirstPromotedKey = INT64_MIN / 2;
  // Ranges one promoted request can have queued in its block: 2^24 (a hint
  // message holds 4096); 2^38 blocks fit below 0, where the other keys start.
  static constexpr std::int64_t kPromotedKeyBlock = std::int64_t{1} << 24;
  std::int64_t next_front_key_ = kFirstPromotedKey;  // the next block's first key
  std::uint64_t queued_pages_ = 0;
  std::uint64_t pinned_bytes_ = 0;
  std::optional<sim::EventLoop::EventId> pump_event_;
  Instant pump_at_{0};     // when pump_event_ fires
  Tag next_tag_ = 1;       // new_tag()
  Instant wait_until_{0};  // the pump stopped for a die, the backend or a frame free only then

  // Idle write-back: per flash channel, dirty pages in the order they became dirty.
  struct DirtyPage {
    Page page = 0;
    Instant since{0};
  };
  std::vector<std::deque<DirtyPage>> dirty_queues_;
  std::uint64_t dirty_queued_ = 0;
  // Entries whose frame left (evicted or trimmed) while queued, per page: a
  // page's entries sit in one channel's queue in order, so its oldest are these.
  std::map<Page, std::uint32_t> left_queue_entries_;
  Instant written_back_until_{0};
  // Evicted dirty pages whose data had not left DRAM when they were evicted,
  // with when it will have (in eviction order; not sorted): a reset before
  // then loses their newest bytes, as it does a dirty frame's.
  struct LeavingPage {
    Instant out;
    Page page;
    // Without poison: the flash copy the write-back replaces, which is what a
    // reset before `out` leaves (the newest bytes never reached flash).
    PageTable::Flags older_flags = 0;  // its kFlashBytes and kTrimmed
    std::vector<std::byte> older_bytes;
  };
  std::deque<LeavingPage> leaving_dram_;
};

// Per written page, inline: a store marks every page of its WRITEs.
// A queued page's frame is going: its entry no longer stands for a dirty frame.
inline void CxlSsdDevice::leave_dirty_queue(Page page, PageTable::Flags& f) {
  if (!(f & PageTable::kWriteBackQueued)) return;
  f &= static_cast<PageTable::Flags>(~PageTable::kWriteBackQueued);
  ++left_queue_entries_[page];
}

inline void CxlSsdDevice::mark_dirty(Page page, Instant at) {
  PageTable::Flags& f = table_.flags_mut(page);
  // Written: the frame holds the page's contents now (a partial WRITE was filled
  // first); on a clean page the bit is kNoContents, not stored bytes.
  if (PageTable::no_contents(f)) f &= static_cast<PageTable::Flags>(~PageTable::kNoContents);
  f |= PageTable::kDirty;
  if (dirty_queues_.empty() || (f & PageTable::kWriteBackQueued)) return;
  // A page written again while queued keeps its place (first dirtying time).
  f |= PageTable::kWriteBackQueued;
  dirty_queues_[flash_.channel_index(page)].push_back({page, at});
  ++dirty_queued_;
}

}  // namespace rcxl::device
