// rcxl::client::Handler (the seed's MaruHandler): stores KV chunks into own
// regions cut into pages and loads them by key, with read hints, write hints,
// write waits and promotes (SPEC R3-R6). Everything is asynchronous; public
// methods are thread-safe (they post to the handler's strand) and every
// `done` runs on that strand (core rule: no blocking).
#pragma once

#include <cstddef>
#include <cstdint>
#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "core/client/config.h"
#include "core/client/local_registration.h"
#include "core/client/memory_hints.h"
#include "core/client/memory_waits.h"
#include "core/client/queue_pairs.h"
#include "core/client/region_map_client.h"
#include "core/directory/directory_client.h"
#include "core/runtime/logger.h"
#include "core/runtime/nic.h"
#include "core/runtime/runtime.h"

namespace rcxl::client {

struct StoreItem {
  std::string key;
  std::vector<std::byte> bytes;  // at most chunk_size_bytes
  // Simulator only (Config::payload_sample_bytes): the chunk's size on the wire
  // when `bytes` is a sample of it; 0 means bytes.size().
  std::uint64_t wire_bytes = 0;

  std::uint64_t size() const { return wire_bytes ? wire_bytes : bytes.size(); }
};

struct StoreResult {
  std::size_t stored = 0;           // written and registered
  std::size_t already_present = 0;  // another writer was first; our page went back
  std::size_t failed = 0;           // the WRITE failed (e.g. the agent's boot changed)
  Status first_failure;             // why the first failed item failed (ok: none failed)
};

struct LoadResult {
  std::vector<std::vector<std::byte>> values;  // the leading hits, in key order
  // Why the hits end at a key the directory had when its READ (or queue
  // pair) failed, or its agent could not be asked for a mapping (unreachable,
  // timed out); ok when they end at a plain miss or a gone region's or boot's
  // location.
  Status stopped_by;
};

struct HandlerStats {
  std::uint64_t stores = 0;
  std::uint64_t loads = 0;
  std::uint64_t reads_posted = 0;
  std::uint64_t read_batches = 0;  // one per agent per load
  std::uint64_t writes_posted = 0;
  std::uint64_t boot_misses = 0;        // locations of a boot that is gone (R6.1)
  std::uint64_t foreign_locations = 0;  // naming an agent outside the pool (only_pool_agents)
  // Longer than chunk_size_bytes, which no store writes: a miss (another
  // client's bad register must not make loads read a region per key).
  std::uint64_t oversized_locations = 0;
  std::uint64_t remote_access_errors = 0;
  std::uint64_t regions_allocated = 0;
  // Pages of keys the directory let go (evicted or deleted), written again.
  std::uint64_t pages_reclaimed = 0;
  // Loads whose READs ended after the lookup's lease could have: their hits
  // were dropped (the pages may have been written again for other keys).
  std::uint64_t lease_outlasted = 0;
  // Registers the directory refused because it saw the agent's boot replaced
  // (an agent that came back under a boot it had left): that agent gets no
  // stores for unreachable_backoff, or until its boot moves.
  std::uint64_t boot_retired_refusals = 0;
  // A queue-pair connect could not reach a pool agent's RDMA endpoint: its
  // stores paused for unreachable_backoff (docs/client.md).
  std::uint64_t rdma_pauses = 0;
  std::uint64_t load_hints = 0;  // R3.7
  // Longest a store held its WRITEs for write waits (R4.3: at most
  // write_wait_ms + reply_timeout); the simulator asserts it in every run.
  runtime::Duration longest_write_wait{0};
};

class Handler {
 public:
  using StoreDone = std::function<void(Result<StoreResult>)>;
  using LoadDone = std::function<void(Result<LoadResult>)>;

  // `directory` may be shared with another role (R3.9); null makes one.
  Handler(runtime::Runtime& rt, Config config, runtime::Nic& nic,
          std::shared_ptr<directory::DirectoryClient> directory = nullptr);
  ~Handler();
  Handler(const Handler&) = delete;
  Handler& operator=(const Handler&) = delete;

  // Write-then-register: pages, write hint / write wait, RDMA WRITE, then the
  // directory; no reader can see a key before its bytes are in place.
  void store(std::vector<StoreItem> items, StoreDone done);
  // Directory lookup (leading hits, leased), READs batched per agent, bytes
  // back. A location whose boot is gone is a miss, never stale bytes.
  // `engine_hinted`: the engine hinted this load already (no R3.7 hint).
  void load(std::vector<std::string> keys, LoadDone done, bool engine_hinted = false);
  // How many leading keys hit (a probe; no lease). With only_pool_agents, a
  // hit on a foreign agent or longer than a chunk ends them, as in a load.
  void lookup(const std::vector<std::string>& keys, std::function<void(Result<std::size_t>)> done);

  // R3.4: queue a hint and its end on the hint strand.
  void hint_read(std::string request, std::vector<std::string> keys);
  void end_read_hint(std::string request);
  // R4.5: queue a read_promote for every agent of the pool that takes it.
  void promote_read(std::string request);

  const Config& config() const { return config_; }
  runtime::Strand& strand() { return *strand_; }
  MemoryHints& hints() { return *hints_; }
  MemoryWaits& waits() { return *waits_; }
  RegionMapClient& regions() { return *regions_; }
  directory::DirectoryClient& directory() { return *directory_; }
  const HandlerStats& stats() const { return stats_; }
  std::size_t free_pages() const { return free_pages_.size(); }

 private:
  struct Page {
    std::string agent;
    std::uint64_t region = 0;
    std::uint64_t offset = 0;
    // The region's owner handle: after an agent restart the id may name a
    // region allocated anew, and a page of the old one must not land there.
    std::string handle;
  };
  // The own region `page` belongs to, or null when it went back (or its id
  // now names another region).
  const OwnRegion* own_region_of(const Page& page) const;
  struct StoreJob;
  struct LoadJob;

  // Free pages first, then pages the directory gives back (once per call),
  // then a new region from the next agent.
  void reserve_pages(std::size_t n, std::size_t agents_tried,
                     std::function<void(Result<std::vector<Page>>)> done,
                     bool reclaim_asked = false);
  // Takes the locations the directory gave back that are still pages of an
  // own region under its current boot.
  void take_reclaimed(const std::vector<directory::Location>& locations);
  // The directory refused a register of `page` under `boot` as retired.
  void stop_storing_under(const Page& page, const std::string& boot);
  bool boot_refused(const std::string& agent, const std::string& boot) const;
  // No stores into `agent`'s pages under `boot` now: the boot is refused, or
  // the agent's RDMA endpoint could not be reached.
  bool stores_paused(const std::string& agent, const std::string& boot) const;
  // Lifts refusals and RDMA backoffs whose time is up; parks free pages of
  // agents still paused.
  void sort_refused_boots();
  void start_store(std::shared_ptr<StoreJob> job);
  void write_and_register(std::shared_ptr<StoreJob> job);
  void register_written(std::shared_ptr<StoreJob> job);
  // Items the directory refused (indexes into the job): a probe tells a key
  // already there (first writer wins) from one refused because its boot is
  // retired; answers the job when every one is sorted out.
  void sort_out_refused(std::shared_ptr<StoreJob> job, std::shared_ptr<StoreResult> result,
                        std::shared_ptr<const std::vector<std::size_t>> refused);
  // Whether a load takes a hit at `l` (else the hits end before it).
  bool loads_from(const directory::Location& l) const;
  void resolve_locations(std::shared_ptr<LoadJob> job, std::size_t index);
  // Checks location `index` against its mapping and the agent's boot.
  bool accept_location(LoadJob& job, std::size_t index, const Result<Mapping>& mapping);
  // Location `index` names a boot its mapping does not: ask the agent once per
  // load (this client may be behind; else the boot is gone and the directory
  // is told), then go on or end the prefix there.
  void check_location_boot(std::shared_ptr<LoadJob> job, std::size_t index,
                           const Result<Mapping>& mapping);
  // The prefix ends at a location whose map failed: why, unless its region or boot is gone.
  void note_unreached(LoadJob& job, const Status& map_failure);
  void read_batches(std::shared_ptr<LoadJob> job);
  void finish_load(std::shared_ptr<LoadJob> job);
  void gated_reads(const std::string& agent, std::shared_ptr<runtime::QueuePair> qp,
                   std::vector<runtime::RdmaOp> ops, std::shared_ptr<LoadJob> job,
                   const std::vector<std::size_t>& indexes,
                   std::function<void(std::vector<Status>)> done);
  void on_boot_change(const std::string& agent, const std::string& old_boot,
                      const std::string& new_boot, const std::vector<OwnRegion>& lost);
  // Config::zero_copy on a NIC that needs it: registers the buffers of ops
  // about to be posted, which `owner` holds; null otherwise.
  std::shared_ptr<LocalRegistration> register_local(const std::vector<runtime::RdmaOp>& ops,
                                                    std::shared_ptr<const void> owner);
  RangesByAgent subset(const RangesByAgent& all, const std::set<std::string>& agents) const;

  Config config_;
  runtime::Logger log_;
  runtime::Clock& clock_;
  std::unique_ptr<runtime::Strand> directory_strand_;  // only when the handler made the client
  std::shared_ptr<runtime::StrandGate> reply_gate_;    // directory replies onto strand_
  std::shared_ptr<directory::DirectoryClient> directory_;
  std::unique_ptr<RegionMapClient> regions_;
  std::unique_ptr<MemoryHints> hints_;
  std::unique_ptr<MemoryWaits> waits_;
  runtime::Nic& nic_;
  std::unique_ptr<QueuePairs> qps_;
  std::deque<Page> free_pages_;
  std::size_t next_agent_ = 0;
  std::size_t reclaim_rotation_ = 0;  // where the next reclaim's region list starts
  // Per agent, a boot the directory refuses registers under (retired there):
  // its pages are parked and no region is allocated there until `lift_at`
  // (unreachable_backoff later) or the agent's boot moves. Lifted, the parked
  // pages are tried again: the directory may have forgotten the boot (its
  // memory of boots is bounded), or a new refusal parks them again.
  struct RefusedBoot {
    std::string boot;
    runtime::Instant lift_at{0};
  };
  std::map<std::string, RefusedBoot> refused_boots_;
  // Per agent whose RDMA endpoint a connect could not reach: when it is tried
  // again (unreachable_backoff later, or at its next boot). Its pages are
  // parked and no region is allocated there meanwhile.
  struct RdmaPause {
    std::string endpoint;  // as the NIC reaches it, for messages
    runtime::Instant lift_at{0};
  };
  std::map<std::string, RdmaPause> rdma_unreachable_;
  std::deque<Page> parked_pages_;
  std::uint64_t seq_ = 0;
  HandlerStats stats_;
  std::shared_ptr<bool> alive_ = std::make_shared<bool>(true);
  // Last: destroyed first, its thread joined before the members its tasks use.
  std::unique_ptr<runtime::Strand> strand_;
};

}  // namespace rcxl::client
