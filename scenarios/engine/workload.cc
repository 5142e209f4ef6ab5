#include "scenarios/engine/workload.h"

#include <algorithm>
#include <climits>
#include <cstdint>
#include <optional>

#include "scenarios/json_document.h"

namespace rcxl::scenarios {

std::vector<ConversationSpec> make_workload(const WorkloadParams& params,
                                            runtime::RandomSource& rnd) {
  std::vector<ConversationSpec> out(static_cast<std::size_t>(params.conversations));
  for (int c = 0; c < params.conversations; ++c) {
    auto& conv = out[static_cast<std::size_t>(c)];
    const auto window = static_cast<std::uint64_t>(params.start_window.count());
    conv.start = runtime::Duration(window ? static_cast<std::int64_t>(rnd.next_below(window)) : 0);
    conv.think_time = params.think_time;
    for (int t = 1; t <= params.turns; ++t) {
      TurnSpec turn;
      turn.conversation = c;
      turn.turn = t;
      turn.prompt_tokens =
          (t == 1 ? params.first_prompt_tokens : params.followup_prompt_tokens).draw(rnd);
      turn.output_tokens = params.output_tokens.draw(rnd);
      conv.turns.push_back(turn);
    }
  }
  return out;
}

std::uint64_t requests_of(const WorkloadParams& w, int gpu_nodes) {
  if (w.kind == WorkloadKind::kStore) {
    return static_cast<std::uint64_t>(w.stores) * static_cast<std::uint64_t>(gpu_nodes);
  }
  return static_cast<std::uint64_t>(w.conversations) * static_cast<std::uint64_t>(w.turns);
}

std::uint64_t reuse_turns_of(const WorkloadParams& w) {
  if (w.kind == WorkloadKind::kStore) return 0;
  return static_cast<std::uint64_t>(w.conversations) *
         static_cast<std::uint64_t>(std::max(w.turns - 1, 0));
}

namespace {

// The JSON integer as int when it lies in [lo, hi]: get<int>() alone would
// wrap 4294967297 to 1 and accept it.
std::optional<int> int_in(const nlohmann::json& v, int lo, int hi) {
  if (!v.is_number_integer()) return std::nullopt;
  if (v.is_number_unsigned() ? v.get<std::uint64_t>() > static_cast<std::uint64_t>(hi)
                             : v.get<std::int64_t>() > hi || v.get<std::int64_t>() < lo) {
    return std::nullopt;
  }
  const int n = static_cast<int>(v.get<std::int64_t>());
  if (n < lo) return std::nullopt;
  return n;
}

constexpr char kContextSource[] =
    " tokens (a 1M-token context: 8x the 128K window of Llama-3.1-8B, the engine's model class)";

// The longest context a conversation can reach: its last turn's prompt holds
// every earlier prompt and output.
std::int64_t longest_context(const WorkloadParams& p) {
  return std::int64_t{p.first_prompt_tokens.hi} +
         std::int64_t{p.turns - 1} * p.followup_prompt_tokens.hi +
         std::int64_t{p.turns} * p.output_tokens.hi;
}

Status read_range(const nlohmann::json& j, const char* key, IntRange& out) {
  if (!j.contains(key)) return {};
  const auto& v = j[key];
  const auto lo = v.is_array() && v.size() == 2 ? int_in(v[0], 1, kMaxContextTokens) : std::nullopt;
  const auto hi = lo ? int_in(v[1], *lo, kMaxContextTokens) : std::nullopt;
  if (!hi) {
    return Error(ErrorCode::kBadRequest, std::string("/workload/") + key +
                                             ": expected [lo, hi] with 1 <= lo <= hi <= " +
                                             std::to_string(kMaxContextTokens) + kContextSource);
  }
  out = {*lo, *hi};
  return {};
}

}  // namespace

Result<WorkloadParams> workload_from_json(const nlohmann::json& j) {
  WorkloadParams p;
  if (!j.is_object()) return Error(ErrorCode::kBadRequest, "/workload: expected an object");
  if (j.contains("kind")) {
    const auto& k = j["kind"];
    if (k == "store") {
      p.kind = WorkloadKind::kStore;
    } else if (k != "serving") {
      return Error(ErrorCode::kBadRequest,
                   "/workload/kind: expected \"serving\" (the chat workload, the default) or "
                   "\"store\" (KV stores back to back: the store-bandwidth experiment)");
    }
  }
  // Each kind takes only its own fields: a serving field in a store experiment does nothing.
  static const std::vector<std::string> kServingFields = {"kind",
                                                          "conversations",
                                                          "turns",
                                                          "first_prompt_tokens",
                                                          "followup_prompt_tokens",
                                                          "output_tokens",
                                                          "start_window_s",
                                                          "think_time_s"};
  static const std::vector<std::string> kStoreFields = {"kind", "stores", "chunks_per_store"};
  const auto& known = p.kind == WorkloadKind::kStore ? kStoreFields : kServingFields;
  for (const auto& [key, value] : j.items()) {
    if (std::find(known.begin(), known.end(), key) == known.end()) {
      std::string list;
      for (const auto& k : known) list += (list.empty() ? "" : ", ") + k;
      return Error(ErrorCode::kBadRequest,
                   "/workload/" + pointer_token(key) + ": unknown field for kind " +
                       (p.kind == WorkloadKind::kStore ? "store" : "serving") +
                       "; expected one of: " + list);
    }
  }
  auto read_int = [&](const char* key, int& out, int lo, int hi, const char* why = "") -> Status {
    if (!j.contains(key)) return {};
    const auto n = int_in(j[key], lo, hi);
    if (!n) {
      return Error(ErrorCode::kBadRequest, std::string("/workload/") + key +
                                               ": expected an integer in " + std::to_string(lo) +
                                               ".." + std::to_string(hi) + why);
    }
    out = *n;
    return {};
  };
  auto read_seconds = [&](const char* key, runtime::Duration& out) -> Status {
    if (!j.contains(key)) return {};
    if (!j[key].is_number() || j[key].get<double>() < 0 || j[key].get<double>() > 3600) {
      return Error(ErrorCode::kBadRequest,
                   std::string("/workload/") + key + ": expected seconds in 0..3600");
    }
    if (!runtime::whole_nanoseconds(j[key].get<double>())) {
      return Error(ErrorCode::kBadRequest, std::string("/workload/") + key +
                                               ": expected whole nanoseconds (a multiple of "
                                               "1e-9 s), not " +
                                               j[key].dump() + "; the simulator keeps time in ns");
    }
    out = runtime::from_seconds(j[key].get<double>());
    return {};
  };
  if (p.kind == WorkloadKind::kStore) {
    for (Status s : {read_int("stores", p.stores, 1, kMaxStoredChunks),
                     read_int("chunks_per_store", p.chunks_per_store, 1, kMaxStoredChunks)}) {
      if (!s.ok()) return s;
    }
    if (std::int64_t{p.stores} * p.chunks_per_store > kMaxStoredChunks) {
      return Error(ErrorCode::kBadRequest,
                   "/workload: stores x chunks_per_store = " +
                       std::to_string(std::int64_t{p.stores} * p.chunks_per_store) +
                       " chunks; at most " + std::to_string(kMaxStoredChunks) +
                       " (32 TiB of 32 MiB chunks, past any pool): lower one of them");
    }
    return p;
  }
  for (Status s :
       {read_int("conversations", p.conversations, 1, kMaxConversations,
                 " (the engine scans every live conversation each step: more would not finish)"),
        read_int("turns", p.turns, 1, kMaxTurns),
        read_range(j, "first_prompt_tokens", p.first_prompt_tokens),
        read_range(j, "followup_prompt_tokens", p.followup_prompt_tokens),
        read_range(j, "output_tokens", p.output_tokens),
        read_seconds("start_window_s", p.start_window),
        read_seconds("think_time_s", p.think_time)}) {
    if (!s.ok()) return s;
  }
  if (const std::int64_t longest = longest_context(p); longest > kMaxContextTokens) {
    return Error(ErrorCode::kBadRequest,
                 "/workload: a conversation's context reaches " + std::to_string(longest) +
                     " tokens (first_prompt_tokens + (turns - 1) x followup_prompt_tokens + "
                     "turns x output_tokens, at their largest); at most " +
                     std::to_string(kMaxContextTokens) + kContextSource +
                     "; lower turns or the token ranges");
  }
  return p;
}

}  // namespace rcxl::scenarios
