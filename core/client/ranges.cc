#include "core/client/ranges.h"

#include <algorithm>

namespace rcxl::client {

std::vector<RangeList> RangeList::split(std::size_t max_ranges) const {
  std::vector<RangeList> out;
  max_ranges = std::max<std::size_t>(max_ranges, 1);  // 0 would never advance
  for (std::size_t i = 0; i < ranges.size(); i += max_ranges) {
    RangeList piece;
    for (std::size_t j = i; j < ranges.size() && j < i + max_ranges; ++j) {
      piece.add(ranges[j], handles.at(ranges[j].region));
    }
    out.push_back(std::move(piece));
  }
  return out;
}

void RangeList::write_to(Json& message) const {
  Json list = Json::array();
  for (const auto& r : ranges) list.push_back({r.region, r.offset, r.length});
  Json by_region = Json::object();
  for (const auto& [region, handle] : handles) by_region[std::to_string(region)] = handle;
  message["ranges"] = std::move(list);
  message["handles"] = std::move(by_region);
}

}  // namespace rcxl::client
