// A vLLM-like serving engine in virtual time: continuous batching with a
// chunked-prefill budget, asynchronous KV loads found by the scheduler and run
// by the worker, write-behind stores. It measures TTFT and KV load time.
#pragma once

#include <cstddef>
#include <cstdint>
#include <deque>
#include <map>
#include <memory>
#include <vector>

#include "core/runtime/runtime.h"
#include "scenarios/engine/engine_kv.h"
#include "scenarios/engine/engine_params.h"
#include "scenarios/engine/workload.h"

namespace rcxl::scenarios {

struct RequestRecord {
  int conversation = 0;
  int turn = 0;
  runtime::Instant arrival{0};
  runtime::Instant first_token{0};
  runtime::Instant finished{0};
  std::size_t hit_chunks = 0;     // found by the scheduler's lookup
  std::size_t loaded_chunks = 0;  // actually loaded (the rest recomputed)
  runtime::Instant load_start{0};
  runtime::Instant load_end{0};
  std::int64_t prefill_tokens = 0;

  bool reuse_turn() const { return turn >= 2; }
  bool loaded() const { return hit_chunks > 0; }
  // A run cut off by its time limit leaves requests without these (no step
  // ends at virtual time 0): means leave them out rather than count negatives.
  bool answered() const { return first_token.count() > 0; }
  bool load_finished() const { return load_end.count() > 0; }
  runtime::Duration ttft() const { return first_token - arrival; }
  runtime::Duration load_time() const { return load_end - load_start; }
};

class EngineModel {
 public:
  // With several engines (GPU nodes) each serves the conversations c with
  // c % engines == engine; all see the whole workload, so names stay global.
  EngineModel(runtime::Runtime& rt, EngineKv& kv, EngineParams params,
              std::vector<ConversationSpec> workload, int engine = 0, int engines = 1);
  ~EngineModel();

  void start();
  bool done() const { return finished_turns_ == total_turns_ && stores_in_flight_ == 0; }
  const std::vector<RequestRecord>& records() const { return records_; }
  std::size_t steps() const { return steps_; }

 private:
  enum class Phase { kWaiting, kLookingUp, kLoading, kReady, kRunning, kDone };
  struct Conversation {
    ConversationSpec spec;
    // 64-bit: a thousand turns of long prompts and outputs pass INT_MAX.
    std::int64_t context_tokens = 0;
    std::size_t stored_chunks = 0;  // chunks whose store was issued
  };
  struct Request {
    std::size_t record = 0;  // index into records_
    KvRequest kv;
    TurnSpec spec;
    Phase phase = Phase::kWaiting;
    std::int64_t context_tokens = 0;  // prompt context: earlier turns + this prompt
    std::int64_t prefill_left = 0;
    int decoded = 0;
    bool load_finished = false;
  };

  bool serves(std::size_t conversation) const {
    return static_cast<int>(conversation % static_cast<std::size_t>(engines_)) == engine_;
  }
  void arrive(int conversation, int turn);
  void kick();  // runs a schedule pass if the GPU is idle
  void schedule_pass();
  void admission_pass();
  void take_lookup(std::uint64_t id, std::size_t hits);
  void run_step();
  void end_step();
  void finish_request(Request& r);
  // Write-behind store of the conversation's full chunks of its first
  // `context_tokens` tokens that are not stored yet.
  void store_context(const Request& r, std::int64_t context_tokens);
  void load_complete(std::uint64_t id, std::size_t loaded);
  std::int64_t loaded_tokens(const RequestRecord& rec) const {
    return static_cast<std::int64_t>(rec.loaded_chunks) * params_.chunk_tokens;
  }

  runtime::Runtime& rt_;
  EngineKv& kv_;
  EngineParams params_;
  std::unique_ptr<runtime::Strand> strand_;
  std::vector<Conversation> conversations_;
  int engine_ = 0;
  int engines_ = 1;
  std::map<std::uint64_t, Request> requests_;  // by arrival sequence: FIFO order
  std::vector<RequestRecord> records_;
  std::uint64_t next_request_ = 0;
  bool gpu_busy_ = false;
  bool lookups_pending_ = false;
  std::size_t finished_turns_ = 0;
  std::size_t total_turns_ = 0;
  std::size_t stores_in_flight_ = 0;
  std::size_t steps_ = 0;
};

}  // namespace rcxl::scenarios
