#include "core/extension/c_abi_extension.h"

#include <algorithm>
#include <array>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <map>
#include <memory>
#include <mutex>
#include <set>
#include <utility>

#include "core/runtime/printable.h"

namespace rcxl::ext {
namespace {

constexpr std::size_t kErrorSize = 512;
constexpr std::size_t kGenerationSize = 256;
// A write_wait answer goes into the agent's reply: a plugin's megabytes (or
// nesting deep enough to overflow the encoder's recursion) must not.
constexpr std::size_t kMaxAnswerBytes = 4096;

using ErrorBuffer = std::array<char, kErrorSize>;

// Every field of ABI version 1's table: the least a plugin's struct_size says.
constexpr std::size_t kV1TableSize =
    offsetof(rcxl_region_extension_api_v1, write_wait) + sizeof(void (*)());
static_assert(kV1TableSize == sizeof(rcxl_region_extension_api_v1),
              "a new hook appended to the table is a new version's; keep kV1TableSize at v1's");

Status failed(const std::string& hook, const ErrorBuffer& error,
              ErrorCode code = ErrorCode::kExtensionFailed) {
  // The plugin may fill the buffer without a NUL: read at most its size; its
  // text reaches logs and replies, so control bytes are escaped.
  std::string text = runtime::printable(
      std::string(error.data(), strnlen(error.data(), error.size())), kErrorSize);
  return Error(code, hook + " failed" + (text.empty() ? "" : ": " + text));
}

rcxl_region_info to_c(const RegionInfo& r) {
  return {r.region, r.pool_offset, r.size};
}

std::vector<rcxl_range> to_c(const std::vector<Range>& ranges) {
  std::vector<rcxl_range> out;
  out.reserve(ranges.size());
  for (const auto& r : ranges) out.push_back({r.region, r.offset, r.length, r.pool_offset});
  return out;
}

struct PendingWait {
  const void* owner;  // the CAbiExtension that asked
  RegionExtension::WriteWaitDone done;
  std::string token;
  std::vector<rcxl_range> ranges;
  rcxl_write_wait c;
};

// Write waits a plugin still owes an answer, by the number it was handed as
// its context. An answer for a number not here (a second one, or one after
// its extension went) is dropped: it freed the wait twice before.
class PendingWaits {
 public:
  static PendingWaits& all() {
    static PendingWaits waits;
    return waits;
  }
  PendingWait* add(std::uint64_t& id, std::unique_ptr<PendingWait> wait) {
    std::lock_guard lock(mu_);
    id = next_++;
    return waits_.emplace(id, std::move(wait)).first->second.get();
  }
  std::unique_ptr<PendingWait> take(std::uint64_t id) {
    std::lock_guard lock(mu_);
    auto node = waits_.extract(id);
    return node ? std::move(node.mapped()) : nullptr;
  }
  void drop_all_of(const void* owner) {
    std::lock_guard lock(mu_);
    std::erase_if(waits_, [owner](const auto& entry) { return entry.second->owner == owner; });
  }

 private:
  std::mutex mu_;
  std::uint64_t next_ = 1;
  std::map<std::uint64_t, std::unique_ptr<PendingWait>> waits_;
};

class CAbiExtension final : public RegionExtension {
 public:
  CAbiExtension(const rcxl_region_extension_api_v1& api, void* self,
                std::vector<std::string> actions)
      : table_(api),
        api_(&table_),
        self_(self),
        actions_(std::move(actions)),
        // SPEC R6.6: a plugin without connection_closed still has a closed
        // connection's open requests ended, one read_hint_end each.
        ends_for_closed_(!api_->connection_closed && std::find(actions_.begin(), actions_.end(),
                                                               "read_hint_end") != actions_.end()) {
  }
  ~CAbiExtension() override {
    close();  // c_abi.h: `close` once, `destroy` last, even when the agent never closed it
    api_->destroy(self_);
    PendingWaits::all().drop_all_of(this);  // unanswered: the agent's own timeout answers them
  }

  std::string name() const override { return api_->name ? api_->name : "c-abi"; }

  Status validate_access(const RegionInfo& region) override {
    ErrorBuffer error{};
    const auto info = to_c(region);
    // c_abi.h: RCXL_VALIDATE_RETRY could not tell (extension_failed, retried);
    // any other non-zero says no (refused), as every non-zero did before.
    const int answer = api_->validate_access(self_, &info, error.data(), error.size());
    if (answer == RCXL_VALIDATE_RETRY) return failed("validate_access", error);
    if (answer != 0) return failed("validate_access", error, ErrorCode::kRefused);
    return {};
  }
  Status mapped(const RegionInfo& region, bool fresh) override {
    ErrorBuffer error{};
    const auto info = to_c(region);
    if (api_->mapped(self_, &info, fresh ? 1 : 0, error.data(), error.size()) != 0) {
      return failed("mapped", error);
    }
    return {};
  }
  bool retire(const RegionInfo& region) override {
    const auto info = to_c(region);
    // SPEC R2.2: only an explicit 1 gives the region back; an error code (-1) is "not yet".
    return api_->retire(self_, &info) == 1;
  }
  Status hint(const Hint& hint) override {
    ErrorBuffer error{};
    const auto ranges = to_c(hint.ranges);
    const rcxl_hint c{hint.conn, hint.action.c_str(), hint.request.c_str(), ranges.data(),
                      ranges.size()};
    const bool ok = api_->hint(self_, &c, error.data(), error.size()) == 0;
    if (ends_for_closed_) {
      std::lock_guard lock(open_mu_);
      if (ok && hint.action == "read_hint") open_[hint.conn].insert(hint.request);
      // The agent closes the request whatever the plugin answered: it is sent no second end.
      if (hint.action == "read_hint_end") {
        auto it = open_.find(hint.conn);
        if (it != open_.end() && it->second.erase(hint.request) && it->second.empty()) {
          open_.erase(it);
        }
      }
    }
    return ok ? Status() : failed("hint", error);
  }
  void close() override {
    if (std::exchange(closed_, true)) return;
    api_->close(self_);
  }
  bool has_memory_generation() const override { return api_->memory_generation != nullptr; }
  std::optional<std::string> memory_generation() override {
    if (!api_->memory_generation) return std::nullopt;
    std::array<char, kGenerationSize> out{};
    if (api_->memory_generation(self_, out.data(), out.size()) != 1) return std::nullopt;
    out.back() = '\0';
    return std::string(out.data());
  }
  Status connection_closed(std::uint64_t conn) override {
    if (!api_->connection_closed) return end_open_requests(conn);
    ErrorBuffer error{};
    if (api_->connection_closed(self_, conn, error.data(), error.size()) != 0) {
      return failed("connection_closed", error);
    }
    return {};
  }
  std::vector<std::string> hint_actions() const override { return actions_; }
  void write_wait(const WriteWait& wait, WriteWaitDone done) override {
    // Owned by the plugin until it calls back, exactly once; the wait it was
    // given stays valid until then (c_abi.h), as a plugin that answers later
    // reads it then.
    std::uint64_t id = 0;
    PendingWait* pending =
        PendingWaits::all().add(id, std::make_unique<PendingWait>(PendingWait{
                                        this, std::move(done), wait.token, to_c(wait.ranges), {}}));
    pending->c = {wait.conn, pending->token.c_str(), pending->ranges.data(), pending->ranges.size(),
                  wait.timeout_ms};
    // The context is the wait's number, not its address: a stale one finds nothing.
    // NOLINTNEXTLINE(performance-no-int-to-ptr)
    void* context = reinterpret_cast<void*>(static_cast<std::uintptr_t>(id));
    api_->write_wait(self_, &pending->c, &CAbiExtension::write_wait_done, context);
  }

 private:
  // Runs on the plugin's thread, under C frames: nothing may unwind into them.
  static void write_wait_done(void* context, int status, const char* answer_json) noexcept {
    try {
      answer_write_wait(context, status, answer_json);
    } catch (...) {  // NOLINT(bugprone-empty-catch)
      // Out of memory answering: the agent's own timeout answers the wait.
    }
  }
  static void answer_write_wait(void* context, int status, const char* answer_json) {
    std::unique_ptr<PendingWait> pending =
        PendingWaits::all().take(reinterpret_cast<std::uintptr_t>(context));
    if (!pending) return;  // answered already, or its extension is gone
    WriteWaitDone& done = pending->done;
    const std::size_t length = answer_json ? strnlen(answer_json, kMaxAnswerBytes + 1) : 0;
    if (status != 0) {
      return done(Error(
          ErrorCode::kExtensionFailed,
          "write_wait failed: " + runtime::printable(std::string(answer_json ? answer_json : "",
                                                                 std::min(length, kErrorSize)),
                                                     kErrorSize)));
    }
    if (!answer_json) return done(Json(nullptr));
    if (length > kMaxAnswerBytes) {
      return done(
          Error(ErrorCode::kExtensionFailed,
                "write_wait answer is longer than " + std::to_string(kMaxAnswerBytes) + " bytes"));
    }
    Json answer = Json::parse(answer_json, nullptr, false);
    if (answer.is_discarded() || !(answer.is_object() || answer.is_null())) {
      return done(Error(ErrorCode::kExtensionFailed, "write_wait answer is not a JSON object"));
    }
    done(std::move(answer));
  }

  // One read_hint_end per request `conn` left open (the plugin has no connection_closed).
  Status end_open_requests(std::uint64_t conn) {
    std::set<std::string> requests;
    {
      std::lock_guard lock(open_mu_);
      auto node = open_.extract(conn);
      if (node) requests = std::move(node.mapped());
    }
    Status first;
    for (const auto& request : requests) {
      ErrorBuffer error{};
      const rcxl_hint c{conn, "read_hint_end", request.c_str(), nullptr, 0};
      if (api_->hint(self_, &c, error.data(), error.size()) != 0 && first.ok()) {
        first = failed("read_hint_end of a closed connection's request", error);
      }
    }
    return first;
  }

  rcxl_region_extension_api_v1 table_;  // the plugin's, NULL past its struct_size
  const rcxl_region_extension_api_v1* api_;
  void* self_;
  bool closed_ = false;
  std::vector<std::string> actions_;
  const bool ends_for_closed_;
  std::mutex open_mu_;
  std::map<std::uint64_t, std::set<std::string>> open_;  // conn -> requests open at the plugin
};

// The actions the plugin takes (c_abi.h): what hint_actions lists, else the
// defaults. A list that is not a JSON array of names, or that names write_wait
// without its hook, is a plugin that cannot load (SPEC R2.1), not a default.
Result<std::vector<std::string>> plugin_actions(const rcxl_region_extension_api_v1* api,
                                                void* self) {
  if (!api->hint_actions) return default_hint_actions();
  const char* text = api->hint_actions(self);
  const Json parsed = Json::parse(text ? text : "", nullptr, false);
  std::vector<std::string> actions;
  if (parsed.is_array()) {
    for (const Json& a : parsed) {
      if (!a.is_string()) break;
      actions.push_back(a.get<std::string>());
    }
  }
  if (!parsed.is_array() || actions.size() != parsed.size()) {
    return Error(ErrorCode::kExtensionFailed,
                 "plugin hint_actions returned " +
                     (text ? "'" + runtime::printable(text, 200) + "'" : std::string("NULL")) +
                     ", not a JSON array of action names (e.g. [\"read_hint\", "
                     "\"read_hint_end\"])");
  }
  if (!api->write_wait &&
      std::find(actions.begin(), actions.end(), "write_wait") != actions.end()) {
    return Error(ErrorCode::kExtensionFailed,
                 "plugin lists write_wait in hint_actions but has no write_wait hook");
  }
  return actions;
}

}  // namespace

Result<std::unique_ptr<RegionExtension>> wrap_c_extension(const rcxl_region_extension_api_v1* api,
                                                          const Json& config) {
  if (!api) return Error(ErrorCode::kExtensionFailed, "plugin returned no extension table");
  if (api->abi_version != RCXL_REGION_EXTENSION_ABI_VERSION) {
    return Error(ErrorCode::kExtensionFailed,
                 "plugin ABI version " + std::to_string(api->abi_version) + ", agent speaks " +
                     std::to_string(RCXL_REGION_EXTENSION_ABI_VERSION));
  }
  if (api->struct_size < kV1TableSize) {
    return Error(ErrorCode::kExtensionFailed, "plugin extension table is too small: struct_size " +
                                                  std::to_string(api->struct_size) +
                                                  ", version 1 has " +
                                                  std::to_string(kV1TableSize) + " bytes");
  }
  // A later table appends fields: read what both sides know; hooks past an
  // older plugin's table stay NULL.
  rcxl_region_extension_api_v1 table{};
  std::memcpy(&table, api, std::min<std::size_t>(api->struct_size, sizeof table));
  api = &table;
  if (!api->create || !api->destroy || !api->validate_access || !api->mapped || !api->retire ||
      !api->hint || !api->close) {
    return Error(ErrorCode::kExtensionFailed, "plugin lacks a required hook");
  }
  ErrorBuffer error{};
  const std::string config_text = config.dump();
  void* self = api->create(config_text.c_str(), error.data(), error.size());
  if (!self) return failed("plugin create", error);
  auto actions = plugin_actions(api, self);
  if (!actions.ok()) {
    api->close(self);  // c_abi.h: `close` once, then `destroy`
    api->destroy(self);
    return actions.status();
  }
  return std::unique_ptr<RegionExtension>(
      std::make_unique<CAbiExtension>(table, self, std::move(actions).value()));
}

}  // namespace rcxl::ext
