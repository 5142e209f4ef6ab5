#include "devices/cxl_ssd_model/flash_array.h"

#include <algorithm>
#include <cmath>

namespace rcxl::device {

namespace {

bool is_pow2(std::uint64_t v) {
  return v != 0 && (v & (v - 1)) == 0;
}

runtime::Duration time_for(std::uint64_t bytes, double bytes_per_second) {
  return runtime::Duration(static_cast<std::int64_t>(std::ceil(bytes * 1e9 / bytes_per_second)));
}

}  // namespace

FlashArray::FlashArray(const CxlSsdParams& p)
    : channels_(p.channels),
      ways_(p.ways),
      pow2_(is_pow2(p.channels) && is_pow2(p.ways)),
      channel_mask_(std::uint64_t{p.channels} - 1),
      unit_mask_(std::uint64_t{p.channels} * p.ways - 1),
      read_(p.flash_read),
      transfer_(time_for(p.page_bytes, p.channel_bytes_per_second)),
      backend_per_page_(time_for(p.page_bytes, p.internal_bytes_per_second)),
      program_per_page_(p.flash_program * static_cast<std::int64_t>(p.page_bytes) /
                        static_cast<std::int64_t>(p.program_unit_bytes)),
      program_unit_(p.flash_program),
      // channels and ways are 1..1024 each (device_profile.cc): the product fits.
      // NOLINTBEGIN(bugprone-implicit-widening-of-multiplication-result)
      // Each resource's shortest work: a read holds its die for tR and the
      // data-out at least, a channel and the backend take one page at a time.
      die_(p.channels * p.ways, BusyTimeline(read_ + transfer_)),
      program_(p.channels * p.ways, Instant{0}),
      // NOLINTEND(bugprone-implicit-widening-of-multiplication-result)
      channel_(p.channels, BusyTimeline(transfer_)),
      backend_(backend_per_page_) {}

void FlashArray::abort_all(Instant now) {
  for (auto& d : die_) d.abort_after(now);
  for (auto& d : program_) d = std::min(d, now);
  for (auto& c : channel_) c.abort_after(now);
  backend_.abort_after(now);
}

}  // namespace rcxl::device
