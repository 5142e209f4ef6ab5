// The --out directory of reproduce and sweep: made and proven writable before
// the first run, so a bad path is refused up front, not after an hour of runs.
#pragma once

#include <string>

#include "core/runtime/status.h"

namespace rcxl::scenarios {

// Creates `dir` and its parents and writes (then removes) a probe file in it.
// kBadRequest "--out DIR: cannot create directory (reason); choose a writable
// directory" when either fails.
Status prepare_out_dir(const std::string& dir);

}  // namespace rcxl::scenarios
