// The region extension: the memory-node plugin of SPEC R2. One per agent. The
// agent calls every hook outside its lock; hooks answer from local state within
// microseconds and never block on the device (SPEC R2.3).
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "core/runtime/runtime.h"
#include "core/runtime/status.h"

namespace rcxl::ext {

using Json = nlohmann::json;

// A region as the extension sees it: where its bytes sit in the node's pool.
struct RegionInfo {
  std::uint64_t region = 0;
  std::uint64_t pool_offset = 0;
  std::uint64_t size = 0;
};

// [region, offset, length] of PROTOCOL.md, in the client's access order.
struct Range {
  std::uint64_t region = 0;
  std::uint64_t offset = 0;
  std::uint64_t length = 0;
  // Filled by the agent from its region table: the range's place in the pool.
  std::uint64_t pool_offset = 0;
  bool operator==(const Range&) const = default;
};

// One checked extension message (read_hint, read_hint_end, write_hint, read_promote).
struct Hint {
  std::uint64_t conn = 0;
  std::string action;
  std::string request;  // `request` for read hints and promotes, `token` for write hints
  std::vector<Range> ranges;
};

struct WriteWait {
  std::uint64_t conn = 0;
  std::string token;
  std::vector<Range> ranges;
  std::uint32_t timeout_ms = 0;
};

inline const std::vector<std::string>& default_hint_actions() {
  static const std::vector<std::string> kDefault = {"read_hint", "read_hint_end"};
  return kDefault;
}

class RegionExtension {
 public:
  // The answer of write_wait: a JSON object, or null.
  using WriteWaitDone = std::function<void(Result<Json> answer)>;

  virtual ~RegionExtension() = default;
  virtual std::string name() const = 0;

  // R2.2: may refuse a region before it is mapped (the map answers `refused`).
  virtual Status validate_access(const RegionInfo& /*region*/) { return {}; }
  // R2.2/R5.2: the NIC has the region; `fresh` is the owner's word that it holds
  // no KV yet. A failure fails the map and keeps the region out of use.
  virtual Status mapped(const RegionInfo& /*region*/, bool /*fresh*/) { return {}; }
  // R2.2: may the region go back to the pool? While false it stays, unregistered.
  virtual bool retire(const RegionInfo& /*region*/) { return true; }
  // R3/R4: a checked hint, read_hint_end or promote. A failure answers
  // `extension_failed` and leaves no request open.
  virtual Status hint(const Hint& hint) = 0;
  virtual void close() {}

  // R6: optional. has_memory_generation() false = no hook: boot is the boot id.
  virtual bool has_memory_generation() const { return false; }
  // nullopt = cannot tell right now (R6.4 grace applies).
  virtual std::optional<std::string> memory_generation() { return std::nullopt; }
  // R6.6: optional; a failure is logged and ignored (R2.4).
  virtual Status connection_closed(std::uint64_t /*conn*/) { return {}; }
  // R4.2: the actions this extension takes; the agent advertises exactly these.
  virtual std::vector<std::string> hint_actions() const { return default_hint_actions(); }
  // R4.4: called only when hint_actions() lists write_wait. `done` must be
  // called exactly once, at the latest after wait.timeout_ms (on any strand).
  // By value: overrides keep `done` past the call; this default only calls it.
  // NOLINTNEXTLINE(performance-unnecessary-value-param)
  virtual void write_wait(const WriteWait& /*wait*/, WriteWaitDone done) { done(Json(nullptr)); }
};

// What an extension may use of the node: clock, strands, files, logs.
struct ExtensionContext {
  runtime::Runtime* runtime = nullptr;
  // Set on the simulator when a device model backs the pool (cxl_ssd needs it).
  void* device = nullptr;
};

using ExtensionFactory = std::function<Result<std::unique_ptr<RegionExtension>>(
    const ExtensionContext& context, const Json& config)>;

}  // namespace rcxl::ext
