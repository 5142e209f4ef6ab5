// The GPU node's serving engine, as a class of hardware and model. Every value
// has its source in docs/reproduce.md; the profile JSON can override them.
#pragma once

#include <cstdint>
#include <nlohmann/json.hpp>

#include "core/runtime/clock.h"
#include "core/runtime/status.h"

namespace rcxl::scenarios {

struct EngineParams {
  // Llama-3-8B class in bf16: 32 layers x 8 KV heads x 128 dims x 2 (K,V) x 2 B.
  std::uint64_t kv_bytes_per_token = 131072;
  // LMCache's default chunk: 256 tokens (32 MiB of KV for this model class).
  int chunk_tokens = 256;
  // A100-80GB class running an 8B model in vLLM: ~10k prefill tokens/s.
  runtime::Duration prefill_per_token = std::chrono::microseconds(100);
  // Every step reads the weights once (~16 GB at ~2 TB/s HBM => ~8 ms) ...
  runtime::Duration step_base = std::chrono::microseconds(8000);
  // ... and each decoding sequence's KV: 128 KiB per context token at ~2 TB/s.
  runtime::Duration decode_per_context_token = std::chrono::nanoseconds(64);
  // vLLM's chunked-prefill token budget per step, and its sequence cap.
  int max_batched_tokens = 2048;
  int max_running = 256;
  // Scheduler process -> worker process hand-off (vLLM's IPC of the step's plan).
  runtime::Duration scheduler_to_worker = std::chrono::microseconds(300);
  // When a turn's KV is stored: false, all of it when the request finishes;
  // true, the prompt's full chunks once its prefill is done and no decode KV
  // (Maru's vLLM connector: write-behind after the prefill's last forward;
  // the output is stored as part of the next turn's prompt). See
  // docs/reproduce.md, *When a turn's KV is stored*.
  bool store_prompt_after_prefill = true;
  // vLLM V1's scheduler order: running requests' prefill first, then waiting
  // requests in arrival order while tokens and sequence slots are left, each
  // looked up (its load and hint started) only when reached. False: every
  // waiting request is looked up at each pass and admission is in request
  // order (the model through session 25). docs/reproduce.md.
  bool lookup_on_admission = false;
};

Result<EngineParams> engine_params_from_json(const nlohmann::json& j);

}  // namespace rcxl::scenarios
