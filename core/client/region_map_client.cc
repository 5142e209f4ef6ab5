#include "core/client/region_map_client.h"

#include "core/protocol/auth.h"
#include "core/protocol/reply_fields.h"

namespace rcxl::client {

namespace {

using Json = nlohmann::json;

// A reply is input too (SPEC R1.2): a field missing or of another type is an
// error of that call, never an exception.
Status malformed(const char* what, const Json& reply) {
  return Error(ErrorCode::kInternal, std::string("malformed ") + what +
                                         " reply from the agent: " + reply.dump().substr(0, 200));
}

// PROTOCOL.md: {"boot":B,"addr":<u64>,"rkey":<u32>,"size":S}, S the region's
// size: a mapping of less (or none said) would fail or miss every access past it.
Result<Mapping> mapping_from(const Json& reply, std::uint64_t region_size) {
  const auto addr = protocol::u64_field(reply, "addr");
  const auto rkey = protocol::u64_field(reply, "rkey");
  const auto size = protocol::u64_field(reply, "size");
  const auto boot = protocol::string_field(reply, "boot");
  if (!addr || !rkey || *rkey > UINT32_MAX || !boot || boot->empty() || !size || *size == 0 ||
      *size < region_size || *addr > UINT64_MAX - *size) {
    return malformed("map", reply);
  }
  return Mapping{*addr, static_cast<std::uint32_t>(*rkey), *size, *boot};
}

std::string boot_of(const Json& reply) {
  return protocol::string_field(reply, "boot").value_or("");
}

}  // namespace

using Json = nlohmann::json;

RegionMapClient::RegionMapClient(runtime::Runtime& rt, runtime::Strand& strand,
                                 const Config& config)
    : rt_(rt),
      strand_(strand),
      config_(config),
      log_(rt.log_sink(), "region-map"),
      alloc_tokens_(rt.random("client/alloc-tokens")) {}

RegionMapClient::~RegionMapClient() {
  *alive_ = false;
}

RegionMapClient::AgentState& RegionMapClient::agent_state(const std::string& agent) {
  auto it = agents_.find(agent);
  if (it != agents_.end()) return it->second;
  AgentState& state = agents_[agent];
  auto address = runtime::Address::Parse(agent);
  state.conn = directory::RpcConnection::Make(
      rt_, strand_,
      {.address = address.ok() ? *address : runtime::Address{agent, 0},
       .secret = config_.secret,
       .client_name = config_.client_name + "/maps",
       .reply_timeout = config_.reply_timeout});
  std::weak_ptr<bool> alive = alive_;
  state.conn->set_on_connecting([this, alive, agent] {
    if (!alive.expired()) agents_[agent].boot_at_connect = agents_[agent].hello.boot;
  });
  state.conn->set_on_hello([this, alive, agent](const Json& reply) {
    if (!alive.expired()) on_hello(agent, reply);
  });
  return state;
}

void RegionMapClient::on_hello(const std::string& agent, const Json& reply) {
  AgentState& state = agents_[agent];
  AgentHello hello = parse_agent_hello(reply);
  if (hello.rdma_connect_proof && !config_.secret.empty()) {
    hello.connect_proof = protocol::connect_proof(config_.secret, state.conn->challenge());
  }
  // R6.4: boot news that came while the hello was out (a hint's or a wait's
  // stale_epoch) is newer than the hello's: the belief stays (take_hello).
  const std::string believed = state.hello.boot;
  const bool news = take_hello(state.hello, std::move(hello), state.boot_at_connect);
  const std::string boot = state.hello.boot;
  state.hello.boot = believed;  // adopt_boot moves it
  state.said_hello = true;
  if (news) adopt_boot(agent, boot);
  if (++state.hellos == 1) return;
  // A new connection holds nothing: map what we hold again (R5.1: fresh only
  // for regions that never had a map reply). Other agents' read maps stand.
  forget_read_maps_of(agent);
  for (auto& [key, region] : own_) {
    if (key.first != agent) continue;
    map_own(key, 1, region.handle, [](const Result<Mapping>&) {});
  }
}

const AgentHello* RegionMapClient::known(const std::string& agent) const {
  auto it = agents_.find(agent);
  return it == agents_.end() || !it->second.said_hello ? nullptr : &it->second.hello;
}

void RegionMapClient::hello(const std::string& agent, Done<AgentHello> done) {
  AgentState& state = agent_state(agent);
  std::weak_ptr<bool> alive = alive_;
  state.conn->ensure_ready([this, alive, agent, done = std::move(done)](const Status& status) {
    if (alive.expired()) return;
    if (!status.ok()) return done(status);
    done(agents_[agent].hello);
  });
}

void RegionMapClient::observe_boot(const std::string& agent, const std::string& boot) {
  if (boot.empty()) return;
  // News from another connection may be older than what this one knows.
  if (agent_state(agent).past_boots.count(boot)) return;
  adopt_boot(agent, boot);
}

void RegionMapClient::adopt_reply_boot(const std::string& agent, const std::string& boot,
                                       const std::string& sent_under) {
  AgentState& state = agent_state(agent);
  // A reply naming a boot already replaced, while this client's belief moved on
  // since the request left, is older news than that belief (another connection
  // saw the change first): adopting it would turn the boot back.
  if (state.past_boots.count(boot) && state.hello.boot != sent_under) return;
  adopt_boot(agent, boot);
}

void RegionMapClient::adopt_boot(const std::string& agent, const std::string& boot) {
  if (boot.empty()) return;
  AgentState& state = agent_state(agent);
  if (state.hello.boot == boot) return;
  const std::string old_boot = state.hello.boot;
  state.hello.boot = boot;
  // A boot can come back (`:unknown` each unknown period; a restart without a
  // region table counts its periods anew): what this connection says is now.
  state.past_boots.erase(boot);
  if (old_boot.empty()) return;
  state.past_boots.insert(old_boot);
  ++boot_changes_;
  log_.info("agent ", agent, " boot ", old_boot, " -> ", boot);
  // Readers: every cached mapping of that agent is gone with its registration.
  forget_read_maps_of(agent);
  // Owners: the regions go back (R6.1); a new alloc gets fresh maps again (R5.1).
  std::vector<OwnRegion> lost;
  for (auto it = own_.begin(); it != own_.end();) {
    if (it->first.first != agent) {
      ++it;
      continue;
    }
    lost.push_back(it->second);
    state.conn->call({{"op", "free"}, {"region", it->second.region}, {"handle", it->second.handle}},
                     [](const Status&, const Json&) {});
    it = own_.erase(it);
  }
  if (boot_listener_) boot_listener_(agent, old_boot, boot, lost);
}

void RegionMapClient::observe_boot_if(const std::string& agent, const std::string& from,
                                      const std::string& to) {
  const std::string& now = agent_state(agent).hello.boot;
  if (!from.empty() && !now.empty() && now != from) return;
  observe_boot(agent, to);
}

void RegionMapClient::observe_peer_boot(const std::string& agent, const std::string& from,
                                        const std::string& to) {
  if (from.empty() && !agent_state(agent).hello.boot.empty()) return;
  observe_boot_if(agent, from, to);
}

bool RegionMapClient::retryable(ErrorCode code) const {
  return code == ErrorCode::kGenerationUnknown || code == ErrorCode::kTimeout ||
         code == ErrorCode::kClosed || code == ErrorCode::kUnavailable ||
         code == ErrorCode::kExtensionFailed;
}

void RegionMapClient::allocate(const std::string& agent, std::uint64_t size, Done<OwnRegion> done) {
  // Two: a `boot_changed` map reply names no boot, so the retry's map may
  // meet stale_epoch before this client learns the new one.
  allocate_once(agent, size, /*boot_retries=*/2, std::move(done));
}

void RegionMapClient::allocate_once(const std::string& agent, std::uint64_t size, int boot_retries,
                                    Done<OwnRegion> done) {
  std::weak_ptr<bool> alive = alive_;
  hello(agent, [this, alive, agent, size, boot_retries,
                done = std::move(done)](const Result<AgentHello>& hello) mutable {
    if (alive.expired()) return;
    if (!hello.ok()) return done(hello.status());
    Json request = {{"op", "alloc"}, {"size", size}};
    std::string token;  // so that an alloc whose reply is lost can be asked again
    if (hello->alloc_tokens) {
      ask_unanswered_again(agent);
      token = alloc_tokens_->next_hex(128);
      request["token"] = token;
      ++agents_[agent].allocs_sent;
    }
    agents_[agent].conn->call(
        std::move(request),
        [this, alive, agent, size, token, boot_retries, done = std::move(done)](
            const Status& status, const Json& reply) mutable {
          if (alive.expired()) return;
          if (!status.ok()) {
            // No word from the agent: it may have made the region.
            if (reply.is_null() && !token.empty()) remember_unanswered(agent, token, size);
            return done(status);
          }
          take_allocated(agent, size, boot_retries, reply, std::move(done));
        },
        {},
        [this, alive, agent, token](const Json& reply) {
          if (alive.expired()) return;
          if (token.empty()) {
            if (free_unheld_alloc(agent, reply, "came after its call timed out")) {
              ++late_allocs_freed_;
            }
            return;
          }
          settle_unanswered(agent, token, reply, late_allocs_freed_);
        });
  });
}

bool RegionMapClient::free_unheld_alloc(const std::string& agent, const nlohmann::json& reply,
                                        std::string_view why,
                                        std::function<void(const Json&)> freed) {
  // Its caller was told `timeout`, so nobody holds this region: only this
  // reply names its handle, and without a free it would stay at the agent.
  if (!directory::reply_status(reply).ok()) return false;
  const auto id = protocol::u64_field(reply, "region");
  const auto handle = protocol::string_field(reply, "handle");
  if (!id || !handle || handle->empty()) return false;
  // Not one this client holds (an agent that gave the same region out twice).
  if (auto held = own_.find({agent, *id}); held != own_.end() && held->second.handle == *handle) {
    return false;
  }
  log_.info("alloc reply for region ", *id, " from ", agent, " ", why, ": freeing the region");
  agent_state(agent).conn->call({{"op", "free"}, {"region", *id}, {"handle", *handle}},
                                [freed = std::move(freed)](const Status&, const Json& reply) {
                                  if (freed) freed(reply);
                                });
  return true;
}

void RegionMapClient::remember_unanswered(const std::string& agent, const std::string& token,
                                          std::uint64_t size) {
  AgentState& state = agent_state(agent);
  auto [it, added] = state.unanswered.try_emplace(token);
  if (!added) return;
  it->second = {size, state.unanswered_seq++, 0, state.allocs_sent, false, false};
  if (state.unanswered.size() <= kMaxUnansweredAllocs) return;
  auto oldest =
      std::min_element(state.unanswered.begin(), state.unanswered.end(),
                       [](const auto& a, const auto& b) { return a.second.seq < b.second.seq; });
  ++unanswered_allocs_forgotten_;
  log_.warn("more than ", kMaxUnansweredAllocs, " allocs to ", agent,
            " got no reply: forgetting the oldest (its region, if the agent made it, stays "
            "there unless a late reply names it)");
  state.unanswered.erase(oldest);
}

void RegionMapClient::settle_unanswered(const std::string& agent, const std::string& token,
                                        const Json& reply, std::uint64_t& freed) {
  AgentState& state = agent_state(agent);
  auto kept = state.unanswered.find(token);
  const bool tracked = kept != state.unanswered.end();
  if (tracked && kept->second.freeing) return;  // a reply before this one named it
  std::weak_ptr<bool> alive = alive_;
  auto on_freed = [this, alive, agent, token](const Json& answer) {
    if (alive.expired()) return;
    auto& unanswered = agent_state(agent).unanswered;
    auto it = unanswered.find(token);
    if (it == unanswered.end()) return;
    // ok, not_found or bad_range: gone. No word: asked again before a later alloc.
    if (!answer.is_null()) return (void)unanswered.erase(it);
    it->second.freeing = false;
  };
  if (tracked) kept->second.freeing = true;  // before the call: its answer may come at once
  if (free_unheld_alloc(agent, reply, "answered an alloc whose reply was lost", on_freed)) {
    ++freed;
    return;
  }
  // not_found, or a region this client holds: nothing to free, the token is settled.
  if (tracked) state.unanswered.erase(token);
}

void RegionMapClient::ask_unanswered_again(const std::string& agent) {
  AgentState& state = agent_state(agent);
  std::weak_ptr<bool> alive = alive_;
  for (auto& [token, pending] : state.unanswered) {
    if (pending.asking || pending.freeing || state.allocs_sent < pending.next_ask) continue;
    pending.asking = true;
    ++unanswered_asks_sent_;
    // made_only: the agent answers the region this token's alloc made, or
    // not_found; it never allocates (that could take the space this alloc needs).
    state.conn->call(
        {{"op", "alloc"}, {"size", pending.size}, {"token", token}, {"made_only", true}},
        [this, alive, agent, token](const Status&, const Json& reply) {
          if (alive.expired()) return;
          AgentState& st = agent_state(agent);
          auto it = st.unanswered.find(token);
          if (it != st.unanswered.end()) it->second.asking = false;
          if (!reply.is_null()) {
            return settle_unanswered(agent, token, reply, unanswered_allocs_freed_);
          }
          if (it == st.unanswered.end()) return;
          // No word again: ask before allocs 1, 2, 4, 8, ... from now.
          const int asks = ++it->second.asks;
          const std::uint64_t wait = std::min<std::uint64_t>(
              kMaxAllocsBetweenAsks, (std::uint64_t{1} << std::min(asks - 1, 20)) - 1);
          it->second.next_ask = st.allocs_sent + wait;
        },
        {},
        [this, alive, agent, token](const Json& reply) {
          if (!alive.expired()) settle_unanswered(agent, token, reply, unanswered_allocs_freed_);
        });
  }
}

std::size_t RegionMapClient::unanswered_allocs() const {
  std::size_t n = 0;
  for (const auto& [agent, state] : agents_) n += state.unanswered.size();
  return n;
}

void RegionMapClient::take_allocated(const std::string& agent, std::uint64_t size, int boot_retries,
                                     const Json& reply, Done<OwnRegion> done) {
  // PROTOCOL.md: {"region":R,"size":S,"handle":..,"read_handle":..}.
  const auto id = protocol::u64_field(reply, "region");
  const auto handle = protocol::string_field(reply, "handle");
  const auto read_handle = protocol::string_field(reply, "read_handle");
  // The region is the size asked for: a size of 0 would give no pages
  // (and another alloc, forever), a huge one pages that are not there.
  const bool other_size = reply.contains("size") && protocol::u64_field(reply, "size") != size;
  if (!id || !handle || handle->empty() || !read_handle || read_handle->empty() || other_size) {
    // The agent made the region and only this reply names its handle: free it
    // (R1.5, as a late reply's), or it stays at the agent for good.
    (void)free_unheld_alloc(agent, reply, "that this client cannot use");
    return done(malformed("alloc", reply));
  }
  const RegionKey key{agent, *id};
  if (auto held = own_.find(key); held != own_.end()) {
    // One region given out twice: its pages would take two keys each.
    if (held->second.handle == *handle) {
      return done(Error(ErrorCode::kInternal,
                        "the agent gave region " + std::to_string(*id) +
                            " out twice (an alloc reply names a region this client holds)"));
    }
    // The id was issued anew (a restart without the region table): the
    // region we held under it is gone there, and so are its pages.
    lose_own(key);
  }
  OwnRegion region;
  region.agent = agent;
  region.region = *id;
  region.size = size;
  region.handle = *handle;
  region.read_handle = *read_handle;
  own_[key] = region;
  std::weak_ptr<bool> alive = alive_;
  map_own(key, 1, region.handle,
          [this, alive, key, agent, size, boot_retries, handle = region.handle,
           done = std::move(done)](const Result<Mapping>& mapping) mutable {
            if (alive.expired()) return;
            // Only this alloc's region: another alloc may hold the id by now (R6.1).
            auto it = own_.find(key);
            const bool ours = it != own_.end() && it->second.handle == handle;
            if (mapping.ok() && ours) return done(it->second);
            const ErrorCode code = mapping.ok() ? ErrorCode::kBootChanged : mapping.status().code();
            if (ours) give_back(key.first, key.second);
            if (boot_retries > 0 &&
                (code == ErrorCode::kStaleEpoch || code == ErrorCode::kBootChanged)) {
              return allocate_once(agent, size, boot_retries - 1, std::move(done));
            }
            done(mapping.ok() ? Error(code, "boot changed") : mapping.status());
          });
}

void RegionMapClient::map_own(RegionKey key, int attempt, const std::string& handle,
                              Done<Mapping> done) {
  auto it = own_.find(key);
  if (it == own_.end()) return done(Error(ErrorCode::kNotFound, "region went back"));
  // A retry speaks of the region it first mapped: an alloc that reissued the
  // id since (take_allocated) put another region at the key (R6.1).
  if (it->second.handle != handle) {
    return done(Error(ErrorCode::kBootChanged, "region " + std::to_string(key.second) +
                                                   " was issued anew: the region mapped is gone"));
  }
  AgentState& state = agent_state(key.first);
  Json request = {{"op", "map"},
                  {"region", key.second},
                  {"handle", it->second.handle},
                  {"epoch", state.hello.boot}};
  ++own_maps_sent_;
  if (!it->second.map_replied) {
    request["fresh"] = true;  // SPEC R5.1, retries too
    ++fresh_maps_sent_;
  }
  std::weak_ptr<bool> alive = alive_;
  const std::string sent_under = state.hello.boot;
  // The reply speaks of the region held under this handle; an alloc that
  // reissued the id since (take_allocated) put another region at the key.
  const std::string sent_handle = it->second.handle;
  state.conn->call(std::move(request), [this, alive, key, attempt, sent_under, sent_handle,
                                        done = std::move(done)](const Status& status,
                                                                const Json& reply) mutable {
    if (alive.expired()) return;
    auto held = [&] {
      auto now = own_.find(key);
      return now != own_.end() && now->second.handle == sent_handle;
    };
    if (!status.ok()) {
      if (status.code() == ErrorCode::kStaleEpoch) {
        adopt_reply_boot(key.first, boot_of(reply), sent_under);
        return done(status);
      }
      if (status.code() == ErrorCode::kNotFound || status.code() == ErrorCode::kBadRange) {
        if (held()) lose_own(key);  // gone at the agent: its pages must not take more stores
        return done(status);
      }
      if (retryable(status.code()) && attempt < config_.map_attempts && held()) {
        strand_.post_after(config_.map_retry_delay, [this, alive, key, attempt, sent_handle,
                                                     done = std::move(done)]() mutable {
          if (!alive.expired()) map_own(key, attempt + 1, sent_handle, std::move(done));
        });
        return;
      }
      return done(status);
    }
    auto it = own_.find(key);
    auto mapping = mapping_from(reply, it == own_.end() ? 0 : it->second.size);
    if (!mapping.ok()) {
      // Mapped again it would say the same: give the region up (stores go
      // elsewhere). A first map's failure is the alloc's to give back.
      if (held() && own_.at(key).map_replied) {
        const std::string handle = own_.at(key).handle;
        lose_own(key);
        agent_state(key.first).conn->call(
            {{"op", "free"}, {"region", key.second}, {"handle", handle}},
            [](const Status&, const Json&) {});
      }
      return done(mapping.status());
    }
    // R6.3: a map reply's boot wins over the connection's (unless it is older news).
    adopt_reply_boot(key.first, mapping->boot, sent_under);
    if (!held()) return done(Error(ErrorCode::kBootChanged, "boot changed: region gone"));
    it = own_.find(key);
    it->second.map_replied = true;
    it->second.mapping = *mapping;
    done(it->second.mapping);
  });
}

void RegionMapClient::lose_own(const RegionKey& key) {
  auto it = own_.find(key);
  if (it == own_.end()) return;
  const OwnRegion lost = it->second;
  own_.erase(it);
  ++regions_lost_;
  log_.warn("agent ", key.first, " no longer knows region ", key.second,
            " (restarted without its region table?): giving it up");
  if (region_lost_listener_) region_lost_listener_(key.first, lost);
}

void RegionMapClient::forget_read_maps_of(const std::string& agent) {
  auto it = read_maps_.lower_bound({agent, 0, std::string()});
  while (it != read_maps_.end() && std::get<0>(it->first) == agent) it = read_maps_.erase(it);
}

void RegionMapClient::start_over(const std::string& agent) {
  agent_state(agent).conn->start_over(
      Error(ErrorCode::kUnavailable,
            "the agent refused an RDMA connect with this connection's "
            "proof: connecting anew"));
}

void RegionMapClient::recheck(const std::string& agent, std::uint64_t region) {
  auto it = own_.find({agent, region});
  if (it == own_.end()) return;
  map_own({agent, region}, config_.map_attempts, it->second.handle, [](const Result<Mapping>&) {});
}

void RegionMapClient::map_for_read(const std::string& agent, std::uint64_t region,
                                   const std::string& handle, Done<Mapping> done) {
  if (auto cached = cached_mapping(agent, region, handle)) return done(*cached);
  const ReadKey read_key{agent, region, handle};
  auto& waiters = read_map_waiters_[read_key];
  waiters.push_back(std::move(done));
  if (waiters.size() > 1) return;  // one map in flight per region and handle
  std::weak_ptr<bool> alive = alive_;
  auto finish = [this, alive, read_key](const Result<Mapping>& result) {
    if (alive.expired()) return;
    auto waiters = std::move(read_map_waiters_[read_key]);
    read_map_waiters_.erase(read_key);
    for (auto& w : waiters) w(result);
  };
  send_read_map({agent, region}, handle, std::nullopt, /*retry_stale=*/true, finish);
}

void RegionMapClient::send_read_map(const RegionKey& key, const std::string& handle,
                                    std::optional<std::string> location_boot, bool retry_stale,
                                    Done<Mapping> finish) {
  std::weak_ptr<bool> alive = alive_;
  hello(key.first, [this, alive, key, handle, location_boot, retry_stale,
                    finish = std::move(finish)](const Result<AgentHello>& hello) {
    if (alive.expired()) return;
    if (!hello.ok()) return finish(hello.status());
    const std::string sent_under = agents_[key.first].hello.boot;
    const std::string epoch = location_boot.value_or(sent_under);
    agents_[key.first].conn->call(
        {{"op", "map"}, {"region", key.second}, {"handle", handle}, {"epoch", epoch}},
        [this, alive, key, handle, location_boot, retry_stale, sent_under, finish](
            const Status& status, const Json& reply) {
          if (alive.expired()) return;
          if (!status.ok()) {
            if (status.code() == ErrorCode::kStaleEpoch) {
              const std::string now = boot_of(reply);
              adopt_reply_boot(key.first, now, sent_under);
              // A location's boot the agent has left, fresh from it: boots move
              // on, so it is gone (a boot this client believed, adopt_boot told).
              // Only news this client now believes: a late reply of a replaced boot is not.
              if (location_boot && !now.empty() && now != *location_boot &&
                  agents_[key.first].hello.boot == now && boot_gone_listener_) {
                boot_gone_listener_(key.first, *location_boot, now);
              }
              // The location may be of the new boot: ask once more under it.
              if (retry_stale) return send_read_map(key, handle, std::nullopt, false, finish);
            }
            if ((status.code() == ErrorCode::kNotFound || status.code() == ErrorCode::kBadRange) &&
                read_region_gone_listener_) {
              read_region_gone_listener_(key.first, key.second, handle);
            }
            return finish(status);
          }
          auto parsed = mapping_from(reply, 0);
          if (!parsed.ok()) return finish(parsed.status());
          const Mapping mapping = *parsed;
          adopt_reply_boot(key.first, mapping.boot, sent_under);
          if (mapping.boot == agents_[key.first].hello.boot) {
            // Bounded: the next loads map again what they need.
            if (read_maps_.size() >= config_.read_map_cache_limit) read_maps_.clear();
            read_maps_[{key.first, key.second, handle}] = mapping;
          }
          finish(mapping);
        });
  });
}

void RegionMapClient::check_location_boot(const std::string& agent, std::uint64_t region,
                                          const std::string& handle, const std::string& boot,
                                          Done<Mapping> done) {
  send_read_map({agent, region}, handle, boot, /*retry_stale=*/false, std::move(done));
}

std::optional<Mapping> RegionMapClient::cached_mapping(const std::string& agent,
                                                       std::uint64_t region,
                                                       const std::string& handle) const {
  // An own region answers only for its own handles: after an agent restart the
  // id may be this client's new region while the location names an old one.
  if (auto own = own_.find({agent, region});
      own != own_.end() && own->second.map_replied &&
      (handle == own->second.read_handle || handle == own->second.handle)) {
    return own->second.mapping;
  }
  if (auto it = read_maps_.find({agent, region, handle}); it != read_maps_.end()) {
    return it->second;
  }
  return std::nullopt;
}

void RegionMapClient::forget_read_mapping(const std::string& agent, std::uint64_t region) {
  // Every handle's: the registration the READ went through is gone.
  auto it = read_maps_.lower_bound({agent, region, std::string()});
  while (it != read_maps_.end() && std::get<0>(it->first) == agent &&
         std::get<1>(it->first) == region) {
    it = read_maps_.erase(it);
  }
}

void RegionMapClient::give_back(const std::string& agent, std::uint64_t region,
                                std::function<void(Status)> done) {
  auto it = own_.find({agent, region});
  if (it == own_.end()) {
    if (done) done(Error(ErrorCode::kNotFound, "not an own region"));
    return;
  }
  const std::string handle = it->second.handle;
  own_.erase(it);  // forgets the map reply too (R5.1)
  agent_state(agent).conn->call({{"op", "free"}, {"region", region}, {"handle", handle}},
                                [done](const Status& status, const Json&) {
                                  if (done) done(status);
                                });
}

}  // namespace rcxl::client
