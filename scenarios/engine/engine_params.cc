#include "scenarios/engine/engine_params.h"

#include <cmath>
#include <cstdio>
#include <functional>
#include <map>
#include <string>

#include "scenarios/json_document.h"

namespace rcxl::scenarios {
namespace {

// One engine field: its range as written in the profile, whether it counts
// whole things (tokens, bytes, sequences, nanoseconds), and where it goes.
struct EngineField {
  double lo;
  double hi;
  bool integer;
  std::function<void(EngineParams&, double)> set;
  const char* why = "";  // why the range is what it is, for the message
};

runtime::Duration micros(double us) {
  return runtime::Duration(static_cast<std::int64_t>(std::llround(us * 1000)));
}

const std::map<std::string, EngineField>& engine_fields() {
  static const std::map<std::string, EngineField> kFields = {
      {"kv_bytes_per_token",
       {1, 1 << 24, true,
        [](EngineParams& p, double v) { p.kv_bytes_per_token = static_cast<std::uint64_t>(v); }}},
      {"chunk_tokens",
       {16, 1 << 16, true, [](EngineParams& p, double v) { p.chunk_tokens = static_cast<int>(v); },
        " (a stored chunk holds whole KV blocks, vLLM's of 16 tokens; smaller chunks only "
        "multiply the simulated keys and slow a run ~100x)"}},
      {"prefill_per_token_us",
       {0, 1e7, false, [](EngineParams& p, double v) { p.prefill_per_token = micros(v); }}},
      {"step_base_us", {0, 1e7, false, [](EngineParams& p, double v) { p.step_base = micros(v); }}},
      {"decode_per_context_token_ns",
       {0, 1e6, true,
        [](EngineParams& p, double v) {
          p.decode_per_context_token = runtime::Duration(static_cast<std::int64_t>(v));
        }}},
      {"scheduler_to_worker_us",
       {0, 1e7, false, [](EngineParams& p, double v) { p.scheduler_to_worker = micros(v); }}},
      {"max_batched_tokens",
       {1, 1 << 20, true,
        [](EngineParams& p, double v) { p.max_batched_tokens = static_cast<int>(v); }}},
      {"max_running",
       {1, 1 << 16, true, [](EngineParams& p, double v) { p.max_running = static_cast<int>(v); }}},
      {"store_prompt_after_prefill",
       {0, 1, true, [](EngineParams& p, double v) { p.store_prompt_after_prefill = v != 0; },
        " (0: a turn's KV is stored when it finishes; 1: the prompt's once its prefill is done)"}},
      {"lookup_on_admission",
       {0, 1, true, [](EngineParams& p, double v) { p.lookup_on_admission = v != 0; },
        " (1: vLLM V1's order, a waiting request is looked up only when the step has tokens and "
        "a slot for it; 0: every waiting request at each pass)"}},
  };
  return kFields;
}

Status engine_error(const std::string& key, const std::string& what) {
  return Error(ErrorCode::kBadRequest, "/engine/" + pointer_token(key) + ": " + what);
}

}  // namespace

Result<EngineParams> engine_params_from_json(const nlohmann::json& j) {
  EngineParams p;
  if (!j.is_object()) return Error(ErrorCode::kBadRequest, "/engine: expected an object");
  for (const auto& [key, value] : j.items()) {
    if (key.rfind('_', 0) == 0) continue;  // "_sources" and other notes
    const auto field = engine_fields().find(key);
    if (field == engine_fields().end()) {
      std::string list;
      for (const auto& [name, unused] : engine_fields()) list += (list.empty() ? "" : ", ") + name;
      return engine_error(key, "unknown field; expected one of: " + list);
    }
    const EngineField& f = field->second;
    char range[64];
    std::snprintf(range, sizeof range, "%.15g..%.15g", f.lo, f.hi);
    // is_number() is false for true/false: a boolean is not a count.
    if (!value.is_number() || !(value.get<double>() >= f.lo) || value.get<double>() > f.hi) {
      return engine_error(key, std::string("expected ") + (f.integer ? "an integer" : "a number") +
                                   " in " + range + f.why);
    }
    const double v = value.get<double>();
    if (f.integer && std::floor(v) != v) {
      return engine_error(key, std::string("expected an integer in ") + range +
                                   " (it counts whole tokens, bytes, sequences or ns), not " +
                                   value.dump());
    }
    // The simulator keeps whole nanoseconds: a fraction would be rounded away
    // silently (0.0004 us ran as 0, and two sweep values as one point).
    if (!f.integer) {
      const double ns = v * 1000;
      if (std::fabs(ns - std::round(ns)) > 1e-9 * std::max(1.0, std::fabs(ns))) {
        return engine_error(key, "expected whole nanoseconds (a multiple of 0.001 us), not " +
                                     value.dump() + "; the simulator keeps time in ns");
      }
    }
    f.set(p, v);
  }
  return p;
}

}  // namespace rcxl::scenarios
