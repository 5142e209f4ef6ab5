// The key -> location registry of one application group (the seed's
// maru-server): first writer wins, prefix lookups under a lease, probes that
// refresh last use (SPEC R3.4), drops per region and per agent boot (R6.1),
// LRU eviction over a key capacity. Pure state: time comes in as arguments.
#pragma once

#include <algorithm>
#include <cstdint>
#include <functional>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

#include "core/directory/location.h"
#include "core/runtime/clock.h"
#include "core/runtime/status.h"

namespace rcxl::directory {

struct DirectoryOptions {
  std::uint64_t max_keys = 1u << 20;  // evict the least recently used past this
  runtime::Duration lease_ttl =
      std::chrono::seconds(10);  // a reader that dies frees its lease then
  // Boots remembered over all agents (current, retired, registered under);
  // past this the oldest is forgotten. Readers check a location's boot against
  // the agent's own, so a forgotten retired boot costs only a stale entry that
  // its first reader reports, never stale bytes.
  std::size_t max_boot_records = 1u << 16;
  // Pages of keys that left (evicted, or deleted with no lease left) kept for
  // their owner to write again (reclaim); past this the oldest kept is
  // forgotten (an owner that never asks, e.g. one that exited, cannot stop
  // the others' reuse).
  std::size_t max_reclaimable = 1u << 20;
  // Old pages one key keeps for its open leases (a delete and register while
  // leased adds one): each settles in time linear in them, so a client that
  // cycles one leased key must not make every release cost seconds (review,
  // session 30: 40000 cycles stalled the directory 21 s). Past it, dropped.
  std::size_t max_old_pages_per_key = 64;
  // The first lease id (then one up per lease). The server draws it at random:
  // a release a client sends after the directory restarted must not name
  // another reader's lease of the new process (ids restarting at 1 did).
  std::uint64_t first_lease = 1;
};

// One region of one agent as its owner knows it (the read handle tells a
// region id the agent gave out again from the old one).
struct RegionRef {
  std::string agent;
  std::uint64_t region = 0;
  std::string read_handle;
};

struct Lease {
  std::uint64_t id = 0;  // 0: no lease (no hits)
  runtime::Instant expires{0};
};

struct LookupResult {
  std::vector<Location> locations;  // the leading hits, in key order
  Lease lease;
};

enum class RegisterOutcome { kRegistered, kAlreadyPresent };

class Directory {
 public:
  explicit Directory(DirectoryOptions options = {})
      : options_(options), next_lease_(std::max<std::uint64_t>(options.first_lease, 1)) {}

  // First writer wins: a later register of the key changes nothing and says so.
  // A boot reported gone (boot_changed) is stale_epoch; any other is taken.
  Result<RegisterOutcome> register_key(const std::string& key, const Location& location);
  // register_key for each entry in order, then one eviction pass that spares
  // every key of the batch: a key reported registered is in the directory
  // when the reply leaves.
  std::vector<Result<RegisterOutcome>> register_keys(
      const std::vector<std::pair<std::string, Location>>& entries);
  // Leading hits (stops at the first miss) under one lease that keeps them from
  // eviction and deletion until released or expired.
  LookupResult lookup(const std::vector<std::string>& keys, runtime::Instant now);
  // Like lookup without a lease; refreshes each hit's last use (SPEC R3.4).
  std::vector<Location> probe(const std::vector<std::string>& keys, runtime::Instant now);
  Status release(std::uint64_t lease_id);
  // Keys removed now; leased keys go when their last lease ends.
  std::size_t erase(const std::vector<std::string>& keys);
  // The region went back to its agent: every key in it goes (only those
  // stored under `read_handle` when one is given: a region id the agent gave
  // out again holds another owner's keys under another handle).
  std::size_t drop_region(const std::string& agent, std::uint64_t region,
                          const std::string& read_handle = "");
  // R6.1. With `from`: the reporter saw the agent's boot `from` replaced by
  // `boot`; `from` is retired and its keys go (safe in any order of reports).
  // Without: the agent now runs `boot`; unless it already was the current one,
  // every other boot of it is retired and its keys go; an already-retired
  // `boot` is stale_epoch.
  Result<std::size_t> boot_changed(const std::string& agent, const std::string& boot,
                                   const std::string& from = "");
  // The agent's boot last reported new (boot_changed), or "" when none was.
  std::string current_boot(const std::string& agent) const {
    auto it = boots_.find(agent);
    return it == boots_.end() ? std::string() : it->second.current;
  }
  // Takes up to `max` locations of keys that left while their region and boot
  // lived (evicted, or deleted and no lease left), in those regions: nobody
  // reads them any more, so their owner may write them again. Each is given
  // out once.
  std::vector<Location> reclaim(const std::vector<RegionRef>& regions, std::size_t max);
  // Ends expired leases (called before each operation by the server).
  void expire_leases(runtime::Instant now);

  // Entries held, keys deleted while leased among them (they go with their leases).
  std::size_t size() const { return keys_.size(); }
  // Keys a lookup can find: the entries less the doomed ones.
  std::size_t live_keys() const { return keys_.size() - doomed_; }
  std::size_t doomed_keys() const { return doomed_; }
  std::size_t open_leases() const { return leases_.size(); }
  // Boots remembered (bounded by max_boot_records), and agents they belong to.
  std::size_t boot_records() const { return boot_records_.size(); }
  std::size_t agents_with_boots() const { return boots_.size(); }
  std::uint64_t evictions() const { return evictions_; }
  // Locations kept for reclaim, and those forgotten (max_reclaimable reached).
  std::size_t reclaimable() const { return reclaimable_count_; }
  std::uint64_t reclaimable_dropped() const { return reclaimable_dropped_; }
  std::optional<Location> find(const std::string& key) const;

 private:
  struct OldPage {
    Location location;
    std::uint64_t last_lease = 0;  // the leases that read it have ids up to this
    std::uint32_t readers = 0;     // of those on the key, still open
  };
  struct Entry {
    Location location;
    std::uint64_t last_use = 0;  // key into lru_ (there only while no lease holds it)
    std::uint32_t leases = 0;
    bool doomed = false;  // erased while leased: goes with its last lease
    // Doomed by a delete (its page may be written again once its last lease
    // ends), not by its region or boot going.
    bool reclaim_on_end = false;
    // Pages the key left by a delete and a register while leased: readers
    // under the leases taken before still read them.
    std::vector<OldPage> old_pages;
  };
  struct LeaseState {
    runtime::Instant expires{0};
    std::vector<std::string> keys;
  };
  // Each boot remembered is one record (its number orders them by age).
  enum class BootKind { kCurrent, kRetired, kSeen };
  struct AgentBoots {
    std::string current;  // the last reported new boot
    std::uint64_t current_record = 0;
    std::map<std::string, std::uint64_t> retired;  // reported gone: never taken again
    std::map<std::string, std::uint64_t> seen;     // registered under, not retired
  };
  struct BootRecord {
    std::string agent;
    std::string boot;
    BootKind kind;
  };
  // Where keys' bytes are, coarsely (agent, region, read handle, boot): drops
  // find their keys here instead of scanning every key (a drop at 1M keys
  // held the directory ~0.1 s).
  using Place = std::tuple<std::string, std::uint64_t, std::string, std::string>;
  // Keys of one place, by value (deterministic order); they point into keys_.
  struct ByKey {
    bool operator()(const std::string* a, const std::string* b) const { return *a < *b; }
  };
  using KeySet = std::set<const std::string*, ByKey>;

  // Makes the key the most recently used.
  void touch(std::map<std::string, Entry>::iterator it);
  Result<RegisterOutcome> register_one(const std::string& key, const Location& location);
  void remove(std::map<std::string, Entry>::iterator it);
  // Removes a key nobody reads any more and keeps its location for reclaim.
  void remove_for_reclaim(std::map<std::string, Entry>::iterator it);
  // Keeps a page nobody reads any more for reclaim (the oldest kept goes past
  // the bound).
  void keep_for_reclaim(const Location& location);
  // A lease on the key ended: its old pages that no lease reads now go to reclaim.
  void settle_old_pages(std::map<std::string, Entry>::iterator it, std::uint64_t lease_id);
  // Forgets the key's old pages at `place` (its region or boot went).
  void forget_old_pages(const std::string* key, const Place& place);
  // Forgets the old pages of every place from `first` on that `same` accepts.
  void forget_old_pages_where(const Place& first, const std::function<bool(const Place&)>& same,
                              const std::function<bool(const Place&)>& gone);
  std::size_t erase_keys(const std::vector<std::string>& keys, bool reclaim);
  // A region or boot went: its kept locations name memory that is gone.
  void forget_reclaimable(const std::string& agent, std::uint64_t region,
                          const std::string& read_handle);
  void forget_reclaimable_boots(const std::string& agent,
                                const std::function<bool(const std::string&)>& gone);
  // Erases one place's kept locations (their ages too); the next place.
  std::map<Place, std::map<std::uint64_t, Location>>::iterator forget_place(
      std::map<Place, std::map<std::uint64_t, Location>>::iterator it);
  // Evicts the least recently used unleased keys while over max_keys, but
  // none of `keep` (sorted).
  void evict_over_capacity(const std::vector<const std::string*>& keep = {});
  std::size_t drop_where(const std::string& agent,
                         const std::function<bool(const std::string&)>& gone);
  static Place place_of(const Location& l) { return {l.agent, l.region, l.read_handle, l.boot}; }
  // Boot records: add one (forgetting the oldest past the bound), drop one.
  std::uint64_t remember_boot(const std::string& agent, const std::string& boot, BootKind kind);
  void forget_record(std::uint64_t record, const std::string& busy);
  void set_current(const std::string& agent, AgentBoots& boots, const std::string& boot);
  void retire_boot(const std::string& agent, AgentBoots& boots, const std::string& boot);

  DirectoryOptions options_;
  std::map<std::string, Entry> keys_;
  // Last use -> key (into keys_), oldest first: only keys no lease holds, so
  // eviction never walks past leased ones (a walk over 100k leased keys per
  // register had held the directory for seconds).
  std::map<std::uint64_t, const std::string*> lru_;
  std::map<std::uint64_t, LeaseState> leases_;
  std::set<std::pair<runtime::Instant, std::uint64_t>> lease_expiry_;  // (expires, id)
  std::map<Place, KeySet> places_;
  // Keys with old pages (Entry::old_pages) by the place of those pages.
  std::map<Place, KeySet> old_page_places_;
  std::size_t old_pages_count_ = 0;
  // Kept locations per place by age, and all of them oldest first.
  std::map<Place, std::map<std::uint64_t, Location>> reclaimable_;
  std::map<std::uint64_t, Place> reclaimable_order_;
  std::uint64_t next_reclaimable_ = 0;
  std::size_t reclaimable_count_ = 0;
  std::uint64_t reclaimable_dropped_ = 0;
  std::map<std::string, AgentBoots> boots_;
  std::map<std::uint64_t, BootRecord> boot_records_;  // oldest first
  std::uint64_t next_boot_record_ = 1;
  std::uint64_t use_clock_ = 0;
  std::uint64_t next_lease_;
  std::uint64_t evictions_ = 0;
  std::size_t doomed_ = 0;  // entries with doomed set
};

}  // namespace rcxl::directory
