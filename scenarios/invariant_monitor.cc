#include "scenarios/invariant_monitor.h"

#include <algorithm>
#include <nlohmann/json.hpp>

namespace rcxl::scenarios {

namespace {

bool is_unknown_boot(const std::string& boot) {
  static const std::string kUnknown = ":unknown";
  return boot.size() >= kUnknown.size() &&
         boot.compare(boot.size() - kUnknown.size(), kUnknown.size(), kUnknown) == 0;
}

}  // namespace

InvariantMonitor::InvariantMonitor(const runtime::Clock& clock, InvariantLimits limits)
    : clock_(clock), limits_(limits) {}

void InvariantMonitor::violate(const std::string& kind, const std::string& example) {
  Kind& k = violations_[kind];
  if (k.count++ == 0) k.first_example = example;
}

// SPEC R5.2: fresh only on the map that maps a region first, and only if a
// map asked for it under the region's owner handle.
void InvariantMonitor::on_mapped(const ext::RegionInfo& region, bool fresh, bool accepted) {
  const bool first = !mapped_regions_.count(region.region);
  if (fresh && !first) {
    violate("fresh reached the extension on a later map (SPEC R5.2)",
            "region " + std::to_string(region.region));
  }
  if (fresh && !fresh_licences_.count(region.region)) {
    violate(
        "fresh reached the extension without a map asking for it under the owner handle "
        "(SPEC R5.2)",
        "region " + std::to_string(region.region));
  }
  if (accepted) mapped_regions_.insert(region.region);
}

// Only maps and messages with ranges matter here: other frames are not parsed.
void InvariantMonitor::on_agent_frame_in(std::uint64_t conn, std::string_view payload) {
  // A range is at least `[r,o,l]` and a comma: shorter frames cannot break R3.4.
  const bool ranges = payload.size() >= 8 * (std::size_t{limits_.max_ranges_per_message} + 1) &&
                      payload.find("\"ranges\"") != std::string_view::npos;
  if (!ranges && payload.find("\"map\"") == std::string_view::npos) return;
  const auto j = nlohmann::json::parse(payload, nullptr, /*allow_exceptions=*/false);
  if (!j.is_object()) return;
  // SPEC R3.4 as the client sent it: the agent refuses a larger message before
  // its extension sees it, so on_hint alone could never see one.
  if (const auto r = j.find("ranges");
      r != j.end() && r->is_array() && r->size() > limits_.max_ranges_per_message) {
    violate("a client sent more ranges in one message than allowed (SPEC R3.4)",
            j.value("action", nlohmann::json()).dump() + " with " + std::to_string(r->size()) +
                " ranges");
  }
  if (j.value("op", nlohmann::json()) != "map") return;
  if (j.value("fresh", nlohmann::json()) != true) return;
  const auto region = j.value("region", nlohmann::json());
  const auto handle = j.value("handle", nlohmann::json());
  if (!region.is_number_unsigned() || !handle.is_string()) return;
  const auto owner = owner_handles_.find(region.get<std::uint64_t>());
  if (owner != owner_handles_.end() && owner->second == handle.get<std::string>()) {
    const std::string id = j.value("id", nlohmann::json()).dump();
    if (fresh_owner_maps_[conn].emplace(id, owner->first).second) ++fresh_licences_[owner->first];
  }
}

void InvariantMonitor::on_agent_frame_out(std::uint64_t conn, std::string_view payload) {
  const auto pending = fresh_owner_maps_.find(conn);
  const bool answers_map = pending != fresh_owner_maps_.end();
  const bool tells_boot = payload.find("\"boot\"") != std::string_view::npos;
  if (!answers_map && !tells_boot && payload.find("\"read_handle\"") == std::string_view::npos) {
    return;
  }
  const auto j = nlohmann::json::parse(payload, nullptr, /*allow_exceptions=*/false);
  if (!j.is_object()) return;
  // R6.1/R6.4 by what clients are told (hello, map, stale_epoch replies), not
  // only by what the agent's own tracker says its boot is.
  if (const auto boot = j.find("boot"); boot != j.end() && boot->is_string()) {
    on_boot(boot->get<std::string>());
  }
  if (answers_map) {
    // The map is answered: the extension heard of it before (R5.2), or never will.
    auto map = pending->second.find(j.value("id", nlohmann::json()).dump());
    if (map != pending->second.end()) {
      auto licence = fresh_licences_.find(map->second);
      if (licence != fresh_licences_.end() && --licence->second == 0) {
        fresh_licences_.erase(licence);
      }
      pending->second.erase(map);
      if (pending->second.empty()) fresh_owner_maps_.erase(pending);
    }
  }
  if (j.value("ok", nlohmann::json()) != true) return;
  const auto region = j.value("region", nlohmann::json());
  const auto handle = j.value("handle", nlohmann::json());
  if (region.is_number_unsigned() && handle.is_string()) {
    // A new region.
    owner_handles_[region.get<std::uint64_t>()] = handle.get<std::string>();
  }
}

void InvariantMonitor::on_agent_wire_closed(std::uint64_t conn) {
  auto pending = fresh_owner_maps_.find(conn);
  if (pending == fresh_owner_maps_.end()) return;
  for (const auto& [id, region] : pending->second) {
    auto licence = fresh_licences_.find(region);
    if (licence != fresh_licences_.end() && --licence->second == 0) fresh_licences_.erase(licence);
  }
  fresh_owner_maps_.erase(pending);
}

// SPEC R3.3 / R3.4: bounded messages, bounded open requests per connection.
void InvariantMonitor::on_hint(const ext::Hint& hint, bool accepted) {
  if (hint.ranges.size() > limits_.max_ranges_per_message) {
    violate("a hint message carried more ranges than allowed (SPEC R3.4)",
            hint.action + " with " + std::to_string(hint.ranges.size()) + " ranges");
  }
  // The agent closes a request before it tells the extension of its end, so an
  // end the extension fails still closes it (the extension was told).
  if (!accepted && hint.action != "read_hint_end") return;  // opens nothing (R3.3)
  auto& open = open_[hint.conn];
  if (hint.action == "read_hint") {
    open.insert(hint.request);
    if (open.size() > limits_.max_hint_requests) {
      violate("a connection had more hint requests open than allowed (SPEC R3.3)",
              "conn " + std::to_string(hint.conn) + ": " + std::to_string(open.size()) + " open");
    }
  } else if (hint.action == "read_hint_end") {
    open.erase(hint.request);
  }
  if (open.empty()) open_.erase(hint.conn);
}

void InvariantMonitor::on_write_wait(const ext::WriteWait& wait) {
  if (wait.ranges.size() > limits_.max_ranges_per_message) {
    violate("a write_wait carried more ranges than allowed (SPEC R3.4)",
            "token " + wait.token + " with " + std::to_string(wait.ranges.size()) + " ranges");
  }
}

void InvariantMonitor::on_connection_closed(std::uint64_t conn) {
  ++connection_closed_calls_;
  auto it = open_.find(conn);
  if (it != open_.end()) requests_open_at_close_ += it->second.size();
  open_.erase(conn);
}

void InvariantMonitor::on_extension_closed() {
  open_.clear();
  // The agent stopped: its maps in flight went unanswered with their
  // connections, whose close handlers may never run in the sim.
  fresh_owner_maps_.clear();
  fresh_licences_.clear();
}

// The agent ends the requests a boot change closed at the extension (PROTOCOL
// Boot), each on its connection's strand just after: none may be left open here.
// SPEC R6.3: a boot change drops every registration, so RDMA posted through
// one since must fail, whether or not the agent called deregister for it.
void InvariantMonitor::on_boot_change(const std::string& boot) {
  on_boot(boot);
  drop_live_rkeys();
}

void InvariantMonitor::on_process_end() {
  drop_live_rkeys();
}

void InvariantMonitor::drop_live_rkeys() {
  for (const std::uint32_t rkey : live_rkeys_) dropped_rkeys_.emplace(rkey, clock_.now());
  live_rkeys_.clear();
}

void InvariantMonitor::on_register(const runtime::Registration& registration) {
  dropped_rkeys_.erase(registration.rkey);  // a key may be handed out again
  live_rkeys_.insert(registration.rkey);
}

void InvariantMonitor::on_deregister(const runtime::Registration& registration) {
  // The earliest drop counts: a boot change before a (late, retried) deregister.
  dropped_rkeys_.emplace(registration.rkey, clock_.now());
  live_rkeys_.erase(registration.rkey);
}

// An op posted after its registration was dropped can never have reached it in time.
void InvariantMonitor::on_completion(const runtime::RdmaOp& op, runtime::Instant posted,
                                     const Status& status) {
  if (!status.ok()) return;
  auto dropped = dropped_rkeys_.find(op.rkey);
  if (dropped != dropped_rkeys_.end() && dropped->second <= posted) {
    violate("RDMA through a dropped registration succeeded",
            std::string(op.kind == runtime::RdmaOp::Kind::kRead ? "READ" : "WRITE") + " rkey " +
                std::to_string(op.rkey) + " posted at " + std::to_string(posted.count()) +
                " ns, deregistered at " + std::to_string(dropped->second.count()) + " ns");
  }
}

// SPEC R6.4: after a boot changed away, it never comes back (`~n` exists for that).
void InvariantMonitor::on_boot(const std::string& boot) {
  if (!boots_.empty() && boots_.back() == boot) return;
  if (!is_unknown_boot(boot) && std::find(boots_.begin(), boots_.end(), boot) != boots_.end()) {
    violate(after_unknown_ ? "a boot repeated after an unknown period (SPEC R6.4)"
                           : "a boot repeated after it changed (SPEC R6.1)",
            boot);
  }
  if (is_unknown_boot(boot)) after_unknown_ = true;
  boots_.push_back(boot);
}

void InvariantMonitor::check_write_wait(const std::string& client, runtime::Duration longest,
                                        runtime::Duration allowed) {
  if (longest > allowed) {
    violate("a store held its WRITEs past write_wait_ms + reply timeout (SPEC R4.3)",
            client + ": " + std::to_string(runtime::to_millis(longest)) + " ms, allowed " +
                std::to_string(runtime::to_millis(allowed)) + " ms");
  }
}

void InvariantMonitor::check_client_hints(const std::string& client, std::size_t queued,
                                          std::size_t open) {
  if (queued > limits_.max_queued_hints) {
    violate("a client queued more hints than allowed (SPEC R3.5)",
            client + ": " + std::to_string(queued) + " waiting, allowed " +
                std::to_string(limits_.max_queued_hints));
  }
  if (open > limits_.max_open_hinted_requests) {
    violate("a client kept more hinted requests open than allowed (SPEC R3.6)",
            client + ": " + std::to_string(open) + " open, allowed " +
                std::to_string(limits_.max_open_hinted_requests));
  }
}

void InvariantMonitor::check_all_hints_closed() {
  std::size_t open = 0;
  std::string example;
  for (const auto& [conn, requests] : open_) {
    open += requests.size();
    if (example.empty() && !requests.empty()) {
      example = "conn " + std::to_string(conn) + " request " + *requests.begin();
    }
  }
  if (open > 0) {
    violate("hint requests neither ended nor closed with their connection (SPEC R3.3)",
            std::to_string(open) + " open, e.g. " + example);
  }
}

std::vector<std::string> InvariantMonitor::violations() const {
  std::vector<std::string> out;
  for (const auto& [kind, k] : violations_) {
    out.push_back(kind + ": " + std::to_string(k.count) + "x, first: " + k.first_example);
  }
  return out;
}

std::uint64_t InvariantMonitor::violation_count() const {
  std::uint64_t n = 0;
  for (const auto& [kind, k] : violations_) n += k.count;
  return n;
}

}  // namespace rcxl::scenarios
