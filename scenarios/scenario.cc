#include "scenarios/scenario.h"

#include <algorithm>
#include <map>

namespace rcxl::scenarios {
namespace {

const std::map<std::string, Fault::Kind>& fault_kinds() {
  static const std::map<std::string, Fault::Kind> kKinds = {
      {"reset", Fault::Kind::kReset},
      {"unknown_generation", Fault::Kind::kUnknown},
      {"drop_connections", Fault::Kind::kDropConnections},
      {"agent_restart", Fault::Kind::kAgentRestart},
      {"partition", Fault::Kind::kPartition},
      {"delay", Fault::Kind::kDelay},
  };
  return kKinds;
}

// Reads fields of one object, naming the pointer of whatever is wrong.
class Reader {
 public:
  Reader(const Json& j, std::string origin, std::string pointer)
      : j_(j), origin_(std::move(origin)), pointer_(std::move(pointer)) {}

  Status require_object() const {
    if (!j_.is_object()) return fail("", "expected an object");
    return {};
  }
  Status only(const std::vector<std::string>& known) const {
    for (const auto& [key, value] : j_.items()) {
      if (std::find(known.begin(), known.end(), key) == known.end()) {
        std::string list;
        for (const auto& k : known) list += (list.empty() ? "" : ", ") + k;
        return fail("/" + key, "unknown field; expected one of: " + list);
      }
    }
    return {};
  }
  Status string(const char* key, std::string& out, bool required = false) const {
    if (!j_.contains(key)) return required ? fail(std::string("/") + key, "missing") : Status();
    if (!j_[key].is_string() || j_[key].get<std::string>().empty()) {
      return fail(std::string("/") + key, "expected a non-empty string");
    }
    out = j_[key].get<std::string>();
    return {};
  }
  Status boolean(const char* key, bool& out) const {
    if (!j_.contains(key)) return {};
    if (!j_[key].is_boolean()) return fail(std::string("/") + key, "expected true or false");
    out = j_[key].get<bool>();
    return {};
  }
  Status optional_boolean(const char* key, std::optional<bool>& out) const {
    if (!j_.contains(key)) return {};
    bool v = false;
    if (auto s = boolean(key, v); !s.ok()) return s;
    out = v;
    return {};
  }
  Status unsigned_int(const char* key, std::uint64_t& out, std::uint64_t lo,
                      std::uint64_t hi) const {
    if (!j_.contains(key)) return {};
    const bool non_negative = j_[key].is_number_unsigned() ||
                              (j_[key].is_number_integer() && j_[key].get<std::int64_t>() >= 0);
    if (!non_negative || j_[key].get<std::uint64_t>() < lo || j_[key].get<std::uint64_t>() > hi) {
      return fail(std::string("/") + key,
                  "expected an integer in " + std::to_string(lo) + ".." + std::to_string(hi));
    }
    out = j_[key].get<std::uint64_t>();
    return {};
  }
  Status seconds(const char* key, runtime::Duration& out, bool required = false) const {
    if (!j_.contains(key)) return required ? fail(std::string("/") + key, "missing") : Status();
    if (!j_[key].is_number() || j_[key].get<double>() < 0 || j_[key].get<double>() > 86400) {
      return fail(std::string("/") + key, "expected seconds in 0..86400");
    }
    out = runtime::from_seconds(j_[key].get<double>());
    return {};
  }
  Status fail(const std::string& sub, const std::string& what) const {
    return Error(ErrorCode::kBadRequest, origin_ + ": " + pointer_ + sub + ": " + what);
  }
  const std::string& pointer() const { return pointer_; }

 private:
  const Json& j_;
  std::string origin_;
  std::string pointer_;
};

Status parse_fault(const Json& j, const std::string& origin, const std::string& pointer,
                   Fault& out) {
  Reader r(j, origin, pointer);
  if (auto s = r.require_object(); !s.ok()) return s;
  if (auto s = r.only({"kind", "at_s", "for_s", "extra_ms", "node"}); !s.ok()) return s;
  std::string kind;
  if (auto s = r.string("kind", kind, true); !s.ok()) return s;
  auto it = fault_kinds().find(kind);
  if (it == fault_kinds().end()) {
    std::string list;
    for (const auto& [name, k] : fault_kinds()) list += (list.empty() ? "" : ", ") + name;
    return r.fail("/kind", "unknown fault '" + kind + "'; expected one of: " + list);
  }
  out.kind = it->second;
  if (auto s = r.seconds("at_s", out.at, true); !s.ok()) return s;
  if (auto s = r.seconds("for_s", out.duration); !s.ok()) return s;
  if (auto s = r.string("node", out.node); !s.ok()) return s;
  if (j.contains("extra_ms")) {
    if (!j["extra_ms"].is_number() || j["extra_ms"].get<double>() < 0) {
      return r.fail("/extra_ms", "expected milliseconds >= 0");
    }
    out.extra = runtime::from_seconds(j["extra_ms"].get<double>() / 1000);
  }
  const bool needs_duration = out.kind == Fault::Kind::kUnknown ||
                              out.kind == Fault::Kind::kPartition ||
                              out.kind == Fault::Kind::kDelay;
  if (needs_duration && out.duration.count() == 0) {
    return r.fail("/for_s", "this fault needs a duration (for_s > 0)");
  }
  return {};
}

}  // namespace

std::string fault_kind_name(Fault::Kind kind) {
  for (const auto& [name, k] : fault_kinds()) {
    if (k == kind) return name;
  }
  return "?";
}

Result<Scenario> parse_scenario(const Json& j, const std::string& origin) {
  Scenario sc;
  Reader r(j, origin, "");
  if (auto s = r.require_object(); !s.ok()) return s;
  if (auto s = r.only({"name", "description", "seed", "profile", "extension", "pool_bytes",
                       "client", "workload", "faults", "expect", "time_limit_s"});
      !s.ok()) {
    return s;
  }
  if (auto s = r.string("name", sc.name, true); !s.ok()) return s;
  if (j.contains("description") && !j["description"].is_string()) {
    return r.fail("/description", "expected a string");
  }
  sc.description = j.value("description", "");
  if (auto s = r.unsigned_int("seed", sc.seed, 0, UINT64_MAX); !s.ok()) return s;
  if (auto s = r.string("profile", sc.profile); !s.ok()) return s;
  if (auto s = r.unsigned_int("pool_bytes", sc.pool_bytes, 1 << 20, 1ull << 46); !s.ok()) return s;
  if (auto s = r.seconds("time_limit_s", sc.time_limit); !s.ok()) return s;
  if (j.contains("extension")) {
    Reader e(j["extension"], origin, "/extension");
    if (auto s = e.require_object(); !s.ok()) return s;
    if (auto s = e.only({"name", "config"}); !s.ok()) return s;
    if (auto s = e.string("name", sc.extension, true); !s.ok()) return s;
    if (j["extension"].contains("config")) {
      if (!j["extension"]["config"].is_object()) return e.fail("/config", "expected an object");
      sc.extension_config = j["extension"]["config"];
    }
  }
  if (j.contains("client")) {
    Reader c(j["client"], origin, "/client");
    if (auto s = c.require_object(); !s.ok()) return s;
    if (auto s = c.only({"read_hints", "write_hints", "read_promotes", "write_wait_ms",
                         "read_hint_on_arrival", "gate_reads"});
        !s.ok()) {
      return s;
    }
    std::uint64_t wait = sc.client.write_wait_ms;
    for (Status s : {c.boolean("read_hints", sc.client.read_hints),
                     c.optional_boolean("write_hints", sc.client.write_hints),
                     c.optional_boolean("read_promotes", sc.client.read_promotes),
                     c.unsigned_int("write_wait_ms", wait, 0, 10000),
                     c.boolean("read_hint_on_arrival", sc.client.read_hint_on_arrival),
                     c.boolean("gate_reads", sc.client.gate_reads)}) {
      if (!s.ok()) return s;
    }
    sc.client.write_wait_ms = static_cast<std::uint32_t>(wait);
  }
  if (j.contains("workload")) {
    auto w = workload_from_json(j["workload"]);
    if (!w.ok()) return Error(ErrorCode::kBadRequest, origin + ": " + w.status().message());
    sc.workload = w.value();
  }
  if (j.contains("faults")) {
    if (!j["faults"].is_array()) return r.fail("/faults", "expected an array");
    for (std::size_t i = 0; i < j["faults"].size(); ++i) {
      Fault f;
      if (auto s = parse_fault(j["faults"][i], origin, "/faults/" + std::to_string(i), f);
          !s.ok()) {
        return s;
      }
      sc.faults.push_back(f);
    }
  }
  if (j.contains("expect")) {
    if (!j["expect"].is_object()) return r.fail("/expect", "expected an object");
    sc.expect = j["expect"];
  }
  return sc;
}

}  // namespace rcxl::scenarios
