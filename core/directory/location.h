// Where a key's bytes live: the agent, the boot they were stored under (SPEC
// R6.1) and the region range a reader maps with the read handle.
#pragma once

#include <cstdint>
#include <nlohmann/json.hpp>
#include <string>

#include "core/runtime/status.h"

namespace rcxl::directory {

using Json = nlohmann::json;

// A location as JSON: clients' batching counts on 1 KiB per location in a
// reply (directory_client.cc); this leaves room for the separators.
inline constexpr std::size_t kMaxLocationJsonBytes = 1000;
// A key's bytes: with max_keys (2^20) this bounds the directory's keys at
// 1 GiB; a KV chunk key (model, rank, prefix hash) is a few hundred bytes.
inline constexpr std::size_t kMaxKeyBytes = 1024;

struct Location {
  std::string agent;  // agent control address "host:port"
  std::string boot;   // the agent's boot when the bytes were written
  std::uint64_t region = 0;
  std::string read_handle;
  std::uint64_t offset = 0;
  std::uint64_t length = 0;

  bool operator==(const Location&) const = default;
};

Json to_json(const Location& location);
// Every field present and of its type, strings not empty, length > 0, no
// overflow, at most kMaxLocationJsonBytes as JSON; else bad_request.
Result<Location> location_from_json(const Json& json);

}  // namespace rcxl::directory
