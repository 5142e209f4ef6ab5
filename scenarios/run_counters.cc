#include "scenarios/run_counters.h"

#include <algorithm>

#include "core/protocol/messages.h"

namespace rcxl::scenarios {
namespace {

struct Family {
  const char* prefix;  // "agent.hints_refused"
  const char* keys;    // what its keys are, for the error message
  bool (*valid)(const std::string& key);
};

bool is_action(const std::string& key) {
  return protocol::action_from_name(key).has_value();
}
bool is_error_code(const std::string& key) {
  const auto code = error_code_from_name(key);
  return code.has_value() && *code != ErrorCode::kOk;
}

constexpr Family kFamilies[] = {
    {"agent.hints_accepted", "an extension action such as read_hint", is_action},
    {"agent.hints_refused", "an error code such as bad_range", is_error_code},
};

// The family `path` is a member of, with its key; nullptr if none.
const Family* family_of(const std::string& path, std::string& key) {
  for (const auto& f : kFamilies) {
    const std::string prefix = std::string(f.prefix) + ".";
    if (path.rfind(prefix, 0) == 0) {
      key = path.substr(prefix.size());
      return &f;
    }
  }
  return nullptr;
}

std::string section_of(const std::string& path) {
  return path.substr(0, path.find('.'));
}

}  // namespace

const std::vector<std::string>& fixed_counter_paths() {
  static const std::vector<std::string> kPaths = {
      "agent.boot_changes",
      "agent.connections_closed",
      "agent.hint_requests_closed_by_boot_change",
      "agent.hint_requests_closed_by_disconnect",
      "agent.maps",
      "agent.maps_refused",
      "agent.open_hint_requests",
      "agent.unknown_periods",
      "agent.write_waits",
      "device.demand_read_fills",
      "device.evictions",
      "device.fills",
      "device.hinted_bytes_prepared",
      "device.hits",
      "device.idle_write_backs",
      "device.merged_misses",
      "device.misses",
      "device.resets",
      "device.write_allocate_fills",
      "device.write_backs",
      "extension.connection_closed_calls",
      "extension.requests_open_at_close",
      "kv.failed_loads",
      "kv.failed_stores",
      "kv.missed_chunks",
      "kv.reuse_turns_without_hits",
      "kv.short_loads",
      "scheduler.ends_sent",
      "scheduler.hints_sent",
      "scheduler.lookups",
      "worker.boot_misses",
      "worker.loads",
      "worker.longest_write_wait_ms",
      "worker.reads_posted",
      "worker.remote_access_errors",
      "worker.stores",
      "worker.writes_posted",
  };
  return kPaths;
}

// "mem3" -> memory, "gpu0" -> gpu; the sections each kind of node reports.
std::optional<std::vector<std::string>> node_sections(const std::string& node) {
  const bool mem = node.rfind("mem", 0) == 0, gpu = node.rfind("gpu", 0) == 0;
  if (!(mem || gpu) || node.size() != 4 || node[3] < '0' || node[3] > '7') return std::nullopt;
  if (mem) return std::vector<std::string>{"agent", "device", "extension"};
  return std::vector<std::string>{"kv", "scheduler", "worker"};
}

Status check_counter_path(const std::string& path) {
  const std::string by_node = "by_node.";
  if (path.rfind(by_node, 0) == 0) {
    // by_node.<node>.<a counter of a section that kind of node has>
    const std::size_t dot = path.find('.', by_node.size());
    const std::string node = path.substr(by_node.size(), dot - by_node.size());
    const auto sections = node_sections(node);
    if (!sections || dot == std::string::npos) {
      return Error(ErrorCode::kBadRequest,
                   "'" + path +
                       "': write by_node.<node>.<counter>, the node mem0..mem7 or "
                       "gpu0..gpu7, e.g. by_node.mem1.device.resets");
    }
    const std::string rest = path.substr(dot + 1);
    if (std::find(sections->begin(), sections->end(), section_of(rest)) == sections->end()) {
      std::string list;
      for (const auto& sec : *sections) list += (list.empty() ? "" : ", ") + sec + ".";
      return Error(ErrorCode::kBadRequest,
                   "'" + path + "': a " + node.substr(0, 3) + " node has " + list + " counters");
    }
    return check_counter_path(rest);
  }
  const auto& fixed = fixed_counter_paths();
  if (std::binary_search(fixed.begin(), fixed.end(), path)) return {};
  std::string key;
  if (const Family* f = family_of(path, key)) {
    if (!key.empty() && key.find('.') == std::string::npos && f->valid(key)) return {};
    return Error(ErrorCode::kBadRequest, "'" + key + "' is not a key of " + f->prefix + "; write " +
                                             f->prefix + ".<" + f->keys + ">");
  }
  // Name the counters of the section the path starts with, or the sections.
  const std::string section = section_of(path);
  std::string known;
  for (const auto& p : fixed) {
    if (section_of(p) == section) known += (known.empty() ? "" : ", ") + p;
  }
  for (const auto& f : kFamilies) {
    if (section_of(f.prefix) == section) {
      known += (known.empty() ? "" : ", ") + std::string(f.prefix) + ".<key>";
    }
  }
  if (known.empty()) {
    return Error(ErrorCode::kBadRequest,
                 "no counter section '" + section +
                     "'; counters are under agent., device., extension., kv., scheduler. and "
                     "worker. (and by_node.<node>. with several nodes)");
  }
  return Error(ErrorCode::kBadRequest, "no counter " + path + "; " + section + " has " + known);
}

std::optional<double> counter_value(const nlohmann::json& counters, const std::string& path) {
  // Walks the dotted path one object member at a time (no JSON-pointer text:
  // a key is taken as it is, whatever characters it has).
  const nlohmann::json* at = &counters;
  std::size_t from = 0;
  while (true) {
    const std::size_t dot = path.find('.', from);
    const std::string name = path.substr(from, dot == std::string::npos ? dot : dot - from);
    if (!at->is_object()) return std::nullopt;
    auto it = at->find(name);
    if (it == at->end()) {
      // The last name missing from a family the run has: never counted, 0.
      std::string key;
      // by_node.<node>.<family path>: the family is the node's own.
      std::string own = path;
      if (own.rfind("by_node.", 0) == 0) {
        const std::size_t node_end = own.find('.', 8);
        own = node_end == std::string::npos ? std::string() : own.substr(node_end + 1);
      }
      const bool family_key =
          dot == std::string::npos && family_of(own, key) != nullptr && key == name;
      if (family_key) return 0.0;
      return std::nullopt;
    }
    at = &*it;
    if (dot == std::string::npos) break;
    from = dot + 1;
  }
  if (!at->is_number()) return std::nullopt;
  return at->get<double>();
}

}  // namespace rcxl::scenarios
