// `rcxl-sim reproduce`: the seed's measurements P1-P6 (PAPER.md) from one
// profile, as paired runs with 95% t-intervals, a table, JSON and SVGs.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <nlohmann/json.hpp>
#include <string>

#include "core/runtime/status.h"
#include "scenarios/serving_rig.h"
#include "scenarios/sweep.h"

namespace rcxl::scenarios {

struct ReproduceOptions {
  int pairs = 5;     // P1-P3 (and the no-hint run)
  int p5_pairs = 3;  // P5, as the seed measured it; at most `pairs`
  // p5_pairs was given by the user: above `pairs` it is refused, where the
  // default 3 shrinks to fit (a p5_pairs other than 3 counts as given).
  bool p5_pairs_given = false;
  bool beyond_seed = false;  // also run no_hints: the no-hint TTFT ratio
  std::uint64_t first_seed = 1;
  std::string profiles_dir;  // empty: the built-in profiles
  // --set NAME=VALUE: a profile field changed in every profile (named as in
  // sweep), e.g. "idle_write_back=1"; the table and JSON say so.
  std::vector<std::string> settings;
  std::string out_dir = "rcxl-reproduce";
  int threads = 2;  // independent runs in parallel; results do not depend on it
  std::function<void(const std::string&)> progress;  // one line per finished run
};

struct ReproduceReport {
  nlohmann::json json;  // keyed P1..P6 (+ "beyond_seed" when asked for)
  std::string table;    // what the terminal shows
  std::vector<std::string> pictures;
  bool all_within = false;
};

Result<ReproduceReport> reproduce(const ReproduceOptions& options);
// The profiles reproduce runs (by name), with options.settings applied; a bad
// setting is kBadRequest naming "--set NAME" and the fix.
Result<std::map<std::string, Profile>> reproduce_profiles(const ReproduceOptions& options);

}  // namespace rcxl::scenarios
