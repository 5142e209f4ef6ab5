// Typed agent requests (PROTOCOL.md "Requests and replies"): every field checked
// for presence, type and range before anything looks at state. The decode is
// kept here, apart from the agent, so its JSON library can be swapped.
#pragma once

#include <cstddef>
#include <cstdint>
#include <map>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <string_view>
#include <variant>
#include <vector>

#include "core/runtime/status.h"

namespace rcxl::protocol {

using Json = nlohmann::json;

inline constexpr std::size_t kMaxRangesPerMessage = 4096;
inline constexpr std::uint32_t kMinTimeoutMs = 1;
inline constexpr std::uint32_t kMaxTimeoutMs = 10000;
inline constexpr std::uint64_t kRegionAlignment = 4096;
inline constexpr int kProtocolVersion = 1;
// A hint's `request` or `token`, at most this long (bad_request past it): an
// agent keeps the names of a connection's open requests (--max-hint-requests),
// so this bounds what they hold (PROTOCOL.md names no bound; docs/agent.md).
inline constexpr std::size_t kMaxNameBytes = 1024;
// An alloc token's most bytes (rcxl clients send 32 hex digits).
inline constexpr std::size_t kMaxAllocTokenBytes = 128;

// A client's text quoted in an error message: at most 64 bytes, then "...",
// so a reply stays far below any frame limit whatever the request carried.
std::string quote_client_text(std::string_view text);

enum class Action { kReadHint, kReadHintEnd, kWriteHint, kReadPromote, kWriteWait };

// Wire spelling ("read_hint").
std::string_view action_name(Action action);
std::optional<Action> action_from_name(std::string_view name);
// Actions that carry ranges and handles (and are checked against the epoch).
bool action_has_ranges(Action action);

// [region, offset, length] as sent; offset + length is checked against the region later.
struct WireRange {
  std::uint64_t region = 0;
  std::uint64_t offset = 0;
  std::uint64_t length = 0;
  bool operator==(const WireRange&) const = default;
};

struct HelloRequest {
  std::optional<std::string> auth;
  std::string client;
  bool operator==(const HelloRequest&) const = default;
};

struct AllocRequest {
  std::uint64_t size = 0;
  // Optional, added to v1 by rcxl (docs/agent.md, *Alloc tokens*): a retried
  // alloc with the same token answers the region the first one made.
  std::optional<std::string> token;
  // With a token: only ask for the region that token's alloc made; never allocate.
  bool made_only = false;
  bool operator==(const AllocRequest&) const = default;
};

struct MapRequest {
  std::uint64_t region = 0;
  std::string handle;
  std::string epoch;
  bool fresh = false;
  bool operator==(const MapRequest&) const = default;
};

struct ReleaseRequest {
  std::uint64_t region = 0;
  std::string handle;
  bool operator==(const ReleaseRequest&) const = default;
};

struct FreeRequest {
  std::uint64_t region = 0;
  std::string handle;
  bool operator==(const FreeRequest&) const = default;
};

struct ExtensionRequest {
  Action action = Action::kReadHint;
  // Required for actions with ranges; optional for read_hint_end/read_promote.
  std::optional<std::string> epoch;
  // `request` for read_hint, read_hint_end, read_promote; `token` for write_hint, write_wait.
  std::string name;
  std::vector<WireRange> ranges;
  // Region id -> handle; has an entry for every region in `ranges`.
  std::map<std::uint64_t, std::string> handles;
  std::uint32_t timeout_ms = 0;
  bool operator==(const ExtensionRequest&) const = default;
};

using Request = std::variant<HelloRequest, AllocRequest, MapRequest, ReleaseRequest, FreeRequest,
                             ExtensionRequest>;

// The id to echo: null when absent; bad_request when not an unsigned integer.
Result<Json> parse_request_id(const Json& message);

// Decodes one request object (PROTOCOL.md field rules); bad_request on any
// missing, mistyped or out-of-range field and on an unknown op or action.
Result<Request> parse_request(const Json& message);

// {"id":…, "ok":true} plus `fields` (an object); id omitted when null.
Json ok_reply(const Json& id, Json fields = Json::object());

}  // namespace rcxl::protocol
