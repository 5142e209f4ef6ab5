// The multi-turn chat workload of the seed's measurement: conversations whose
// turns reuse the KV of everything said before (PAPER.md "Reuse turn").
#pragma once

#include <cstdint>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "core/runtime/clock.h"
#include "core/runtime/random.h"
#include "core/runtime/status.h"

namespace rcxl::scenarios {

struct IntRange {
  int lo = 0;
  int hi = 0;
  int draw(runtime::RandomSource& rnd) const {
    // In 64 bits: hi - lo + 1 and lo + offset overflow int for the widest ranges.
    const std::uint64_t span = static_cast<std::uint64_t>(hi) - static_cast<std::uint64_t>(lo) + 1;
    return static_cast<int>(std::int64_t{lo} + static_cast<std::int64_t>(rnd.next_below(span)));
  }
};

// A prompt, an output and a conversation's whole context (every prompt and
// output of its turns) fit in 2^20 tokens: 8x the 128K-token window of
// Llama-3.1-8B, the engine's model class (engine_params.h), and as long as the
// longest windows served (1M tokens). Larger counts only build chunk keys.
inline constexpr int kMaxContextTokens = 1 << 20;
// The engine scans its live requests (one per conversation) every step: with
// more conversations a run does not finish in useful time.
inline constexpr int kMaxConversations = 10000;
inline constexpr int kMaxTurns = 1000;

// What the GPU nodes run: the serving engine over the chat workload, or
// PAPER P4's store experiment (KV stores back to back, nothing served).
enum class WorkloadKind { kServing, kStore };
// A store experiment's stores x chunks_per_store chunks: 32 TiB of the
// profile's 32 MiB chunks, more than any pool this simulator models.
inline constexpr int kMaxStoredChunks = 1 << 20;

struct WorkloadParams {
  WorkloadKind kind = WorkloadKind::kServing;
  // --- serving
  int conversations = 48;
  int turns = 6;
  IntRange first_prompt_tokens{600, 1000};  // system prompt + first question
  IntRange followup_prompt_tokens{60, 180};
  IntRange output_tokens{150, 300};
  // Conversations start uniformly within this window (a benchmark client ramping up).
  runtime::Duration start_window = std::chrono::seconds(2);
  // Pause between a response and the next turn (0: a closed-loop benchmark client).
  runtime::Duration think_time = std::chrono::milliseconds(0);
  // --- store: each engine stores `stores` times `chunks_per_store` new chunks,
  // a store starting when the one before it ended (one write-behind strand).
  int stores = 64;
  int chunks_per_store = 1;
};

// Requests the run makes over `gpu_nodes` engines: turns served (the
// conversations are dealt out), or stores made (each engine makes `stores`).
// A fault's during_store counts them.
std::uint64_t requests_of(const WorkloadParams& w, int gpu_nodes);
// Requests that can load KV: turns 2.. of each conversation (none in a store experiment).
std::uint64_t reuse_turns_of(const WorkloadParams& w);

struct TurnSpec {
  int conversation = 0;
  int turn = 0;  // 1-based; turns >= 2 are reuse turns
  int prompt_tokens = 0;
  int output_tokens = 0;
};

struct ConversationSpec {
  runtime::Duration start{0};
  runtime::Duration think_time{0};
  std::vector<TurnSpec> turns;
};

// Draws every conversation from `rnd`: the same seed gives the same workload,
// so a pair's two configurations serve identical requests.
std::vector<ConversationSpec> make_workload(const WorkloadParams& params,
                                            runtime::RandomSource& rnd);

Result<WorkloadParams> workload_from_json(const nlohmann::json& j);

}  // namespace rcxl::scenarios
