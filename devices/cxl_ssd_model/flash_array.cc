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
      die_(p.channels * p.ways, Instant{0}),
      program_(p.channels * p.ways, Instant{0}),
      channel_(p.channels, Instant{0}) {}

FlashArray::Instant FlashArray::read_page(std::uint64_t page, Instant t) {
  const std::size_t unit = unit_of(page);
  Instant& die = die_[unit];
  Instant& channel = channel_[channel_of(page)];
  const Instant start = std::max(t, die);
  const Instant sensed = start + read_;
  // Data-out needs the channel; the die stays busy until its register is drained.
  const Instant out_start = std::max(sensed, channel);
  const Instant out_end = out_start + transfer_;
  channel = out_end;
  die = out_end;
  // Program suspend: a read does not wait for a program on its die; the program
  // resumes after it, later by the time the read held the die.
  Instant& program = program_[unit];
  if (program > start) program += out_end - start;
  backend_ = std::max(backend_, out_start) + backend_per_page_;
  return std::max(out_end, backend_);
}

FlashArray::Instant FlashArray::program_page(std::uint64_t page, Instant t) {
  Instant& program = program_[unit_of(page)];
  Instant& channel = channel_[channel_of(page)];
  const Instant in_end = std::max(t, channel) + transfer_;
  channel = in_end;
  program = std::max(in_end, program) + program_per_page_;
  return program;
}

void FlashArray::abort_all(Instant now) {
  for (auto& d : die_) d = std::min(d, now);
  for (auto& d : program_) d = std::min(d, now);
  for (auto& c : channel_) c = std::min(c, now);
  backend_ = std::min(backend_, now);
}

}  // namespace rcxl::device
