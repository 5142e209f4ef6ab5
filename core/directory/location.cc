#include "core/directory/location.h"

#include <limits>

namespace rcxl::directory {

Json to_json(const Location& l) {
  return {{"agent", l.agent},   {"boot", l.boot},
          {"region", l.region}, {"read_handle", l.read_handle},
          {"offset", l.offset}, {"length", l.length}};
}

namespace {
bool is_u64(const Json& j, const char* key) {
  return j.contains(key) && j[key].is_number_unsigned();
}
bool is_string(const Json& j, const char* key) {
  return j.contains(key) && j[key].is_string() && !j[key].get_ref<const std::string&>().empty();
}
}  // namespace

Result<Location> location_from_json(const Json& j) {
  if (!j.is_object() || !is_string(j, "agent") || !is_string(j, "boot") || !is_u64(j, "region") ||
      !is_string(j, "read_handle") || !is_u64(j, "offset") || !is_u64(j, "length")) {
    return Error(ErrorCode::kBadRequest,
                 "location needs agent, boot, read_handle (strings) and region, offset, length "
                 "(unsigned integers)");
  }
  Location l;
  l.agent = j["agent"].get<std::string>();
  l.boot = j["boot"].get<std::string>();
  l.region = j["region"].get<std::uint64_t>();
  l.read_handle = j["read_handle"].get<std::string>();
  l.offset = j["offset"].get<std::uint64_t>();
  l.length = j["length"].get<std::uint64_t>();
  if (l.length == 0) return Error(ErrorCode::kBadRequest, "location length is zero");
  // A lookup reply carries a location per key: a larger one would make it
  // outgrow clients' frame limit and fail every call on their connection.
  // Measured as it is sent (escapes, replaced bytes), with its key's share.
  const std::size_t bytes = to_json(l).dump(-1, ' ', false, Json::error_handler_t::replace).size();
  if (bytes > kMaxLocationJsonBytes) {
    return Error(ErrorCode::kBadRequest,
                 "a location is at most " + std::to_string(kMaxLocationJsonBytes) +
                     " bytes as JSON; this one is " + std::to_string(bytes));
  }
  if (l.offset > std::numeric_limits<std::uint64_t>::max() - l.length) {
    return Error(ErrorCode::kBadRequest, "location offset + length overflows");
  }
  return l;
}

}  // namespace rcxl::directory
