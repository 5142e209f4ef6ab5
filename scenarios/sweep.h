// `rcxl-sim sweep`: what-if grids. Every point of a parameter grid is run
// under each chosen configuration and seed; the report is a CSV with one row
// per run, SVG charts of a metric over the first parameter, and a table
// (docs/reproduce.md, "What-if sweeps").
#pragma once

#include <cstdint>
#include <functional>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "core/runtime/status.h"
#include "scenarios/batch_runner.h"

namespace rcxl::scenarios {

// One axis of the grid: a named parameter or a JSON pointer, and its values.
struct SweepParam {
  std::string name;                    // "dram_cache_bytes" or "/device/flash_read_ns"
  std::vector<std::string> texts;      // the values as written ("4G")
  std::vector<nlohmann::json> values;  // parsed (4294967296); before any unit scaling
  std::string option = "--param";      // the option that named it: errors say it
};

// `reproduce --set NAME=...`: NAME is a profile field (else the error says
// what --set takes).
Status check_profile_setting(const std::string& option, const std::string& name);

// Parses "NAME=V1,V2,...". Values: true, false, or a number with an optional
// binary suffix K, M, G, T (x 1024^n). Errors name the parameter and the fix.
// `option` names the command-line option in errors ("--param", "--set").
Result<SweepParam> parse_sweep_param(const std::string& spec,
                                     const std::string& option = "--param");
// Sets value `index` of `param` in a scenario or a profile document, as a
// sweep point does; `profile_only` refuses a parameter of the scenario.
Status apply_sweep_value(const SweepParam& param, std::size_t index, nlohmann::json& scenario,
                         nlohmann::json& profile, bool profile_only = false);
// " (hint_lead_ms sets /engine/scheduler_to_worker_us x 1000)" when `message`
// (a refusal in the field's unit) names a field one of `params` sets scaled;
// else "".
std::string scaled_unit_note(const std::vector<SweepParam>& params, const std::string& message);
// A field another option sets: {"--conversations", "/workload/conversations"}.
struct OptionTarget {
  std::string option;
  std::string pointer;
};
// Refuses two parameters (or a parameter and an option) that set one field,
// or one inside the other's, e.g. dram_cache_bytes and /device/dram_cache_bytes:
// the run would use one value and label it with the other. kBadRequest naming both.
Status check_distinct_targets(const std::vector<SweepParam>& params,
                              const std::vector<OptionTarget>& options = {});
// Refuses seeds first_seed .. first_seed + count - 1 that pass 2^64 - 1 (they
// would wrap to 0): kBadRequest naming --seed, `option` ("--seeds") and the fix.
Status check_seed_range(std::uint64_t first_seed, int count, const std::string& option);
// The built-in names, e.g. "dram_cache_bytes", with what each one sets.
std::vector<std::pair<std::string, std::string>> sweep_param_help();

// One grid point: a value index per parameter.
struct SweepPoint {
  std::vector<std::size_t> index;
};
// The cartesian product in nested-loop order: the first parameter outermost.
std::vector<SweepPoint> expand_grid(const std::vector<SweepParam>& params);

struct SweepOptions {
  std::vector<SweepParam> params;  // empty: dram_cache_bytes=4G,8G,16G,32G
  std::vector<std::string> configs = {"hints", "no_hints"};
  int seeds = 1;
  std::uint64_t first_seed = 1;
  int threads = 2;  // runs in parallel; results do not depend on it
  std::string out_dir = "rcxl-sweep";
  std::string profiles_dir;  // empty: the built-in profiles
  // The scenario every point starts from; empty: the built-in seed_serving.
  std::optional<nlohmann::json> scenario;
  std::string scenario_path;         // for errors and the reproduce line
  std::optional<int> conversations;  // shorter workloads for quick sweeps
  std::optional<int> turns;
  bool write_files = true;
  std::function<void(const std::string&)> progress;  // one line per finished run
};

struct SweepRun {
  std::size_t point = 0;
  std::string config;
  std::uint64_t seed = 0;
  RunSummary summary;
};

struct SweepReport {
  std::vector<SweepParam> params;
  std::vector<SweepPoint> points;
  std::vector<SweepRun> runs;  // point-major, then configuration, then seed
  std::string csv;
  nlohmann::json json;
  std::string table;
  std::vector<std::string> pictures;
  // One line per failed run, each with the command that reproduces it.
  std::vector<std::string> failures;
};

// Validates every point (bad values: kBadRequest, nothing run), runs the grid
// and, with write_files, writes sweep.csv, sweep.json and sweep_<metric>.svg.
Result<SweepReport> sweep(const SweepOptions& options);

}  // namespace rcxl::scenarios
