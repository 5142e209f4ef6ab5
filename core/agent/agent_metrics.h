// The agent's counters, as a struct and as Prometheus text.
#pragma once

#include <cstdint>
#include <map>
#include <string>

namespace rcxl::agent {

struct AgentMetrics {
  std::map<std::string, std::uint64_t> hints_accepted;  // by action
  std::map<std::string, std::uint64_t> hints_refused;   // by error code
  std::uint64_t open_hint_requests = 0;                 // gauge, all connections
  std::uint64_t write_waits = 0;
  std::uint64_t maps = 0;  // successful map replies
  std::uint64_t maps_refused = 0;
  // allocs whose token named a region made before: that region answered again
  std::uint64_t allocs_answered_again = 0;
  std::uint64_t registrations = 0;        // gauge: NIC registrations held now (read-only ones too)
  std::uint64_t registrations_total = 0;  // register_memory calls that succeeded
  // gauge: of `registrations`, those the NIC would not drop, tried again at each sweep
  std::uint64_t lingering_registrations = 0;
  std::uint64_t boot_changes = 0;
  std::uint64_t unknown_periods = 0;
  std::uint64_t connections = 0;         // gauge
  std::uint64_t connections_closed = 0;  // closed control connections (R6.6: each told but at stop)
  // Hint requests a connection still held open when it closed, closed by that (R3.3).
  std::uint64_t hint_requests_closed_by_disconnect = 0;
  // Hint requests open when the boot changed, closed by that (PROTOCOL Boot);
  // each ended at the extension as read_hint_end would.
  std::uint64_t hint_requests_closed_by_boot_change = 0;
  std::uint64_t regions = 0;           // gauge: allocated, not freed
  std::uint64_t retiring_regions = 0;  // gauge: freed, retire() said no so far
  std::uint64_t extension_errors = 0;  // failed hooks incl. ignored connection_closed
  std::uint64_t fast_decoded = 0;      // requests the simdjson path decoded (the rest: nlohmann)
  std::uint64_t queued_requests = 0;   // gauge: waiting behind the one being served
  // gauge: their size as parsed (a nlohmann tree's bound, a fast-decoded frame's text)
  std::uint64_t queued_request_bytes = 0;
};

// Prometheus exposition format, metric names prefixed `rcxl_agent_`.
std::string metrics_text(const AgentMetrics& metrics);

}  // namespace rcxl::agent
