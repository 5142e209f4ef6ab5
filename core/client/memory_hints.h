// MemoryHints: the hint strand of one backend (SPEC R3.4-R3.6, R4.1, R4.5).
// Hints wait in a bounded queue (R3.5: at most 1024, more are dropped and
// counted); ends are never dropped and go at once, not behind the queue
// (R3.8). Hints are sent one after another on the hint
// strand's own agent connections (apart from maps and waits, R4.6): read hints
// probe the directory with locations for where the hits are, are grouped per
// agent and split to <= 4096 ranges per message, and go only to agents whose
// hello advertises the action. At most 4096 hinted requests stay open (R3.6).
// Public methods are thread-safe: they post to the hint strand.
#pragma once

#include <cstdint>
#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <set>
#include <string>
#include <variant>
#include <vector>

#include "core/client/agent_hello.h"
#include "core/client/config.h"
#include "core/client/ranges.h"
#include "core/directory/directory_client.h"
#include "core/directory/rpc_connection.h"
#include "core/runtime/runtime.h"

namespace rcxl::client {

struct MemoryHintsStats {
  std::uint64_t queued = 0;               // hints accepted into the queue
  std::uint64_t dropped = 0;              // hints refused because the queue was full (R3.5)
  std::uint64_t forced_ends = 0;          // requests ended because too many were open (R3.6)
  std::uint64_t probes = 0;               // directory probes with locations
  std::uint64_t skipped_unreachable = 0;  // agents skipped while in backoff
  std::size_t max_queue_depth = 0;        // items waiting (ends go at once)
  std::size_t max_queued_hints = 0;       // droppable hints waiting at once (R3.5 bounds it)
  std::size_t open_requests = 0;
  std::size_t max_open_requests = 0;  // hinted requests open at once (R3.6 bounds it)
  std::size_t max_ranges_in_message = 0;
  std::uint64_t ended_before_sent = 0;            // queued hints and promotes whose end came first
  std::map<std::string, std::uint64_t> messages;  // per action
};

class MemoryHints {
 public:
  // Agents' boots seen on hint connections go to the map client's strand:
  // `from` is the boot the hint connection believed before ("" = none yet).
  using BootObserver =
      std::function<void(const std::string& agent, const std::string& from, const std::string& to)>;

  MemoryHints(runtime::Runtime& rt, const Config& config, directory::DirectoryClient& directory);
  ~MemoryHints();

  void set_boot_observer(BootObserver observer) { boot_observer_ = std::move(observer); }
  // News of a boot from elsewhere (a map reply): later hints go under `to`,
  // if the hint connection still believes `from` (news crossing between the
  // strands must not take a boot back). Any thread.
  void observe_boot(const std::string& agent, const std::string& from, const std::string& to);

  // R3.4: hint `request` for `keys` (probed for locations when sent).
  void read_hint(std::string request, std::vector<std::string> keys);
  // R3.7: hint a load whose ranges are known already.
  void read_hint_ranges(std::string request, RangesByAgent ranges);
  // Never dropped (R3.5). Ends nothing when the request is not open.
  void end_read_hint(std::string request);
  // R4.1: fire and forget, no end.
  void write_hint(std::string token, RangesByAgent ranges);
  // R4.5: to every agent of the pool that takes it.
  void read_promote(std::string request);

  // A copy, taken on the hint strand's behalf (sim: call between runs).
  MemoryHintsStats stats() const;
  runtime::Strand& strand() { return *strand_; }
  // True when nothing is queued or being sent. Not thread-safe: read it on
  // the hint strand, or between runs in sim (tests).
  bool idle() const;

 private:
  struct ReadHintKeys {
    std::string request;
    std::vector<std::string> keys;
  };
  struct ReadHintRanges {
    std::string request;
    RangesByAgent ranges;
  };
  struct ReadHintEnd {
    std::string request;
  };
  struct WriteHint {
    std::string token;
    RangesByAgent ranges;
  };
  struct ReadPromote {
    std::string request;
  };
  using Item = std::variant<ReadHintKeys, ReadHintRanges, ReadHintEnd, WriteHint, ReadPromote>;
  struct Peer {
    std::shared_ptr<directory::RpcConnection> conn;
    AgentHello hello;
    std::string boot_at_connect;            // hello.boot as the current connect started
    std::set<std::string> past_boots;       // left behind: their locations are advice about nothing
    runtime::Instant unreachable_until{0};  // hints skip it until then
    bool failed_before = false;             // its last connect failed: probe, do not wait
  };
  struct OpenRequest {
    std::uint64_t seq = 0;
    std::set<std::string> agents;
  };
  using Next = std::function<void()>;

  void enqueue(Item item, bool is_end);
  void pump();
  // An end, sent at once (or after its request's hint now being sent).
  void end_now(const std::string& request);
  static const std::string* request_of(const Item& item);
  void process(Item& item, Next next);
  // The boot each agent's read hint goes under: the connection's, or the
  // locations' when none of that agent's locations is under it (R6.1).
  std::map<std::string, std::string> hint_epochs(
      const std::vector<directory::Location>& locations) const;
  void send_read_hint(const std::string& request, RangesByAgent ranges, Next next,
                      std::map<std::string, std::string> epochs = {});
  // `epochs`: per agent, the boot to send under instead of the connection's.
  // Per agent sent to: `sending(agent)` before its messages go, and
  // `failed(agent, pieces, status)` for each of its `pieces` messages that fails.
  struct RangedCallbacks {
    std::function<void(const std::string&)> sending;
    // (agent, pieces, status, every piece so far refused unseen by the extension).
    std::function<void(const std::string&, std::size_t, const Status&, bool)> failed;
  };
  void send_ranged(const std::string& action, const char* name_field, const std::string& name,
                   RangesByAgent ranges, std::function<void(std::set<std::string>)> done,
                   std::map<std::string, std::string> epochs = {}, RangedCallbacks callbacks = {});
  // The agent holds `request` (hint `seq`) open: it takes a slot here (R3.6).
  void add_open(const std::string& request, std::uint64_t seq, const std::string& agent);
  // It certainly does not (any more): the slot goes. A reply of an older hint
  // of the same name (`seq`) changes nothing.
  void forget_open(const std::string& request, std::uint64_t seq, const std::string& agent);
  void send_end(const std::string& request);
  void send_promote(const std::string& request, Next next);
  // Runs `fn` with the agent's peer once its hello is done (nullptr when unreachable).
  void with_peer(const std::string& agent, std::function<void(Peer*)> fn);
  // A connect attempt's outcome: the skip starts (failure) or ends (success).
  void note_connect(const std::string& agent, const Status& status);
  void send(Peer& peer, const std::string& agent, Json message,
            std::function<void(const Status&)> failed = nullptr);
  // The agent's boot moved to `boot` (a reply said so): keep it and tell the observer.
  void observe_boot_here(const std::string& agent, const std::string& boot);
  // Moves the believed boot; the old one joins past_boots.
  static void move_boot(Peer& peer, const std::string& boot);
  void for_each_peer(std::vector<std::string> agents,
                     std::function<void(const std::string&, Peer*)> fn, Next done);
  template <typename F>
  void update_stats(F f) {
    std::lock_guard<std::mutex> lock(stats_mutex_);
    f(stats_);
  }

  runtime::Runtime& rt_;
  const Config& config_;
  directory::DirectoryClient& directory_;
  std::shared_ptr<runtime::StrandGate> reply_gate_;  // directory replies onto strand_
  std::deque<std::pair<Item, bool>> queue_;          // item, is an end
  std::optional<std::string> in_flight_;  // the request of the read hint or promote being sent
  bool end_in_flight_ = false;            // its end came meanwhile
  std::size_t queued_hints_ = 0;          // droppable items in queue_
  bool busy_ = false;
  std::map<std::string, Peer> peers_;
  std::map<std::string, OpenRequest> open_;
  std::map<std::uint64_t, std::string> open_order_;  // seq -> request, oldest first
  std::uint64_t open_seq_ = 0;
  mutable std::mutex stats_mutex_;  // stats() may be read from any thread
  MemoryHintsStats stats_;
  BootObserver boot_observer_;
  std::shared_ptr<bool> alive_ = std::make_shared<bool>(true);
  // Last: destroyed first, its thread joined before the members its tasks use.
  std::unique_ptr<runtime::Strand> strand_;
};

}  // namespace rcxl::client
