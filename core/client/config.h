// rcxl::client::Config (the seed's MaruConfig): what a Handler and the engine
// connectors are told. Defaults follow the seed; knobs that bound state are
// named constants here (after eRPC).
#pragma once

#include <algorithm>
#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "core/runtime/clock.h"
#include "core/runtime/transport.h"

namespace rcxl::client {

inline constexpr std::size_t kMaxQueuedHints = 1024;         // SPEC R3.5
inline constexpr std::size_t kMaxOpenHintRequests = 4096;    // SPEC R3.6
inline constexpr std::size_t kMaxRangesPerMessage = 4096;    // SPEC R3.4 / PROTOCOL.md
inline constexpr std::size_t kMaxSchedulerRequests = 65536;  // SPEC R3.8
inline constexpr std::uint32_t kMaxTimeoutMs = 10000;        // PROTOCOL.md timeout_ms

struct Config {
  runtime::Address directory;
  // The pool: own regions are allocated from these agents, round robin; read
  // promotes go to every one of them (R4.5).
  std::vector<runtime::Address> agents;
  // Locations naming an agent outside `agents` are misses, never connected
  // to (a reader and its scheduler hints trust only the pool). Off: any agent
  // a location of the directory group names is reached, as the seed does.
  bool only_pool_agents = false;
  // Where the round robin starts (modulo agents.size()): clients given
  // different starts spread their first regions over the pool instead of all
  // filling the first agent.
  std::size_t first_agent = 0;
  // Shared secret of agents and directory (file contents, trimmed); empty: --auth none.
  std::string secret;
  // Names hint requests and store tokens apart from other clients' (per connection anyway).
  std::string client_name = "rcxl-client";

  // One key's bytes take one page of this.
  std::uint64_t chunk_size_bytes = std::uint64_t{256} * 1024;
  // Alloc size; a multiple of 4096 and of the chunk.
  std::uint64_t region_size_bytes = std::uint64_t{64} * 1024 * 1024;

  // Simulator only: loads keep the first this-many bytes of each chunk and
  // time the rest (stores pass StoreItem::wire_bytes); 0 = every byte is real.
  std::uint32_t payload_sample_bytes = 0;

  bool read_hints = false;            // R3.4 (vLLM maru_read_hints)
  std::optional<bool> write_hints;    // R4.1; follows read_hints
  std::optional<bool> read_promotes;  // R4.5; follows read_hints
  std::optional<bool> hint_loads;     // R3.7 load-start hints; follows read_hints
  std::uint32_t write_wait_ms = 50;   // R4.3; 0 never waits
  bool read_hint_on_arrival = false;  // R3.8 scheduler connector
  // Zero copy: each store's and load's buffers are registered with the NIC
  // (Nic::register_local) while their RDMA runs, instead of a staging copy.
  // Costs a registration per buffer; the sim RNIC ignores it.
  bool zero_copy = false;
  // PAPER P3, the replaced design (#124): one control round trip to the agent
  // before each READ batch (docs/client.md says which).
  bool gate_reads = false;

  // A control reply later than this (on top of a wait's own timeout) is lost.
  runtime::Duration reply_timeout = std::chrono::seconds(1);
  // An agent that cannot be reached is not asked to wait for this long (R4.3).
  runtime::Duration unreachable_backoff = std::chrono::seconds(5);
  // An own region's map is retried this often (fresh stays on, R5.1).
  int map_attempts = 3;
  runtime::Duration map_retry_delay = std::chrono::milliseconds(100);
  // Read mappings kept for later loads; past it the cache starts over (a
  // freed region's entry is never read again, and would stay for good).
  std::size_t read_map_cache_limit = 4096;

  std::size_t max_queued_hints = kMaxQueuedHints;
  std::size_t max_open_hint_requests = kMaxOpenHintRequests;
  std::size_t max_ranges_per_message = kMaxRangesPerMessage;
  std::size_t max_scheduler_requests = kMaxSchedulerRequests;

  // Where the agent's NIC is reached; default: the agent's host (sim: its node).
  std::function<std::string(const runtime::Address&)> nic_endpoint;

  // What a hint or wait message carries at most: 1 .. the protocol's 4096 (R3.4),
  // whatever the field says (0 would split forever, more is refused).
  std::size_t ranges_per_message() const {
    return std::clamp<std::size_t>(max_ranges_per_message, 1, kMaxRangesPerMessage);
  }
  bool effective_write_hints() const { return write_hints.value_or(read_hints); }
  bool effective_read_promotes() const { return read_promotes.value_or(read_hints); }
  bool effective_hint_loads() const { return hint_loads.value_or(read_hints); }
  // Whether a location naming `agent` ("host:port") may be reached.
  bool reaches(const std::string& agent) const;
};

// "host:port" of an agent address (the key of every per-agent map).
inline std::string agent_key(const runtime::Address& a) {
  return a.ToString();
}

inline bool Config::reaches(const std::string& agent) const {
  return !only_pool_agents || std::any_of(agents.begin(), agents.end(),
                                          [&](const auto& a) { return agent_key(a) == agent; });
}

}  // namespace rcxl::client
