#include "core/protocol/messages.h"

#include <array>
#include <charconv>
#include <limits>

#include "core/protocol/reply_fields.h"

namespace rcxl::protocol {
namespace {

struct ActionName {
  Action action;
  std::string_view name;
};

constexpr std::array kActions = {
    ActionName{Action::kReadHint, "read_hint"},   ActionName{Action::kReadHintEnd, "read_hint_end"},
    ActionName{Action::kWriteHint, "write_hint"}, ActionName{Action::kReadPromote, "read_promote"},
    ActionName{Action::kWriteWait, "write_wait"},
};

Status bad(std::string message) {
  return Error(ErrorCode::kBadRequest, std::move(message));
}

// Field readers: nullptr-safe lookups that say what was wrong with which field.
const Json* find(const Json& message, const char* key) {
  auto it = message.find(key);
  return it == message.end() ? nullptr : &*it;
}

Result<std::uint64_t> required_u64(const Json& message, const char* key) {
  const Json* v = find(message, key);
  if (!v) return bad(std::string("missing field '") + key + "'");
  if (!v->is_number_unsigned())
    return bad(std::string("'") + key + "' must be an unsigned integer");
  return v->get<std::uint64_t>();
}

Result<std::string> required_string(const Json& message, const char* key) {
  const Json* v = find(message, key);
  if (!v) return bad(std::string("missing field '") + key + "'");
  if (!v->is_string()) return bad(std::string("'") + key + "' must be a string");
  return v->get<std::string>();
}

Result<std::optional<std::string>> optional_string(const Json& message, const char* key) {
  const Json* v = find(message, key);
  if (!v || v->is_null()) return std::optional<std::string>();
  if (!v->is_string()) return bad(std::string("'") + key + "' must be a string");
  return std::optional<std::string>(v->get<std::string>());
}

Result<HelloRequest> parse_hello(const Json& m) {
  HelloRequest hello;
  // PROTOCOL: under --auth none any `auth` is taken; with a secret, one that is
  // not a string proves nothing (auth_failed, as in the directory).
  hello.auth = string_field(m, "auth");
  auto client = optional_string(m, "client");
  if (!client.ok()) return client.status();
  hello.client = client->value_or("");
  // A null version is an absent one, as a null client or epoch (a Python client's None).
  if (const Json* v = find(m, "version"); v && !v->is_null()) {
    if (!v->is_number_unsigned() || v->get<std::uint64_t>() != kProtocolVersion) {
      return bad("'version' must be 1");
    }
  }
  return hello;
}

Result<AllocRequest> parse_alloc(const Json& m) {
  auto size = required_u64(m, "size");
  if (!size.ok()) return size.status();
  if (*size == 0 || *size % kRegionAlignment != 0) {
    return bad("'size' must be a positive multiple of 4096");
  }
  auto token = optional_string(m, "token");
  if (!token.ok()) return token.status();
  if (*token && ((*token)->empty() || (*token)->size() > kMaxAllocTokenBytes)) {
    return bad("'token' must be 1 to " + std::to_string(kMaxAllocTokenBytes) + " bytes");
  }
  AllocRequest alloc{*size, std::move(token).value(), false};
  if (const Json* v = find(m, "made_only"); v && !v->is_null()) {
    if (!v->is_boolean()) return bad("'made_only' must be a boolean");
    alloc.made_only = v->get<bool>();
  }
  if (alloc.made_only && !alloc.token) return bad("'made_only' needs a 'token'");
  return alloc;
}

Result<MapRequest> parse_map(const Json& m) {
  MapRequest map;
  auto region = required_u64(m, "region");
  if (!region.ok()) return region.status();
  auto handle = required_string(m, "handle");
  if (!handle.ok()) return handle.status();
  auto epoch = required_string(m, "epoch");
  if (!epoch.ok()) return epoch.status();
  map.region = *region;
  map.handle = std::move(handle).value();
  map.epoch = std::move(epoch).value();
  // An optional field sent as null is absent, as `client` and `epoch` are.
  if (const Json* v = find(m, "fresh"); v && !v->is_null()) {
    if (!v->is_boolean()) return bad("'fresh' must be a boolean");
    map.fresh = v->get<bool>();
  }
  return map;
}

template <typename T>
Result<T> parse_region_and_handle(const Json& m) {
  auto region = required_u64(m, "region");
  if (!region.ok()) return region.status();
  auto handle = required_string(m, "handle");
  if (!handle.ok()) return handle.status();
  return T{*region, std::move(handle).value()};
}

Status parse_ranges(const Json& m, std::vector<WireRange>& out) {
  const Json* v = find(m, "ranges");
  if (!v) return bad("missing field 'ranges'");
  if (!v->is_array()) return bad("'ranges' must be an array");
  if (v->size() > kMaxRangesPerMessage) {
    return bad("more than " + std::to_string(kMaxRangesPerMessage) + " ranges");
  }
  out.reserve(v->size());
  for (const Json& r : *v) {
    if (!r.is_array() || r.size() != 3 || !r[0].is_number_unsigned() ||
        !r[1].is_number_unsigned() || !r[2].is_number_unsigned()) {
      return bad("a range must be [region, offset, length] of unsigned integers");
    }
    WireRange range{r[0].get<std::uint64_t>(), r[1].get<std::uint64_t>(),
                    r[2].get<std::uint64_t>()};
    if (range.length == 0) return bad("a range has zero length");
    out.push_back(range);
  }
  return {};
}

std::optional<std::uint64_t> parse_decimal(std::string_view text) {
  std::uint64_t value = 0;
  if (text.empty() || (text.size() > 1 && text[0] == '0')) return std::nullopt;
  const auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), value);
  if (ec != std::errc() || end != text.data() + text.size()) return std::nullopt;
  return value;
}

Status parse_handles(const Json& m, ExtensionRequest& req) {
  const Json* v = find(m, "handles");
  if (!v) return bad("missing field 'handles'");
  if (!v->is_object()) return bad("'handles' must be an object");
  for (const auto& [key, handle] : v->items()) {
    const auto region = parse_decimal(key);
    if (!region) return bad("'handles' keys must be decimal region ids");
    if (!handle.is_string()) return bad("'handles' values must be strings");
    req.handles.emplace(*region, handle.get<std::string>());
  }
  for (const auto& range : req.ranges) {
    if (!req.handles.count(range.region)) {
      return bad("no handle for region " + std::to_string(range.region));
    }
  }
  return {};
}

Result<ExtensionRequest> parse_extension(const Json& m) {
  ExtensionRequest req;
  auto action_text = required_string(m, "action");
  if (!action_text.ok()) return action_text.status();
  const auto action = action_from_name(*action_text);
  if (!action) return bad("unknown action " + quote_client_text(*action_text));
  req.action = *action;
  const bool with_ranges = action_has_ranges(req.action);
  if (with_ranges) {
    auto epoch = required_string(m, "epoch");
    if (!epoch.ok()) return epoch.status();
    req.epoch = std::move(epoch).value();
  } else {
    auto epoch = optional_string(m, "epoch");
    if (!epoch.ok()) return epoch.status();
    req.epoch = std::move(epoch).value();
  }
  const bool by_token = req.action == Action::kWriteHint || req.action == Action::kWriteWait;
  const char* name_field = by_token ? "token" : "request";
  auto name = required_string(m, name_field);
  if (!name.ok()) return name.status();
  if (name->size() > kMaxNameBytes) {
    return bad(std::string("'") + name_field + "' is longer than " + std::to_string(kMaxNameBytes) +
               " bytes");
  }
  // A C extension gets the name as a C string (c_abi.h): "q\u0000A" and "q"
  // would be one name to it and two to the agent.
  if (name->find('\0') != std::string::npos) {
    return bad(std::string("'") + name_field +
               "' holds a NUL character (\\u0000); a region extension reads names as C "
               "strings: use a name without it");
  }
  req.name = std::move(name).value();
  if (with_ranges) {
    if (Status s = parse_ranges(m, req.ranges); !s.ok()) return s;
    if (Status s = parse_handles(m, req); !s.ok()) return s;
  }
  if (req.action == Action::kWriteWait) {
    auto timeout = required_u64(m, "timeout_ms");
    if (!timeout.ok()) return timeout.status();
    if (*timeout < kMinTimeoutMs || *timeout > kMaxTimeoutMs) {
      return bad("'timeout_ms' must be within 1..10000");
    }
    req.timeout_ms = static_cast<std::uint32_t>(*timeout);
  }
  return req;
}

template <typename T>
Result<Request> widen(Result<T> r) {
  if (!r.ok()) return r.status();
  return Request(std::move(r).value());
}

}  // namespace

std::string quote_client_text(std::string_view text) {
  constexpr std::size_t kShown = 64;
  if (text.size() <= kShown) return "'" + std::string(text) + "'";
  return "'" + std::string(text.substr(0, kShown)) + "...' (" + std::to_string(text.size()) +
         " bytes)";
}

std::string_view action_name(Action action) {
  for (const auto& entry : kActions) {
    if (entry.action == action) return entry.name;
  }
  return "unknown";
}

std::optional<Action> action_from_name(std::string_view name) {
  for (const auto& entry : kActions) {
    if (entry.name == name) return entry.action;
  }
  return std::nullopt;
}

bool action_has_ranges(Action action) {
  return action == Action::kReadHint || action == Action::kWriteHint ||
         action == Action::kWriteWait;
}

Result<Json> parse_request_id(const Json& message) {
  const Json* v = find(message, "id");
  if (!v || v->is_null()) return Json();
  if (!v->is_number_unsigned()) return bad("'id' must be an unsigned integer");
  return *v;
}

Result<Request> parse_request(const Json& message) {
  if (!message.is_object()) return bad("a request must be an object");
  auto op = required_string(message, "op");
  if (!op.ok()) return op.status();
  if (*op == "hello") return widen(parse_hello(message));
  if (*op == "alloc") return widen(parse_alloc(message));
  if (*op == "map") return widen(parse_map(message));
  if (*op == "release") return widen(parse_region_and_handle<ReleaseRequest>(message));
  if (*op == "free") return widen(parse_region_and_handle<FreeRequest>(message));
  if (*op == "extension") return widen(parse_extension(message));
  return bad("unknown op " + quote_client_text(*op));
}

Json ok_reply(const Json& id, Json fields) {
  Json reply = Json::object();
  if (!id.is_null()) reply["id"] = id;
  reply["ok"] = true;
  for (auto& [key, value] : fields.items()) reply[key] = std::move(value);
  return reply;
}

}  // namespace rcxl::protocol
