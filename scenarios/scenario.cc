#include "scenarios/scenario.h"

#include <algorithm>
#include <cctype>
#include <cstdio>
#include <map>

#include "scenarios/json_document.h"
#include "scenarios/run_counters.h"
#include "scenarios/scenario_extensions.h"

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
        return fail("/" + pointer_token(key), "unknown field; expected one of: " + list);
      }
    }
    return {};
  }
  Status string(const char* key, std::string& out, bool required = false) const {
    if (!j_.contains(key)) {
      return required ? fail(std::string("/") + key, "missing; expected a non-empty string")
                      : Status();
    }
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
    if (!j_.contains(key)) {
      return required ? fail(std::string("/") + key, "missing; expected seconds in 0..86400")
                      : Status();
    }
    if (!j_[key].is_number() || j_[key].get<double>() < 0 || j_[key].get<double>() > 86400) {
      return fail(std::string("/") + key, "expected seconds in 0..86400");
    }
    if (!runtime::whole_nanoseconds(j_[key].get<double>())) {
      return fail(std::string("/") + key,
                  "expected whole nanoseconds (a multiple of 1e-9 s), not " + j_[key].dump() +
                      "; the simulator keeps time in ns");
    }
    out = runtime::from_seconds(j_[key].get<double>());
    return {};
  }
  Status fail(const std::string& sub, const std::string& what) const {
    const std::string where = pointer_ + sub;
    return Error(ErrorCode::kBadRequest,
                 origin_ + ": " + (where.empty() ? "the document" : where) + ": " + what);
  }
  const std::string& pointer() const { return pointer_; }
  const std::string& origin() const { return origin_; }

 private:
  const Json& j_;
  std::string origin_;
  std::string pointer_;
};

// Network faults act on any node; the device and agent faults on memory nodes only.
Status check_fault_node(const Reader& r, const Fault& f, const Topology& topology) {
  const bool network = f.kind == Fault::Kind::kDropConnections ||
                       f.kind == Fault::Kind::kPartition || f.kind == Fault::Kind::kDelay;
  std::vector<std::string> memory;
  for (int i = 0; i < topology.memory_nodes; ++i) memory.push_back(memory_node_name(i));
  std::vector<std::string> all = {kDirectoryNode};
  for (int i = 0; i < topology.gpu_nodes; ++i) all.push_back(gpu_node_name(i));
  all.insert(all.end(), memory.begin(), memory.end());
  const auto& allowed = network ? all : memory;
  if (std::find(allowed.begin(), allowed.end(), f.node) != allowed.end()) return {};
  std::string list;
  for (const auto& n : allowed) list += (list.empty() ? "" : ", ") + n;
  if (!network && std::find(all.begin(), all.end(), f.node) != all.end()) {
    return r.fail("/node", "'" + fault_kind_name(f.kind) + "' acts on a memory node (" + list +
                               "), not '" + printable(f.node) + "'; drop node or write \"" +
                               kMemoryNode + "\"");
  }
  return r.fail("/node", "no node '" + printable(f.node) + "'; expected one of: " + list);
}

// Only cxl_ssd reads the simulated device's generation: under another extension
// the agent keeps its boot through a reset, and readers see lost bytes as stale hits.
bool tells_device_generation(const std::string& extension) {
  return extension == "cxl_ssd";
}

std::string seconds_text(runtime::Duration d) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%g s", runtime::to_seconds(d));
  return buf;
}

// topology.memory_profiles: one profile name per memory node, in node order.
Status parse_memory_profiles(const Reader& t, const Json& topology, Topology& out) {
  if (!topology.contains("memory_profiles")) return {};
  const Json& names = topology["memory_profiles"];
  const std::string count = std::to_string(out.memory_nodes);
  if (!names.is_array() || names.size() != static_cast<std::size_t>(out.memory_nodes)) {
    return t.fail("/memory_profiles", "expected an array of " + count +
                                          " profile names, one per memory node (memory_nodes "
                                          "is " +
                                          count + ")");
  }
  for (std::size_t i = 0; i < names.size(); ++i) {
    if (!names[i].is_string() || names[i].get<std::string>().empty()) {
      return t.fail("/memory_profiles/" + std::to_string(i),
                    "expected a profile name, e.g. \"all_dram\"");
    }
    out.memory_profiles.push_back(names[i].get<std::string>());
  }
  return {};
}

// A fault must be able to happen in the run the rest of the file describes.
Status check_fault_in_run(const Reader& r, const Fault& f, const Scenario& sc) {
  // Each request stores at most once; only a reuse turn (turns 2.. of its
  // conversation) loads, at most once: a first turn finds nothing stored.
  const std::uint64_t requests = requests_of(sc.workload, sc.topology.gpu_nodes);
  const std::uint64_t reuse_turns = reuse_turns_of(sc.workload);
  auto within = [&](const char* field, const char* event, std::uint64_t nth, std::uint64_t most,
                    const std::string& why) -> Status {
    if (nth <= most) return {};
    if (most == 0) {
      return r.fail(std::string("/") + field, std::string(event) + " " + std::to_string(nth) +
                                                  " never starts: " + why +
                                                  "; raise turns or trigger it by at_s");
    }
    return r.fail(std::string("/") + field, std::string(event) + " " + std::to_string(nth) +
                                                " never starts: " + why + "; pick 1.." +
                                                std::to_string(most));
  };
  const bool store_kind = sc.workload.kind == WorkloadKind::kStore;
  if (f.during_load > 0 && store_kind) {
    return r.fail("/during_load",
                  "a store workload (/workload/kind \"store\") loads nothing, so this fault "
                  "would never happen; use during_store or at_s");
  }
  if (f.during_load > 0) {
    if (auto s = within("during_load", "load", f.during_load, reuse_turns,
                        "the workload has " + std::to_string(reuse_turns) +
                            " reuse turns (turns 2.. of each conversation; a first turn has "
                            "nothing stored to load) and each loads at most once");
        !s.ok()) {
      return s;
    }
  } else if (f.during_store > 0) {
    if (auto s = within("during_store", "store", f.during_store, requests,
                        "the workload has " + std::to_string(requests) +
                            (store_kind ? " stores (stores x gpu_nodes)"
                                        : " requests and each stores at most once"));
        !s.ok()) {
      return s;
    }
  } else if (f.at >= sc.time_limit) {
    return r.fail("/at_s", "at " + seconds_text(f.at) + " is not before the run's time limit of " +
                               seconds_text(sc.time_limit) +
                               " (time_limit_s), so it would never happen; move it earlier or "
                               "raise time_limit_s");
  }
  const bool generation_fault = f.kind == Fault::Kind::kReset || f.kind == Fault::Kind::kUnknown;
  if (generation_fault && !tells_device_generation(sc.extension)) {
    return r.fail("/kind", "'" + fault_kind_name(f.kind) + "' changes the device's memory " +
                               "generation, which the extension '" + sc.extension +
                               "' cannot tell (only cxl_ssd reads it from the simulated device): " +
                               "the agent would keep its boot and report false violations; " +
                               "use the extension cxl_ssd or drop this fault");
  }
  return {};
}

// When a fault fires: `at_s` from the start, or `after_ms` past the start of
// load `during_load` or store `during_store` (exactly one of the three).
Status parse_fault_time(const Reader& r, const Json& j, Fault& out) {
  const bool timed = j.contains("at_s");
  const bool on_load = j.contains("during_load");
  const bool on_store = j.contains("during_store");
  if (int(timed) + int(on_load) + int(on_store) > 1) {
    return r.fail(on_store ? "/during_store" : "/during_load",
                  "give one of at_s, during_load and during_store; drop the others");
  }
  if (!timed && !on_load && !on_store) {
    return r.fail("/at_s",
                  "missing; a fault fires at_s seconds from the start, or after_ms past "
                  "the start of the during_load-th KV load or the during_store-th KV store");
  }
  if (timed) {
    if (j.contains("after_ms")) {
      return r.fail("/after_ms",
                    "only a fault with during_load or during_store takes after_ms; drop it");
    }
    return r.seconds("at_s", out.at, true);
  }
  if (on_load) {
    if (auto s = r.unsigned_int("during_load", out.during_load, 1, 1'000'000); !s.ok()) return s;
  } else if (auto s = r.unsigned_int("during_store", out.during_store, 1, 1'000'000); !s.ok()) {
    return s;
  }
  if (j.contains("after_ms")) {
    const Json& after = j["after_ms"];
    if (!after.is_number() || !(after.get<double>() >= 0) || after.get<double>() > 60e3) {
      return r.fail("/after_ms", "expected milliseconds in 0..60000");
    }
    if (!runtime::whole_nanoseconds(after.get<double>() / 1000)) {
      return r.fail("/after_ms",
                    "expected whole nanoseconds (a multiple of 0.000001 ms), not " + after.dump());
    }
    out.after = runtime::from_seconds(after.get<double>() / 1000);
  }
  return {};
}

Status parse_fault(const Json& j, const std::string& origin, const std::string& pointer,
                   Fault& out) {
  Reader r(j, origin, pointer);
  if (auto s = r.require_object(); !s.ok()) return s;
  if (auto s = r.only(
          {"kind", "at_s", "during_load", "during_store", "after_ms", "for_s", "extra_ms", "node"});
      !s.ok()) {
    return s;
  }
  std::string list;
  for (const auto& [name, k] : fault_kinds()) list += (list.empty() ? "" : ", ") + name;
  if (!j.contains("kind")) return r.fail("/kind", "missing; expected one of: " + list);
  std::string kind;
  if (auto s = r.string("kind", kind, true); !s.ok()) return s;
  auto it = fault_kinds().find(kind);
  if (it == fault_kinds().end()) {
    return r.fail("/kind", "unknown fault '" + printable(kind) + "'; expected one of: " + list);
  }
  out.kind = it->second;
  if (auto s = parse_fault_time(r, j, out); !s.ok()) return s;
  if (auto s = r.seconds("for_s", out.duration); !s.ok()) return s;
  if (auto s = r.string("node", out.node); !s.ok()) return s;
  const bool is_delay = out.kind == Fault::Kind::kDelay;
  if (j.contains("extra_ms") && !is_delay) {
    return r.fail("/extra_ms", "only a delay fault takes extra_ms; drop it");
  }
  if (is_delay) {
    if (!j.contains("extra_ms")) return r.fail("/extra_ms", "a delay fault needs extra_ms > 0");
    const Json& extra = j["extra_ms"];
    if (!extra.is_number() || !(extra.get<double>() > 0) || extra.get<double>() > 86400e3) {
      return r.fail("/extra_ms", "expected milliseconds > 0 (at most 86400000)");
    }
    if (!runtime::whole_nanoseconds(extra.get<double>() / 1000)) {
      return r.fail("/extra_ms",
                    "expected whole nanoseconds (a multiple of 0.000001 ms), not " + extra.dump());
    }
    out.extra = runtime::from_seconds(extra.get<double>() / 1000);
    // Under the clock's 1 ns tick it would be no delay at all, as for_s is no duration.
    if (out.extra.count() == 0) {
      return r.fail("/extra_ms",
                    "expected milliseconds > 0 and at least 0.000001 (1 ns, the "
                    "simulator's clock tick)");
    }
  }
  const bool needs_duration =
      out.kind == Fault::Kind::kUnknown || out.kind == Fault::Kind::kPartition || is_delay;
  if (needs_duration && out.duration.count() == 0) {
    return r.fail("/for_s",
                  "this fault needs a duration (for_s > 0, at least 1e-9: the "
                  "simulator's clock tick)");
  }
  if (!needs_duration && j.contains("for_s")) {
    return r.fail("/for_s", "'" + kind + "' is instant and takes no for_s; drop it");
  }
  return {};
}

// Boots are short strings (boot-mem0:2, boot-mem0:unknown, boot-mem0:1~1): a
// longer pattern is a mistake, and a deep one recurses std::regex off the stack.
constexpr std::size_t kMaxBootPatternChars = 256;
// A run's boots are a handful; each pattern is tried against the boots left.
constexpr std::size_t kMaxBootPatterns = 64;
// Repetitions and alternations in one pattern: each multiplies the ways a match
// can be tried (std::regex backtracks), so a few suffice and many never end.
constexpr int kMaxBootPatternChoices = 6;
// A boot is a few dozen characters: a longer repeat never matches one.
constexpr int kMaxBootRepeat = 256;
constexpr char kBootExamples[] =
    "boots are short strings such as boot-mem0:2 or boot-mem0:unknown; write e.g. "
    "^boot-mem0:2$ or .*:unknown";

// Why matching `p` could backtrack for ever even on a short boot, or "": a
// repeated group ((...)*, (...)+, (...){n,}) holding a repetition or an
// alternation, or more than kMaxBootPatternChoices of them in all.
std::string backtracking_risk(const std::string& p) {
  std::vector<bool> open;             // per open group: holds a repetition or alternation
  bool closed_group_chooses = false;  // the token before is a group that does
  bool after_atom = false;            // a quantifier here repeats something
  bool after_quantifier = false;      // a quantifier here repeats a repetition
  int choices = 0;
  auto mark_choice = [&] {
    ++choices;
    if (!open.empty()) open.back() = true;
  };
  for (std::size_t i = 0; i < p.size(); ++i) {
    const char c = p[i];
    const bool repeat = c == '*' || c == '+' || c == '{';
    // libstdc++ takes a{2}{3} (ECMAScript does not), and its counts multiply.
    if ((repeat || c == '?') && after_quantifier) {
      return "repeats a repetition (a quantifier right after another, e.g. a{2}{3}); write one";
    }
    after_quantifier = false;
    if ((repeat || c == '?') && after_atom) {
      if (repeat && closed_group_chooses) {
        return "repeats a group that itself repeats or alternates, which backtracks without end";
      }
      mark_choice();
      if (c == '{') {
        const std::size_t end = std::min(p.find('}', i), p.size() - 1);
        // libstdc++ reads a count into an int that wraps: a{4294967296} is a{0}.
        std::size_t digits = 0;
        for (std::size_t k = i + 1; k < end; ++k) {
          digits = std::isdigit(static_cast<unsigned char>(p[k])) ? digits + 1 : 0;
          if (digits > 3 || (digits == 3 && std::stoi(p.substr(k - 2, 3)) > kMaxBootRepeat)) {
            return "repeats something more than " + std::to_string(kMaxBootRepeat) +
                   " times ({n} counts up to " + std::to_string(kMaxBootRepeat) + ")";
          }
        }
        i = end;
      }
      if (i + 1 < p.size() && p[i + 1] == '?') ++i;  // lazy: the same choices
      after_atom = false;
      after_quantifier = true;
      closed_group_chooses = false;
      continue;
    }
    closed_group_chooses = false;
    after_atom = true;
    if (c == '\\') {
      ++i;
    } else if (c == '[') {
      for (++i; i < p.size() && p[i] != ']'; ++i) {
        if (p[i] == '\\') ++i;
      }
    } else if (c == '(') {
      open.push_back(false);
      if (i + 2 < p.size() && p[i + 1] == '?') i += 2;  // (?: (?= (?!
      after_atom = false;
    } else if (c == ')' && !open.empty()) {
      closed_group_chooses = open.back();
      open.pop_back();
      if (closed_group_chooses && !open.empty()) open.back() = true;
    } else if (c == '|') {
      mark_choice();
      after_atom = false;
    } else if (c == '^') {
      after_atom = false;
    }
  }
  if (choices > kMaxBootPatternChoices) {
    return "has " + std::to_string(choices) + " repetitions and alternations (at most " +
           std::to_string(kMaxBootPatternChoices) + "; each multiplies the work of a match)";
  }
  return "";
}

Status parse_boots(const Reader& r, const Json& j, std::vector<BootPattern>& out) {
  if (!j.is_array()) {
    return r.fail("", "expected an array of regular expressions, e.g. [\"^boot-mem0:1$\"]");
  }
  if (j.size() > kMaxBootPatterns) {
    return r.fail("", std::to_string(j.size()) + " patterns; a run advertises a handful of " +
                          "boots: give at most " + std::to_string(kMaxBootPatterns));
  }
  for (std::size_t i = 0; i < j.size(); ++i) {
    const std::string at = "/" + std::to_string(i);
    if (!j[i].is_string()) return r.fail(at, "expected a regular expression (a string)");
    const std::string text = j[i].get<std::string>();
    if (text.empty()) {
      // regex_match: "" matches only an empty boot, and a boot never is.
      return r.fail(at, std::string("is empty and matches no boot; ") + kBootExamples);
    }
    if (text.size() > kMaxBootPatternChars) {
      return r.fail(at, "'" + printable(text) + "' is longer than " +
                            std::to_string(kMaxBootPatternChars) + " characters; " + kBootExamples);
    }
    try {
      out.push_back({text, std::regex(text)});
    } catch (const std::regex_error& e) {
      return r.fail(at, "'" + printable(text) + "' is not a regular expression (" + e.what() +
                            "); write ECMAScript syntax, e.g. ^boot-mem0:1$");
    }
    if (const std::string risk = backtracking_risk(text); !risk.empty()) {
      return r.fail(at, "'" + printable(text) + "' " + risk + "; " + kBootExamples);
    }
  }
  return {};
}

// A bound is a number >= 0; `out` keeps it as given.
Status bound(const Reader& r, const Json& j, const char* key, std::optional<double>& out) {
  if (!j.contains(key)) return {};
  const Json& v = j[key];
  if (!v.is_number() || v.get<double>() < 0) {
    return r.fail(std::string("/") + key, "expected a number >= 0");
  }
  out = v.get<double>();
  return {};
}

// "agent.boot_changes" -> /agent/boot_changes: letters, digits and _ between dots.
bool is_counter_path(const std::string& path) {
  if (path.empty() || path.front() == '.' || path.back() == '.') return false;
  for (std::size_t i = 0; i < path.size(); ++i) {
    const char c = path[i];
    if (c == '.' && path[i + 1] == '.') return false;
    if (c != '.' && c != '_' && !std::isalnum(static_cast<unsigned char>(c))) return false;
  }
  return true;
}

// by_node.<node>. counters exist only for the run's nodes, and only when it
// has more than one node of a kind (a single node's numbers are the totals).
Status check_node_of(const std::string& path, const Topology& topology) {
  const std::string prefix = "by_node.";
  if (path.rfind(prefix, 0) != 0) return {};
  const std::string node =
      path.substr(prefix.size(), path.find('.', prefix.size()) - prefix.size());
  if (topology.gpu_nodes == 1 && topology.memory_nodes == 1) {
    return Error(ErrorCode::kBadRequest,
                 "by_node counters come only with several nodes (topology); with one of "
                 "each, write the total, e.g. " +
                     path.substr(path.find('.', prefix.size()) + 1));
  }
  const bool mem = node.rfind("mem", 0) == 0;
  const int index = node[3] - '0';
  const int count = mem ? topology.memory_nodes : topology.gpu_nodes;
  if (index >= count) {
    return Error(ErrorCode::kBadRequest, "no node " + node + " in this run: topology has " +
                                             std::to_string(count) + (mem ? " memory" : " GPU") +
                                             " node(s)");
  }
  return {};
}

Status parse_counter_bounds(const Reader& r, const Json& j, const Topology& topology,
                            std::vector<CounterBounds>& out) {
  if (!j.is_object()) {
    return r.fail("", "expected an object such as {\"agent.boot_changes\": {\"min\": 1}}");
  }
  for (const auto& [path, bounds] : j.items()) {
    Reader b(bounds, r.origin(), r.pointer() + "/" + pointer_token(path));
    if (!is_counter_path(path)) {
      return b.fail("", "expected a dotted counter path such as agent.boot_changes");
    }
    if (auto s = check_counter_path(path); !s.ok()) return b.fail("", s.message());
    if (auto s = check_node_of(path, topology); !s.ok()) return b.fail("", s.message());
    if (!bounds.is_object()) {
      return b.fail("", "expected {\"min\": N, \"max\": N} (either or both), not a bare value");
    }
    if (auto s = b.only({"min", "max"}); !s.ok()) return s;
    CounterBounds c;
    c.path = path;
    if (auto s = bound(b, bounds, "min", c.min); !s.ok()) return s;
    if (auto s = bound(b, bounds, "max", c.max); !s.ok()) return s;
    if (!c.min && !c.max) return b.fail("", "give min, max or both");
    // Counters are whole numbers below 2^64: a min above that fails every run.
    if (c.min && *c.min >= 18446744073709551616.0) {  // 2^64: UINT64_MAX rounds up to it
      return b.fail("/min", "is above every counter's range (2^64 - 1); give a reachable min");
    }
    if (c.min && c.max && *c.min > *c.max) return b.fail("/min", "is above max");
    out.push_back(std::move(c));
  }
  return {};
}

Status parse_expect(const Json& j, const std::string& origin, const Topology& topology,
                    const WorkloadParams& workload, Expectations& out) {
  Reader r(j, origin, "/expect");
  if (auto s = r.require_object(); !s.ok()) return s;
  if (auto s = r.only({"boots", "boots_exactly", "counters", "min_reuse_hits"}); !s.ok()) {
    return s;
  }
  if (j.contains("boots") && j.contains("boots_exactly")) {
    return r.fail("/boots_exactly",
                  "give boots (these in order, others between) or boots_exactly (these and "
                  "no other), not both");
  }
  for (const char* key : {"boots", "boots_exactly"}) {
    if (!j.contains(key)) continue;
    const std::string pointer = std::string("/expect/") + key;
    // Every run advertises a boot: [] would check nothing (boots) or fail every run.
    if (j[key].is_array() && j[key].empty()) {
      return r.fail(std::string("/") + key,
                    std::string(key) == "boots"
                        ? "is empty and checks nothing; name the boots in order, e.g. "
                          "[\"^boot-mem0:1$\"], or drop it"
                        : "is empty, and every run advertises a boot, so it would fail every "
                          "run; name them, e.g. [\"^boot-mem0:1$\"]");
    }
    if (auto s = parse_boots(Reader(j[key], origin, pointer), j[key], out.boots); !s.ok()) {
      return s;
    }
    out.boots_exactly = std::string(key) == "boots_exactly";
  }
  if (j.contains("counters")) {
    Reader c(j["counters"], origin, "/expect/counters");
    if (auto s = parse_counter_bounds(c, j["counters"], topology, out.counters); !s.ok()) {
      return s;
    }
  }
  if (j.contains("min_reuse_hits") && workload.kind == WorkloadKind::kStore) {
    return r.fail("/min_reuse_hits",
                  "a store workload (/workload/kind \"store\") serves no turn; bound "
                  "worker.stores or kv.failed_stores under counters instead");
  }
  if (j.contains("min_reuse_hits")) {
    std::uint64_t hits = 0;
    if (auto s = r.unsigned_int("min_reuse_hits", hits, 0, UINT64_MAX); !s.ok()) return s;
    if (hits == 0) {
      return r.fail("/min_reuse_hits", "0 checks nothing; give 1 or more, or drop it");
    }
    if (const std::uint64_t most = reuse_turns_of(workload); hits > most) {
      return r.fail(
          "/min_reuse_hits",
          std::to_string(hits) + " can never be met: the workload has " + std::to_string(most) +
              " reuse turns (turns 2.. of each conversation); " +
              (most == 0 ? std::string("raise turns to 2 or more, or drop it")
                         : "pick 1.." + std::to_string(most) + " or raise conversations or turns"));
    }
    out.min_reuse_hits = hits;
  }
  return {};
}

// The rcxl-agent flags of the same names (SPEC R7), with their ranges: a poll
// or sweep at least a millisecond apart, a grace that may be 0.
Status parse_agent(const Reader& a, AgentSettings& out) {
  if (auto s = a.require_object(); !s.ok()) return s;
  if (auto s = a.only({"memory_generation_poll_s", "memory_generation_grace_s", "sweep_interval_s",
                       "max_hint_requests"});
      !s.ok()) {
    return s;
  }
  AgentSettings v = out;
  std::uint64_t max_hints = v.max_hint_requests;
  for (Status s : {a.seconds("memory_generation_poll_s", v.generation_poll),
                   a.seconds("memory_generation_grace_s", v.generation_grace),
                   a.seconds("sweep_interval_s", v.sweep_interval),
                   a.unsigned_int("max_hint_requests", max_hints, 1, UINT32_MAX)}) {
    if (!s.ok()) return s;
  }
  constexpr runtime::Duration kShortest = std::chrono::milliseconds(1);
  if (v.generation_poll < kShortest) {
    return a.fail("/memory_generation_poll_s",
                  "expected seconds in 0.001..86400 (rcxl-agent's --memory-generation-poll-s)");
  }
  if (v.sweep_interval < kShortest) {
    return a.fail("/sweep_interval_s",
                  "expected seconds in 0.001..86400 (rcxl-agent's --sweep-interval-s)");
  }
  v.max_hint_requests = static_cast<std::uint32_t>(max_hints);
  out = v;
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
  if (auto s = r.only({"name", "description", "seed", "profile", "extension", "pool_bytes", "agent",
                       "client", "workload", "topology", "faults", "expect", "time_limit_s"});
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
  // Its own range in the message: seconds() would offer 0, which is refused.
  if (j.contains("time_limit_s") && j["time_limit_s"].is_number() &&
      !(j["time_limit_s"].get<double>() > 0)) {
    return r.fail("/time_limit_s",
                  "expected seconds > 0, at most 86400 (a run needs some virtual time)");
  }
  if (auto s = r.seconds("time_limit_s", sc.time_limit); !s.ok()) return s;
  if (j.contains("time_limit_s") && sc.time_limit.count() <= 0) {
    return r.fail("/time_limit_s", "expected seconds > 0 (a run needs some virtual time)");
  }
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
  if (auto s = check_scenario_extension(sc.extension, sc.extension_config, origin); !s.ok()) {
    return s;
  }
  if (j.contains("agent")) {
    if (auto s = parse_agent(Reader(j["agent"], origin, "/agent"), sc.agent); !s.ok()) return s;
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
    // R4.3: a write wait is a write hint that waits; with write hints off none is asked.
    if (wait > 0 && j["client"].contains("write_wait_ms") &&
        !sc.client.write_hints.value_or(sc.client.read_hints)) {
      return c.fail("/write_wait_ms",
                    "a write wait is a write hint that waits, and write hints are off (they "
                    "follow read_hints unless write_hints is given), so no store would wait; "
                    "set \"write_hints\": true, or drop write_wait_ms");
    }
    // R3.8: hints on arrival are the scheduler's read hints; alone they send nothing.
    if (sc.client.read_hint_on_arrival && !sc.client.read_hints) {
      return c.fail("/read_hint_on_arrival",
                    "hints on arrival are read hints, and read_hints is off, so none would be "
                    "sent; set \"read_hints\": true as well, or drop read_hint_on_arrival");
    }
  }
  if (j.contains("workload")) {
    auto w = workload_from_json(j["workload"]);
    if (!w.ok()) return Error(ErrorCode::kBadRequest, origin + ": " + w.status().message());
    sc.workload = w.value();
  }
  // A workload that cannot start (or think) within the time limit only times
  // out; a store workload has neither (its stores start at once).
  const bool serving = sc.workload.kind == WorkloadKind::kServing;
  const auto before_limit = [&](const char* field, runtime::Duration d, const std::string& what) {
    if (!serving || d < sc.time_limit) return Status{};
    return r.fail(std::string("/workload/") + field,
                  what + " " + seconds_text(d) + " is not before the run's time limit of " +
                      seconds_text(sc.time_limit) +
                      " (time_limit_s), so the run could only time out; shorten it or raise "
                      "time_limit_s");
  };
  if (auto s = before_limit("start_window_s", sc.workload.start_window, "a start window of");
      !s.ok()) {
    return s;
  }
  const auto pauses = sc.workload.think_time * std::max(sc.workload.turns - 1, 0);
  if (auto s = before_limit("think_time_s", pauses,
                            "a conversation's pauses between its turns, (turns - 1) x "
                            "think_time_s =");
      !s.ok()) {
    return s;
  }
  // The last conversation may start at the window's end, then pause as each does.
  if (auto s = before_limit("think_time_s", sc.workload.start_window + pauses,
                            "the last start (start_window_s) plus a conversation's pauses "
                            "((turns - 1) x think_time_s) =");
      !s.ok()) {
    return s;
  }
  if (j.contains("topology")) {
    Reader t(j["topology"], origin, "/topology");
    if (auto s = t.require_object(); !s.ok()) return s;
    if (auto s = t.only({"gpu_nodes", "memory_nodes", "memory_profiles"}); !s.ok()) return s;
    std::uint64_t gpus = 1, mems = 1;
    for (Status s : {t.unsigned_int("gpu_nodes", gpus, 1, Topology::kMaxNodes),
                     t.unsigned_int("memory_nodes", mems, 1, Topology::kMaxNodes)}) {
      if (!s.ok()) return s;
    }
    sc.topology.gpu_nodes = static_cast<int>(gpus);
    sc.topology.memory_nodes = static_cast<int>(mems);
    if (auto s = parse_memory_profiles(t, j["topology"], sc.topology); !s.ok()) return s;
  }
  if (j.contains("faults")) {
    if (!j["faults"].is_array()) return r.fail("/faults", "expected an array");
    for (std::size_t i = 0; i < j["faults"].size(); ++i) {
      Fault f;
      const std::string at = "/faults/" + std::to_string(i);
      if (auto s = parse_fault(j["faults"][i], origin, at, f); !s.ok()) return s;
      const Reader fr(j["faults"][i], origin, at);
      if (auto s = check_fault_node(fr, f, sc.topology); !s.ok()) return s;
      if (auto s = check_fault_in_run(fr, f, sc); !s.ok()) return s;
      sc.faults.push_back(f);
    }
  }
  if (j.contains("expect")) {
    if (auto s = parse_expect(j["expect"], origin, sc.topology, sc.workload, sc.expect); !s.ok()) {
      return s;
    }
  }
  return sc;
}

}  // namespace rcxl::scenarios
