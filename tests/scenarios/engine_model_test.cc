// The serving-engine model on its own, with an ideal KV layer: loads take
// bytes / bandwidth, stores land after a fixed time.
#include "scenarios/engine/engine_model.h"

#include <gtest/gtest.h>

#include <limits>
#include <set>

#include "backends/sim/sim_world.h"

namespace rcxl::scenarios {
namespace {

using namespace std::chrono_literals;

class IdealKv : public EngineKv {
 public:
  IdealKv(runtime::Runtime& rt, double bytes_per_second, std::uint64_t chunk_bytes,
          runtime::Duration store_time = 5ms)
      : strand_(rt.make_strand("kv")),
        bw_(bytes_per_second),
        chunk_bytes_(chunk_bytes),
        store_time_(store_time) {}

  void lookup(const KvRequest& r, LookupDone done) override {
    std::size_t hits = 0;
    while (hits < r.chunk_keys.size() && stored_.count(r.chunk_keys[hits])) ++hits;
    ++lookups;
    strand_->post_after(100us, [done, hits] { done(hits); });
  }
  void on_load_done(const KvRequest&) override { ++load_dones; }
  void load(const KvRequest& r, std::size_t chunks, LoadDone done) override {
    const auto t = runtime::from_seconds(static_cast<double>(chunks * chunk_bytes_) / bw_);
    // A short load: its last chunks went between the lookup and the load (a reset).
    const std::size_t lost = std::min(chunks, lose_on_next_load);
    lose_on_next_load -= lost;
    for (std::size_t i = chunks - lost; i < chunks; ++i) stored_.erase(r.chunk_keys[i]);
    strand_->post_after(t, [done, got = chunks - lost] { done(got); });
  }
  void store(const KvRequest& r, std::size_t first, std::size_t end, StoreDone done) override {
    std::vector<std::string> keys(r.chunk_keys.begin() + static_cast<long>(first),
                                  r.chunk_keys.begin() + static_cast<long>(end));
    strand_->post_after(store_time_, [this, keys, done] {
      for (const auto& k : keys) stored_.insert(k);
      done(keys.size());
    });
  }

  void preload(const std::string& key) { stored_.insert(key); }

  int lookups = 0;
  int load_dones = 0;
  std::size_t lose_on_next_load = 0;

 private:
  std::unique_ptr<runtime::Strand> strand_;
  double bw_;
  std::uint64_t chunk_bytes_;
  runtime::Duration store_time_;
  std::set<std::string> stored_;
};

struct RunResult {
  std::vector<RequestRecord> records;
  std::string hash;
};

RunResult run(std::uint64_t seed, double load_bw, WorkloadParams w = {}, EngineParams params = {},
              runtime::Duration store_time = 5ms) {
  sim::SimWorld world(seed);
  auto& gpu = world.add_node("gpu");
  IdealKv kv(gpu, load_bw, params.kv_bytes_per_token * params.chunk_tokens, store_time);
  auto rnd = world.random("workload");
  EngineModel engine(gpu, kv, params, make_workload(w, *rnd));
  engine.start();
  EXPECT_TRUE(world.run_until([&] { return engine.done(); }).ok());
  EXPECT_EQ(kv.lookups, w.conversations * w.turns);
  return {engine.records(), world.trace().hash_hex()};
}

double mean_reuse_ttft_ms(const std::vector<RequestRecord>& recs) {
  double sum = 0;
  int n = 0;
  for (const auto& r : recs) {
    if (!r.reuse_turn()) continue;
    sum += runtime::to_millis(r.ttft());
    ++n;
  }
  return sum / n;
}

TEST(EngineModel, EveryTurnGetsAFirstTokenAndReuseTurnsLoadTheirPrefix) {
  WorkloadParams w;
  w.conversations = 8;
  auto result = run(1, 11.75e9, w);
  ASSERT_EQ(result.records.size(), 8u * 6u);
  int loaded = 0;
  for (const auto& r : result.records) {
    EXPECT_GT(r.first_token, r.arrival);
    EXPECT_GE(r.finished, r.first_token);
    if (r.turn == 1) {
      EXPECT_EQ(r.hit_chunks, 0u);
    }
    if (r.reuse_turn() && r.hit_chunks > 0) {
      ++loaded;
      EXPECT_GE(r.load_end, r.load_start);
      EXPECT_GE(r.first_token, r.load_end);
    }
  }
  EXPECT_GT(loaded, 8 * 5 / 2);  // most reuse turns find their prefix stored
}

// When a turn's KV is stored (docs/reproduce.md): at the finish, a store that
// takes 300 ms has not landed when the next turn (think time 0) looks its
// prefix up, so every turn 2 recomputes it; stored once the prompt's prefill
// is done, it lands during the decode and every turn 2 finds it.
TEST(EngineModel, R8_APromptStoredAfterItsPrefillIsFoundByTheNextTurn) {
  WorkloadParams w;
  w.conversations = 8;
  EngineParams at_finish;
  at_finish.store_prompt_after_prefill = false;
  const EngineParams after_prefill;  // the profiles' default
  auto turn2_without_hits = [](const RunResult& r) {
    int n = 0;
    for (const auto& rec : r.records) n += rec.turn == 2 && rec.hit_chunks == 0;
    return n;
  };
  EXPECT_EQ(turn2_without_hits(run(1, 11.75e9, w, at_finish, 300ms)), 8);
  const RunResult stored_early = run(1, 11.75e9, w, after_prefill, 300ms);
  EXPECT_EQ(turn2_without_hits(stored_early), 0);
  for (const auto& rec : stored_early.records) {
    EXPECT_GT(rec.finished - rec.first_token, 300ms);  // the decode outlasts the store
  }
}

// Maru's connector stores no decode KV (docs/reproduce.md): with the early
// store a turn's output reaches storage only inside the next turn's prompt, so
// turn 2 finds the chunks of turn 1's prompt alone; stored at the finish, it
// finds those of turn 1's prompt and output.
TEST(EngineModel, R8_AnEarlyStoreLeavesTheOutputToTheNextPrompt) {
  WorkloadParams w;
  w.conversations = 8;
  w.turns = 2;
  w.think_time = 2s;  // every store has landed when turn 2 looks up
  EngineParams finish_params;
  finish_params.store_prompt_after_prefill = false;
  const RunResult at_finish = run(5, 11.75e9, w, finish_params);
  const RunResult stored_early = run(5, 11.75e9, w);  // the default
  sim::SimWorld world(5);
  const auto workload = make_workload(w, *world.random("workload"));
  const auto chunks = [](int tokens) { return static_cast<std::size_t>(tokens / 256); };
  int output_chunks_left = 0;  // conversations whose output completes a chunk
  for (std::size_t i = 0; i < at_finish.records.size(); ++i) {
    const RequestRecord& finish = at_finish.records[i];
    const RequestRecord& early_rec = stored_early.records[i];
    ASSERT_EQ(finish.conversation, early_rec.conversation);
    ASSERT_EQ(finish.turn, early_rec.turn);
    if (finish.turn != 2) continue;
    const TurnSpec& first = workload[static_cast<std::size_t>(finish.conversation)].turns[0];
    EXPECT_EQ(early_rec.hit_chunks, chunks(first.prompt_tokens));
    EXPECT_EQ(finish.hit_chunks, chunks(first.prompt_tokens + first.output_tokens));
    output_chunks_left += finish.hit_chunks > early_rec.hit_chunks;
  }
  EXPECT_GT(output_chunks_left, 0);  // the two policies differ on this workload
}

TEST(EngineModel, SlowerLoadsRaiseReuseTtft) {
  WorkloadParams w;
  w.conversations = 16;
  const double fast = mean_reuse_ttft_ms(run(3, 11.75e9, w).records);
  const double slow = mean_reuse_ttft_ms(run(3, 1.3e9, w).records);
  EXPECT_GT(slow, fast * 1.2);
}

TEST(EngineModel, SameSeedSameRunDifferentSeedDifferentRun) {
  WorkloadParams w;
  w.conversations = 6;
  EXPECT_EQ(run(5, 11.75e9, w).hash, run(5, 11.75e9, w).hash);
  EXPECT_NE(mean_reuse_ttft_ms(run(5, 11.75e9, w).records),
            mean_reuse_ttft_ms(run(6, 11.75e9, w).records));
}

TEST(EngineModel, WorkloadJsonIsValidatedWithPointers) {
  EXPECT_TRUE(workload_from_json({{"conversations", 4}, {"turns", 2}}).ok());
  auto bad = workload_from_json({{"conversations", -1}});
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.status().message().find("/workload/conversations"), std::string::npos);
  auto unknown = workload_from_json({{"convs", 4}});
  EXPECT_NE(unknown.status().message().find("unknown field"), std::string::npos);
  EXPECT_FALSE(workload_from_json({{"output_tokens", {5, 1}}}).ok());
  // Integers past int are refused, not wrapped (4294967297 would read as 1).
  EXPECT_FALSE(workload_from_json({{"conversations", 4294967297ull}}).ok());
  EXPECT_FALSE(workload_from_json({{"turns", -4294967295ll}}).ok());
  EXPECT_FALSE(workload_from_json({{"output_tokens", {1, 4294967297ull}}}).ok());
  EXPECT_FALSE(workload_from_json({{"output_tokens", {-4294967295ll, 5}}}).ok());
  EXPECT_FALSE(workload_from_json({{"output_tokens", {1, 18446744073709551615ull}}}).ok());
  EXPECT_TRUE(
      workload_from_json({{"turns", 1}, {"output_tokens", {1, kMaxContextTokens / 2}}}).ok());
}

// SPEC R8, hunt H2: token counts past any model's context built every chunk
// key up front (8 GB, bad_alloc); a prompt, an output and a conversation's
// whole context are held to 2^20 tokens, and only as many conversations as a
// run can finish are taken.
TEST(EngineModel, R8_WorkloadCountsAreHeldToWhatARunCanHold) {
  auto refused = [](const nlohmann::json& j, const std::string& says) {
    auto w = workload_from_json(j);
    EXPECT_FALSE(w.ok()) << j.dump();
    if (w.ok()) return;
    EXPECT_EQ(w.status().code(), ErrorCode::kBadRequest);
    EXPECT_NE(w.status().message().find(says), std::string::npos) << w.status().message();
  };
  refused({{"first_prompt_tokens", {2000000000, 2147483647}}},
          "/workload/first_prompt_tokens: expected [lo, hi] with 1 <= lo <= hi <= 1048576");
  refused({{"output_tokens", {1, kMaxContextTokens + 1}}}, "/workload/output_tokens");
  refused({{"followup_prompt_tokens", {kMaxContextTokens + 1, kMaxContextTokens + 1}}},
          "/workload/followup_prompt_tokens");
  // Each count fits, the conversation does not: 1000 turns of 600 tokens.
  refused({{"turns", 1000}, {"followup_prompt_tokens", {600, 600}}, {"output_tokens", {500, 500}}},
          "/workload: a conversation's context reaches 1100400 tokens");
  refused({{"conversations", 100000}}, "/workload/conversations: expected an integer in 1..10000");
  EXPECT_TRUE(
      workload_from_json({{"conversations", kMaxConversations}, {"turns", kMaxTurns}}).ok());
  EXPECT_TRUE(workload_from_json({{"turns", 1},
                                  {"first_prompt_tokens", {1, kMaxContextTokens / 2}},
                                  {"output_tokens", {1, kMaxContextTokens / 2}}})
                  .ok());
}

// vLLM's max_num_seqs counts every running sequence, also one whose prefill
// is not done: the step that finishes a long prompt's prefill must not admit
// a second request beside it when the cap is 1 (before, only decoding
// sequences were counted, so the prompt's last chunk left room for one more).
TEST(EngineModel, R8_MaxRunningCountsSequencesStillInTheirPrefill) {
  sim::SimWorld world(1);
  auto& gpu = world.add_node("gpu");
  EngineParams params;
  params.max_running = 1;
  IdealKv kv(gpu, 1e12, params.kv_bytes_per_token * params.chunk_tokens);
  ConversationSpec longer;
  longer.turns = {{0, 1, 3000, 4}};  // two steps of prefill at 2048 tokens a step
  ConversationSpec shorter;
  shorter.start = 1ms;
  shorter.turns = {{1, 1, 100, 4}};
  EngineModel engine(gpu, kv, params, {longer, shorter});
  engine.start();
  ASSERT_TRUE(world.run_until([&] { return engine.done(); }).ok());
  const auto& recs = engine.records();
  ASSERT_EQ(recs.size(), 2u);
  ASSERT_EQ(recs[0].conversation, 0);
  EXPECT_GE(recs[1].first_token, recs[0].finished);
}

// A request that arrives while the scheduler's lookups are out is looked up
// at the next pass; when that pass finds only a load to start (the GPU stays
// idle), the pass after it runs at once, not when the load ends.
TEST(EngineModel, R8_AnArrivalDuringTheLookupsIsNotLeftBehindAnIdlePass) {
  sim::SimWorld world(1);
  auto& gpu = world.add_node("gpu");
  const EngineParams params;
  const std::uint64_t chunk_bytes = params.kv_bytes_per_token * params.chunk_tokens;
  IdealKv kv(gpu, static_cast<double>(2 * chunk_bytes), chunk_bytes);  // two chunks: 1 s
  kv.preload("conv0/chunk0");
  kv.preload("conv0/chunk1");
  ConversationSpec loads;  // its lookups take 100 us, then a 1 s load
  loads.turns = {{0, 1, 2 * params.chunk_tokens + 1, 1}};
  ConversationSpec arrives_meanwhile;
  arrives_meanwhile.start = 50us;
  arrives_meanwhile.turns = {{1, 1, 100, 1}};
  EngineModel engine(gpu, kv, params, {loads, arrives_meanwhile});
  engine.start();
  ASSERT_TRUE(world.run_until([&] { return engine.done(); }).ok());
  const auto& recs = engine.records();
  ASSERT_EQ(recs.size(), 2u);
  ASSERT_EQ(recs[0].hit_chunks, 2u);
  EXPECT_GT(recs[0].ttft(), 1s);
  EXPECT_LT(recs[1].ttft(), 100ms);
}

// A load cut short recomputes its missing chunks; the turn then stores them
// again. It stored only past the lookup's hits, so the gap stayed and the next
// turn's lookup stopped at it (review, session 26).
TEST(EngineModel, R8_ChunksAShortLoadMissedAreStoredAgain) {
  sim::SimWorld world(1);
  auto& gpu = world.add_node("gpu");
  const EngineParams params;
  IdealKv kv(gpu, 1e12, params.kv_bytes_per_token * params.chunk_tokens);
  kv.lose_on_next_load = 2;
  ConversationSpec conv;
  conv.think_time = 1s;  // each turn's store has landed before the next lookup
  const int chunk = params.chunk_tokens;
  conv.turns = {{0, 1, 4 * chunk + 10, 1}, {0, 2, 20, 1}, {0, 3, 20, 1}};
  EngineModel engine(gpu, kv, params, {conv});
  engine.start();
  ASSERT_TRUE(world.run_until([&] { return engine.done(); }).ok());
  const auto& recs = engine.records();
  ASSERT_EQ(recs.size(), 3u);
  ASSERT_EQ(recs[1].hit_chunks, 4u);
  ASSERT_EQ(recs[1].loaded_chunks, 2u);  // chunks 2 and 3 were lost
  EXPECT_EQ(recs[2].hit_chunks, 4u);     // turn 2 stored them again
}

// vLLM V1 reaches a waiting request (and looks it up, starting its load and
// hint) only when the step has tokens left for it; the session-25 model looks
// every waiting request up at once (engine.lookup_on_admission, review, session 26).
TEST(EngineModel, R8_WithLookupOnAdmissionAWaitingRequestIsLookedUpWhenTheBudgetReachesIt) {
  auto load_start = [](bool on_admission) {
    sim::SimWorld world(1);
    auto& gpu = world.add_node("gpu");
    EngineParams params;
    params.lookup_on_admission = on_admission;
    IdealKv kv(gpu, 1e12, params.kv_bytes_per_token * params.chunk_tokens);
    kv.preload("conv1/chunk0");
    kv.preload("conv1/chunk1");
    ConversationSpec busy;  // 10 steps of a full 2048-token budget
    busy.turns = {{0, 1, 20000, 1}};
    ConversationSpec loads;
    loads.start = 1ms;
    loads.turns = {{1, 1, 2 * params.chunk_tokens + 1, 1}};
    EngineModel engine(gpu, kv, params, {busy, loads});
    engine.start();
    EXPECT_TRUE(world.run_until([&] { return engine.done(); }).ok());
    const auto& recs = engine.records();
    EXPECT_EQ(recs.size(), 2u);
    EXPECT_EQ(recs.back().hit_chunks, 2u);
    return recs.back().load_start;
  };
  // Looked up at the pass after the step it arrived in (~205 ms), budget or not.
  EXPECT_LT(load_start(false), runtime::Instant(300ms));
  // The 10th step is the first with tokens left (20000 - 9 x 2048 < 2048).
  EXPECT_GT(load_start(true), runtime::Instant(1500ms));
}

// Stored at the finish, a turn's KV ends one token before its context: the
// last sampled token was never run through the model. A context of exactly
// one chunk stored a chunk whose last token's KV did not exist (review, session 26).
TEST(EngineModel, R8_AStoreAtTheFinishLeavesOutTheLastSampledToken) {
  sim::SimWorld world(1);
  auto& gpu = world.add_node("gpu");
  EngineParams params;
  params.store_prompt_after_prefill = false;
  IdealKv kv(gpu, 1e12, params.kv_bytes_per_token * params.chunk_tokens);
  ConversationSpec conv;
  conv.think_time = 1s;
  conv.turns = {{0, 1, params.chunk_tokens - 56, 56}, {0, 2, 300, 1}};
  EngineModel engine(gpu, kv, params, {conv});
  engine.start();
  ASSERT_TRUE(world.run_until([&] { return engine.done(); }).ok());
  ASSERT_EQ(engine.records().size(), 2u);
  EXPECT_EQ(engine.records()[1].hit_chunks, 0u);
}

// SPEC R8, hunt H2: a conversation's context accumulates over its turns; in
// int it wrapped past 2^31 tokens (negative prefill). Counted in 64 bits.
TEST(EngineModel, R8_ContextPastIntMaxIsCountedIn64Bits) {
  sim::SimWorld world(1);
  auto& gpu = world.add_node("gpu");
  EngineParams params;
  params.kv_bytes_per_token = 1;
  params.chunk_tokens = 1 << 16;  // 2^31 tokens are 2^15 chunk keys, not 2^31
  params.max_batched_tokens = 1 << 20;
  params.prefill_per_token = std::chrono::nanoseconds(0);
  IdealKv kv(gpu, 1e12, params.kv_bytes_per_token * params.chunk_tokens);
  ConversationSpec conv;
  conv.think_time = 10ms;  // the last turn's store has landed
  constexpr int kPrompt = 1 << 30;
  conv.turns = {{0, 1, kPrompt, 1}, {0, 2, kPrompt, 1}, {0, 3, 1, 1}};
  EngineModel engine(gpu, kv, params, {conv});
  engine.start();
  ASSERT_TRUE(world.run_until([&] { return engine.done(); }).ok());
  const auto& recs = engine.records();
  ASSERT_EQ(recs.size(), 3u);
  const std::int64_t chunk = params.chunk_tokens;
  std::int64_t context = 0;
  for (const auto& r : recs) {
    context += r.turn == 3 ? 1 : kPrompt;
    // What was not loaded was computed: the whole context less the loaded chunks.
    EXPECT_EQ(r.prefill_tokens, context - static_cast<std::int64_t>(r.loaded_chunks) * chunk)
        << "turn " << r.turn;
    context += 1;  // the output token
  }
  EXPECT_EQ(recs[1].hit_chunks, static_cast<std::size_t>((std::int64_t{kPrompt} + 1) / chunk));
  EXPECT_GT(recs[2].hit_chunks, static_cast<std::size_t>(std::int64_t{INT32_MAX} / chunk));
}

// SPEC R8, hunt W9: engine counts are whole numbers and never booleans; a
// fraction was truncated (chunk_tokens 1.5 ran as 1).
TEST(EngineModel, R8_EngineParamsRefuseFractionsAndBooleans) {
  for (const char* key : {"kv_bytes_per_token", "chunk_tokens", "max_running", "max_batched_tokens",
                          "decode_per_context_token_ns", "store_prompt_after_prefill"}) {
    for (const nlohmann::json& v : {nlohmann::json(1.5), nlohmann::json(true)}) {
      auto p = engine_params_from_json({{key, v}});
      ASSERT_FALSE(p.ok()) << key << " " << v.dump();
      EXPECT_EQ(p.status().code(), ErrorCode::kBadRequest);
      EXPECT_EQ(p.status().message().rfind(std::string("/engine/") + key + ": expected ", 0), 0u)
          << p.status().message();
    }
  }
  EXPECT_FALSE(engine_params_from_json({{"step_base_us", false}}).ok());
  auto unknown = engine_params_from_json({{"chunk_token", 256}});
  ASSERT_FALSE(unknown.ok());
  EXPECT_NE(unknown.status().message().find("expected one of: chunk_tokens"), std::string::npos)
      << unknown.status().message();
  // Microsecond fields take fractions: they are whole nanoseconds.
  auto p = engine_params_from_json({{"prefill_per_token_us", 1.5}, {"chunk_tokens", 16}});
  ASSERT_TRUE(p.ok()) << p.status().ToString();
  EXPECT_EQ(p->prefill_per_token, std::chrono::nanoseconds(1500));
  EXPECT_EQ(p->chunk_tokens, 16);
  // A fraction of a nanosecond is refused, not rounded away: 0.0004 us ran as
  // 0, and two sweep values as the same point (session 27 review).
  for (const double us : {0.0004, 1.0000001}) {
    auto fraction = engine_params_from_json({{"scheduler_to_worker_us", us}});
    ASSERT_FALSE(fraction.ok()) << us;
    EXPECT_NE(fraction.status().message().find("whole nanoseconds"), std::string::npos)
        << fraction.status().message();
  }
  EXPECT_TRUE(engine_params_from_json({{"scheduler_to_worker_us", 0.3}}).ok());
  EXPECT_TRUE(engine_params_from_json({{"step_base_us", 12345.678}}).ok());
  // The store-timing switch is 0 or 1.
  EXPECT_TRUE(
      engine_params_from_json({{"store_prompt_after_prefill", 1}})->store_prompt_after_prefill);
  auto two = engine_params_from_json({{"store_prompt_after_prefill", 2}});
  ASSERT_FALSE(two.ok());
  EXPECT_NE(two.status().message().find("expected an integer in 0..1"), std::string::npos)
      << two.status().message();
}

// Found by clang-tidy (bugprone-misplaced-widening-cast): hi - lo + 1 was
// computed in int, so a range wider than INT_MAX drew out of range or, for the
// whole int range, asked next_below(0) (a division by zero).
TEST(EngineModel, IntRangeDrawsStayInTheWidestRanges) {
  runtime::DeterministicRandom rnd(7);
  constexpr int kMin = std::numeric_limits<int>::min();
  constexpr int kMax = std::numeric_limits<int>::max();
  const IntRange ranges[] = {{0, kMax}, {kMin, kMax}, {kMin, 0}, {kMax, kMax}, {600, 1000}};
  for (const IntRange& range : ranges) {
    bool below_middle = false;
    bool above_middle = false;
    const std::int64_t middle = (std::int64_t{range.lo} + range.hi) / 2;
    for (int i = 0; i < 200; ++i) {
      const int v = range.draw(rnd);
      ASSERT_GE(v, range.lo);
      ASSERT_LE(v, range.hi);
      below_middle |= v <= middle;
      above_middle |= v >= middle;
    }
    EXPECT_TRUE(below_middle && above_middle) << range.lo << ".." << range.hi;
  }
}

}  // namespace
}  // namespace rcxl::scenarios
