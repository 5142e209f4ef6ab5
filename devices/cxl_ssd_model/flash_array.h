// The flash behind the DRAM cache, as timelines of booked work: one per die
// (a parallel unit), one per channel, one for the controller backend; work
// takes the first gap it fits. Completion times are computed analytically, so
// a fill costs no simulator event.
#pragma once

#include <algorithm>
#include <cstdint>
#include <vector>

#include "devices/cxl_ssd_model/busy_timeline.h"
#include "devices/cxl_ssd_model/cxl_ssd_params.h"

namespace rcxl::device {

class FlashArray {
 public:
  using Instant = runtime::Instant;
  explicit FlashArray(const CxlSsdParams& params);

  // Reads page `page` into DRAM starting no earlier than `t`, in the first
  // gaps of its die, its channel and the backend; returns when it is in.
  // Work that ended by `now` (never after `t`) is forgotten.
  Instant read_page(std::uint64_t page, Instant t, Instant now = Instant{0});
  // Writes back one dirty page (its share of a program unit) from `t`; returns
  // when its data has left DRAM (its frame is free). The transfer waits for
  // the channel and for the die's page buffer: at most one program unit
  // queued beyond the one programming (cache program), as for idle write-back,
  // so evictions are held to the die's program throughput.
  // Reads suspend programs (ONFI program suspend): they wait only for reads.
  Instant program_page(std::uint64_t page, Instant t, Instant now = Instant{0});
  // When an idle-time write-back of `page` wanting to start at `t` could take
  // its channel: after the channel's last transfer, and with at most one
  // program unit queued on the die (its page buffer).
  Instant idle_write_start(std::uint64_t page, Instant t) const {
    return std::max(
        {t, channel_[channel_of(page)].last_end(), program_[unit_of(page)] - program_unit_});
  }
  // Channel number of `page` (idle write-back keeps one queue per channel).
  std::size_t channel_index(std::uint64_t page) const {
    return static_cast<std::size_t>(channel_of(page));
  }
  // When the reads booked on the die holding `page` end (the prefetcher
  // commits work only a horizon ahead of now).
  Instant die_free_at(std::uint64_t page) const { return die_[unit_of(page)].last_end(); }
  // When the die holding `page` has finished its queued programs.
  Instant program_done_at(std::uint64_t page) const { return program_[unit_of(page)]; }
  // When a write-back of `page` from `t` would have its data out of DRAM
  // (program_page's answer, without booking it).
  Instant write_back_out_at(std::uint64_t page, Instant t) const {
    return write_back_transfer_at(page, t) + transfer_;
  }
  // When the pages booked on the controller backend end.
  Instant backend_free_at() const { return backend_.last_end(); }

  // Per-page costs (for docs, tests and the P4 derivation).
  runtime::Duration page_transfer() const { return transfer_; }
  runtime::Duration uncontended_read() const { return read_ + transfer_; }
  // A reset aborts queued flash commands: every timeline is free from `now`.
  void abort_all(Instant now);

 private:
  // A 64-bit division costs more than the rest of a fill, so power-of-two
  // geometries (every shipped profile) use shifts and masks: same result.
  std::uint64_t channel_of(std::uint64_t page) const {
    return pow2_ ? page & channel_mask_ : page % channels_;
  }
  // Where a read asked at `t` goes: its die's sense from `start`, its
  // data-out from `out_start`, its backend slot from `backend`.
  struct ReadPlan {
    Instant start;
    Instant out_start;
    Instant backend;
  };
  ReadPlan plan_read(std::uint64_t page, Instant t) const;
  // A write-back's transfer: in the channel's first gap once the die's page
  // buffer has room (at most one program unit queued beyond the one programming).
  Instant write_back_transfer_at(std::uint64_t page, Instant t) const {
    return channel_[channel_of(page)].first_fit(
        std::max(t, program_[unit_of(page)] - program_unit_), transfer_);
  }
  std::size_t unit_of(std::uint64_t page) const {
    if (pow2_) {
      return static_cast<std::size_t>(page & unit_mask_);  // way * channels + channel
    }
    const std::uint64_t channel = page % channels_;
    const std::uint64_t way = (page / channels_) % ways_;
    return static_cast<std::size_t>(way * channels_ + channel);
  }

  std::uint64_t channels_;
  std::uint64_t ways_;
  bool pow2_;                   // channels and ways are powers of two
  std::uint64_t channel_mask_;  // channels - 1 (pow2_ only)
  std::uint64_t unit_mask_;     // channels * ways - 1 (pow2_ only)
  runtime::Duration read_;
  runtime::Duration transfer_;
  runtime::Duration backend_per_page_;
  runtime::Duration program_per_page_;
  runtime::Duration program_unit_;     // tPROG of one program unit
  std::vector<BusyTimeline> die_;      // reads: sense + data-out
  std::vector<Instant> program_;       // write-backs, pushed back by reads that suspend them
  std::vector<BusyTimeline> channel_;  // data-out of reads, data-in of write-backs
  BusyTimeline backend_;
};

// Per page, inline: every fill and write-back calls one.

inline FlashArray::ReadPlan FlashArray::plan_read(std::uint64_t page, Instant t) const {
  const BusyTimeline& die = die_[unit_of(page)];
  const BusyTimeline& channel = channel_[channel_of(page)];
  // Sense, then data-out once the channel is free; the die stays busy until
  // its register is drained, so it needs a gap covering both.
  Instant start = die.first_fit(t, read_ + transfer_);
  Instant out_start = channel.first_fit(start + read_, transfer_);
  for (Instant fits; (fits = die.first_fit(start, out_start + transfer_ - start)) != start;) {
    start = fits;
    out_start = channel.first_fit(start + read_, transfer_);
  }
  return {start, out_start, backend_.first_fit(out_start, backend_per_page_)};
}

inline FlashArray::Instant FlashArray::read_page(std::uint64_t page, Instant t, Instant now) {
  const std::size_t unit = unit_of(page);
  const auto [start, out_start, backend] = plan_read(page, t);
  const Instant out_end = out_start + transfer_;
  channel_[channel_of(page)].book(out_start, transfer_, now);
  die_[unit].book(start, out_end - start, now);
  // Program suspend: a read does not wait for a program on its die; the program
  // resumes after it, later by the time the read needs the die (tR and its
  // transfer): a controller senses so the data is ready when the channel is,
  // so a wait for the channel is not the die's (it is charged to the channel).
  Instant& program = program_[unit];
  if (program > start) program += read_ + transfer_;
  backend_.book(backend, backend_per_page_, now);
  return std::max(out_end, backend + backend_per_page_);
}

inline FlashArray::Instant FlashArray::program_page(std::uint64_t page, Instant t, Instant now) {
  const Instant transfer = write_back_transfer_at(page, t);
  channel_[channel_of(page)].book(transfer, transfer_, now);
  const Instant out = transfer + transfer_;
  Instant& program = program_[unit_of(page)];
  program = std::max(out, program) + program_per_page_;
  return out;
}

}  // namespace rcxl::device
