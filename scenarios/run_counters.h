// The counters a run reports (RunResult::counters) by dotted path, so an
// `expect` block is checked against them when the file is read, not after the
// run. Two families are keyed and hold only the keys that occurred:
// agent.hints_accepted.<action> and agent.hints_refused.<error code>; a key of
// those that the run never counted reads as 0.
#pragma once

#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "core/runtime/status.h"

namespace rcxl::scenarios {

// Every path that is always present in a run with an agent (serving_rig.cc's
// counters(); tests hold the two lists together).
const std::vector<std::string>& fixed_counter_paths();

// ok for a fixed path or a family path with a key of that family; otherwise
// bad_request naming what the path could have been.
Status check_counter_path(const std::string& path);

// The counter's value in `counters`: a family key the run never counted is 0
// (when the run has the family); nullopt when the run has no such counter
// (e.g. no agent ran) or it is not a number.
std::optional<double> counter_value(const nlohmann::json& counters, const std::string& path);

}  // namespace rcxl::scenarios
