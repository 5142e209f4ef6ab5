#include "core/agent/region_table_file.h"

#include <map>
#include <nlohmann/json.hpp>
#include <set>

#include "core/protocol/frame_json.h"

namespace rcxl::agent {
namespace {

using Json = nlohmann::json;
constexpr int kVersion = 1;
constexpr std::uint64_t kAlignment = 4096;

Status bad(const std::string& message) {
  return Error(ErrorCode::kBadRequest, message);
}

Result<std::uint64_t> u64(const Json& object, const char* key) {
  auto it = object.find(key);
  if (it == object.end() || !it->is_number_unsigned()) {
    return bad(std::string("'") + key + "' must be an unsigned integer");
  }
  return it->get<std::uint64_t>();
}

Result<std::string> text(const Json& object, const char* key) {
  auto it = object.find(key);
  if (it == object.end() || !it->is_string() || it->get<std::string>().empty()) {
    return bad(std::string("'") + key + "' must be a non-empty string");
  }
  return it->get<std::string>();
}

Result<bool> flag(const Json& object, const char* key) {
  auto it = object.find(key);
  if (it == object.end() || !it->is_boolean())
    return bad(std::string("'") + key + "' must be a boolean");
  return it->get<bool>();
}

Result<PersistedRegion> decode_region(const Json& r) {
  if (!r.is_object()) return bad("a region must be an object");
  auto region = u64(r, "region");
  auto offset = u64(r, "offset");
  auto size = u64(r, "size");
  auto owner = text(r, "handle");
  auto reader = text(r, "read_handle");
  auto mapped = flag(r, "mapped_before");
  auto retiring = flag(r, "retiring");
  for (const Status* st : {&region.status(), &offset.status(), &size.status(), &owner.status(),
                           &reader.status(), &mapped.status(), &retiring.status()}) {
    if (!st->ok()) return *st;
  }
  PersistedRegion out{*region, *offset, *size, *owner, *reader, *mapped, *retiring, ""};
  // Absent in files written before tokens were kept, and for allocs without one.
  if (r.contains("alloc_token")) {
    auto token = text(r, "alloc_token");
    if (!token.ok()) return token.status();
    out.alloc_token = std::move(token).value();
  }
  return out;
}

Status check_extents(const RegionTable& table) {
  std::set<std::uint64_t> ids;
  std::set<std::string> tokens;
  std::map<std::uint64_t, std::uint64_t> extents;  // offset -> end
  for (const auto& r : table.regions) {
    const std::string name = "region " + std::to_string(r.region);
    if (r.region == 0 || r.region >= table.next_region) {
      return bad(name + " is not below next_region " + std::to_string(table.next_region));
    }
    if (!ids.insert(r.region).second) return bad(name + " appears twice");
    if (!r.alloc_token.empty() && !tokens.insert(r.alloc_token).second) {
      return bad(name + "'s alloc_token is another region's too");
    }
    if (r.size == 0 || r.size % kAlignment || r.pool_offset % kAlignment) {
      return bad(name + " has an unaligned extent");
    }
    if (r.pool_offset > table.pool_size || r.size > table.pool_size - r.pool_offset) {
      return bad(name + " runs past the pool");
    }
    auto next = extents.lower_bound(r.pool_offset);
    if (next != extents.end() && next->first < r.pool_offset + r.size) {
      return bad(name + " overlaps another region");
    }
    if (next != extents.begin() && std::prev(next)->second > r.pool_offset) {
      return bad(name + " overlaps another region");
    }
    extents[r.pool_offset] = r.pool_offset + r.size;
  }
  return {};
}

}  // namespace

std::string encode_region_table(const RegionTable& table) {
  Json regions = Json::array();
  for (const auto& r : table.regions) {
    regions.push_back({{"region", r.region},
                       {"offset", r.pool_offset},
                       {"size", r.size},
                       {"handle", r.owner_handle},
                       {"read_handle", r.read_handle},
                       {"mapped_before", r.mapped_before},
                       {"retiring", r.retiring}});
    if (!r.alloc_token.empty()) regions.back()["alloc_token"] = r.alloc_token;
  }
  return Json{{"version", kVersion},
              {"boot_id", table.boot_id},
              {"pool_size", table.pool_size},
              {"next_region", table.next_region},
              {"unknown_periods", table.unknown_periods},
              {"regions", regions}}
             .dump(1) +
         "\n";
}

Result<RegionTable> decode_region_table(std::string_view input) {
  Json doc = protocol::parse_json_text(input);
  if (doc.is_discarded()) return bad("not valid JSON");
  if (!doc.is_object()) return bad("not a JSON object");
  auto version = u64(doc, "version");
  if (!version.ok()) return version.status();
  if (*version != kVersion) return bad("unknown version " + std::to_string(*version));
  RegionTable table;
  auto boot_id = text(doc, "boot_id");
  if (!boot_id.ok()) return boot_id.status();
  auto pool_size = u64(doc, "pool_size");
  if (!pool_size.ok()) return pool_size.status();
  auto next_region = u64(doc, "next_region");
  if (!next_region.ok()) return next_region.status();
  table.boot_id = *boot_id;
  table.pool_size = *pool_size;
  table.next_region = *next_region;
  // Absent in files written before it was kept: none seen.
  if (doc.contains("unknown_periods")) {
    auto unknown_periods = u64(doc, "unknown_periods");
    if (!unknown_periods.ok()) return unknown_periods.status();
    table.unknown_periods = *unknown_periods;
  }
  auto regions = doc.find("regions");
  if (regions == doc.end() || !regions->is_array()) return bad("'regions' must be an array");
  for (const Json& r : *regions) {
    auto region = decode_region(r);
    if (!region.ok()) return region.status();
    table.regions.push_back(std::move(region).value());
  }
  if (Status st = check_extents(table); !st.ok()) return st;
  return table;
}

}  // namespace rcxl::agent
