#include "scenarios/engine/engine_model.h"

#include <algorithm>
#include <string>

namespace rcxl::scenarios {

using runtime::Duration;

EngineModel::EngineModel(runtime::Runtime& rt, EngineKv& kv, EngineParams params,
                         std::vector<ConversationSpec> workload, int engine, int engines)
    : rt_(rt),
      kv_(kv),
      params_(params),
      strand_(rt.make_strand("engine")),
      engine_(engine),
      engines_(std::max(engines, 1)) {
  for (std::size_t c = 0; c < workload.size(); ++c) {
    if (serves(c)) total_turns_ += workload[c].turns.size();
    conversations_.push_back(Conversation{std::move(workload[c])});
  }
}

EngineModel::~EngineModel() = default;

void EngineModel::start() {
  for (std::size_t c = 0; c < conversations_.size(); ++c) {
    if (!serves(c) || conversations_[c].spec.turns.empty()) continue;
    strand_->post_after(conversations_[c].spec.start,
                        [this, c] { arrive(static_cast<int>(c), 1); });
  }
}

void EngineModel::arrive(int conversation, int turn) {
  Conversation& conv = conversations_[static_cast<std::size_t>(conversation)];
  const TurnSpec& spec = conv.spec.turns[static_cast<std::size_t>(turn - 1)];
  Request r;
  r.spec = spec;
  r.context_tokens = conv.context_tokens + spec.prompt_tokens;
  r.kv.id = "c" + std::to_string(conversation) + "-t" + std::to_string(turn);
  r.kv.conversation = conversation;
  r.kv.turn = turn;
  // Only full chunks are stored, and at least one token is always computed.
  const std::int64_t reusable =
      std::max<std::int64_t>(0, r.context_tokens - 1) / params_.chunk_tokens;
  for (std::int64_t i = 0; i < reusable; ++i) {
    r.kv.chunk_keys.push_back("conv" + std::to_string(conversation) + "/chunk" + std::to_string(i));
  }
  r.record = records_.size();
  RequestRecord rec;
  rec.conversation = conversation;
  rec.turn = turn;
  rec.arrival = rt_.clock().now();
  records_.push_back(rec);
  const std::uint64_t id = next_request_++;
  auto& stored = requests_.emplace(id, std::move(r)).first->second;
  kv_.on_arrival(stored.kv);
  kick();
}

void EngineModel::kick() {
  if (!gpu_busy_ && !lookups_pending_) schedule_pass();
}

// A lookup's answer: a hit starts its load (the worker gets it with the
// step's plan), a miss makes the request ready to prefill all of its context.
void EngineModel::take_lookup(std::uint64_t id, std::size_t hits) {
  Request& req = requests_.at(id);
  RequestRecord& rec = records_[req.record];
  rec.hit_chunks = std::min(hits, req.kv.chunk_keys.size());
  // What was stored and is gone (a reset, a late store) is stored again.
  Conversation& conv = conversations_[static_cast<std::size_t>(req.spec.conversation)];
  conv.stored_chunks = std::min(conv.stored_chunks, rec.hit_chunks);
  if (rec.hit_chunks > 0) {
    req.phase = Phase::kLoading;
    // The worker starts the load when it receives this step's plan.
    strand_->post_after(params_.scheduler_to_worker, [this, id] {
      Request& q = requests_.at(id);
      RequestRecord& rc = records_[q.record];
      rc.load_start = rt_.clock().now();
      kv_.load(q.kv, rc.hit_chunks, [this, id](std::size_t loaded) {
        strand_->post([this, id, loaded] { load_complete(id, loaded); });
      });
    });
  } else {
    req.phase = Phase::kReady;
    req.prefill_left = req.context_tokens;
  }
}

// vLLM V1's order (EngineParams::lookup_on_admission): the running requests
// take the step's tokens first; waiting ones are reached in arrival order
// while tokens and sequence slots are left, and each is looked up (a
// synchronous RPC) only when reached. A hit loads asynchronously and takes
// neither tokens nor a slot until its load is done.
void EngineModel::admission_pass() {
  int budget = params_.max_batched_tokens;
  int running = 0;
  for (auto& [id, r] : requests_) {
    if (r.phase != Phase::kRunning) continue;
    ++running;
    budget -= r.prefill_left == 0
                  ? 1
                  : static_cast<int>(std::min<std::int64_t>(std::max(budget, 0), r.prefill_left));
  }
  for (auto& [id, r] : requests_) {
    if (budget <= 0 || running >= params_.max_running) break;
    if (r.phase == Phase::kReady) {
      budget -= static_cast<int>(std::min<std::int64_t>(budget, r.prefill_left));
      ++running;
    } else if (r.phase == Phase::kWaiting) {
      lookups_pending_ = true;
      r.phase = Phase::kLookingUp;
      kv_.lookup(r.kv, [this, id = id](std::size_t hits) {
        strand_->post([this, id, hits] {
          take_lookup(id, hits);
          lookups_pending_ = false;
          admission_pass();  // on from the start: the budget left may have changed
        });
      });
      return;
    }
  }
  run_step();
}

// The scheduler's lookups are synchronous RPCs in vLLM: the pass waits for them.
void EngineModel::schedule_pass() {
  if (params_.lookup_on_admission) return admission_pass();
  std::vector<std::uint64_t> waiting;
  for (auto& [id, r] : requests_) {
    if (r.phase == Phase::kWaiting) waiting.push_back(id);
  }
  if (waiting.empty()) return run_step();
  lookups_pending_ = true;
  auto remaining = std::make_shared<std::size_t>(waiting.size());
  for (std::uint64_t id : waiting) {
    Request& r = requests_.at(id);
    r.phase = Phase::kLookingUp;
    kv_.lookup(r.kv, [this, id, remaining](std::size_t hits) {
      strand_->post([this, id, remaining, hits] {
        take_lookup(id, hits);
        if (--*remaining == 0) {
          lookups_pending_ = false;
          run_step();
        }
      });
    });
  }
}

void EngineModel::load_complete(std::uint64_t id, std::size_t loaded) {
  Request& r = requests_.at(id);
  RequestRecord& rec = records_[r.record];
  rec.load_end = rt_.clock().now();
  rec.loaded_chunks = std::min(loaded, rec.hit_chunks);
  // A short load's missing chunks are recomputed: the turn stores them again.
  Conversation& conv = conversations_[static_cast<std::size_t>(r.spec.conversation)];
  conv.stored_chunks = std::min(conv.stored_chunks, rec.loaded_chunks);
  r.load_finished = true;
  // vLLM reports finished_recving at a step's end; an idle engine sees it now.
  if (!gpu_busy_) {
    r.phase = Phase::kReady;
    r.prefill_left = r.context_tokens - loaded_tokens(rec);
    kv_.on_load_done(r.kv);
    kick();
  }
}

void EngineModel::run_step() {
  if (gpu_busy_) return;
  int budget = params_.max_batched_tokens;
  int running = 0;
  int decodes = 0;
  std::int64_t decode_context = 0;  // tokens of KV the decodes read this step
  for (auto& [id, r] : requests_) {
    if (r.phase != Phase::kRunning) continue;
    ++running;  // max_num_seqs counts a sequence still in its prefill too
    if (r.prefill_left == 0) {
      ++decodes;
      decode_context += r.context_tokens + r.decoded;
    }
  }
  budget -= decodes;
  int prefill = 0;
  // vLLM V1 gives the running requests' prefill chunks the budget before any
  // waiting request (lookup_on_admission); the session-25 model, request order.
  const bool running_first = params_.lookup_on_admission;
  std::vector<Request*> order;
  for (auto& [id, r] : requests_) {
    if (!running_first || (r.phase == Phase::kRunning && r.prefill_left > 0)) order.push_back(&r);
  }
  for (auto& [id, r] : requests_) {
    if (running_first && r.phase == Phase::kReady) order.push_back(&r);
  }
  for (Request* rp : order) {
    Request& r = *rp;
    if (budget <= 0) break;
    const bool admitted = r.phase == Phase::kRunning && r.prefill_left > 0;
    if (!admitted && r.phase != Phase::kReady) continue;
    if (!admitted && running >= params_.max_running) continue;
    if (r.phase == Phase::kReady) {
      r.phase = Phase::kRunning;
      ++running;
    }
    const int take = static_cast<int>(std::min<std::int64_t>(budget, r.prefill_left));
    r.prefill_left -= take;
    records_[r.record].prefill_tokens += take;
    budget -= take;
    prefill += take;
  }
  if (prefill == 0 && decodes == 0) {
    // Idle until an arrival or a load; one that arrived during the lookups is
    // looked up now (kick() waits while lookups are pending).
    if (std::any_of(requests_.begin(), requests_.end(),
                    [](const auto& entry) { return entry.second.phase == Phase::kWaiting; })) {
      schedule_pass();
    }
    return;
  }
  gpu_busy_ = true;
  ++steps_;
  // Roofline: weights stream once per step; prefill is compute-bound; decode
  // adds the reads of each sequence's KV.
  const Duration compute = std::max(params_.step_base, params_.prefill_per_token * prefill) +
                           params_.decode_per_context_token * decode_context;
  strand_->post_after(compute, [this] { end_step(); });
}

void EngineModel::end_step() {
  gpu_busy_ = false;
  const auto now = rt_.clock().now();
  std::vector<std::uint64_t> finished;
  for (auto& [id, r] : requests_) {
    if (r.phase == Phase::kRunning && r.prefill_left == 0) {
      RequestRecord& rec = records_[r.record];
      if (r.decoded == 0) {
        rec.first_token = now;  // the prefill's last step emits it
        // The prompt's KV is all computed: a connector that saves during the
        // forward pass has it on its way now.
        if (params_.store_prompt_after_prefill) store_context(r, r.context_tokens);
      }
      ++r.decoded;
      if (r.decoded >= r.spec.output_tokens) finished.push_back(id);
    }
  }
  for (std::uint64_t id : finished) finish_request(requests_.at(id));
  for (std::uint64_t id : finished) requests_.erase(id);
  // Loads that finished during the step are reported now (finished_recving).
  for (auto& [id, r] : requests_) {
    if (r.phase == Phase::kLoading && r.load_finished) {
      const RequestRecord& rec = records_[r.record];
      r.phase = Phase::kReady;
      r.prefill_left = r.context_tokens - loaded_tokens(rec);
      kv_.on_load_done(r.kv);
    }
  }
  kick();
}

void EngineModel::store_context(const Request& r, std::int64_t context_tokens) {
  Conversation& conv = conversations_[static_cast<std::size_t>(r.spec.conversation)];
  // Write-behind: the context's new full chunks, named like later lookups name them.
  const std::size_t full = static_cast<std::size_t>(context_tokens / params_.chunk_tokens);
  if (full <= conv.stored_chunks) return;
  KvRequest store = r.kv;
  store.chunk_keys.clear();
  for (std::size_t i = 0; i < full; ++i) {
    store.chunk_keys.push_back("conv" + std::to_string(r.spec.conversation) + "/chunk" +
                               std::to_string(i));
  }
  const std::size_t first = conv.stored_chunks;
  conv.stored_chunks = full;
  ++stores_in_flight_;
  kv_.store(store, first, full,
            [this](std::size_t) { strand_->post([this] { --stores_in_flight_; }); });
}

void EngineModel::finish_request(Request& r) {
  RequestRecord& rec = records_[r.record];
  rec.finished = rt_.clock().now();
  r.phase = Phase::kDone;
  kv_.on_finished(r.kv);
  Conversation& conv = conversations_[static_cast<std::size_t>(r.spec.conversation)];
  conv.context_tokens = r.context_tokens + r.spec.output_tokens;
  // A connector that saves during the forward pass stores no decode KV: the
  // output reaches storage as part of the next turn's prompt.
  // The last sampled token never ran through the model: its KV does not
  // exist (vLLM stores num_computed_tokens = prompt + output - 1).
  if (!params_.store_prompt_after_prefill) store_context(r, conv.context_tokens - 1);
  ++finished_turns_;
  const int next = r.spec.turn + 1;
  if (next <= static_cast<int>(conv.spec.turns.size())) {
    const int c = r.spec.conversation;
    strand_->post_after(conv.spec.think_time, [this, c, next] { arrive(c, next); });
  }
}

}  // namespace rcxl::scenarios
