#include "scenarios/json_document.h"

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <optional>
#include <set>
#include <vector>

#include "backends/verbs/regular_file.h"
#include "core/protocol/json_pointer.h"

namespace rcxl::scenarios {

using Json = nlohmann::json;

namespace {

// A JSON pointer as a message shows it; the empty one is the whole document.
std::string shown_pointer(const std::string& pointer) {
  return pointer.empty() ? "(the document)" : printable(pointer, 200);
}

}  // namespace

Result<Json> parse_json_document(const std::string& text, const std::string& origin) {
  // nlohmann's lexer takes a NUL for the end of input and would ignore the rest.
  if (const auto nul = text.find('\0'); nul != std::string::npos) {
    return Error(ErrorCode::kBadRequest, origin + ": not valid JSON: a NUL byte at offset " +
                                             std::to_string(nul) +
                                             "; a scenario or profile is UTF-8 text");
  }
  bool too_deep = false;
  std::string duplicate;
  // Where the parser is, for messages that name a JSON pointer: per open
  // container its keys so far, or the index of its current element.
  struct Open {
    bool object = false;
    std::set<std::string> keys;
    std::string key;
    long index = -1;
  };
  std::vector<Open> open;
  // The pointer of the current element of each open container, up to `levels`.
  auto pointer = [&](std::size_t levels) {
    std::string out;
    for (std::size_t i = 0; i < levels && i < open.size(); ++i) {
      std::string part = open[i].object ? open[i].key : std::to_string(open[i].index);
      for (std::size_t at = 0; (at = part.find_first_of("~/", at)) != std::string::npos; at += 2) {
        part.replace(at, 1, part[at] == '~' ? "~0" : "~1");  // RFC 6901
      }
      out += "/" + part;
    }
    return out;
  };
  std::string where;  // the pointer a failure names
  Json::parser_callback_t check = [&](int depth, Json::parse_event_t event, Json& parsed) {
    if (too_deep || !duplicate.empty()) return false;
    const bool element = event == Json::parse_event_t::object_start ||
                         event == Json::parse_event_t::array_start ||
                         event == Json::parse_event_t::value;
    if (element && !open.empty() && !open.back().object) ++open.back().index;
    switch (event) {
      case Json::parse_event_t::object_start:
      case Json::parse_event_t::array_start:
        if (depth >= kMaxJsonDepth) {
          too_deep = true;
          where = pointer(open.size());
        }
        open.push_back({event == Json::parse_event_t::object_start, {}, "", -1});
        break;
      case Json::parse_event_t::object_end:
      case Json::parse_event_t::array_end:
        if (!open.empty()) open.pop_back();
        break;
      case Json::parse_event_t::key:
        if (!open.empty()) {
          open.back().key = parsed.get<std::string>();
          if (!open.back().keys.insert(open.back().key).second) {
            duplicate = open.back().key;
            where = pointer(open.size());
          }
        }
        break;
      default:
        break;
    }
    return !too_deep && duplicate.empty();
  };
  // A refusal the callback found first: the parser goes on after it, unwatched.
  auto first_failure = [&]() -> std::optional<Status> {
    if (too_deep) {
      return Error(ErrorCode::kBadRequest, origin + ": " + shown_pointer(where) +
                                               ": nested deeper than " +
                                               std::to_string(kMaxJsonDepth) +
                                               " levels; no scenario or profile needs that");
    }
    if (!duplicate.empty()) {
      return Error(ErrorCode::kBadRequest, origin + ": " + shown_pointer(where) +
                                               ": key appears twice in one object; keep one");
    }
    return std::nullopt;
  };
  Json j;
  try {
    j = Json::parse(text, check, /*allow_exceptions=*/true);
  } catch (const Json::parse_error& e) {
    if (auto first = first_failure()) return *first;
    // "[json.exception.parse_error.101] parse error at line 1, column 2: syntax error ..."
    std::string why = e.what();
    const auto tag_end = why.find("] ");
    if (tag_end != std::string::npos) why = why.substr(tag_end + 2);
    return Error(ErrorCode::kBadRequest, origin + ": not valid JSON: " + printable(why, 300));
  } catch (const Json::out_of_range& e) {
    if (auto first = first_failure()) return *first;
    // "[json.exception.out_of_range.406] number overflow parsing '1e400'"
    std::string why = e.what();
    const auto tag_end = why.find("] ");
    if (tag_end != std::string::npos) why = why.substr(tag_end + 2);
    // The number is the next element of the innermost container.
    if (!open.empty() && !open.back().object) ++open.back().index;
    return Error(ErrorCode::kBadRequest, origin + ": " + shown_pointer(pointer(open.size())) +
                                             ": " + printable(why, 300) +
                                             "; numbers must fit a double (about ±1.8e308)");
  }
  if (auto first = first_failure()) return *first;
  return j;
}

std::string pointer_token(std::string_view key) {
  return printable(protocol::json_pointer_token(key));
}

Result<std::string> read_document_file(const std::string& path) {
  using Problem = verbs::RegularFileRead::Problem;
  // The name as messages show it: one line, whole (a path is no user text to cut).
  const std::string shown = printable(path, 4096);
  verbs::RegularFileRead file = verbs::read_regular_file(path, kMaxDocumentBytes);
  switch (file.problem) {
    case Problem::kNone:
      return std::move(file.contents);
    case Problem::kNotFound:
      return Error(ErrorCode::kNotFound, shown + ": no such file; name a .json file");
    case Problem::kDirectory:
      return Error(ErrorCode::kBadRequest, shown + ": is a directory; name a .json file");
    case Problem::kNotRegular:
      return Error(ErrorCode::kBadRequest,
                   shown +
                       ": is not a regular file (a FIFO, device or socket could block or never "
                       "end); name a .json file");
    case Problem::kTooLarge:
      return Error(ErrorCode::kBadRequest, shown + ": larger than " +
                                               std::to_string(kMaxDocumentBytes >> 20) +
                                               " MiB; a scenario or profile is a few KiB of JSON");
    case Problem::kSystem:
      break;
  }
  return Error(ErrorCode::kBadRequest,
               shown + ": cannot read it (" + std::strerror(file.error) + ")");
}

}  // namespace rcxl::scenarios
