#include "scenarios/json_document.h"

#include <set>
#include <vector>

namespace rcxl::scenarios {

using Json = nlohmann::json;

Result<Json> parse_json_document(const std::string& text, const std::string& origin) {
  bool too_deep = false;
  std::string duplicate;
  std::vector<std::set<std::string>> keys;  // one set per open object
  Json::parser_callback_t check = [&](int depth, Json::parse_event_t event, Json& parsed) {
    if (too_deep || !duplicate.empty()) return false;
    switch (event) {
      case Json::parse_event_t::object_start:
      case Json::parse_event_t::array_start:
        if (depth >= kMaxJsonDepth) too_deep = true;
        if (event == Json::parse_event_t::object_start) keys.emplace_back();
        break;
      case Json::parse_event_t::object_end:
        if (!keys.empty()) keys.pop_back();
        break;
      case Json::parse_event_t::key:
        if (!keys.empty() && !keys.back().insert(parsed.get<std::string>()).second) {
          duplicate = parsed.get<std::string>();
        }
        break;
      default:
        break;
    }
    return !too_deep && duplicate.empty();
  };
  Json j;
  try {
    j = Json::parse(text, check, /*allow_exceptions=*/true);
  } catch (const Json::parse_error& e) {
    // "[json.exception.parse_error.101] parse error at line 1, column 2: syntax error ..."
    std::string why = e.what();
    const auto tag_end = why.find("] ");
    if (tag_end != std::string::npos) why = why.substr(tag_end + 2);
    if (why.size() > 300) why = why.substr(0, 300) + "...";
    return Error(ErrorCode::kBadRequest, origin + ": not valid JSON: " + why);
  }
  if (too_deep) {
    return Error(ErrorCode::kBadRequest, origin + ": nested deeper than " +
                                             std::to_string(kMaxJsonDepth) +
                                             " levels; no scenario or profile needs that");
  }
  if (!duplicate.empty()) {
    std::string shown = duplicate.size() > 80 ? duplicate.substr(0, 80) + "..." : duplicate;
    return Error(ErrorCode::kBadRequest,
                 origin + ": key \"" + shown + "\" appears twice in one object; keep one");
  }
  return j;
}

}  // namespace rcxl::scenarios
