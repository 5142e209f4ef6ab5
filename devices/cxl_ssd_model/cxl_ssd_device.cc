#include "devices/cxl_ssd_model/cxl_ssd_device.h"

#include <algorithm>
#include <array>
#include <cstdio>
#include <cstdlib>

namespace rcxl::device {

namespace {

constexpr int kPullForwardSpans = 256;

// Page numbers are 32-bit (PageTable::Page): profiles are refused past that
// (device_profile.cc); parameters built in code stop loudly instead of
// aliasing pages.
std::uint64_t checked_page_count(const CxlSsdParams& params) {
  const std::uint64_t pages = (params.capacity_bytes + params.page_bytes - 1) / params.page_bytes;
  if (pages >= (std::uint64_t{1} << 32)) {
    std::fputs("rcxl: a CXL-SSD device holds fewer than 2^32 pages\n", stderr);
    std::abort();
  }
  return pages;
}

}  // namespace

CxlSsdDevice::CxlSsdDevice(sim::EventLoop& loop, const CxlSsdParams& params)
    : loop_(loop),
      params_(params),
      capacity_pages_(params.dram_cache_bytes / params.page_bytes),
      // A last partial page is a page too: check() takes offsets up to the capacity.
      table_(checked_page_count(params)),
      flash_(params),
      write_slots_(std::max<std::uint32_t>(1, params.write_allocate_depth), Instant{0}),
      read_slots_(std::max<std::uint32_t>(1, params.read_miss_depth), Instant{0}),
      dirty_queues_(params.idle_write_back ? params.channels : 0) {}

CxlSsdDevice::~CxlSsdDevice() {
  if (pump_event_) loop_.cancel(*pump_event_);
}

std::string CxlSsdDevice::describe() const {
  return "sim cxl-ssd " + std::to_string(params_.capacity_bytes) + " bytes, dram cache " +
         std::to_string(params_.dram_cache_bytes) + " bytes";
}

Status CxlSsdDevice::check(std::uint64_t offset, std::uint64_t length) const {
  if (offset > size() || length > size() - offset) {
    return Error(ErrorCode::kBadRange, "device access past its end");
  }
  return {};
}

// ---------------------------------------------------------------- bytes

Status CxlSsdDevice::read(std::uint64_t offset, std::span<std::byte> out) const {
  if (auto s = check(offset, out.size()); !s.ok()) return s;
  if (params_.all_resident) {
    flash_bytes_.read(offset, out);
    return {};
  }
  std::uint64_t done = 0;
  while (done < out.size()) {
    const std::uint64_t at = offset + done;
    const std::uint64_t n = std::min(page_bytes() - at % page_bytes(), out.size() - done);
    const auto page = static_cast<Page>(at / page_bytes());
    const PageTable::Flags f = table_.flags(page);
    if (f & PageTable::kPoisoned) {
      // Its newest bytes were lost in a reset: a CXL memory device answers such a
      // read with poison, never with older bytes (docs/device-model.md). Only
      // with poison_lost_pages; without, no page is ever marked.
      return Error(ErrorCode::kIoError, "poisoned page at offset " +
                                            std::to_string(std::uint64_t{page} * page_bytes()) +
                                            ": its bytes were lost in a device reset");
    }
    const bool in_dram = (f & PageTable::kResident) && (f & PageTable::kDirty);
    (in_dram ? dram_bytes_ : flash_bytes_).read(at, out.subspan(done, n));
    done += n;
  }
  return {};
}

Status CxlSsdDevice::write(std::uint64_t offset, std::span<const std::byte> in) {
  if (auto s = check(offset, in.size()); !s.ok()) return s;
  if (params_.all_resident) {
    flash_bytes_.write(offset, in);
    return {};
  }
  write_back_idle(now());
  std::uint64_t done = 0;
  while (done < in.size()) {
    const std::uint64_t at = offset + done;
    const std::uint64_t n = std::min(page_bytes() - at % page_bytes(), in.size() - done);
    const auto page = static_cast<Page>(at / page_bytes());
    // The frame may have gone between access_ready and now; bytes still land in DRAM.
    if (!(table_.flags(page) & PageTable::kResident)) fill_page(page, now());
    // A write of the whole page ends its poison. Of part of it, not: the rest
    // would read as the older flash copy (R6: never older bytes as a hit).
    if (n == page_bytes()) {
      table_.flags_mut(page) &= static_cast<PageTable::Flags>(~PageTable::kPoisoned);
    }
    store_bytes(page, at, in.subspan(done, n));
    done += n;
  }
  return {};
}

void CxlSsdDevice::store_bytes(Page page, std::uint64_t at, std::span<const std::byte> bytes) {
  PageTable::Flags& f = table_.flags_mut(page);
  if (!(f & PageTable::kDirty)) {
    std::array<std::byte, 4096> copy{};
    const std::uint64_t base = std::uint64_t{page} * page_bytes();
    for (std::uint64_t o = 0; o < page_bytes(); o += copy.size()) {
      const std::uint64_t len = std::min<std::uint64_t>(copy.size(), page_bytes() - o);
      flash_bytes_.read(base + o, std::span(copy).first(len));
      dram_bytes_.write(base + o, std::span(copy).first(len));
    }
    mark_dirty(page, now());  // first: it reads the bit as kNoContents on a clean page
    f |= PageTable::kHasBytes;
  } else if (!(f & PageTable::kHasBytes)) {
    f |= PageTable::kHasBytes;  // dirty from a sampled write: its other bytes read as zeros
  }
  dram_bytes_.write(at, bytes);
}

Status CxlSsdDevice::write_flash(std::uint64_t offset, std::span<const std::byte> in) {
  if (auto s = check(offset, in.size()); !s.ok()) return s;
  flash_bytes_.write(offset, in);
  if (params_.all_resident) return {};
  for (std::uint64_t p = offset / page_bytes(); p * page_bytes() < offset + in.size(); ++p) {
    PageTable::Flags& f = table_.flags_mut(static_cast<Page>(p));
    f &= static_cast<PageTable::Flags>(~PageTable::kTrimmed);
    f |= PageTable::kFlashBytes;
  }
  return {};
}

// ---------------------------------------------------------------- timing

Instant CxlSsdDevice::access_ready(std::uint64_t offset, std::uint64_t length, bool write,
                                   Instant at) {
  Instant ready = at + params_.dram_access;
  if (length == 0 || !check(offset, length).ok()) return ready;
  const auto first = static_cast<Page>(offset / page_bytes());
  const auto last = static_cast<Page>((offset + length - 1) / page_bytes());
  if (params_.all_resident) {
    counters_.hits += last - first + 1;
    return ready;
  }
  write_back_idle(now());
  // A write hint's frame (no contents yet) is a miss for a READ, and for a
  // WRITE that leaves part of the page as it was.
  const auto needs_contents = [&](Page p, PageTable::Flags f) {
    if (!PageTable::no_contents(f)) return false;
    const std::uint64_t base = std::uint64_t{p} * page_bytes();
    return !write || offset > base || offset + length < base + page_bytes();
  };
  // A range already on the LRU in page order (the usual re-access) is all hits
  // and merges, and moves to the front in one splice: filling a frame's
  // contents does not move it.
  if (table_.lru_touch_run(first, last)) {
    for (Page p = first;; ++p) {
      Instant in(table_.ready_at(p));
      if (needs_contents(p, table_.flags(p))) [[unlikely]] {
        in = fill_frame_contents(p, write, at);
      } else {
        ++(in > at ? counters_.merged_misses : counters_.hits);
      }
      ready = std::max(ready, in + params_.dram_access);
      if (p == last) break;
    }
    return ready;
  }
  for (Page p = first;; ++p) {
    PageTable::Flags f = table_.flags(p);
    // Pages of the request being prefetched ride the prefetch stream.
    if (!write && needs_fill(f) && table_.pins(p) > 0 && pull_forward(p)) {
      f = table_.flags(p);
    }
    if ((f & PageTable::kResident) && !needs_contents(p, f)) {
      const Instant in(table_.ready_at(p));
      if (in > at) {
        ++counters_.merged_misses;  // joins the fill in flight (MSHR)
      } else {
        ++counters_.hits;
      }
      ready = std::max(ready, in + params_.dram_access);
      if (f & PageTable::kInLru) table_.lru_touch(p);
    } else if (f & PageTable::kResident) [[unlikely]] {
      if (f & PageTable::kInLru) table_.lru_touch(p);
      ready = std::max(ready, fill_frame_contents(p, write, at) + params_.dram_access);
    } else {
      ++counters_.misses;
      // A flash read waits for a miss slot: write-allocate (posted writes apply in
      // order) or the RNIC's read window. Trimmed pages need no flash read.
      Instant in;
      if (f & PageTable::kTrimmed) {
        in = fill_page(p, at);
      } else if (write) {
        in = fill_in_slot(write_slots_, p, at);
        ++counters_.write_allocate_fills;
      } else {
        in = fill_in_slot(read_slots_, p, at);
        ++counters_.demand_read_fills;
      }
      ready = std::max(ready, in + params_.dram_access);
    }
    if (p == last) break;
  }
  return ready;
}

// A miss on a write hint's frame: its contents come from flash as a miss's
// would, in its kind's slot, into the frame it has.
Instant CxlSsdDevice::fill_frame_contents(Page p, bool write, Instant at) {
  ++counters_.misses;
  if (table_.flags(p) & PageTable::kTrimmed) return fill_contents(p, at);
  ++(write ? counters_.write_allocate_fills : counters_.demand_read_fills);
  auto& slots = write ? write_slots_ : read_slots_;
  auto slot = std::min_element(slots.begin(), slots.end());
  *slot = fill_contents(p, std::max(at, *slot));
  return *slot;
}

void CxlSsdDevice::accessed(std::uint64_t offset, std::uint64_t length, bool write, Instant at) {
  if (write) (void)land_write(offset, length, {}, at);
}

bool CxlSsdDevice::land_write(std::uint64_t offset, std::uint64_t length,
                              std::span<const std::byte> payload, Instant at) {
  if (params_.all_resident || length == 0 || payload.size() > length ||
      !check(offset, length).ok()) {
    return false;  // the bytes alone, through write() (which refuses a bad range)
  }
  const auto first = static_cast<Page>(offset / page_bytes());
  const auto last = static_cast<Page>((offset + length - 1) / page_bytes());
  // Only pages the WRITE covers whole leave their poison or skip the read of their old bytes.
  const std::uint64_t whole_first = (offset + page_bytes() - 1) / page_bytes();
  const std::uint64_t whole_end = (offset + length) / page_bytes();
  const std::uint64_t payload_end = offset + payload.size();
  write_back_idle(now());
  // A page whose frame went since access_ready (a reset, a DRAM smaller than
  // the WRITE) gets one; a page the WRITE covers whole leaves its poison.
  const auto reframe = [&](Page p) {
    const bool whole = p >= whole_first && p < whole_end;
    if (!(table_.flags(p) & PageTable::kResident)) whole ? frame_page(p, at) : fill_page(p, at);
    if (any_poisoned_ && whole) {
      table_.flags_mut(p) &= static_cast<PageTable::Flags>(~PageTable::kPoisoned);
    }
  };
  Page p = first;
  // The pages the payload reaches (one, for a sampled chunk): its bytes.
  for (; !payload.empty() && std::uint64_t{p} * page_bytes() < payload_end; ++p) {
    reframe(p);
    const std::uint64_t from = std::max(offset, std::uint64_t{p} * page_bytes());
    const std::uint64_t to = std::min(payload_end, (std::uint64_t{p} + 1) * page_bytes());
    store_bytes(p, from, payload.subspan(from - offset, to - from));
    if (p == last) return true;
  }
  // The rest, a sampled op's bulk: dirty without their values (they read as
  // zeros). The hot loop of a store: as lean as the checks allow.
  for (;; ++p) {
    if (!(table_.flags(p) & PageTable::kResident)) [[unlikely]] {
      (p >= whole_first && p < whole_end) ? frame_page(p, at) : fill_page(p, at);
    }
    if (any_poisoned_ && p >= whole_first && p < whole_end) {
      table_.flags_mut(p) &= static_cast<PageTable::Flags>(~PageTable::kPoisoned);
    }
    mark_dirty(p, at);
    if (p == last) return true;
  }
}

bool CxlSsdDevice::lost(std::uint64_t offset, std::uint64_t length) const {
  if (!any_poisoned_ || length == 0 || !check(offset, length).ok()) return false;
  const auto first = static_cast<Page>(offset / page_bytes());
  const auto last = static_cast<Page>((offset + length - 1) / page_bytes());
  for (Page p = first;; ++p) {
    if (table_.flags(p) & PageTable::kPoisoned) return true;
    if (p == last) return false;
  }
}

Instant CxlSsdDevice::fill_in_slot(std::vector<Instant>& slots, Page page, Instant at) {
  auto slot = std::min_element(slots.begin(), slots.end());
  const Instant in = fill_page(page, std::max(at, *slot));
  *slot = in;
  return in;
}

Instant CxlSsdDevice::fill_page(Page page, Instant start) {
  // The flash read goes ahead; its data lands once the victim's frame is free.
  const Instant frame = make_room(start);
  PageTable::Flags& f = table_.flags_mut(page);
  Instant in = std::max(start, frame);
  if (f & PageTable::kTrimmed) {
    ++counters_.zero_fills;
  } else {
    in = std::max(flash_.read_page(page, start, now()), frame);
    ++counters_.fills;
  }
  f |= PageTable::kResident;
  table_.set_ready_at(page, in.count());
  ++resident_pages_;
  if (table_.pins(page) == 0) table_.lru_push_front(page);
  return in;
}

Instant CxlSsdDevice::frame_page(Page page, Instant start) {
  const Instant in = std::max(start, make_room(start));
  table_.flags_mut(page) |= PageTable::kResident;
  table_.set_ready_at(page, in.count());
  ++resident_pages_;
  if (table_.pins(page) == 0) table_.lru_push_front(page);
  return in;
}

Instant CxlSsdDevice::fill_contents(Page page, Instant start) {
  PageTable::Flags& f = table_.flags_mut(page);
  const bool zeros = f & PageTable::kTrimmed;
  // The contents land in the frame the write hint took, not before it is free
  // (its victim's write-back may still be waiting for the program rate).
  const Instant frame(table_.ready_at(page));
  const Instant in = std::max(zeros ? start : flash_.read_page(page, start, now()), frame);
  ++(zeros ? counters_.zero_fills : counters_.fills);
  f &= static_cast<PageTable::Flags>(~PageTable::kNoContents);  // not dirty: the mark only
  table_.set_ready_at(page, in.count());
  return in;
}

Instant CxlSsdDevice::make_room(Instant at) {
  Instant free = at;
  while (resident_pages_ >= capacity_pages_) {
    const Page victim = table_.lru_pop_back();
    if (victim == PageTable::kNone) {
      ++counters_.overflows;  // everything resident is pinned
      return free;
    }
    free = std::max(free, evict(victim, at));
  }
  return free;
}

Instant CxlSsdDevice::evict(Page page, Instant at) {
  PageTable::Flags& f = table_.flags_mut(page);
  leave_dirty_queue(page, f);
  Instant free = at;
  if (f & PageTable::kDirty) {
    LeavingPage leaving{Instant{0}, page, 0, {}};
    if (!params_.poison_lost_pages) {
      leaving.older_flags = f & (PageTable::kFlashBytes | PageTable::kTrimmed);
      if (f & PageTable::kFlashBytes) {
        leaving.older_bytes.resize(page_bytes());
        flash_bytes_.read(std::uint64_t{page} * page_bytes(), leaving.older_bytes);
      }
    }
    free = write_back(page, at);
    ++counters_.write_backs;
    // Its newest bytes are still only in DRAM until then: a reset loses them.
    while (!leaving_dram_.empty() && leaving_dram_.front().out <= now()) {
      leaving_dram_.pop_front();
    }
    if (free > now()) {
      leaving.out = free;
      leaving_dram_.push_back(std::move(leaving));
    }
  }
  // Written back if dirty (which clears its bytes); else the bit is kNoContents.
  f &= static_cast<PageTable::Flags>(~(PageTable::kResident | PageTable::kNoContents));
  --resident_pages_;
  ++counters_.evictions;
  return free;
}

Instant CxlSsdDevice::write_back(Page page, Instant at) {
  PageTable::Flags& f = table_.flags_mut(page);
  const std::uint64_t base = std::uint64_t{page} * page_bytes();
  if (f & PageTable::kHasBytes) {
    std::array<std::byte, 4096> copy{};
    for (std::uint64_t o = 0; o < page_bytes(); o += copy.size()) {
      const std::uint64_t len = std::min<std::uint64_t>(copy.size(), page_bytes() - o);
      dram_bytes_.read(base + o, std::span(copy).first(len));
      flash_bytes_.write(base + o, std::span(copy).first(len));
    }
    dram_bytes_.drop(base, page_bytes());
    f |= PageTable::kFlashBytes;
  } else if (f & PageTable::kFlashBytes) {
    flash_bytes_.drop(base, page_bytes());  // never-stored bytes stay zeros on flash
    f &= static_cast<PageTable::Flags>(~PageTable::kFlashBytes);
  }
  const Instant out = flash_.program_page(page, at, std::min(at, now()));
  // Flash has a copy now.
  f &= static_cast<PageTable::Flags>(
      ~(PageTable::kTrimmed | PageTable::kDirty | PageTable::kHasBytes));
  return out;
}

void CxlSsdDevice::write_back_idle(Instant until) {
  if (dirty_queued_ == 0 || until <= written_back_until_) return;
  written_back_until_ = until;
  const runtime::Duration transfer = flash_.page_transfer();
  for (auto& queue : dirty_queues_) {
    while (!queue.empty()) {
      const DirtyPage d = queue.front();
      if (auto left = left_queue_entries_.find(d.page); left != left_queue_entries_.end()) {
        if (--left->second == 0) left_queue_entries_.erase(left);
        queue.pop_front();  // the frame it stood for is gone; its page's flags are not its own
        --dirty_queued_;
        continue;
      }
      PageTable::Flags& f = table_.flags_mut(d.page);
      const bool dirty_frame = (f & (PageTable::kResident | PageTable::kDirty)) ==
                               (PageTable::kResident | PageTable::kDirty);
      if (dirty_frame) {
        // Not before the write, nor before the frame's fill (it may be a newer frame).
        const Instant since = std::max(d.since, Instant(table_.ready_at(d.page)));
        const Instant start = flash_.idle_write_start(d.page, since);
        if (start + transfer > until) break;  // the channel was not idle long enough
        write_back(d.page, start);
        ++counters_.idle_write_backs;
      }
      f &= static_cast<PageTable::Flags>(~PageTable::kWriteBackQueued);
      queue.pop_front();
      --dirty_queued_;
    }
  }
}

// ---------------------------------------------------------------- preparation

Status CxlSsdDevice::prefetch(Tag tag, std::span<const PoolRange> ranges, bool pin) {
  if (auto s = check(ranges); !s.ok()) return s;
  if (params_.all_resident) return {};
  for (const auto& r : ranges) {
    if (r.length == 0) continue;
    const PageSpan span{static_cast<Page>(r.offset / page_bytes()),
                        static_cast<Page>((r.offset + r.length - 1) / page_bytes() + 1)};
    // A range hinted for a request already promoted joins its promoted ranges.
    auto tag_it = tags_.find(tag);
    const bool promoted = tag_it != tags_.end() && tag_it->second.promoted;
    const std::int64_t key = promoted ? promoted_key(tag_it->second) : next_back_key_++;
    if (pin) {
      waiting_[key] = {tag, span};
      tags_[tag].waiting.insert(key);
    } else {
      enqueue(tag, span, key);
    }
  }
  admit_waiting();
  pump();
  return {};
}

Status CxlSsdDevice::check(std::span<const PoolRange> ranges) const {
  for (const auto& r : ranges) {
    if (auto s = check(r.offset, r.length); !s.ok()) return s;
  }
  return {};
}

Status CxlSsdDevice::prepare_write(Tag tag, std::span<const PoolRange> ranges) {
  if (auto s = check(ranges); !s.ok()) return s;
  if (params_.all_resident) return {};
  write_back_idle(now());
  for (const auto& r : ranges) prepare_write_range(tag, r, /*missing_only=*/false);
  pump();
  return {};
}

Result<std::uint64_t> CxlSsdDevice::prepare_write_again(Tag tag,
                                                        std::span<const PoolRange> ranges) {
  if (auto s = check(ranges); !s.ok()) return s;
  if (params_.all_resident) return std::uint64_t{0};
  auto ts = tags_.find(tag);
  const bool fills_queued = ts != tags_.end() && !ts->second.queued.empty();
  std::vector<PoolRange> again;
  std::uint64_t pages = 0;
  for (const auto& r : ranges) {
    if (r.length == 0) continue;
    const auto first = static_cast<Page>(r.offset / page_bytes());
    const auto last = static_cast<Page>((r.offset + r.length - 1) / page_bytes());
    const auto whole_first = static_cast<Page>((r.offset + page_bytes() - 1) / page_bytes());
    const auto whole_end = static_cast<Page>((r.offset + r.length) / page_bytes());
    // Only the whole pages while fills are queued: the partial ones may wait there.
    const Page from = fills_queued ? whole_first : first;
    const Page to = fills_queued ? whole_end : last + 1;
    std::uint64_t missing = 0;
    for (Page p = from; p < to; ++p) missing += !(table_.flags(p) & PageTable::kResident);
    if (missing == 0) continue;
    pages += missing;
    if (!fills_queued) {
      again.push_back(r);
    } else {
      again.push_back({std::uint64_t{whole_first} * page_bytes(),
                       std::uint64_t{whole_end - whole_first} * page_bytes()});
    }
  }
  if (again.empty()) return std::uint64_t{0};  // nothing left DRAM: the device is not touched
  write_back_idle(now());
  for (const auto& r : again) prepare_write_range(tag, r, /*missing_only=*/true);
  pump();
  return pages;
}

void CxlSsdDevice::prepare_write_range(Tag tag, const PoolRange& r, bool missing_only) {
  if (r.length == 0) return;
  const std::uint64_t end = r.offset + r.length;
  const auto first = static_cast<Page>(r.offset / page_bytes());
  const auto last_end = static_cast<Page>((end - 1) / page_bytes() + 1);
  const auto whole_first = static_cast<Page>((r.offset + page_bytes() - 1) / page_bytes());
  const auto whole_end = static_cast<Page>(end / page_bytes());
  auto wanted = [&](Page p) { return !missing_only || !(table_.flags(p) & PageTable::kResident); };
  // Partial head and tail pages keep bytes the write does not cover: fill them.
  if (first < whole_first && wanted(first)) enqueue(tag, {first, whole_first}, next_back_key_++);
  if (whole_end < last_end && whole_end >= whole_first && wanted(whole_end)) {
    enqueue(tag, {whole_end, last_end}, next_back_key_++);
  }
  for (Page p = whole_first; p < whole_end; ++p) {
    if (table_.flags(p) & PageTable::kResident) continue;
    // A page wholly overwritten needs no flash read: a frame is enough, once free.
    const Instant frame = make_room(now());
    PageTable::Flags& f = table_.flags_mut(p);
    f |= PageTable::kResident | PageTable::kNoContents;  // not resident, so not dirty
    table_.set_ready_at(p, frame.count());
    ++resident_pages_;
    if (table_.pins(p) == 0) table_.lru_push_front(p);
    counters_.hinted_bytes_prepared += page_bytes();
  }
}

void CxlSsdDevice::enqueue(Tag tag, PageSpan span, std::int64_t key) {
  queue_[key] = {tag, span};
  tags_[tag].queued.insert(key);
  queued_pages_ += span.end - span.first;
}

void CxlSsdDevice::pin(const PageSpan& span) {
  pinned_bytes_ += table_.pin_range(span.first, span.end) * page_bytes();
}

void CxlSsdDevice::unpin(const PageSpan& span) {
  pinned_bytes_ -= table_.unpin_range(span.first, span.end) * page_bytes();
}

void CxlSsdDevice::admit_waiting() {
  while (!waiting_.empty()) {
    auto it = waiting_.begin();
    const PageSpan& pages = it->second.pages;
    // The cap is on pinned DRAM: pages another hint already pins cost nothing
    // more (shared prefixes). Count them only when the whole span would not fit.
    // Pins hold DRAM frames: never more than the DRAM has, whatever the cap says
    // (a sweep to a DRAM smaller than the profile's cap).
    const std::uint64_t cap =
        std::min<std::uint64_t>(params_.hinted_bytes_cap, capacity_pages_ * page_bytes());
    const std::uint64_t bytes = pinned_bytes_ + span_bytes(pages) <= cap
                                    ? span_bytes(pages)
                                    : table_.unpinned_pages(pages.first, pages.end) * page_bytes();
    // A span larger than the cap still goes when nothing else is pinned, and
    // one that pins nothing new always does (also while an oversized one is over the cap).
    if (pinned_bytes_ > 0 && bytes > 0 && pinned_bytes_ + bytes > cap) break;
    const auto [tag, span] = it->second;
    const std::int64_t key = it->first;
    waiting_.erase(it);
    TagState& ts = tags_[tag];
    ts.waiting.erase(key);
    pin(span);
    ts.pinned.push_back(span);
    enqueue(tag, span, key);
  }
}

void CxlSsdDevice::promote(Tag tag) {
  auto it = tags_.find(tag);
  if (it == tags_.end()) return;
  TagState& ts = it->second;
  ts.promoted = true;
  // Promoted requests go ahead of all others but behind those promoted before
  // them: a QP's READs are served in order, so the earliest promote loads first.
  // Queued and waiting ranges move together in the hint's own order (their
  // keys share one counter), so a waiting range admitted later still follows
  // the queued ranges hinted before it.
  std::set<std::int64_t> queued, waiting;
  auto q = ts.queued.begin();
  auto w = ts.waiting.begin();
  while (q != ts.queued.end() || w != ts.waiting.end()) {
    const bool from_queue = w == ts.waiting.end() || (q != ts.queued.end() && *q < *w);
    const std::int64_t old = from_queue ? *q++ : *w++;
    auto& into = from_queue ? queued : waiting;
    if (old < 0) {  // already promoted: keeps its place
      into.insert(old);
      continue;
    }
    auto& m = from_queue ? queue_ : waiting_;
    auto node = m.extract(old);
    node.key() = promoted_key(ts);
    into.insert(node.key());
    m.insert(std::move(node));
  }
  ts.queued = std::move(queued);
  ts.waiting = std::move(waiting);
  admit_waiting();
  pump();
}

std::int64_t CxlSsdDevice::promoted_key(TagState& ts) {
  if (ts.next_front_key == ts.front_end) {
    ts.next_front_key = next_front_key_;
    next_front_key_ += kPromotedKeyBlock;
    ts.front_end = next_front_key_;
  }
  return ts.next_front_key++;
}

void CxlSsdDevice::release(Tag tag) {
  auto it = tags_.find(tag);
  if (it == tags_.end()) return;
  TagState& ts = it->second;
  for (std::int64_t key : ts.queued) {
    auto q = queue_.find(key);
    queued_pages_ -= q->second.pages.end - q->second.pages.first;
    queue_.erase(q);
  }
  for (std::int64_t key : ts.waiting) waiting_.erase(key);
  for (const auto& span : ts.pinned) unpin(span);
  tags_.erase(it);
  admit_waiting();
  pump();
}

void CxlSsdDevice::pump() {
  write_back_idle(now());
  const Instant limit = now() + params_.prefetch_horizon;
  wait_until_ = Instant{0};
  while (!queue_.empty() && issue_front(limit, true)) {
  }
  if (!queue_.empty()) schedule_pump(wait_until_ - params_.prefetch_horizon);
}

Instant CxlSsdDevice::next_frame_free_at() const {
  if (resident_pages_ < capacity_pages_) return now();
  const Page victim = table_.lru_back();
  if (victim == PageTable::kNone || !(table_.flags(victim) & PageTable::kDirty)) return now();
  return flash_.write_back_out_at(victim, now());
}

bool CxlSsdDevice::issue_front(Instant limit, bool whole_span) {
  auto it = queue_.begin();
  QueuedSpan& q = it->second;
  if (q.pages.first == q.pages.end) {
    auto ts = tags_.find(q.tag);
    ts->second.queued.erase(it->first);
    const TagState& s = ts->second;
    if (s.queued.empty() && s.waiting.empty() && s.pinned.empty()) tags_.erase(ts);
    queue_.erase(it);
    return true;
  }
  // Page by page: the same as one call per page, without the queue lookup.
  do {
    const Page p = q.pages.first;
    const PageTable::Flags f = table_.flags(p);
    if (needs_fill(f)) {
      // Commit fills only a little ahead, so promotes and demand misses still count.
      if (!(f & PageTable::kTrimmed) &&
          (flash_.die_free_at(p) > limit || flash_.backend_free_at() > limit)) {
        wait_until_ = std::max(flash_.die_free_at(p), flash_.backend_free_at());
        return false;
      }
      // Its data would wait outside DRAM for a frame: committed that early, it
      // would only hold the channel and the die from demand misses.
      if (!(f & PageTable::kResident) && limit != Instant::max()) {
        if (const Instant frame = next_frame_free_at(); frame > limit) {
          wait_until_ = frame;
          return false;
        }
      }
      if (f & PageTable::kResident) [[unlikely]] {
        fill_contents(p, now());  // a write hint's frame: counted as prepared then
      } else {
        fill_page(p, now());
        counters_.hinted_bytes_prepared += page_bytes();
      }
    }
    ++q.pages.first;
    --queued_pages_;
  } while (whole_span && q.pages.first != q.pages.end);
  return true;
}

bool CxlSsdDevice::pull_forward(Page page) {
  if (queue_.empty()) return false;
  const Tag front = queue_.begin()->second.tag;
  bool queued_here = false;
  // Only the front request's first spans: a READ follows its hint's order.
  int spans = 0;
  for (const auto& [key, q] : queue_) {
    if (q.tag != front || ++spans > kPullForwardSpans) break;
    if (page >= q.pages.first && page < q.pages.end) {
      queued_here = true;
      break;
    }
  }
  if (!queued_here) return false;
  while (needs_fill(table_.flags(page)) && !queue_.empty()) {
    (void)issue_front(Instant::max(), false);
  }
  if (!queue_.empty()) schedule_pump();
  return true;
}

void CxlSsdDevice::schedule_pump(Instant not_before) {
  const Instant at = std::max(now() + params_.prefetch_horizon / 2, not_before);
  // A wake set for a frame far ahead must not hold back one wanted sooner.
  if (pump_event_ && pump_at_ <= at) return;
  if (pump_event_) loop_.cancel(*pump_event_);
  pump_at_ = at;
  pump_event_ = loop_.schedule_at(at, [this] {
    pump_event_.reset();
    pump();
  });
}

bool CxlSsdDevice::range_ready(std::uint64_t offset, std::uint64_t length) const {
  auto at = range_ready_at(offset, length);
  return at && *at <= now();
}

std::optional<Instant> CxlSsdDevice::range_ready_at(std::uint64_t offset,
                                                    std::uint64_t length) const {
  if (params_.all_resident || length == 0) return now();
  if (!check(offset, length).ok()) return std::nullopt;
  Instant latest{0};
  const auto first = static_cast<Page>(offset / page_bytes());
  const auto last = static_cast<Page>((offset + length - 1) / page_bytes());
  for (Page p = first;; ++p) {
    if (!(table_.flags(p) & PageTable::kResident)) return std::nullopt;
    latest = std::max(latest, Instant(table_.ready_at(p)));
    if (p == last) break;
  }
  return latest;
}

Status CxlSsdDevice::trim(std::uint64_t offset, std::uint64_t length) {
  if (auto s = check(offset, length); !s.ok()) return s;
  if (params_.all_resident) {
    flash_bytes_.drop(offset, length);
    return {};
  }
  const std::uint64_t first = (offset + page_bytes() - 1) / page_bytes();
  const std::uint64_t end = (offset + length) / page_bytes();
  for (std::uint64_t p = first; p < end; ++p) {
    const auto page = static_cast<Page>(p);
    if (table_.flags(page) & PageTable::kResident) {
      table_.lru_remove(page);
      --resident_pages_;
    }
    PageTable::Flags& f = table_.flags_mut(page);
    leave_dirty_queue(page, f);
    f = PageTable::kTrimmed;
  }
  if (end > first) {
    dram_bytes_.drop(first * page_bytes(), (end - first) * page_bytes());
    flash_bytes_.drop(first * page_bytes(), (end - first) * page_bytes());
  }
  // Frames it freed (or trimmed pages that need no read) may unblock the queue.
  if (!queue_.empty()) schedule_pump();
  return {};
}

// ---------------------------------------------------------------- generations

void CxlSsdDevice::reset() {
  write_back_idle(now());  // what the idle channels wrote back before the reset survives it
  // Without poison handling a lost page silently reads as its older flash copy.
  table_.drop_all_frames(params_.poison_lost_pages);
  if (params_.poison_lost_pages) any_poisoned_ = true;
  // Evicted, but their write-back had not taken their bytes out of DRAM yet:
  // poisoned, or without poison the older flash copy again (oldest last: a
  // page evicted twice gets the copy from before its first write-back).
  for (auto it = leaving_dram_.rbegin(); it != leaving_dram_.rend(); ++it) {
    if (it->out <= now()) continue;
    PageTable::Flags& f = table_.flags_mut(it->page);
    if (params_.poison_lost_pages) {
      if (!(f & PageTable::kTrimmed)) f |= PageTable::kPoisoned;
      continue;
    }
    const std::uint64_t base = std::uint64_t{it->page} * page_bytes();
    if (it->older_flags & PageTable::kFlashBytes) {
      flash_bytes_.write(base, it->older_bytes);
    } else {
      flash_bytes_.drop(base, page_bytes());
    }
    f = static_cast<PageTable::Flags>((f & ~(PageTable::kFlashBytes | PageTable::kTrimmed)) |
                                      it->older_flags);
  }
  leaving_dram_.clear();
  for (auto& queue : dirty_queues_) queue.clear();
  left_queue_entries_.clear();
  dirty_queued_ = 0;
  dram_bytes_ = sim::SparseBytes();
  resident_pages_ = 0;
  queue_.clear();
  waiting_.clear();
  tags_.clear();
  queued_pages_ = 0;
  pinned_bytes_ = 0;
  if (pump_event_) loop_.cancel(*pump_event_);
  pump_event_.reset();
  flash_.abort_all(now());
  for (auto& slot : write_slots_) slot = std::min(slot, now());
  for (auto& slot : read_slots_) slot = std::min(slot, now());
  ++generation_;
  ++counters_.resets;
}

void CxlSsdDevice::script_unknown_period(Instant from, Instant to) {
  unknown_periods_.emplace_back(from, to);
}

std::optional<std::uint64_t> CxlSsdDevice::observed_generation() const {
  for (const auto& [from, to] : unknown_periods_) {
    if (now() >= from && now() < to) return std::nullopt;
  }
  return generation_;
}

std::uint64_t CxlSsdDevice::waiting_bytes() const {
  std::uint64_t total = 0;
  for (const auto& [key, q] : waiting_) total += span_bytes(q.pages);
  return total;
}

std::uint64_t CxlSsdDevice::frames_without_contents() const {
  std::uint64_t n = 0;
  for (std::uint64_t p = 0; p < table_.pages(); ++p) {
    n += PageTable::no_contents(table_.flags(static_cast<Page>(p)));
  }
  return n;
}

PageState CxlSsdDevice::page_state(std::uint64_t offset) const {
  if (offset >= size()) return {};  // no page of this device
  const auto p = static_cast<Page>(offset / page_bytes());
  const PageTable::Flags f = table_.flags(p);
  PageState s;
  s.resident = params_.all_resident || (f & PageTable::kResident);
  s.dirty = f & PageTable::kDirty;
  s.trimmed = f & PageTable::kTrimmed;
  s.poisoned = f & PageTable::kPoisoned;
  s.no_contents = PageTable::no_contents(f);
  s.pins = table_.pins(p);
  s.ready_at = Instant(table_.ready_at(p));
  return s;
}

}  // namespace rcxl::device
