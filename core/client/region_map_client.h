// RegionMapClient: the control connection to each agent (hello, alloc, map,
// free), the client's own regions with their fresh state (SPEC R5.1), cached
// read mappings, and the agent boots the client believes (R6.1, R6.3).
// Strand-confined: call on the strand given at construction.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

#include "core/client/agent_hello.h"
#include "core/client/config.h"
#include "core/directory/rpc_connection.h"
#include "core/runtime/logger.h"
#include "core/runtime/runtime.h"

namespace rcxl::client {

struct Mapping {
  std::uint64_t addr = 0;
  std::uint32_t rkey = 0;
  std::uint64_t size = 0;
  std::string boot;  // the boot the map reply named
};

struct OwnRegion {
  std::string agent;
  std::uint64_t region = 0;
  std::uint64_t size = 0;
  std::string handle;
  std::string read_handle;
  Mapping mapping;
  bool map_replied = false;  // fresh is sent until this is true (R5.1)
};

class RegionMapClient {
 public:
  using RegionKey = std::pair<std::string, std::uint64_t>;  // agent, region
  // An agent's boot moved from old to new; `lost` are the own regions it held,
  // already forgotten here and freed at the agent (best effort).
  using BootListener =
      std::function<void(const std::string& agent, const std::string& old_boot,
                         const std::string& new_boot, const std::vector<OwnRegion>& lost)>;
  // An own region the agent no longer knows under our handle (its map answered
  // not_found or bad_range: e.g. an agent restarted without its region table),
  // already forgotten here.
  using RegionLostListener = std::function<void(const std::string& agent, const OwnRegion& lost)>;
  template <typename T>
  using Done = std::function<void(Result<T>)>;

  // Unanswered allocs kept per agent; past it the oldest is forgotten.
  static constexpr std::size_t kMaxUnansweredAllocs = 64;
  // An unanswered alloc asked in vain waits 2^(asks-1) - 1 allocs before the
  // next ask (asked before allocs 1, 2, 4, 8, ... after it), at most this many.
  static constexpr std::uint64_t kMaxAllocsBetweenAsks = 31;

  RegionMapClient(runtime::Runtime& rt, runtime::Strand& strand, const Config& config);
  ~RegionMapClient();

  void set_boot_listener(BootListener listener) { boot_listener_ = std::move(listener); }
  void set_region_lost_listener(RegionLostListener listener) {
    region_lost_listener_ = std::move(listener);
  }
  // Says hello if this agent's control connection has not yet.
  void hello(const std::string& agent, Done<AgentHello> done);
  // The last hello of the agent's control connection with the boot believed now.
  const AgentHello* known(const std::string& agent) const;
  // alloc + map; maps carry fresh until the first map reply (retries included).
  void allocate(const std::string& agent, std::uint64_t size, Done<OwnRegion> done);
  // A mapping for reading (the read handle), cached until the agent's boot changes.
  void map_for_read(const std::string& agent, std::uint64_t region, const std::string& handle,
                    Done<Mapping> done);
  void forget_read_mapping(const std::string& agent, std::uint64_t region);
  // The mapping map_for_read would answer at once, if any (no round trip).
  // The mapping known for reads of `region` under `handle` (a location's read
  // handle): a region id can name another region after an agent restart, so
  // a mapping counts only for the handle it was made under.
  std::optional<Mapping> cached_mapping(const std::string& agent, std::uint64_t region,
                                        const std::string& handle) const;
  // Frees an own region and forgets it (and that it had a map reply).
  void give_back(const std::string& agent, std::uint64_t region,
                 std::function<void(Status)> done = nullptr);
  // Asks the agent whether `boot`, a location's, is still its boot: a read map
  // under that epoch. The mapping when it is (this client was behind); else
  // stale_epoch, and `boot` is gone for good: the boot-gone listener hears of
  // it with the agent's boot now.
  void check_location_boot(const std::string& agent, std::uint64_t region,
                           const std::string& handle, const std::string& boot, Done<Mapping> done);
  using BootGoneListener = std::function<void(const std::string& agent, const std::string& gone,
                                              const std::string& now)>;
  void set_boot_gone_listener(BootGoneListener listener) {
    boot_gone_listener_ = std::move(listener);
  }
  // A read map answered not_found or bad_range: the agent, in its boot now,
  // has no region `region` under `read_handle` (it restarted without its
  // region table, or the region was freed), so locations naming the pair are
  // dead whoever wrote them (SPEC R6.1: the directory drops such locations).
  using ReadRegionGoneListener = std::function<void(const std::string& agent, std::uint64_t region,
                                                    const std::string& read_handle)>;
  void set_read_region_gone_listener(ReadRegionGoneListener listener) {
    read_region_gone_listener_ = std::move(listener);
  }
  // Maps an own region again; a boot change shows in the reply (after an RDMA error).
  void recheck(const std::string& agent, std::uint64_t region);
  // The agent refused a queue pair with this connection's proof: it does not
  // know the connection any more, so the next hello (and proof) is a new one.
  void start_over(const std::string& agent);
  // A boot seen on another connection (hint, wait): ignored when it is one this
  // client already saw replaced (news sent before the change, handled after).
  void observe_boot(const std::string& agent, const std::string& boot);
  // observe_boot(agent, to) if this client still believes `from` (or either is
  // unknown): news posted over from another strand must not take a boot back.
  void observe_boot_if(const std::string& agent, const std::string& from, const std::string& to);
  // Boot news from another connection to the agent (the waits or hint connection):
  // `from` is what that connection believed before ("" before its first
  // hello). Taken only if it follows this client's belief; a first hello only
  // when this client believes no boot yet (it may be older than a map reply).
  void observe_peer_boot(const std::string& agent, const std::string& from, const std::string& to);

  const std::map<RegionKey, OwnRegion>& own_regions() const { return own_; }
  std::uint64_t boot_changes() const { return boot_changes_; }
  std::uint64_t regions_lost() const { return regions_lost_; }
  // Regions whose alloc reply came after its call timed out, freed at once.
  std::uint64_t late_allocs_freed() const { return late_allocs_freed_; }
  // Allocs that got no reply (to an agent that takes alloc tokens), asked
  // again with their token and what came back freed (docs/client.md, *Known
  // limits*); and those forgotten unsettled past kMaxUnansweredAllocs.
  std::uint64_t unanswered_allocs_freed() const { return unanswered_allocs_freed_; }
  std::uint64_t unanswered_allocs_forgotten() const { return unanswered_allocs_forgotten_; }
  // Unanswered allocs kept to be asked again, all agents.
  std::size_t unanswered_allocs() const;
  // Asks about them sent (each a made_only alloc).
  std::uint64_t unanswered_asks_sent() const { return unanswered_asks_sent_; }
  std::uint64_t own_maps_sent() const { return own_maps_sent_; }
  std::uint64_t fresh_maps_sent() const { return fresh_maps_sent_; }
  std::size_t read_maps_cached() const { return read_maps_.size(); }

 private:
  struct UnansweredAlloc {
    std::uint64_t size = 0;
    std::uint64_t seq = 0;       // the oldest goes first past kMaxUnansweredAllocs
    int asks = 0;                // asks sent in vain so far
    std::uint64_t next_ask = 0;  // asked before the alloc when allocs_sent reaches this
    bool asking = false;         // an ask is on its way
    bool freeing = false;        // the free of the region a reply named is on its way
  };
  struct AgentState {
    std::shared_ptr<directory::RpcConnection> conn;
    AgentHello hello;
    bool said_hello = false;
    int hellos = 0;
    // Boots seen replaced: news of one from another connection comes late (a
    // reply sent before the change, handled after it) and is ignored.
    std::set<std::string> past_boots;
    std::string boot_at_connect;  // hello.boot as the current connect started
    // Allocs sent without a reply (timeout, closed connection), by token: the
    // agent may have made the region. Asked about before later allocs to it.
    std::map<std::string, UnansweredAlloc> unanswered;
    std::uint64_t unanswered_seq = 0;
    std::uint64_t allocs_sent = 0;  // with a token
  };
  AgentState& agent_state(const std::string& agent);
  void on_hello(const std::string& agent, const nlohmann::json& reply);
  // A boot this client's own map connection was told: the agent's now.
  // adopt_boot for a reply to a request sent while `sent_under` was believed.
  void adopt_reply_boot(const std::string& agent, const std::string& boot,
                        const std::string& sent_under);
  void adopt_boot(const std::string& agent, const std::string& boot);
  // Maps the own region at `key` held under `handle`; one issued anew under
  // the id since ends the call kBootChanged.
  void map_own(RegionKey key, int attempt, const std::string& handle, Done<Mapping> done);
  void forget_read_maps_of(const std::string& agent);
  // Forgets an own region the agent no longer knows and tells the listener.
  void lose_own(const RegionKey& key);
  // A read map under `location_boot` (a location's), or under the boot this
  // client believes; a stale_epoch retries once under the new boot if asked.
  void send_read_map(const RegionKey& key, const std::string& handle,
                     std::optional<std::string> location_boot, bool retry_stale,
                     Done<Mapping> finish);
  void allocate_once(const std::string& agent, std::uint64_t size, int boot_retries,
                     Done<OwnRegion> done);
  // Frees the region an alloc reply names, whose call's caller was told it
  // failed (so nobody holds it); true when it did. `why` goes in the log line.
  // `freed` gets the free's reply (null: no word).
  bool free_unheld_alloc(const std::string& agent, const nlohmann::json& reply,
                         std::string_view why,
                         std::function<void(const nlohmann::json&)> freed = nullptr);
  // A reply about an unanswered alloc's token (late, or to an ask). The region
  // it names is freed, counted in `freed`; the token is kept until that free
  // is answered (no word: asked again later). A reply about a token no longer
  // kept frees too: a second free of a region only gets an error back.
  void settle_unanswered(const std::string& agent, const std::string& token,
                         const nlohmann::json& reply, std::uint64_t& freed);
  // Remembers an alloc that got no reply, to ask again with its token.
  void remember_unanswered(const std::string& agent, const std::string& token, std::uint64_t size);
  // Asks the agent again for each unanswered alloc (its token, its size) and
  // frees what it answers; one that gets no reply again waits for the next time.
  void ask_unanswered_again(const std::string& agent);
  // An alloc reply: checks it, takes the region and maps it.
  void take_allocated(const std::string& agent, std::uint64_t size, int boot_retries,
                      const nlohmann::json& reply, Done<OwnRegion> done);
  bool retryable(ErrorCode code) const;

  runtime::Runtime& rt_;
  runtime::Strand& strand_;
  const Config& config_;
  runtime::Logger log_;
  std::map<std::string, AgentState> agents_;
  std::map<RegionKey, OwnRegion> own_;
  // agent, region, the read handle the mapping was made under.
  using ReadKey = std::tuple<std::string, std::uint64_t, std::string>;
  std::map<ReadKey, Mapping> read_maps_;
  std::map<ReadKey, std::vector<Done<Mapping>>> read_map_waiters_;
  BootListener boot_listener_;
  RegionLostListener region_lost_listener_;
  BootGoneListener boot_gone_listener_;
  ReadRegionGoneListener read_region_gone_listener_;
  std::uint64_t boot_changes_ = 0;
  std::uint64_t regions_lost_ = 0;
  std::uint64_t late_allocs_freed_ = 0;
  std::uint64_t unanswered_allocs_freed_ = 0;
  std::uint64_t unanswered_allocs_forgotten_ = 0;
  std::uint64_t unanswered_asks_sent_ = 0;
  // Alloc tokens: 128 random bits each, unguessable (a token is a capability).
  std::unique_ptr<runtime::RandomSource> alloc_tokens_;
  std::uint64_t own_maps_sent_ = 0;
  std::uint64_t fresh_maps_sent_ = 0;
  std::shared_ptr<bool> alive_ = std::make_shared<bool>(true);
};

}  // namespace rcxl::client
