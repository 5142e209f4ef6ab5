// The ranges of one extension message (PROTOCOL.md "Extension actions"): in
// access order, with the handle each region is held under; split to at most
// N ranges per message.
#pragma once

#include <cstdint>
#include <map>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

namespace rcxl::client {

using Json = nlohmann::json;

struct Range {
  std::uint64_t region = 0;
  std::uint64_t offset = 0;
  std::uint64_t length = 0;
  bool operator==(const Range&) const = default;
};

struct RangeList {
  std::vector<Range> ranges;                     // access order
  std::map<std::uint64_t, std::string> handles;  // region -> handle

  // False (and not added) when the region is already here under another
  // handle: a message names one handle per region (R3.1), and a range sent
  // under the wrong one would have the agent refuse the whole message. After
  // an agent restart an id can name two regions, and the later is left out.
  bool add(const Range& range, const std::string& handle) {
    auto [it, first] = handles.emplace(range.region, handle);
    if (!first && it->second != handle) return false;
    ranges.push_back(range);
    return true;
  }
  bool empty() const { return ranges.empty(); }
  // Pieces of at most `max_ranges`, order kept, each with its regions' handles.
  std::vector<RangeList> split(std::size_t max_ranges) const;
  // Adds "ranges" and "handles" fields to an extension message.
  void write_to(Json& message) const;
};

// Ranges by agent ("host:port"), agents in order.
using RangesByAgent = std::map<std::string, RangeList>;

}  // namespace rcxl::client
