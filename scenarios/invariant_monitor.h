// The invariants of issue #6 that every simulated run asserts, kept apart from
// the code they watch: the monitor sees the extension's hooks, the NICs' calls
// and the agent's boots through decorators and keeps its own books, so a bug in
// the agent's or the sim RNIC's bookkeeping cannot hide itself.
#pragma once

#include <cstdint>
#include <map>
#include <set>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "core/extension/region_extension.h"
#include "core/runtime/clock.h"
#include "core/runtime/nic.h"

namespace rcxl::scenarios {

struct InvariantLimits {
  std::uint32_t max_hint_requests = 4096;       // SPEC R3.3, per connection
  std::uint32_t max_ranges_per_message = 4096;  // SPEC R3.4
  std::size_t max_queued_hints = 1024;          // SPEC R3.5, per client (not its own config)
  std::size_t max_open_hinted_requests = 4096;  // SPEC R3.6, per client
};

class InvariantMonitor {
 public:
  InvariantMonitor(const runtime::Clock& clock, InvariantLimits limits);

  // --- extension hooks (CheckedExtension), after the wrapped extension answered
  void on_mapped(const ext::RegionInfo& region, bool fresh, bool accepted);
  void on_hint(const ext::Hint& hint, bool accepted);
  void on_write_wait(const ext::WriteWait& wait);
  void on_connection_closed(std::uint64_t conn);
  // The agent stopped: its connections (and their hint requests) are gone.
  void on_extension_closed();

  // --- the agent's wire (CheckedRuntime): each frame it read, and each it
  // sent, on connection `conn`
  void on_agent_frame_in(std::uint64_t conn, std::string_view payload);
  void on_agent_frame_out(std::uint64_t conn, std::string_view payload);
  // Connection `conn` closed: its unanswered maps license nothing any more.
  void on_agent_wire_closed(std::uint64_t conn);

  // --- NIC calls (CheckedNic)
  void on_register(const runtime::Registration& registration);
  void on_deregister(const runtime::Registration& registration);
  // The NIC's process ended (an agent restart): its registrations died with it.
  void on_process_end();
  // One op of a batch posted at `posted` completed with `status`.
  void on_completion(const runtime::RdmaOp& op, runtime::Instant posted, const Status& status);

  // --- the agent's advertised boot, sampled
  void on_boot(const std::string& boot);
  // The agent's boot changed (R6.3/R6.4): it dropped every open hint request
  // and every registration.
  void on_boot_change(const std::string& boot);

  // --- end of run
  // A store held its WRITEs `longest` for waits; SPEC R4.3 allows `allowed`.
  void check_write_wait(const std::string& client, runtime::Duration longest,
                        runtime::Duration allowed);
  // A client's hint queue held `queued` droppable hints at once (SPEC R3.5) and
  // its hint thread kept `open` hinted requests open at once (R3.6).
  void check_client_hints(const std::string& client, std::size_t queued, std::size_t open);
  // Hint requests still open at the end (SPEC R3.3: ended or closed with their connection).
  void check_all_hints_closed();

  // One line per kind of violation, with its first example and a count.
  std::vector<std::string> violations() const;
  std::uint64_t violation_count() const;

  // What the extension was told (SPEC R6.6): connection_closed calls, and the
  // hint requests those connections still had open in the extension.
  std::uint64_t connection_closed_calls() const { return connection_closed_calls_; }
  std::uint64_t requests_open_at_close() const { return requests_open_at_close_; }

 private:
  void violate(const std::string& kind, const std::string& example);
  // Every live rkey is dropped now (R6.3), unless it was dropped earlier.
  void drop_live_rkeys();

  const runtime::Clock& clock_;
  InvariantLimits limits_;
  std::set<std::uint64_t> mapped_regions_;              // every region id mapped so far
  std::map<std::uint64_t, std::string> owner_handles_;  // region -> handle its alloc gave
  // Maps asking fresh under the owner handle, not answered yet: conn -> id -> region.
  // Only such a map may bring fresh to the extension (a refused one licenses nothing).
  std::map<std::uint64_t, std::map<std::string, std::uint64_t>> fresh_owner_maps_;
  std::map<std::uint64_t, std::uint32_t> fresh_licences_;    // region -> such maps
  std::map<std::uint64_t, std::set<std::string>> open_;      // conn -> open hint requests
  std::map<std::uint32_t, runtime::Instant> dropped_rkeys_;  // rkey -> deregistered at
  std::set<std::uint32_t> live_rkeys_;                       // registered, not dropped
  std::vector<std::string> boots_;                           // distinct, in order
  bool after_unknown_ = false;
  std::uint64_t connection_closed_calls_ = 0;
  std::uint64_t requests_open_at_close_ = 0;
  struct Kind {
    std::string first_example;
    std::uint64_t count = 0;
  };
  std::map<std::string, Kind> violations_;
};

}  // namespace rcxl::scenarios
