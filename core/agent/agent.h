// The memory-node agent (SPEC R1–R6, PROTOCOL.md): owns the node's pool, hands
// out regions, registers them with the NIC on map, checks hints and waits and
// passes them to the region extension, and tracks the boot (generation).
//
// Threads: every connection is served on its own strand (a thread in the thread
// runtime), requests of one connection in order; the generation poll and the
// sweep have strands of their own. Shared state sits under one std::mutex; the
// extension is always called after it is released (SPEC R3.2).
#pragma once

#include <atomic>
#include <cstdint>
#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "core/agent/agent_metrics.h"
#include "core/agent/boot_tracker.h"
#include "core/agent/region_allocator.h"
#include "core/agent/region_table_file.h"
#include "core/extension/region_extension.h"
#include "core/protocol/fast_request_decoder.h"
#include "core/protocol/frame_codec.h"
#include "core/protocol/framed_conn.h"
#include "core/protocol/messages.h"
#include "core/runtime/logger.h"
#include "core/runtime/memory_pool.h"
#include "core/runtime/nic.h"
#include "core/runtime/runtime.h"

namespace rcxl::agent {

using namespace std::chrono_literals;

// SPEC R7 (the binary fills it from flags).
struct AgentConfig {
  std::vector<runtime::Address> listen;
  // The shared secret (file contents, trailing whitespace removed); nullopt is
  // `--auth none`, allowed only when every listener is loopback.
  std::optional<std::string> auth_secret;
  std::string boot_id;
  std::uint32_t max_hint_requests = 4096;
  runtime::Duration generation_poll = 100ms;
  runtime::Duration generation_grace = 2s;
  runtime::Duration sweep_interval = 1s;
  std::uint32_t max_frame_bytes = protocol::kDefaultMaxFrameBytes;
  std::uint32_t max_connections = 0;  // 0 = no limit
  // A connection without a successful hello by then is closed (0 = never), so
  // silent peers cannot hold connection threads and slots for good.
  runtime::Duration hello_timeout = 10s;
  // The region table, rewritten (file_system().write_file) whenever it changes
  // and loaded at start, so regions survive an agent restart that keeps the
  // memory. Empty: no persistence.
  std::string state_file;
  // The pool's bytes did not exist before this start (a file: pool created or
  // grown now): a region table of this node boot does not describe them, so
  // its regions are not restored (their bytes are gone; ids still go on).
  bool pool_is_new = false;
  // A map under a region's read handle gets an rkey of its own, registered for
  // remote READ only, so a reader cannot WRITE the region (docs/agent.md,
  // *Security model*). False: every map gets the owner's read-write rkey.
  bool read_only_reader_rkeys = true;
  // `--rdma-auth proof`: the NIC takes a queue pair only with the proof of a
  // live, authenticated control connection in its connect (docs/agent.md,
  // *RDMA connect proofs*). Needs auth_secret and a NIC that checks connects.
  bool rdma_connect_proofs = false;
  // Called after every boot change (R6.3/R6.4) with the new boot, outside the
  // agent's lock; the simulator's invariant monitor listens here.
  std::function<void(const std::string& boot)> on_boot_change;
};

class Agent {
 public:
  // The key an alloc token is kept under: its SHA-256 ("" for none).
  static std::string token_key(const std::string& token);
  Agent(runtime::Runtime& runtime, runtime::MemoryPool& pool, runtime::Nic& nic,
        std::unique_ptr<ext::RegionExtension> extension, AgentConfig config);
  ~Agent();
  Agent(const Agent&) = delete;
  Agent& operator=(const Agent&) = delete;

  // Reads the generation (a failure is the error: the binary exits non-zero),
  // listens, starts the poll and the sweep.
  Status start();
  // Stops listening, closes connections, deregisters every mapping, waits for
  // agent code still running on other threads, then closes the extension.
  // Idempotent. Never call it (or destroy the agent) from one of the agent's
  // tasks or an extension hook: it would wait for itself.
  void stop();

  // Where it listens (port 0 resolved).
  std::vector<runtime::Address> listen_addresses() const;
  std::string boot() const;
  // The actions hello advertises (empty without an extension).
  std::vector<std::string> advertised_actions() const;
  AgentMetrics metrics() const;
  std::string metrics_text() const;
  // One generation read now (as hello, map and the sweep do).
  void read_generation();

  // --- introspection (tests, tools)
  std::size_t open_hint_requests(std::uint64_t conn) const;
  bool holds(std::uint64_t conn, std::uint64_t region) const;
  // The read-write registration (owner-handle maps); the read-only one (read-handle maps).
  std::optional<runtime::Registration> registration(std::uint64_t region) const;
  std::optional<runtime::Registration> read_registration(std::uint64_t region) const;
  std::uint64_t free_bytes() const;
  std::size_t retiring_regions() const;

 private:
  struct Region;
  struct ConnRecord;
  class Session;
  // Agent code running on connection strands and extension threads (their tasks
  // hold sessions, not the agent): ~Agent waits until none runs, then no more start.
  class Activity;
  using SessionPtr = std::shared_ptr<Session>;
  // A request as it arrived: decoded by the fast path, or a JSON object.
  // A write_wait's reply goes once (R4.4): the extension's answer or the timer.
  struct WaitReply {
    std::atomic<bool> answered{false};
    std::optional<runtime::TimerId> timer;  // set and read on the session's strand
  };
  // An extension that has not answered a write_wait this long after its
  // timeout_ms gets extension_failed for it.
  static constexpr runtime::Duration kWriteWaitGrace = std::chrono::seconds(1);

  struct Incoming {
    protocol::Json message;
    std::optional<protocol::DecodedRequest> decoded;
    // A bad frame: answered in its turn, after the replies owed before it, then closed.
    std::optional<Status> bad_frame;
    std::size_t bytes = 0;  // its frame's size, while it waits in the queue
  };

  void accept(std::shared_ptr<runtime::Conn> raw);
  // On a NIC thread: `proof` names a live control connection that said hello.
  bool accept_connect_proof(std::string_view proof) const;
  // The simdjson path for `extension` frames; false leaves the frame to nlohmann.
  bool decode_fast(const SessionPtr& s, std::string& frame);
  void on_message(const SessionPtr& s, Incoming message);
  void on_closed(const SessionPtr& s);
  void pump(const SessionPtr& s);
  void complete(const SessionPtr& s, const protocol::Json& reply, bool close_after = false);
  void handle(const SessionPtr& s, Incoming& message);

  void handle_hello(const SessionPtr& s, const protocol::Json& id, const protocol::HelloRequest& r);
  // PROTOCOL.md's alloc reply: {region, size, handle, read_handle}.
  static protocol::Json allocated_reply(const protocol::Json& id, const Region& region);
  // Under mu_: answers an alloc whose token is known or withdrawn; nullopt when
  // it is neither (a new alloc). `unrecorded` is set to a region the answer
  // must wait for: made, but not yet in the --state-file.
  std::optional<protocol::Json> answer_token_locked(const protocol::Json& id,
                                                    const protocol::AllocRequest& r,
                                                    std::optional<std::uint64_t>& unrecorded);
  void withdraw_token_locked(const std::string& token);
  void handle_alloc(const SessionPtr& s, const protocol::Json& id, const protocol::AllocRequest& r);
  void handle_map(const SessionPtr& s, const protocol::Json& id, const protocol::MapRequest& r);
  void handle_release(const SessionPtr& s, const protocol::Json& id,
                      const protocol::ReleaseRequest& r);
  void handle_free(const SessionPtr& s, const protocol::Json& id, const protocol::FreeRequest& r);
  void handle_extension(const SessionPtr& s, const protocol::Json& id,
                        const protocol::ExtensionRequest& r);

  // validate_access -> register -> mapped, outside the lock.
  // `announce`: the region has no registration yet, so the extension is asked
  // (validate_access) and told (mapped); a second registration only adds an rkey.
  Result<runtime::Registration> register_and_announce(const ext::RegionInfo& info, bool fresh,
                                                      unsigned access, bool announce);
  // Under mu_: checks one message's ranges and handles, filling pool offsets.
  Status check_ranges_locked(const protocol::ExtensionRequest& r,
                             std::vector<ext::Range>& out) const;
  void drop_hold_locked(Region& region, std::uint64_t conn);
  void deregister_locked(Region& region);
  // R6.3: a registration the NIC would not drop stays live, so it is kept and
  // tried again at each sweep; its region's memory is not given out again
  // (the region is not retired) while one lingers.
  void drop_registration_locked(const runtime::Registration& reg, std::uint64_t region);
  void linger_locked(const runtime::Registration& reg, std::uint64_t region, const Status& why);
  void retry_lingering();  // on the sweep's strand; takes mu_ itself
  bool lingers_locked(std::uint64_t region) const;
  static bool still_live(const Status& deregistered);
  // A boot change: every mapping, hold and open hint request goes (SPEC R6.3).
  // Returns the closed requests (conn, name): the extension is told outside mu_.
  std::vector<std::pair<std::uint64_t, std::string>> drop_everything_locked();
  // read_hint_end to the extension for requests the agent closed on its own,
  // each on its connection's strand.
  void end_closed_requests(const std::vector<std::pair<std::uint64_t, std::string>>& closed);
  void retire_outside_lock(const std::vector<ext::RegionInfo>& candidates);
  // The state file: loaded once at start; written after each change, outside mu_.
  Status load_regions();
  Status persist_regions();
  // SPEC R6.4: whether the state file holds the current `~n` count (true without one).
  bool unknown_count_recorded() const;
  // A generation read while the count is not on disk: written first, else nullopt.
  std::optional<std::string> keep_unknown_until_recorded(std::optional<std::string> generation);
  // persist_regions with state_mu_ already held.
  Status write_regions_locked();
  // The sweep's retry of a state-file write that failed.
  void rewrite_unwritten_table();
  RegionTable snapshot_locked() const;
  void schedule_poll(runtime::Strand& strand);
  void schedule_sweep(runtime::Strand& strand);
  void sweep();
  // Destroys the sessions closed so far (on reap_strand_).
  void reap_closed_sessions();
  // Queues reap_closed_sessions() on reap_strand_ (reap_posted_ set by the caller).
  void post_reap(runtime::Duration delay);
  // Takes the closed sessions nothing else holds any more (counted in reaping_).
  std::vector<SessionPtr> take_reapable_locked();
  protocol::Json refuse_hint_locked(const protocol::Json& id, const Status& status, bool with_boot);
  Status call_extension(const char* hook, const std::function<Status()>& call);

  runtime::Runtime& rt_;
  runtime::MemoryPool& pool_;
  runtime::Nic& nic_;
  std::unique_ptr<ext::RegionExtension> ext_;
  const AgentConfig config_;
  runtime::Logger log_;
  std::unique_ptr<runtime::Strand> accept_strand_;
  std::unique_ptr<runtime::Strand> poll_strand_;
  std::unique_ptr<runtime::Strand> sweep_strand_;
  std::unique_ptr<runtime::Strand> reap_strand_;  // ends closed connections' strands
  std::vector<std::unique_ptr<runtime::Listener>> listeners_;
  std::atomic<bool> started_{false};
  std::atomic<bool> up_{false};  // start() succeeded
  std::atomic<bool> stopped_{false};

  // One generation reader at a time (SPEC R6.2); taken before mu_, never after.
  std::mutex generation_mu_;
  // One state-file writer at a time, snapshots in order; taken before mu_.
  std::mutex state_mu_;
  mutable std::mutex mu_;
  BootTracker boot_;
  RegionAllocator allocator_;
  std::unique_ptr<runtime::RandomSource> handle_random_;
  std::unique_ptr<runtime::RandomSource> challenge_random_;
  std::set<std::string> advertised_;
  std::vector<std::string> advertised_list_;
  std::map<std::uint64_t, std::unique_ptr<Region>> regions_;
  std::map<std::uint64_t, ext::RegionInfo> retiring_;
  // Registrations whose deregister failed, and their regions (drop_registration_locked).
  std::vector<std::pair<runtime::Registration, std::uint64_t>> lingering_;
  // An alloc's token -> the region it made, while that region lives (docs/agent.md).
  std::map<std::string, std::uint64_t> alloc_tokens_;  // by token_key
  // Tokens whose region was freed, or that a made_only ask found unused: an
  // alloc with one (a first alloc that came late) makes nothing. The newest
  // kMaxWithdrawnTokens, oldest forgotten first.
  std::set<std::string> withdrawn_tokens_;
  std::deque<std::string> withdrawn_order_;
  static constexpr std::size_t kMaxWithdrawnTokens = 4096;
  std::map<std::uint64_t, ConnRecord> conns_;
  std::map<std::uint64_t, SessionPtr> sessions_;
  // Destroyed on reap_strand_ once they closed and nothing else holds them
  // (never on their own strand):
  // each holds a thread on the thread runtime until then.
  std::vector<SessionPtr> closed_sessions_;
  bool reap_posted_ = false;                    // a reap of closed_sessions_ is queued
  std::size_t reaping_ = 0;                     // taken from closed_sessions_, their threads ending
  std::optional<std::string> unusable_logged_;  // the last one logged (generation_mu_)
  // SPEC R6.4: the `~n` count the state file holds (mu_); an unknown period
  // whose count is not on disk does not end (a restart would go back a boot).
  std::uint64_t recorded_unknown_periods_ = 0;
  // The last state-file write failed: the sweep writes again, so a free it
  // missed does not come back live after a restart (docs/agent.md).
  bool table_unwritten_ = false;                     // state_mu_
  std::optional<runtime::Instant> next_record_try_;  // generation_mu_
  // Spare simdjson parsers (each keeps buffers sized to the largest frame it saw).
  std::mutex decoders_mu_;
  std::vector<std::unique_ptr<protocol::FastRequestDecoder>> decoders_;
  // Freed while a map was registering them: not retired before that map is done.
  std::set<std::uint64_t> freed_while_mapping_;
  // Retiring regions whose retire() a caller is inside (free and sweep race).
  std::set<std::uint64_t> retire_asked_;
  std::uint64_t next_region_ = 1;
  std::uint64_t next_conn_ = 1;
  const std::shared_ptr<Activity> activity_;
  AgentMetrics metrics_;
  // Requests queued behind the one being served, all connections (gauges;
  // bytes = the parsed-size bound the queues are limited by).
  std::atomic<std::uint64_t> queued_requests_{0};
  std::atomic<std::uint64_t> queued_request_bytes_{0};
};

}  // namespace rcxl::agent
