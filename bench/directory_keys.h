// Keys and locations of the directory benchmarks: 32-hex-digit keys (their
// order is their number's) in regions of 256 chunks of 256 KiB on one agent.
#pragma once

#include <cstdint>
#include <cstdio>
#include <string>

#include "core/directory/location.h"

namespace rcxl::bench {

inline constexpr std::uint64_t kKeysPerRegion = 256;  // a 64 MiB region of 256 KiB chunks

inline std::string key_of(std::uint64_t i) {
  char key[40];
  std::snprintf(key, sizeof key, "%032llx", static_cast<unsigned long long>(i));
  return key;
}

inline directory::Location location_of(std::uint64_t i) {
  const std::uint64_t region = i / kKeysPerRegion;
  return {
      "mem0:7000", "boot-1", region, "rh" + std::to_string(region), (i % kKeysPerRegion) * 262144,
      262144};
}

}  // namespace rcxl::bench
