#include "scenarios/engine/engine_params.h"

#include <cstdio>
#include <string>

namespace rcxl::scenarios {

Result<EngineParams> engine_params_from_json(const nlohmann::json& j) {
  EngineParams p;
  if (!j.is_object()) return Error(ErrorCode::kBadRequest, "/engine: expected an object");
  for (const auto& item : j.items()) {
    // Named: lambdas may not capture structured bindings before clang 16.
    const std::string& key = item.key();
    const nlohmann::json& value = item.value();
    if (key.rfind('_', 0) == 0) continue;  // "_sources" and other notes
    auto number = [&](double lo, double hi) -> Result<double> {
      if (!value.is_number() || value.get<double>() < lo || value.get<double>() > hi) {
        char range[64];
        std::snprintf(range, sizeof range, "%.15g..%.15g", lo, hi);
        return Error(ErrorCode::kBadRequest, "/engine/" + key + ": expected a number in " + range);
      }
      return value.get<double>();
    };
    auto micros = [&](runtime::Duration& out) -> Status {
      auto v = number(0, 1e7);
      if (!v.ok()) return v.status();
      out = runtime::Duration(static_cast<std::int64_t>(*v * 1000));
      return {};
    };
    Status s;
    if (key == "kv_bytes_per_token") {
      auto v = number(1, 1 << 24);
      if (!v.ok()) return v.status();
      p.kv_bytes_per_token = static_cast<std::uint64_t>(*v);
    } else if (key == "chunk_tokens") {
      auto v = number(1, 1 << 16);
      if (!v.ok()) return v.status();
      p.chunk_tokens = static_cast<int>(*v);
    } else if (key == "prefill_per_token_us") {
      s = micros(p.prefill_per_token);
    } else if (key == "step_base_us") {
      s = micros(p.step_base);
    } else if (key == "decode_per_context_token_ns") {
      auto v = number(0, 1e6);
      if (!v.ok()) return v.status();
      p.decode_per_context_token = runtime::Duration(static_cast<std::int64_t>(*v));
    } else if (key == "scheduler_to_worker_us") {
      s = micros(p.scheduler_to_worker);
    } else if (key == "max_batched_tokens") {
      auto v = number(1, 1 << 20);
      if (!v.ok()) return v.status();
      p.max_batched_tokens = static_cast<int>(*v);
    } else if (key == "max_running") {
      auto v = number(1, 1 << 16);
      if (!v.ok()) return v.status();
      p.max_running = static_cast<int>(*v);
    } else {
      return Error(ErrorCode::kBadRequest, "/engine/" + key + ": unknown field");
    }
    if (!s.ok()) return s;
  }
  return p;
}

}  // namespace rcxl::scenarios
