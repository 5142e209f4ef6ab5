#include "scenarios/sweep.h"

#include <algorithm>
#include <cctype>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <limits>
#include <map>
#include <mutex>
#include <optional>
#include <set>
#include <sstream>

#include "core/runtime/printable.h"
#include "scenarios/configurations.h"
#include "scenarios/embedded/embedded.h"
#include "scenarios/out_dir.h"
#include "scenarios/report/stats.h"
#include "scenarios/report/svg_chart.h"
#include "scenarios/serving_rig.h"
#include "scenarios/shell_word.h"

namespace rcxl::scenarios {
namespace {

using Json = nlohmann::json;

// A built-in name is a JSON pointer with a unit: the value times `scale` lands there.
struct NamedParam {
  const char* name;
  const char* pointer;
  double scale;
  const char* help;
};

const std::vector<NamedParam>& named_params() {
  static const std::vector<NamedParam> kNamed = {
      {"dram_cache_bytes", "/device/dram_cache_bytes", 1,
       "the device's DRAM cache in front of flash (profile device.dram_cache_bytes; 16G)"},
      {"flash_read_ns", "/device/flash_read_ns", 1,
       "flash tR, one page read from the array (profile device.flash_read_ns; 3000)"},
      {"hint_lead_ms", "/engine/scheduler_to_worker_us", 1000,
       "ms from the scheduler's read hint to the worker's first READ of that load "
       "(profile engine.scheduler_to_worker_us; 0.3)"},
      {"idle_write_back", "/device/idle_write_back", 1,
       "1: dirty pages go to flash while their channel is idle (eager write-back); "
       "0: only when evicted (profile device.idle_write_back; 0)"},
      {"concurrency", "/workload/conversations", 1,
       "conversations in flight, each a closed-loop client with one request at a time "
       "(scenario workload.conversations; 48)"},
      {"gpu_nodes", "/topology/gpu_nodes", 1,
       "GPU nodes (serving engines) sharing the memory nodes, conversations dealt round robin "
       "(scenario topology.gpu_nodes; 1)"},
      {"memory_nodes", "/topology/memory_nodes", 1,
       "memory nodes (an agent and its device each), regions allocated round robin "
       "(scenario topology.memory_nodes; 1)"},
  };
  return kNamed;
}

// Profile sections; every other pointer goes into the scenario.
bool is_profile_section(const std::string& s) {
  return s == "device" || s == "nic" || s == "engine" || s == "control_link";
}

std::string known_names() {
  std::string out;
  for (const auto& n : named_params()) out += std::string(out.empty() ? "" : ", ") + n.name;
  return out;
}

// `option` is the command-line option that named the parameter (--param, --set).
// The user's text is escaped: a control byte in a value reached the terminal.
Status bad_param(const std::string& option, const std::string& name, const std::string& why) {
  return Error(ErrorCode::kBadRequest,
               option + " " + runtime::printable(name, 200) + ": " + runtime::printable(why, 2000));
}

// "4G" -> 4 * 2^30; "0.5" -> 0.5; "true" -> true.
Result<Json> parse_value(const std::string& option, const std::string& name,
                         const std::string& text) {
  if (text == "true") return Json(true);
  if (text == "false") return Json(false);
  const char* begin = text.c_str();
  char* end = nullptr;
  // Decimal only: strtod would also take a hex float ("0x10", "0x1p3").
  const std::size_t digits = text.find_first_not_of("+-");
  const bool hex = digits != std::string::npos && text.size() > digits + 1 && text[digits] == '0' &&
                   (text[digits + 1] == 'x' || text[digits + 1] == 'X');
  double v = hex ? 0 : std::strtod(begin, &end);
  if (hex || end == begin || text.empty() || std::isspace(static_cast<unsigned char>(text[0]))) {
    return bad_param(option, name,
                     "'" + text + "' is not a value; write a number (3000, 0.5, 4G) or true/false");
  }
  const std::string suffix(end);
  // Either case, as the agent's and rcxl-kv's sizes (--memory anon:4g).
  static const std::map<std::string, double> kSuffix = {{"", 1},
                                                        {"K", 1024.0},
                                                        {"M", 1024.0 * 1024},
                                                        {"G", 1024.0 * 1024 * 1024},
                                                        {"T", 1024.0 * 1024 * 1024 * 1024},
                                                        {"k", 1024.0},
                                                        {"m", 1024.0 * 1024},
                                                        {"g", 1024.0 * 1024 * 1024},
                                                        {"t", 1024.0 * 1024 * 1024 * 1024}};
  auto it = kSuffix.find(suffix);
  if (it == kSuffix.end()) {
    return bad_param(option, name,
                     "'" + text + "' has an unknown suffix '" + suffix +
                         "'; sizes take K, M, G or T, either case (binary: 4G = 4 * 2^30)");
  }
  v *= it->second;
  if (!std::isfinite(v)) return bad_param(option, name, "'" + text + "' is not a finite number");
  if (std::floor(v) == v && std::abs(v) < 9e15) {
    if (v >= 0) return Json(static_cast<std::uint64_t>(v));
    return Json(static_cast<std::int64_t>(v));
  }
  return Json(v);
}

// Where a parameter lands and in which unit.
struct Target {
  bool profile = false;
  Json::json_pointer pointer;
  double scale = 1;
};

Result<Target> target_of(const std::string& option, const std::string& name) {
  Target t;
  std::string pointer;
  for (const auto& n : named_params()) {
    if (name == n.name) {
      pointer = n.pointer;
      t.scale = n.scale;
    }
  }
  if (pointer.empty()) {
    if (name.empty() || name[0] != '/') {
      return bad_param(option, name,
                       "unknown parameter; use one of " + known_names() +
                           ", or a JSON pointer into the scenario or profile such as "
                           "/device/flash_read_ns or /workload/turns");
    }
    pointer = name;
  }
  try {
    t.pointer = Json::json_pointer(pointer);
  } catch (const Json::exception& e) {
    return bad_param(option, name, "not a JSON pointer (" + std::string(e.what()) + ")");
  }
  // The first token decides between the profile's sections and the scenario.
  const auto slash = pointer.find('/', 1);
  const std::string head = pointer.substr(1, slash == std::string::npos ? slash : slash - 1);
  if (head == "seed" || head == "profile") {
    return bad_param(
        option, name,
        "/" + head + " is set by " +
            (head == "seed" ? std::string("--seed and --seeds") : std::string("--configs")));
  }
  // What makes a configuration itself: a value here would run under another's label.
  static const std::set<std::string> kConfigurationFields = {
      "/client", "/client/read_hints", "/client/write_hints", "/client/read_promotes",
      "/client/gate_reads"};
  if (kConfigurationFields.count(pointer)) {
    return bad_param(option, name,
                     pointer +
                         " is what a configuration is made of (--configs: all_dram, hints, gated, "
                         "waits_off, no_hints); choose configurations instead. /client/"
                         "write_wait_ms and /client/read_hint_on_arrival may be swept");
  }
  // The parsers skip `_`-keys (notes such as "_sources"): a value there would change nothing.
  if (pointer.find("/_") != std::string::npos) {
    return bad_param(option, name,
                     "a field starting with '_' is a note the model does not read; name a field "
                     "it reads, e.g. /engine/prefill_per_token_us or /workload/turns");
  }
  t.profile = is_profile_section(head);
  if (t.profile && std::count(pointer.begin(), pointer.end(), '/') != 2) {
    return bad_param(option, name,
                     "profile parameters are /<section>/<field>, e.g. /device/flash_read_ns");
  }
  return t;
}

Json scaled(const Json& v, double scale) {
  if (scale == 1 || !v.is_number()) return v;
  const double s = v.get<double>() * scale;
  if (std::floor(s) == s && std::abs(s) < 9e15) {
    return s >= 0 ? Json(static_cast<std::uint64_t>(s)) : Json(static_cast<std::int64_t>(s));
  }
  return Json(s);
}

// The reference tokens of a pointer, unescaped: "/a/b~1c" -> {"a", "b/c"}.
std::vector<std::string> tokens_of(Json::json_pointer pointer) {
  std::vector<std::string> out;
  for (; !pointer.empty(); pointer.pop_back()) out.push_back(pointer.back());
  std::reverse(out.begin(), out.end());
  return out;
}

// An array index as JSON pointer writes it: decimal digits, no leading zero.
std::optional<std::uint64_t> array_index(const std::string& token) {
  if (token.empty() || token.size() > 19 || (token.size() > 1 && token[0] == '0')) {
    return std::nullopt;
  }
  std::uint64_t v = 0;
  for (char c : token) {
    if (c < '0' || c > '9') return std::nullopt;
    v = v * 10 + static_cast<std::uint64_t>(c - '0');
  }
  return v;
}

// New objects a parameter may create: /expect/counters/<name>/max needs three
// on a scenario without `expect`; more is a mistake (or a way to exhaust memory).
constexpr int kMaxNewLevels = 3;

// The value `pointer` names in `doc`, made if missing. Missing levels become
// objects (at most kMaxNewLevels); an array index must name an existing entry:
// nlohmann's operator[] would grow the array to the index (gigabytes for
// /faults/400000000/at_s).
Result<Json*> slot_of(Json& doc, const Json::json_pointer& pointer, const SweepParam& param,
                      const char* document) {
  Json* at = &doc;
  Json::json_pointer here;  // the levels walked so far, for errors
  int created = 0;
  for (const std::string& token : tokens_of(pointer)) {
    if (at->is_null()) {
      if (array_index(token) || token == "-") {
        return bad_param(param.option, param.name,
                         here.to_string() + " is not an array in the " + document +
                             " (it is missing or null); a parameter changes an entry of an "
                             "existing array, it cannot make one: add the array to the " +
                             document + " file");
      }
      if (++created > kMaxNewLevels) {
        return bad_param(param.option, param.name,
                         "would create " + std::to_string(created) + "+ new levels under " +
                             here.to_string() + " in the " + document +
                             "; a parameter sets one field (at most " +
                             std::to_string(kMaxNewLevels) +
                             " new levels, e.g. /expect/counters/device.hits/max); check the "
                             "pointer");
      }
      *at = Json::object();
    }
    if (at->is_object()) {
      at = &(*at)[token];
    } else if (at->is_array()) {
      const auto index = array_index(token);
      if (!index || *index >= at->size()) {
        const std::string size = std::to_string(at->size());
        return bad_param(param.option, param.name,
                         "'" + token + "' is not an entry of " + here.to_string() + " (" + size +
                             (at->size() == 1 ? " entry" : " entries") +
                             "); a parameter changes an existing entry (" +
                             (at->empty() ? std::string("it has none")
                                          : "index 0 to " + std::to_string(at->size() - 1)) +
                             "), it cannot add one: add it to the " + document + " file");
      }
      at = &(*at)[static_cast<std::size_t>(*index)];
    } else {
      return bad_param(param.option, param.name,
                       here.to_string() + " is a " + at->type_name() + " in the " + document +
                           ", not an object or array; the pointer cannot go below it");
    }
    here /= token;
  }
  return at;
}

// Sets one parameter in a scenario or profile document.
Status apply(const SweepParam& param, const Json& value, Json& scenario, Json& profile,
             bool profile_only = false) {
  auto t = target_of(param.option, param.name);
  if (!t.ok()) return t.status();
  if (profile_only && !t->profile) {
    return bad_param(param.option, param.name,
                     "only profile fields can be set here: /device/..., /nic/..., /engine/... or "
                     "/control_link/... (or a named one of them, e.g. flash_read_ns)");
  }
  const Json v = scaled(value, t->scale);
  auto slot = t->profile ? slot_of(profile, t->pointer, param, "profile")
                         : slot_of(scenario, t->pointer, param, "scenario");
  if (!slot.ok()) return slot.status();
  Json& field = **slot;
  if (!t->profile) {
    field = v;
  } else if (field.is_object() && field.contains("value")) {
    field["value"] = v;
  } else {
    field = {{"value", v}, {"source", "rcxl-sim sweep"}};
  }
  return {};
}

// One (point, configuration): what its runs need, validated before any run.
struct Prepared {
  Scenario scenario;
  Profile profile;
};

std::string fmt(const char* f, double v) {
  char buf[64];
  std::snprintf(buf, sizeof buf, f, v);
  return buf;
}

std::string point_text(const std::vector<SweepParam>& params, const SweepPoint& p) {
  std::string out;
  for (std::size_t i = 0; i < params.size(); ++i) {
    out += (i ? " " : "") + params[i].name + "=" + params[i].texts[p.index[i]];
  }
  return out;
}

std::string csv_field(const std::string& s) {
  if (s.find_first_of(",\"\n") == std::string::npos) return s;
  std::string out = "\"";
  for (char c : s) out += c == '"' ? std::string("\"\"") : std::string(1, c);
  return out + "\"";
}

std::uint64_t counter(const Json& counters, const char* pointer) {
  const Json::json_pointer p(pointer);
  if (!counters.contains(p) || !counters[p].is_number()) return 0;
  return counters[p].get<std::uint64_t>();
}

double quantile_or_zero(const std::vector<double>& xs, double q) {
  return xs.empty() ? 0 : quantile(xs, q);
}

// A statistic of no requests is no number: blank in the CSV, n/a elsewhere.
std::string ms_of(const std::vector<double>& xs, double v) {
  return xs.empty() ? std::string() : fmt("%.3f", v);
}

// The per-run columns after the parameters, configuration and seed.
struct Column {
  const char* name;
  std::function<std::string(const RunSummary&)> value;
};

const std::vector<Column>& columns() {
  auto count = [](const char* pointer) {
    return [pointer](const RunSummary& r) { return std::to_string(counter(r.counters, pointer)); };
  };
  static const std::vector<Column> kColumns = {
      {"ok", [](const RunSummary& r) { return std::string(r.ok() ? "1" : "0"); }},
      {"reuse_turns", [](const RunSummary& r) { return std::to_string(r.ttfts.size()); }},
      {"loads", [](const RunSummary& r) { return std::to_string(r.loads.size()); }},
      {"ttft_mean_ms", [](const RunSummary& r) { return ms_of(r.ttfts, r.ttft_ms); }},
      {"ttft_p50_ms",
       [](const RunSummary& r) { return ms_of(r.ttfts, quantile_or_zero(r.ttfts, 0.5)); }},
      {"ttft_p99_ms",
       [](const RunSummary& r) { return ms_of(r.ttfts, quantile_or_zero(r.ttfts, 0.99)); }},
      {"load_mean_ms", [](const RunSummary& r) { return ms_of(r.loads, r.load_ms); }},
      {"load_p50_ms",
       [](const RunSummary& r) { return ms_of(r.loads, quantile_or_zero(r.loads, 0.5)); }},
      {"load_p99_ms",
       [](const RunSummary& r) { return ms_of(r.loads, quantile_or_zero(r.loads, 0.99)); }},
      {"virtual_s", [](const RunSummary& r) { return fmt("%.6f", r.virtual_s); }},
      {"device_hits", count("/device/hits")},
      {"device_misses", count("/device/misses")},
      {"demand_read_fills", count("/device/demand_read_fills")},
      {"evictions", count("/device/evictions")},
      {"hinted_bytes_prepared", count("/device/hinted_bytes_prepared")},
      {"reads_posted", count("/worker/reads_posted")},
      {"hints_sent", count("/scheduler/hints_sent")},
  };
  return kColumns;
}

// A byte-size parameter's unit on a chart: the largest its values reach
// (a 64 KiB segment size read 0.0001 GiB).
struct ByteUnit {
  double bytes;
  const char* name;
};

std::optional<ByteUnit> byte_unit(const SweepParam& param) {
  if (!param.name.ends_with("_bytes")) return std::nullopt;
  double largest = 0;
  for (const Json& v : param.values) {
    if (v.is_number()) largest = std::max(largest, v.get<double>());
  }
  for (const ByteUnit unit : {ByteUnit{1024.0 * 1024 * 1024, "GiB"}, ByteUnit{1024.0 * 1024, "MiB"},
                              ByteUnit{1024.0, "KiB"}}) {
    if (largest >= unit.bytes) return unit;
  }
  return ByteUnit{1, "bytes"};
}

// A parameter's value on a chart's x axis; byte sizes in their unit.
double axis_value(const SweepParam& param, std::size_t i) {
  const Json& v = param.values[i];
  const double x = v.is_boolean() ? (v.get<bool>() ? 1 : 0) : v.get<double>();
  const auto unit = byte_unit(param);
  return unit ? x / unit->bytes : x;
}

std::string axis_label(const SweepParam& param) {
  const auto unit = byte_unit(param);
  return unit ? param.name + " (" + unit->name + ")" : param.name;
}

struct Metric {
  const char* key;
  const char* title;
  const char* unit;
  std::function<double(const RunSummary&)> value;
  // The requests it is over: a run with none has no value (not 0 ms).
  std::function<const std::vector<double>&(const RunSummary&)> over;
};

const std::vector<Metric>& metrics() {
  static const std::vector<Metric> kMetrics = {
      {"ttft_mean_ms", "Mean reuse-turn TTFT", "TTFT (ms)",
       [](const RunSummary& r) { return r.ttft_ms; },
       [](const RunSummary& r) -> const std::vector<double>& { return r.ttfts; }},
      {"ttft_p99_ms", "p99 reuse-turn TTFT", "TTFT p99 (ms)",
       [](const RunSummary& r) { return quantile_or_zero(r.ttfts, 0.99); },
       [](const RunSummary& r) -> const std::vector<double>& { return r.ttfts; }},
      {"load_mean_ms", "Mean KV load time", "load time (ms)",
       [](const RunSummary& r) { return r.load_ms; },
       [](const RunSummary& r) -> const std::vector<double>& { return r.loads; }},
  };
  return kMetrics;
}

bool spans_decades(const std::vector<double>& xs) {
  if (xs.empty()) return false;
  const auto [lo, hi] = std::minmax_element(xs.begin(), xs.end());
  return *lo > 0 && *hi / *lo >= 20;
}

// `name` in --out, spelled as prepare_out_dir's checks spell it.
std::string out_path(const SweepOptions& options, const std::string& name) {
  return (std::filesystem::path(options.out_dir) / name).string();
}

// The files a sweep writes into `out_dir`.
std::vector<std::string> output_names() {
  std::vector<std::string> out = {"sweep.csv", "sweep.json"};
  for (const auto& m : metrics()) out.push_back(std::string("sweep_") + m.key + ".svg");
  return out;
}

// The same file: one path, or two names (links, "..") for one inode.
bool same_file(const std::filesystem::path& a, const std::filesystem::path& b) {
  std::error_code ec;
  if (std::filesystem::equivalent(a, b, ec) && !ec) return true;
  const auto ca = std::filesystem::weakly_canonical(std::filesystem::absolute(a, ec), ec);
  if (ec) return false;
  const auto cb = std::filesystem::weakly_canonical(std::filesystem::absolute(b, ec), ec);
  return !ec && ca == cb;
}

// The sweep must not overwrite the scenario it reads (then print a
// `reproduce:` line pointing at its own output).
Status check_out_spares_input(const SweepOptions& options) {
  if (!options.write_files || options.scenario_path.empty()) return {};
  for (const auto& name : output_names()) {
    const std::filesystem::path out = std::filesystem::path(options.out_dir) / name;
    if (same_file(out, options.scenario_path)) {
      return Error(ErrorCode::kBadRequest, "--out " + options.out_dir + ": the sweep writes " +
                                               out.string() + ", which is the --scenario file " +
                                               options.scenario_path +
                                               "; choose another --out directory");
    }
  }
  return {};
}

// Refuses a value listed twice in one parameter (3000,3000 or 4G,4294967296):
// every point with it would run twice under two labels.
Status check_distinct_values(const SweepParam& param) {
  if (param.values.empty())
    return bad_param(param.option, param.name, "no values; give one or more");
  std::map<Json, std::size_t> seen;  // value -> its first index; numbers compare by value
  for (std::size_t i = 0; i < param.values.size(); ++i) {
    // A switch takes 1/0 and true/false alike: compare them as one.
    const Json& v = param.values[i];
    const Json key = v.is_boolean() ? Json(v.get<bool>() ? 1 : 0) : v;
    const auto [it, fresh] = seen.emplace(key, i);
    if (fresh) continue;
    const std::string& first = param.texts[it->second];
    const std::string& again = param.texts[i];
    const std::string what = first == again ? "'" + again + "' is given twice"
                                            : "'" + again + "' is the same value as '" + first +
                                                  "' (" + param.values[i].dump() + ")";
    return bad_param(param.option, param.name,
                     what + "; each value would run the same points twice, so list it once");
  }
  return {};
}

// The most runs a sweep takes: more is a mistake (or hours of CPU).
constexpr std::uint64_t kMaxRuns = 10000;

// Refuses a grid of more than kMaxRuns runs from the axis sizes alone, before
// expand_grid: three axes of 1000 values would allocate 10^9 points first.
Status check_grid_size(const std::vector<SweepParam>& params, std::size_t configs, int seeds) {
  std::uint64_t runs = 1;
  bool overflow = false;
  auto times = [&](std::uint64_t n) {
    if (n != 0 && runs > std::numeric_limits<std::uint64_t>::max() / n) overflow = true;
    if (!overflow) runs *= n;
  };
  std::string factors;
  for (const auto& p : params) {
    times(p.values.size());
    factors += (factors.empty() ? "" : " x ") + std::to_string(p.values.size());
  }
  times(configs);
  times(static_cast<std::uint64_t>(seeds));
  if (!overflow && runs <= kMaxRuns) return {};
  const auto count = [](std::uint64_t n, const std::string& what) {
    return std::to_string(n) + " " + what + (n == 1 ? "" : "s");
  };
  const std::string total =
      overflow ? "more than " + std::to_string(std::numeric_limits<std::uint64_t>::max())
               : std::to_string(runs);
  return Error(ErrorCode::kBadRequest,
               "the grid has " + factors + " points x " + count(configs, "configuration") + " x " +
                   count(static_cast<std::uint64_t>(seeds), "seed") + " = " + total +
                   " runs; keep it at most " + std::to_string(kMaxRuns) +
                   " (fewer values, configurations or seeds)");
}

}  // namespace

Status check_seed_range(std::uint64_t first_seed, int count, const std::string& option) {
  const auto extra = static_cast<std::uint64_t>(std::max(1, count) - 1);
  const std::uint64_t last_ok = std::numeric_limits<std::uint64_t>::max() - extra;
  if (first_seed <= last_ok) return {};
  return Error(ErrorCode::kBadRequest,
               "--seed " + std::to_string(first_seed) + " with " + option + " " +
                   std::to_string(count) + ": the seeds would pass " +
                   std::to_string(std::numeric_limits<std::uint64_t>::max()) +
                   " and wrap to 0; give a --seed of at most " + std::to_string(last_ok));
}

Status check_profile_setting(const std::string& option, const std::string& name) {
  const std::string what =
      "only profile fields can be set here: /device/..., /nic/..., /engine/... or "
      "/control_link/... (or a named one of them, e.g. flash_read_ns)";
  auto t = target_of(option, name);
  // An unknown name: say what this option takes, not every sweep parameter.
  if (!t.ok() && !name.empty() && name[0] != '/') {
    return bad_param(option, name, "unknown parameter; " + what);
  }
  if (!t.ok()) return t.status();
  if (!t->profile) return bad_param(option, name, what);
  return {};
}

// A scaled name's value is refused in the field's unit: say how they relate.
std::string scaled_unit_note(const std::vector<SweepParam>& params, const std::string& message) {
  std::string note;
  for (const auto& p : params) {
    auto t = target_of(p.option, p.name);
    if (t.ok() && t->scale != 1 && message.find(t->pointer.to_string()) != std::string::npos) {
      note = " (" + p.name + " sets " + t->pointer.to_string() + " x " + fmt("%g", t->scale) + ")";
    }
  }
  return note;
}

Status apply_sweep_value(const SweepParam& param, std::size_t index, Json& scenario, Json& profile,
                         bool profile_only) {
  if (index >= param.values.size())
    return bad_param(param.option, param.name, "has no value " + std::to_string(index));
  return apply(param, param.values[index], scenario, profile, profile_only);
}

Status check_distinct_targets(const std::vector<SweepParam>& params,
                              const std::vector<OptionTarget>& options) {
  struct Setter {
    std::string who;      // "--param dram_cache_bytes", "--conversations"
    std::string pointer;  // "/device/dram_cache_bytes", normalized
  };
  std::vector<Setter> setters;
  for (const auto& o : options) setters.push_back({o.option, o.pointer});
  for (const auto& p : params) {
    auto t = target_of(p.option, p.name);
    if (!t.ok()) return t.status();
    setters.push_back({p.option + " " + p.name, t->pointer.to_string()});
  }
  // `inner` is `outer` or below it: /workload/turns is inside /workload.
  auto inside = [](const std::string& inner, const std::string& outer) {
    return inner == outer ||
           (inner.size() > outer.size() && inner.starts_with(outer) && inner[outer.size()] == '/');
  };
  for (std::size_t i = 0; i < setters.size(); ++i) {
    for (std::size_t k = 0; k < i; ++k) {
      const Setter& a = setters[k];
      const Setter& b = setters[i];
      if (!inside(a.pointer, b.pointer) && !inside(b.pointer, a.pointer)) continue;
      const std::string how =
          a.pointer == b.pointer
              ? "sets the same field as " + a.who + " (" + a.pointer + ")"
              : "overlaps " + a.who + " (" + b.pointer + " and " + a.pointer + ")";
      return Error(ErrorCode::kBadRequest,
                   b.who + ": " + how + "; only one value could win, so give one of them");
    }
  }
  return {};
}

std::vector<std::pair<std::string, std::string>> sweep_param_help() {
  std::vector<std::pair<std::string, std::string>> out;
  for (const auto& n : named_params()) out.emplace_back(n.name, n.help);
  return out;
}

Result<SweepParam> parse_sweep_param(const std::string& spec, const std::string& option) {
  const auto eq = spec.find('=');
  if (eq == std::string::npos || eq == 0) {
    return bad_param(option, spec, "expected NAME=V1,V2,... (e.g. dram_cache_bytes=4G,8G,16G)");
  }
  SweepParam p;
  p.option = option;
  p.name = spec.substr(0, eq);
  if (auto t = target_of(option, p.name); !t.ok()) return t.status();
  std::string rest = spec.substr(eq + 1);
  if (rest.empty()) return bad_param(option, p.name, "no values; expected NAME=V1,V2,...");
  std::size_t start = 0;
  while (true) {
    const auto comma = rest.find(',', start);
    const std::string text = rest.substr(start, comma == std::string::npos ? comma : comma - start);
    auto v = parse_value(option, p.name, text);
    if (!v.ok()) return v.status();
    p.texts.push_back(text);
    p.values.push_back(*v);
    if (comma == std::string::npos) break;
    start = comma + 1;
  }
  if (auto s = check_distinct_values(p); !s.ok()) return s;
  return p;
}

std::vector<SweepPoint> expand_grid(const std::vector<SweepParam>& params) {
  std::vector<SweepPoint> out{SweepPoint{}};
  for (const auto& param : params) {
    std::vector<SweepPoint> next;
    for (const auto& p : out) {
      for (std::size_t i = 0; i < param.values.size(); ++i) {
        SweepPoint q = p;
        q.index.push_back(i);
        next.push_back(std::move(q));
      }
    }
    out = std::move(next);
  }
  return out;
}

Result<SweepReport> sweep(const SweepOptions& options) {
  SweepReport report;
  report.params = options.params;
  if (report.params.empty()) {
    auto p = parse_sweep_param("dram_cache_bytes=4G,8G,16G,32G");
    if (!p.ok()) return p.status();
    report.params.push_back(*p);
  }
  for (std::size_t i = 0; i < report.params.size(); ++i) {
    if (auto s = check_distinct_values(report.params[i]); !s.ok()) return s;
    for (std::size_t k = 0; k < i; ++k) {
      if (report.params[k].name == report.params[i].name) {
        return bad_param("--param", report.params[i].name,
                         "given twice; list all its values in one --param");
      }
    }
  }
  // --conversations and --turns write the workload too: a parameter there would lose.
  std::vector<OptionTarget> fixed;
  if (options.conversations) fixed.push_back({"--conversations", "/workload/conversations"});
  if (options.turns) fixed.push_back({"--turns", "/workload/turns"});
  if (auto s = check_distinct_targets(report.params, fixed); !s.ok()) return s;
  if (options.configs.empty()) return Error(ErrorCode::kBadRequest, "--configs: name at least one");
  std::vector<Configuration> cfgs;
  for (const auto& name : options.configs) {
    auto c = find_configuration(name);
    if (!c.ok()) return Error(ErrorCode::kBadRequest, "--configs: " + c.status().message());
    for (const auto& before : cfgs) {
      if (before.name == c->name) {
        return Error(ErrorCode::kBadRequest, "--configs: '" + name +
                                                 "' is given twice (each point would run it "
                                                 "twice); name each configuration once");
      }
    }
    cfgs.push_back(*c);
  }
  const int seeds = std::max(1, options.seeds);
  if (auto s = check_seed_range(options.first_seed, seeds, "--seeds"); !s.ok()) return s;
  if (auto s = check_out_spares_input(options); !s.ok()) return s;
  if (auto s = check_grid_size(report.params, cfgs.size(), seeds); !s.ok()) return s;
  report.points = expand_grid(report.params);
  const std::size_t runs = report.points.size() * cfgs.size() * static_cast<std::size_t>(seeds);

  // The base scenario: the user's file or the seed's serving workload.
  Json base;
  std::string origin = options.scenario_path;
  if (options.scenario) {
    base = *options.scenario;
    if (origin.empty()) origin = "(scenario)";
  } else {
    auto text = embedded_file("replays/seed_serving.json");
    if (!text) return Error(ErrorCode::kNotFound, "built-in replays/seed_serving.json is missing");
    base = Json::parse(*text);
    origin = "replays/seed_serving.json (built in)";
  }
  if (!base.is_object()) return Error(ErrorCode::kBadRequest, origin + ": expected a JSON object");
  // The base as `rcxl-sim run` reads it, before anything is applied to it.
  if (auto sc = parse_scenario(base, origin); !sc.ok()) {
    return Error(ErrorCode::kBadRequest, sc.status().message());
  } else if (!sc->topology.memory_profiles.empty()) {
    // A configuration is a profile (all_dram, cxl_ssd_default) for every node.
    return Error(ErrorCode::kBadRequest,
                 origin +
                     ": /topology/memory_profiles: a sweep gives every memory node its "
                     "configuration's profile; drop memory_profiles, or compare mixed nodes "
                     "with rcxl-sim run");
  } else if (sc->workload.kind == WorkloadKind::kStore) {
    // A sweep compares TTFT and load time, which a store experiment has none of.
    return Error(ErrorCode::kBadRequest,
                 origin +
                     ": /workload/kind: a sweep compares serving runs (TTFT, KV load time), and "
                     "a store workload serves nothing; run it with rcxl-sim run, or its "
                     "bandwidth with rcxl-sim reproduce (P4)");
  }
  if (options.conversations) base["workload"]["conversations"] = *options.conversations;
  if (options.turns) base["workload"]["turns"] = *options.turns;
  if (options.conversations || options.turns) {
    // A fault or expectation the smaller workload can no longer meet is the options' doing.
    if (auto sc = parse_scenario(base, origin); !sc.ok()) {
      std::string given;
      if (options.conversations)
        given += "--conversations " + std::to_string(*options.conversations);
      if (options.turns) {
        given +=
            (given.empty() ? "" : " ") + std::string("--turns ") + std::to_string(*options.turns);
      }
      return Error(ErrorCode::kBadRequest, given + ": " + sc.status().message());
    }
  }
  std::map<std::string, Json> profile_docs;
  std::map<std::string, std::string> profile_origins;  // --profiles DIR's file, or the built-in
  for (const auto& c : cfgs) {
    if (profile_docs.count(c.profile)) continue;
    auto doc = load_profile_document(options.profiles_dir, c.profile, &profile_origins[c.profile]);
    if (!doc.ok()) return doc.status();
    profile_docs.emplace(c.profile, std::move(doc).value());
  }

  // Scenario + profile of one point under one configuration; `only` limits
  // the parameters applied (to name the one at fault).
  // `only`: apply that parameter alone; `skip`: all but that one.
  auto prepare = [&](const SweepPoint& point, const Configuration& cfg,
                     std::optional<std::size_t> only,
                     std::optional<std::size_t> skip = std::nullopt) -> Result<Prepared> {
    Json sc = base;
    sc["client"] = client_json(cfg.client);
    sc["profile"] = cfg.profile;
    Json prof = profile_docs.at(cfg.profile);
    std::string what;
    for (std::size_t i = 0; i < report.params.size(); ++i) {
      if ((only && *only != i) || (skip && *skip == i)) continue;
      const auto& param = report.params[i];
      if (auto s = apply(param, param.values[point.index[i]], sc, prof); !s.ok()) return s;
      what += (what.empty() ? "" : " ") + param.name + "=" + param.texts[point.index[i]];
    }
    const std::string at = what.empty() ? "" : "--param " + what + ": ";
    auto scenario = parse_scenario(sc, origin);
    if (!scenario.ok()) return Error(ErrorCode::kBadRequest, at + scenario.status().message());
    auto profile = profile_from_json(prof, profile_origins.at(cfg.profile));
    if (!profile.ok()) {
      std::vector<SweepParam> applied;
      for (std::size_t i = 0; i < report.params.size(); ++i) {
        if ((only && *only != i) || (skip && *skip == i)) continue;
        applied.push_back(report.params[i]);
      }
      return Error(
          ErrorCode::kBadRequest,
          at + profile.status().message() + scaled_unit_note(applied, profile.status().message()));
    }
    // The same cross-check `rcxl-sim run` makes, before any run.
    if (auto s = check_pools_hold_a_region(*scenario, *profile); !s.ok()) {
      return Error(ErrorCode::kBadRequest, at + origin + ": " + s.message());
    }
    scenario->name = cfg.name;
    return Prepared{std::move(scenario).value(), std::move(profile).value()};
  };
  // Every full point is checked before any run. When one fails, the error
  // names its cause: the scenario alone (blaming no parameter), else the one
  // value without which the point is valid (its error alone if it has one),
  // else the whole point. Values are never refused alone: [lo, hi] set by two
  // parameters, or a fault on a store only a larger workload has, are valid
  // only together.
  auto cause_of = [&](const SweepPoint& point, const Configuration& cfg,
                      const Status& whole) -> Status {
    if (auto r = prepare(point, cfg, report.params.size()); !r.ok()) return r.status();
    std::optional<std::size_t> culprit;
    for (std::size_t i = 0; i < report.params.size(); ++i) {
      if (!prepare(point, cfg, std::nullopt, i).ok()) continue;
      if (culprit) return whole;  // two values each make it valid when left out
      culprit = i;
    }
    if (!culprit) return whole;
    if (auto r = prepare(point, cfg, *culprit); !r.ok()) return r.status();
    return whole;
  };
  std::vector<Prepared> prepared;  // point-major, then configuration
  for (const auto& point : report.points) {
    for (const auto& cfg : cfgs) {
      auto r = prepare(point, cfg, std::nullopt);
      if (!r.ok()) {
        Status cause = cause_of(point, cfg, r.status());
        // A /client value one configuration cannot take: name it, not the scenario's fix.
        std::string takes;
        for (const auto& other : cfgs) {
          if (prepare(point, other, std::nullopt).ok())
            takes += (takes.empty() ? "" : ",") + other.name;
        }
        if (takes.empty()) return cause;
        return Error(ErrorCode::kBadRequest, cause.message() + "; configuration " + cfg.name +
                                                 " cannot take this point, " + takes +
                                                 " can: leave " + cfg.name + " out of --configs");
      }
      prepared.push_back(std::move(r).value());
    }
  }
  if (options.write_files) {
    if (auto s = prepare_out_dir(options.out_dir, output_names()); !s.ok()) return s;
  }

  // Runs: point-major, then configuration, then seed.
  report.runs.resize(runs);
  for (std::size_t j = 0; j < runs; ++j) {
    SweepRun& run = report.runs[j];
    run.point = j / (cfgs.size() * static_cast<std::size_t>(seeds));
    run.config = cfgs[(j / static_cast<std::size_t>(seeds)) % cfgs.size()].name;
    run.seed = options.first_seed + j % static_cast<std::size_t>(seeds);
  }
  // A run that goes on for long says how far it is, at most every
  // kHeartbeat of silence (a sweep point can run for hours).
  constexpr auto kHeartbeat = std::chrono::seconds(10);
  std::mutex progress_mu;
  auto last_line = std::chrono::steady_clock::now();
  auto do_run = [&](std::size_t j) {
    const Prepared& p = prepared[j / static_cast<std::size_t>(seeds)];
    Scenario sc = p.scenario;
    sc.seed = report.runs[j].seed;
    RunOptions run_options;
    if (options.progress) {
      const SweepRun& r = report.runs[j];
      const std::string which = point_text(report.params, report.points[r.point]) + " " + r.config +
                                " seed " + std::to_string(r.seed);
      run_options.progress = [&, which](const std::string& line) {
        std::lock_guard lock(progress_mu);
        const auto now = std::chrono::steady_clock::now();
        if (now - last_line < kHeartbeat) return;
        last_line = now;
        options.progress("  running " + which + ": " + line);
      };
    }
    report.runs[j].summary = summarize(run_scenario(sc, p.profile, run_options));
  };
  auto done = [&](std::size_t j, std::size_t finished) {
    if (!options.progress) return;
    // One line at a time with the heartbeats.
    std::lock_guard lock(progress_mu);
    last_line = std::chrono::steady_clock::now();
    const SweepRun& r = report.runs[j];
    options.progress("[" + std::to_string(finished) + "/" + std::to_string(runs) + "] " +
                     point_text(report.params, report.points[r.point]) + " " + r.config + " seed " +
                     std::to_string(r.seed) + ": " +
                     (r.summary.ok()
                          ? "reuse TTFT " + mean_ms_text(r.summary.ttfts, r.summary.ttft_ms) +
                                ", load " + mean_ms_text(r.summary.loads, r.summary.load_ms)
                          : "FAILED: " + r.summary.failure()) +
                     " (" + fmt("%.1f", r.summary.wall_s) + " s)");
  };
  // The first run takes seconds: say what is coming before it ends.
  if (options.progress) {
    options.progress("[0/" + std::to_string(runs) + "] " + std::to_string(runs) + " runs on " +
                     std::to_string(options.threads) + " thread(s); a line as each ends");
  }
  run_parallel(runs, options.threads, do_run, done);

  // Failures, each with the one line that reproduces it.
  for (const SweepRun& r : report.runs) {
    if (r.summary.ok()) continue;
    std::string cmd = "rcxl-sim sweep";
    for (std::size_t i = 0; i < report.params.size(); ++i) {
      cmd += " --param " + shell_word(report.params[i].name + "=" +
                                      report.params[i].texts[report.points[r.point].index[i]]);
    }
    cmd += " --configs " + r.config + " --seed " + std::to_string(r.seed) + " --seeds 1";
    if (!options.scenario_path.empty()) cmd += " --scenario " + shell_path(options.scenario_path);
    if (options.conversations) cmd += " --conversations " + std::to_string(*options.conversations);
    if (options.turns) cmd += " --turns " + std::to_string(*options.turns);
    if (!options.profiles_dir.empty()) cmd += " --profiles " + shell_path(options.profiles_dir);
    // Its own directory: the rerun must not overwrite this sweep's files.
    if (options.write_files) {
      std::string dir = options.out_dir;
      while (dir.size() > 1 && dir.back() == '/') dir.pop_back();  // `out/` -> `out-rerun`
      cmd += " --out " + shell_path(dir + "-rerun");
    }
    report.failures.push_back(point_text(report.params, report.points[r.point]) + " " + r.config +
                              " seed " + std::to_string(r.seed) + ": " + r.summary.failure() +
                              "\n  reproduce: " + cmd);
  }

  // Every metric but the device's is over reuse turns: a sweep whose passing
  // runs served none printed n/a everywhere and passed (new-user review,
  // session 32). Runs that failed say why themselves.
  const bool passed = std::any_of(report.runs.begin(), report.runs.end(),
                                  [](const SweepRun& r) { return r.summary.ok(); });
  const bool measured = std::any_of(report.runs.begin(), report.runs.end(), [](const SweepRun& r) {
    return r.summary.ok() && !r.summary.ttfts.empty();
  });
  if (passed && !measured) {
    report.failures.push_back(
        options.turns == 1
            ? "no run served a reuse turn: --turns 1 has none (turns 2.. of a conversation "
              "load KV), so every TTFT and load metric is n/a; give --turns 2 or more"
            : "no passing run answered a reuse turn, so every TTFT and load metric is n/a; "
              "give more turns or a longer run");
  }

  // CSV and JSON rows: one per run.
  std::string& csv = report.csv;
  Json rows = Json::array();
  for (const auto& p : report.params) csv += csv_field(p.name) + ",";
  csv += "config,seed";
  for (const auto& c : columns()) csv += std::string(",") + c.name;
  csv += ",trace_hash\n";  // each run's fingerprint: the same on any --threads
  for (const SweepRun& r : report.runs) {
    Json row = Json::object();
    for (std::size_t i = 0; i < report.params.size(); ++i) {
      const Json& v = report.params[i].values[report.points[r.point].index[i]];
      csv += csv_field(v.dump()) + ",";
      row[report.params[i].name] = v;
    }
    csv += r.config + "," + std::to_string(r.seed);
    row["config"] = r.config;
    row["seed"] = r.seed;
    for (const auto& c : columns()) {
      const std::string v = c.value(r.summary);
      csv += "," + v;
      row[c.name] = v.empty() ? Json(nullptr) : Json::parse(v);  // blank: no requests
    }
    csv += "," + r.summary.trace_hash + "\n";
    row["trace_hash"] = r.summary.trace_hash;
    rows.push_back(row);
  }

  // Per (point, configuration): mean over seeds with a 95% t-interval.
  struct Cell {
    std::size_t point;
    std::size_t config;
    std::vector<Interval> metric;  // one per metrics()
    std::size_t ok_runs = 0;
  };
  std::vector<Cell> cells;
  for (std::size_t p = 0; p < report.points.size(); ++p) {
    for (std::size_t c = 0; c < cfgs.size(); ++c) {
      Cell cell{p, c, {}, 0};
      auto run_of = [&](int s) -> const RunSummary& {
        return report
            .runs[(p * cfgs.size() + c) * static_cast<std::size_t>(seeds) +
                  static_cast<std::size_t>(s)]
            .summary;
      };
      for (int s = 0; s < seeds; ++s) cell.ok_runs += run_of(s).ok();
      for (const auto& m : metrics()) {
        std::vector<double> xs;  // ok runs that had requests to measure
        for (int s = 0; s < seeds; ++s) {
          if (run_of(s).ok() && !m.over(run_of(s)).empty()) xs.push_back(m.value(run_of(s)));
        }
        cell.metric.push_back(t_interval_95(xs));
      }
      cells.push_back(std::move(cell));
    }
  }

  Json summary = Json::array();
  std::string& table = report.table;
  auto pad = [](std::string s, std::size_t w) {
    if (s.size() < w) s.append(w - s.size(), ' ');
    return s + " ";
  };
  std::vector<std::size_t> widths;
  for (const auto& p : report.params) {
    std::size_t w = p.name.size();
    for (const auto& t : p.texts) w = std::max(w, t.size());
    widths.push_back(w);
    table += pad(p.name, w);
  }
  table += pad("config", 10);
  for (const auto& m : metrics()) table += pad(m.key, seeds > 1 ? 28 : 14);
  table += "\n";
  for (const Cell& cell : cells) {
    Json s = Json::object();
    Json point = Json::object();
    for (std::size_t i = 0; i < report.params.size(); ++i) {
      const std::string& text = report.params[i].texts[report.points[cell.point].index[i]];
      table += pad(text, widths[i]);
      point[report.params[i].name] = report.params[i].values[report.points[cell.point].index[i]];
    }
    s["point"] = point;
    s["config"] = cfgs[cell.config].name;
    s["ok_runs"] = cell.ok_runs;
    table += pad(cfgs[cell.config].name, 10);
    for (std::size_t m = 0; m < metrics().size(); ++m) {
      const Interval& ci = cell.metric[m];
      std::string text = cell.ok_runs == 0 ? "FAILED" : ci.n == 0 ? "n/a" : fmt("%.2f", ci.mean);
      if (ci.has_interval()) {
        text += " [" + fmt("%.2f", ci.low) + ", " + fmt("%.2f", ci.high) + "]";
      }
      table += pad(text, seeds > 1 ? 28 : 14);
      // One run (one seed, or the others failed): a mean and no interval.
      // n: the runs the mean is over (ok runs that had requests to measure).
      s[metrics()[m].key] = {{"mean", ci.n == 0 ? Json(nullptr) : Json(ci.mean)},
                             {"n", ci.n},
                             {"ci", ci.has_interval() ? Json{ci.low, ci.high} : Json(nullptr)}};
    }
    table += "\n";
    summary.push_back(s);
  }
  table += std::to_string(runs) + " runs: " + std::to_string(report.points.size()) + " points x " +
           std::to_string(cfgs.size()) + " configurations x " + std::to_string(seeds) +
           " seed(s) from " + std::to_string(options.first_seed) +
           (seeds > 1 ? "; [95% t-interval over seeds]\n" : "\n");

  Json params = Json::array();
  for (const auto& p : report.params) params.push_back({{"name", p.name}, {"values", p.texts}});
  report.json = {{"params", params},
                 {"configs", options.configs},
                 {"seeds", seeds},
                 {"first_seed", options.first_seed},
                 {"summary", summary},
                 {"runs", rows},
                 {"failures", report.failures}};

  // Charts: a metric over the first parameter, one line per configuration and
  // combination of the other parameters' values.
  const SweepParam& xparam = report.params.front();
  std::vector<std::vector<Series>> charts(metrics().size());
  std::map<std::pair<std::size_t, std::vector<std::size_t>>, std::vector<const Cell*>> lines;
  for (const Cell& cell : cells) {
    const auto& idx = report.points[cell.point].index;
    lines[{cell.config, std::vector<std::size_t>(idx.begin() + 1, idx.end())}].push_back(&cell);
  }
  for (const auto& [key, members] : lines) {
    std::string label = cfgs[key.first].name;
    for (std::size_t i = 1; i < report.params.size(); ++i) {
      label += ", " + report.params[i].name + "=" + report.params[i].texts[key.second[i - 1]];
    }
    std::vector<const Cell*> sorted = members;
    std::stable_sort(sorted.begin(), sorted.end(), [&](const Cell* a, const Cell* b) {
      return axis_value(xparam, report.points[a->point].index[0]) <
             axis_value(xparam, report.points[b->point].index[0]);
    });
    for (std::size_t m = 0; m < metrics().size(); ++m) {
      Series s;
      s.label = label;
      s.markers = true;
      for (const Cell* cell : sorted) {
        if (cell->ok_runs == 0 || cell->metric[m].n == 0) continue;
        s.x.push_back(axis_value(xparam, report.points[cell->point].index[0]));
        s.y.push_back(cell->metric[m].mean);
        if (seeds > 1) {  // a cell where one run counts has low = high = mean: no bar
          s.y_low.push_back(cell->metric[m].low);
          s.y_high.push_back(cell->metric[m].high);
        }
      }
      charts[m].push_back(std::move(s));
    }
  }
  if (!options.write_files) return report;
  std::error_code ec;
  std::filesystem::create_directories(options.out_dir, ec);  // gone since the start?
  if (ec) return Error(ErrorCode::kIoError, options.out_dir + ": " + ec.message());
  for (std::size_t m = 0; m < metrics().size(); ++m) {
    const Metric& metric = metrics()[m];
    const std::string path = out_path(options, std::string("sweep_") + metric.key + ".svg");
    const std::string title = std::string(metric.title) + " over " + xparam.name +
                              (seeds > 1 ? " (95% intervals over seeds)" : "");
    // Values over more than ~1.3 decades go on a log axis, so no line flattens the rest.
    std::vector<double> xs, ys;
    for (const auto& series : charts[m]) {
      xs.insert(xs.end(), series.x.begin(), series.x.end());
      ys.insert(ys.end(), series.y.begin(), series.y.end());
    }
    ChartSpec spec{title, axis_label(xparam), metric.unit, false};
    spec.log_x = spans_decades(xs);
    spec.log_y = spans_decades(ys);
    if (spec.log_x) spec.x_label += ", log scale";
    if (spec.log_y) spec.y_label += ", log scale";
    if (auto s = write_out_file(options.out_dir, path, render_line_chart(spec, charts[m]));
        !s.ok()) {
      return s;
    }
    report.pictures.push_back(path);
  }
  for (const auto& [name, text] : {std::pair<std::string, std::string>{"sweep.csv", csv},
                                   {"sweep.json", report.json.dump(2)}}) {
    if (auto s = write_out_file(options.out_dir, out_path(options, name), text); !s.ok()) return s;
  }
  return report;
}

}  // namespace rcxl::scenarios
