#include "scenarios/store_experiment.h"

#include <algorithm>

#include "scenarios/embedded/embedded.h"
#include "scenarios/run_counters.h"

namespace rcxl::scenarios {

Result<Scenario> store_experiment() {
  auto text = embedded_file("replays/store_bandwidth.json");
  if (!text) return Error(ErrorCode::kNotFound, "built-in replays/store_bandwidth.json is missing");
  return parse_scenario(Json::parse(*text), "replays/store_bandwidth.json (built in)");
}

StoreCase run_store_case(Scenario sc, const Profile& profile, bool prepared) {
  if (!prepared) {
    sc.extension = "none";
    sc.extension_config = Json::object();
    sc.client.write_hints = false;
    // Of the expect block only the stores' outcome (kv., worker.) applies:
    // its device and agent bounds describe the prepared path, and without the
    // extension the boot carries no memory generation.
    sc.expect.boots.clear();
    sc.expect.boots_exactly = false;
    std::erase_if(sc.expect.counters, [](const CounterBounds& c) {
      return c.path.rfind("kv.", 0) != 0 && c.path.rfind("worker.", 0) != 0;
    });
  }
  const RunResult r = run_scenario(sc, profile);
  StoreCase out{r.store, r.trace_hash, ""};
  const std::uint64_t wanted = requests_of(sc.workload, sc.topology.gpu_nodes);
  const auto failed =
      static_cast<std::uint64_t>(counter_value(r.counters, "kv.failed_stores").value_or(0));
  if (!r.status.ok()) {
    out.failure = r.status.ToString();
  } else if (!r.invariants.violations.empty()) {
    out.failure = r.invariants.violations.front();
  } else if (r.store.stores != wanted || failed > 0 || r.store.failed_stores > 0) {
    // A bandwidth over failed stores would read as a result.
    out.failure = std::to_string(r.store.stores) + " of " + std::to_string(wanted) +
                  " stores ended, " + std::to_string(std::max(failed, r.store.failed_stores)) +
                  " of them failed";
  }
  return out;
}

}  // namespace rcxl::scenarios
