#include "core/protocol/fast_request_decoder.h"

#include <simdjson.h>

#include <algorithm>
#include <charconv>
#include <string_view>
#include <utility>

#include "core/protocol/frame_json.h"

namespace rcxl::protocol {
namespace {

namespace od = simdjson::ondemand;

// Deeper unknown values go to the nlohmann path, which refuses past kMaxJsonDepth.
constexpr int kMaxUnknownDepth = 64;

// Walks any value so that everything in the frame is checked, as a DOM parse does.
bool consume_any(od::value value, int depth) {
  if (depth > kMaxUnknownDepth) return false;
  od::json_type type;
  if (value.type().get(type)) return false;
  switch (type) {
    case od::json_type::object: {
      od::object object;
      if (value.get_object().get(object)) return false;
      for (auto field : object) {
        std::string_view key;
        od::value child;
        if (field.unescaped_key().get(key) || field.value().get(child)) return false;
        if (!consume_any(child, depth + 1)) return false;
      }
      return true;
    }
    case od::json_type::array: {
      od::array array;
      if (value.get_array().get(array)) return false;
      for (auto element : array) {
        od::value child;
        if (element.get(child) || !consume_any(child, depth + 1)) return false;
      }
      return true;
    }
    case od::json_type::string: {
      std::string_view text;
      return !value.get_string().get(text);
    }
    case od::json_type::number: {
      double number;
      return !value.get_double().get(number);
    }
    case od::json_type::boolean: {
      bool flag;
      return !value.get_bool().get(flag);
    }
    case od::json_type::null: {
      bool is_null = false;
      return !value.is_null().get(is_null) && is_null;
    }
  }
  return false;
}

std::optional<std::uint64_t> decimal_key(std::string_view text) {
  std::uint64_t value = 0;
  if (text.empty() || (text.size() > 1 && text[0] == '0')) return std::nullopt;
  const auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), value);
  if (ec != std::errc() || end != text.data() + text.size()) return std::nullopt;
  return value;
}

// `text_bytes` bounds how many ranges there can be: each takes at least
// "[0,0,1]," (8 bytes). Reserving for 4096 held 98 KB per queued request.
bool read_ranges(od::value value, std::vector<WireRange>& out, std::size_t text_bytes) {
  od::array ranges;
  if (value.get_array().get(ranges)) return false;
  out.reserve(std::min<std::size_t>(kMaxRangesPerMessage, text_bytes / 8 + 1));
  for (auto element : ranges) {
    if (out.size() == kMaxRangesPerMessage) return false;
    od::array triple;
    if (element.get_array().get(triple)) return false;
    std::uint64_t numbers[3];
    std::size_t n = 0;
    for (auto number : triple) {
      if (n == 3 || number.get_uint64().get(numbers[n])) return false;
      ++n;
    }
    if (n != 3 || numbers[2] == 0) return false;
    out.push_back({numbers[0], numbers[1], numbers[2]});
  }
  return true;
}

bool read_handles(od::value value, std::map<std::uint64_t, std::string>& out) {
  od::object handles;
  if (value.get_object().get(handles)) return false;
  for (auto field : handles) {
    std::string_view key;
    std::string_view handle;
    if (field.unescaped_key().get(key)) return false;
    const auto region = decimal_key(key);
    // A duplicate key: nlohmann keeps the last one; leave that to it.
    if (!region || out.count(*region)) return false;
    if (field.value().get_string().get(handle)) return false;
    out.emplace(*region, std::string(handle));
  }
  return true;
}

// A string field, or (for the name field an action does not use) any value.
struct StringField {
  bool present = false;
  bool is_string = false;
  bool is_null = false;
  std::string text;
};

bool read_string_field(od::value value, StringField& field) {
  if (field.present) return false;  // duplicate key
  field.present = true;
  od::json_type type;
  if (value.type().get(type)) return false;
  if (type == od::json_type::string) {
    std::string_view text;
    if (value.get_string().get(text)) return false;
    field.is_string = true;
    field.text = std::string(text);
    return true;
  }
  if (type == od::json_type::null) {
    bool is_null = false;
    if (value.is_null().get(is_null) || !is_null) return false;
    field.is_null = true;
    return true;
  }
  return consume_any(value, 1);
}

}  // namespace

struct FastRequestDecoder::Impl {
  od::parser parser;

  std::optional<DecodedRequest> decode(std::string& frame) {
    // Other ops are rare and small: nlohmann decodes them.
    if (frame.find("\"extension\"") == std::string::npos) return std::nullopt;
    frame.reserve(frame.size() + simdjson::SIMDJSON_PADDING);
    od::document doc;
    if (parser.iterate(frame.data(), frame.size(), frame.capacity()).get(doc)) return std::nullopt;
    od::object object;
    if (doc.get_object().get(object)) return std::nullopt;

    StringField op, action, epoch, request, token;
    bool has_id = false, has_ranges = false, has_handles = false, has_timeout = false;
    bool timeout_ok = false;
    std::uint64_t timeout = 0;
    Json id;
    ExtensionRequest req;
    for (auto field : object) {
      std::string_view key;
      od::value value;
      if (field.unescaped_key().get(key) || field.value().get(value)) return std::nullopt;
      bool ok = true;
      if (key == "op") {
        ok = read_string_field(value, op);
      } else if (key == "action") {
        ok = read_string_field(value, action);
      } else if (key == "epoch") {
        ok = read_string_field(value, epoch);
      } else if (key == "request") {
        ok = read_string_field(value, request);
      } else if (key == "token") {
        ok = read_string_field(value, token);
      } else if (key == "id") {
        if (has_id) return std::nullopt;
        has_id = true;
        std::uint64_t number = 0;
        bool is_null = false;
        if (!value.is_null().get(is_null) && is_null) {
          id = Json();
        } else if (!value.get_uint64().get(number)) {
          id = number;
        } else {
          return std::nullopt;
        }
      } else if (key == "ranges") {
        if (has_ranges) return std::nullopt;
        has_ranges = true;
        ok = read_ranges(value, req.ranges, frame.size());
      } else if (key == "handles") {
        if (has_handles) return std::nullopt;
        has_handles = true;
        ok = read_handles(value, req.handles);
      } else if (key == "timeout_ms") {
        if (has_timeout) return std::nullopt;
        has_timeout = true;
        ok = !value.get_uint64().get(timeout);
        timeout_ok = ok && timeout >= kMinTimeoutMs && timeout <= kMaxTimeoutMs;
      } else {
        ok = consume_any(value, 1);
      }
      if (!ok) return std::nullopt;
    }
    // Nothing may follow the object (current_location is out of bounds at the end).
    if (doc.current_location().error() != simdjson::OUT_OF_BOUNDS) return std::nullopt;

    if (!op.is_string || op.text != "extension" || !action.is_string) return std::nullopt;
    const auto parsed_action = action_from_name(action.text);
    if (!parsed_action) return std::nullopt;
    req.action = *parsed_action;
    const bool with_ranges = action_has_ranges(req.action);
    if (epoch.is_string) {
      req.epoch = std::move(epoch.text);
    } else if (with_ranges || (epoch.present && !epoch.is_null)) {
      return std::nullopt;
    }
    const bool by_token = req.action == Action::kWriteHint || req.action == Action::kWriteWait;
    StringField& name = by_token ? token : request;
    if (!name.is_string || name.text.size() > kMaxNameBytes ||
        name.text.find('\0') != std::string::npos) {
      return std::nullopt;  // the reference path says why
    }
    req.name = std::move(name.text);
    if (with_ranges) {
      if (!has_ranges || !has_handles) return std::nullopt;
      for (const auto& range : req.ranges) {
        if (!req.handles.count(range.region)) return std::nullopt;
      }
    } else {
      // parse_request ignores them for these actions.
      req.ranges.clear();
      req.handles.clear();
    }
    if (req.action == Action::kWriteWait) {
      if (!timeout_ok) return std::nullopt;
      req.timeout_ms = static_cast<std::uint32_t>(timeout);
    }
    return DecodedRequest{std::move(id), Request(std::move(req))};
  }
};

FastRequestDecoder::FastRequestDecoder() : impl_(std::make_unique<Impl>()) {}
FastRequestDecoder::~FastRequestDecoder() = default;

std::optional<DecodedRequest> FastRequestDecoder::try_decode(std::string& frame) {
  return impl_->decode(frame);
}

Result<DecodedRequest> reference_decode(const std::string& frame) {
  Json message = parse_json_text(frame);
  if (message.is_discarded()) return Error(ErrorCode::kBadFrame, why_not_json(frame));
  if (!message.is_object()) return Error(ErrorCode::kBadFrame, "frame is not a JSON object");
  auto id = parse_request_id(message);
  if (!id.ok()) return id.status();
  auto request = parse_request(message);
  if (!request.ok()) return request.status();
  return DecodedRequest{std::move(id).value(), std::move(request).value()};
}

std::size_t held_bytes(const DecodedRequest& decoded) {
  // A heap block's overhead and a std::map node's links, generously.
  constexpr std::size_t kBlock = 32;
  constexpr std::size_t kMapNode = 64;
  std::size_t bytes = sizeof(DecodedRequest) + kBlock;
  if (const auto* ext = std::get_if<ExtensionRequest>(&decoded.request)) {
    bytes += ext->ranges.capacity() * sizeof(WireRange) + kBlock;
    bytes += ext->name.capacity() + kBlock;
    if (ext->epoch) bytes += ext->epoch->capacity() + kBlock;
    for (const auto& [region, handle] : ext->handles) {
      bytes += kMapNode + sizeof(region) + sizeof(handle) + handle.capacity() + kBlock;
    }
  }
  return bytes;
}

}  // namespace rcxl::protocol
