#include "devices/cxl_ssd_model/cxl_ssd_extension.h"

#include <vector>

#include "core/runtime/printable.h"

namespace rcxl::device {

namespace {

std::vector<PoolRange> pool_ranges(const std::vector<ext::Range>& ranges) {
  std::vector<PoolRange> out;
  out.reserve(ranges.size());
  for (const auto& r : ranges) out.push_back({r.pool_offset, r.length});
  return out;
}

}  // namespace

Result<CxlSsdExtensionConfig> parse_cxl_ssd_extension_config(const ext::Json& config) {
  CxlSsdExtensionConfig out;
  if (config.is_null()) return out;
  if (!config.is_object()) return Error(ErrorCode::kBadRequest, "cxl_ssd config is not an object");
  for (const auto& [key, value] : config.items()) {
    if (key == "write_wait_poll_us") {
      if (!value.is_number() || value.get<double>() < 1 || value.get<double>() > 1e6) {
        return Error(ErrorCode::kBadRequest, "cxl_ssd config 'write_wait_poll_us' must be 1..1e6");
      }
      out.write_wait_poll =
          runtime::Duration(static_cast<std::int64_t>(value.get<double>() * 1000));
    } else {
      return Error(ErrorCode::kBadRequest,
                   "cxl_ssd config has unknown key '" + runtime::printable(key) + "'");
    }
  }
  return out;
}

struct CxlSsdExtension::PendingWait {
  std::vector<PoolRange> ranges;
  Tag tag = 0;                   // its write hint's, to prepare pages again
  std::uint64_t generation = 0;  // the device's at the start: a reset ends preparing
  int prepared_again = 0;        // times its pages had left DRAM and were prepared again
  Instant deadline;
  WriteWaitDone done;
};

CxlSsdExtension::CxlSsdExtension(CxlSsdDevice& device, runtime::Runtime* runtime,
                                 CxlSsdExtensionConfig config)
    : device_(device),
      runtime_(runtime),
      config_(config),
      strand_(runtime ? runtime->make_strand("cxl_ssd.write_wait") : nullptr),
      seen_generation_(device.generation()) {}

CxlSsdExtension::~CxlSsdExtension() = default;

std::vector<std::string> CxlSsdExtension::hint_actions() const {
  return {"read_hint", "read_hint_end", "write_hint", "read_promote", "write_wait"};
}

// A reset dropped the device's pins and queue: our request table is about nothing.
void CxlSsdExtension::forget_if_reset() {
  if (device_.generation() == seen_generation_) return;
  seen_generation_ = device_.generation();
  tags_.clear();
  by_request_.clear();
  promoted_.clear();
  early_promotes_.clear();
  early_order_.clear();
}

Status CxlSsdExtension::check_ranges(const std::vector<ext::Range>& ranges) const {
  for (const auto& r : ranges) {
    if (r.pool_offset > device_.size() || r.length > device_.size() - r.pool_offset) {
      return Error(ErrorCode::kBadRange, "range outside the device");
    }
  }
  return {};
}

Status CxlSsdExtension::validate_access(const ext::RegionInfo& region) {
  if (region.pool_offset > device_.size() || region.size > device_.size() - region.pool_offset) {
    return Error(ErrorCode::kRefused, "region lies outside the cxl-ssd");
  }
  return {};
}

Status CxlSsdExtension::mapped(const ext::RegionInfo& region, bool fresh) {
  // SPEC R5.2: the owner's word that the region holds no KV: drop its old pages.
  if (fresh) return device_.trim(region.pool_offset, region.size);
  return {};
}

Status CxlSsdExtension::hint(const ext::Hint& hint) {
  forget_if_reset();
  if (auto s = check_ranges(hint.ranges); !s.ok()) return s;
  const auto ranges = pool_ranges(hint.ranges);
  if (hint.action == "read_hint") {
    auto [it, inserted] = tags_.try_emplace(Key{hint.conn, hint.request}, 0);
    if (inserted) {
      it->second = device_.new_tag();
      by_request_[hint.request].insert(it->second);
    }
    Status queued = device_.prefetch(it->second, ranges, /*pin=*/true);
    // A request already promoted (on another connection, or before any of its
    // ranges reached the device) takes these ranges to the front too.
    if (queued.ok() &&
        (promoted_.count(hint.request) || (inserted && take_early_promote(hint.request)))) {
      promoted_.insert(hint.request);
      device_.promote(it->second);
    }
    return queued;
  }
  if (hint.action == "read_hint_end") {
    auto it = tags_.find(Key{hint.conn, hint.request});
    if (it != tags_.end()) end_hint(it);
    return {};
  }
  if (hint.action == "write_hint") return device_.prepare_write(device_.new_tag(), ranges);
  if (hint.action == "read_promote") {
    auto it = by_request_.find(hint.request);
    if (it == by_request_.end()) {
      remember_early_promote(hint.request);
      return {};
    }
    promoted_.insert(hint.request);
    for (Tag tag : it->second) device_.promote(tag);
    return {};
  }
  return Error(ErrorCode::kNotAdvertised, "cxl_ssd does not take '" + hint.action + "'");
}

void CxlSsdExtension::remember_early_promote(const std::string& request) {
  const Instant now = device_.now();
  while (!early_order_.empty() &&
         (early_order_.begin()->first <= now || early_order_.size() >= kMaxEarlyPromotes)) {
    early_promotes_.erase(early_order_.begin()->second);
    early_order_.erase(early_order_.begin());
  }
  if (auto old = early_promotes_.find(request); old != early_promotes_.end()) {
    early_order_.erase({old->second, request});
  }
  const Instant until = now + kEarlyPromoteKept;
  early_promotes_[request] = until;
  early_order_.insert({until, request});
}

bool CxlSsdExtension::take_early_promote(const std::string& request) {
  auto it = early_promotes_.find(request);
  if (it == early_promotes_.end()) return false;
  const bool live = it->second > device_.now();
  // Kept for the request's other hints (other connections) until it expires.
  if (!live) {
    early_order_.erase({it->second, request});
    early_promotes_.erase(it);
  }
  return live;
}

void CxlSsdExtension::end_hint(std::map<Key, Tag>::iterator it) {
  device_.release(it->second);
  auto by = by_request_.find(it->first.second);
  by->second.erase(it->second);
  if (by->second.empty()) {
    promoted_.erase(by->first);
    by_request_.erase(by);
  }
  tags_.erase(it);
}

Status CxlSsdExtension::connection_closed(std::uint64_t conn) {
  forget_if_reset();
  auto it = tags_.lower_bound(Key{conn, std::string()});
  while (it != tags_.end() && it->first.first == conn) end_hint(it++);
  return {};
}

void CxlSsdExtension::close() {
  while (!tags_.empty()) end_hint(tags_.begin());
}

std::optional<std::string> CxlSsdExtension::memory_generation() {
  auto g = device_.observed_generation();
  if (!g) return std::nullopt;
  return std::to_string(*g);
}

void CxlSsdExtension::write_wait(const ext::WriteWait& wait, WriteWaitDone done) {
  forget_if_reset();
  if (auto s = check_ranges(wait.ranges); !s.ok()) return done(s);
  auto pending = std::make_shared<PendingWait>();
  pending->ranges = pool_ranges(wait.ranges);
  pending->tag = device_.new_tag();
  pending->generation = device_.generation();
  // A write wait is also the store's write hint for this agent.
  if (auto s = device_.prepare_write(pending->tag, pending->ranges); !s.ok()) return done(s);
  // A store waits on its partial pages' fills: ahead of read prefetch no load
  // waits for yet, behind the loads promoted before it (docs/device-model.md).
  device_.promote(pending->tag);
  const Instant now = runtime_ ? runtime_->clock().now() : Instant{0};
  pending->deadline = now + std::chrono::milliseconds(wait.timeout_ms);
  pending->done = std::move(done);
  poll_wait(std::move(pending));
}

void CxlSsdExtension::poll_wait(std::shared_ptr<PendingWait> wait) {
  std::size_t ready = 0;
  std::optional<Instant> all_in = Instant{0};
  const Instant device_now = device_.now();
  // A page it prepared may have left a full DRAM before the WRITE: again, all
  // ranges first (a frame made for one range may evict another's), and only a
  // few times: a DRAM too small for the wait would evict and refill each poll.
  if (device_.generation() == wait->generation && wait->prepared_again < kMaxPreparesAgain) {
    auto again = device_.prepare_write_again(wait->tag, wait->ranges);
    if (again.ok() && *again > 0) {
      ++wait->prepared_again;
      device_.promote(wait->tag);  // partial pages queued again go where the first ones went
    }
  }
  for (const auto& r : wait->ranges) {
    // One pass per range: when it is all in (range_ready is this <= now).
    auto at = device_.range_ready_at(r.offset, r.length);
    if (at && *at <= device_now) ++ready;
    all_in = at && all_in ? std::optional(std::max(*at, *all_in)) : std::nullopt;
  }
  const std::size_t total = wait->ranges.size();
  const Instant now = runtime_ ? runtime_->clock().now() : wait->deadline;
  if (ready == total || now >= wait->deadline || !strand_) {
    auto done = std::move(wait->done);
    done(ext::Json{{"ready", ready}, {"total", total}});
    return;
  }
  // Wake when the issued fills are in, or look again while some are still queued.
  Instant next = all_in ? *all_in : now + config_.write_wait_poll;
  next = std::clamp(next, now + runtime::Duration(1), wait->deadline);
  strand_->post_after(next - now, [this, wait] { poll_wait(wait); });
}

Result<std::unique_ptr<ext::RegionExtension>> make_cxl_ssd_extension(
    const ext::ExtensionContext& context, const ext::Json& config) {
  if (context.device == nullptr) {
    return Error(ErrorCode::kBadRequest,
                 "cxl_ssd needs a simulated CXL-SSD (ExtensionContext.device is not set)");
  }
  auto parsed = parse_cxl_ssd_extension_config(config);
  if (!parsed.ok()) return parsed.status();
  auto* device = static_cast<CxlSsdDevice*>(context.device);
  return std::unique_ptr<ext::RegionExtension>(
      std::make_unique<CxlSsdExtension>(*device, context.runtime, *parsed));
}

}  // namespace rcxl::device
