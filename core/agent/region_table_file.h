// The agent's region table as a file (AgentConfig::state_file), so that an agent
// process restart without a memory reset keeps every region: ids, pool extents,
// handles, alloc tokens, retiring state, the next region id, whether a region was mapped
// before (so a restarted agent never passes fresh=true for it; SPEC R5.2), and
// the count of unknown-generation periods (so its boot never goes back; R6.4).
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "core/runtime/status.h"

namespace rcxl::agent {

struct PersistedRegion {
  std::uint64_t region = 0;
  std::uint64_t pool_offset = 0;
  std::uint64_t size = 0;
  std::string owner_handle;
  std::string read_handle;
  bool mapped_before = false;
  bool retiring = false;    // freed, waiting for the extension's retire()
  std::string alloc_token;  // its alloc's token (empty: none), so a retry finds it
  bool operator==(const PersistedRegion&) const = default;
};

struct RegionTable {
  std::string boot_id;          // the node boot the memory belongs to
  std::uint64_t pool_size = 0;  // a different pool is a different memory
  std::uint64_t next_region = 1;
  std::vector<PersistedRegion> regions;
  // Unknown-generation periods seen under boot_id (SPEC R6.4: the `~n` of the
  // boot), so a restarted agent never advertises a boot it had left.
  std::uint64_t unknown_periods = 0;
  bool operator==(const RegionTable&) const = default;
};

std::string encode_region_table(const RegionTable& table);
// kBadRequest naming what is wrong: bad JSON, a missing or mistyped field, an
// extent that is unaligned, outside the pool or overlaps another, a duplicate id
// or alloc token, an id at or past next_region.
Result<RegionTable> decode_region_table(std::string_view text);

}  // namespace rcxl::agent
