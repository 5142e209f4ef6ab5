// PAPER P4 through the whole stack (client -> agent -> extension -> device ->
// RNIC): the shipped store experiment (replays/store_bandwidth.json) in its
// two cases, as `rcxl-sim reproduce` runs them.
#pragma once

#include <string>

#include "core/runtime/status.h"
#include "scenarios/scenario.h"
#include "scenarios/serving_rig.h"

namespace rcxl::scenarios {

// replays/store_bandwidth.json, as built in.
Result<Scenario> store_experiment();

// One case of P4: the store experiment's bandwidth, and why it measured nothing.
struct StoreCase {
  StoreRun store;
  std::string trace_hash;
  std::string failure;  // empty when every store ran, none failed and the run kept its expect block
};

// Prepared: `sc` as it is, whose write hints prepare each store's pages.
// Unprepared: the same stores against an agent without the extension, as
// memory nodes ran before rcxl's hooks (no fresh trim, no write hints), so
// each WRITE fills its pages from flash first (docs/reproduce.md, P4).
StoreCase run_store_case(Scenario sc, const Profile& profile, bool prepared);

}  // namespace rcxl::scenarios
