#include "core/directory/directory.h"

#include <algorithm>
#include <functional>
#include <set>

namespace rcxl::directory {

std::optional<Location> Directory::find(const std::string& key) const {
  auto it = keys_.find(key);
  if (it == keys_.end() || it->second.doomed) return std::nullopt;
  return it->second.location;
}

void Directory::touch(const std::string& key, Entry& entry) {
  lru_.erase(entry.last_use);
  entry.last_use = ++use_clock_;
  lru_[entry.last_use] = key;
}

void Directory::remove(std::map<std::string, Entry>::iterator it) {
  if (it->second.doomed) --doomed_;
  lru_.erase(it->second.last_use);
  auto place = places_.find(place_of(it->second.location));
  place->second.erase(&it->first);
  if (place->second.empty()) places_.erase(place);
  keys_.erase(it);
}

Result<RegisterOutcome> Directory::register_key(const std::string& key, const Location& location) {
  if (key.empty()) return Error(ErrorCode::kBadRequest, "empty key");
  auto boots = boots_.find(location.agent);
  if (boots != boots_.end()) {
    if (boots->second.retired.count(location.boot)) {
      return Error(ErrorCode::kStaleEpoch,
                   "boot " + location.boot + " of agent " + location.agent + " is gone");
    }
  }
  // A boot nobody reported gone is taken as it is: which of two boots is the
  // newer only a client that saw one replace the other can tell (boot_changed).
  boots_[location.agent].seen.insert(location.boot);
  auto it = keys_.find(key);
  if (it != keys_.end() && !it->second.doomed) {
    touch(key, it->second);
    return RegisterOutcome::kAlreadyPresent;
  }
  // A doomed key makes room for the new one; its leases still end on this key.
  std::uint32_t leases = 0;
  if (it != keys_.end()) {
    leases = it->second.leases;
    remove(it);
  }
  auto inserted = keys_.try_emplace(key).first;  // not there: removed above if doomed
  Entry& entry = inserted->second;
  entry.location = location;
  entry.leases = leases;
  places_[place_of(location)].insert(&inserted->first);
  touch(key, entry);
  // The new key is the most recent use; evicting it would answer "registered"
  // for a key no lookup finds. With every other key leased the directory stays
  // over max_keys until a lease ends (release evicts then).
  evict_over_capacity(&key);
  return RegisterOutcome::kRegistered;
}

LookupResult Directory::lookup(const std::vector<std::string>& keys, runtime::Instant now) {
  expire_leases(now);
  LookupResult result;
  LeaseState lease;
  for (const auto& key : keys) {
    auto it = keys_.find(key);
    if (it == keys_.end() || it->second.doomed) break;  // prefix semantics for KV chunks
    touch(key, it->second);
    ++it->second.leases;
    lease.keys.push_back(key);
    result.locations.push_back(it->second.location);
  }
  if (!lease.keys.empty()) {
    lease.expires = now + options_.lease_ttl;
    result.lease = {next_lease_++, lease.expires};
    lease_expiry_.insert({lease.expires, result.lease.id});
    leases_[result.lease.id] = std::move(lease);
  }
  return result;
}

std::vector<Location> Directory::probe(const std::vector<std::string>& keys, runtime::Instant now) {
  expire_leases(now);
  std::vector<Location> out;
  for (const auto& key : keys) {
    auto it = keys_.find(key);
    if (it == keys_.end() || it->second.doomed) break;
    touch(key, it->second);  // a probe counts as a use (SPEC R3.4)
    out.push_back(it->second.location);
  }
  return out;
}

Status Directory::release(std::uint64_t lease_id) {
  auto lease = leases_.find(lease_id);
  if (lease == leases_.end()) return Error(ErrorCode::kNotFound, "no such lease");
  for (const auto& key : lease->second.keys) {
    auto it = keys_.find(key);
    if (it == keys_.end()) continue;
    if (--it->second.leases == 0 && it->second.doomed) remove(it);
  }
  lease_expiry_.erase({lease->second.expires, lease_id});
  leases_.erase(lease);
  evict_over_capacity();
  return {};
}

void Directory::expire_leases(runtime::Instant now) {
  // Oldest expiry first: only the expired ones are looked at.
  while (!lease_expiry_.empty() && lease_expiry_.begin()->first <= now) {
    const std::uint64_t id = lease_expiry_.begin()->second;
    lease_expiry_.erase(lease_expiry_.begin());  // taken out first: the loop always ends
    (void)release(id);
  }
}

std::size_t Directory::erase(const std::vector<std::string>& keys) {
  std::size_t n = 0;
  for (const auto& key : keys) {
    auto it = keys_.find(key);
    if (it == keys_.end() || it->second.doomed) continue;
    ++n;
    if (it->second.leases > 0) {
      it->second.doomed = true;
      ++doomed_;
    } else {
      remove(it);
    }
  }
  return n;
}

std::size_t Directory::drop_region(const std::string& agent, std::uint64_t region,
                                   const std::string& read_handle) {
  std::vector<std::string> doomed;
  // Places of this agent and region (and handle, when given) are contiguous.
  for (auto it = places_.lower_bound({agent, region, read_handle, std::string()});
       it != places_.end() && std::get<0>(it->first) == agent && std::get<1>(it->first) == region &&
       (read_handle.empty() || std::get<2>(it->first) == read_handle);
       ++it) {
    for (const std::string* key : it->second) doomed.push_back(*key);
  }
  return erase(doomed);
}

std::size_t Directory::drop_where(const std::string& agent,
                                  const std::function<bool(const std::string&)>& gone) {
  std::vector<std::string> doomed;
  // The agent's places are contiguous; one per region, handle and boot.
  for (auto it = places_.lower_bound({agent, 0, std::string(), std::string()});
       it != places_.end() && std::get<0>(it->first) == agent; ++it) {
    if (!gone(std::get<3>(it->first))) continue;
    for (const std::string* key : it->second) {
      // A key doomed before (deleted while leased) was counted when it was dropped.
      if (!keys_.at(*key).doomed) doomed.push_back(*key);
    }
  }
  // The memory behind them is gone: a lease cannot keep them readable.
  for (const auto& key : doomed) {
    auto it = keys_.find(key);
    if (it->second.leases > 0) {
      it->second.doomed = true;
      ++doomed_;
    } else {
      remove(it);
    }
  }
  return doomed.size();
}

Result<std::size_t> Directory::boot_changed(const std::string& agent, const std::string& boot,
                                            const std::string& from) {
  if (agent.empty() || boot.empty()) return Error(ErrorCode::kBadRequest, "empty agent or boot");
  AgentBoots& boots = boots_[agent];
  auto retired = [&](const std::string& b) { return boots.retired.count(b) > 0; };
  auto retire = [&](const std::string& b) {
    boots.retired.insert(b);
    boots.seen.erase(b);
  };
  if (!from.empty()) {
    // Reports may arrive in any order: only `from`, which the reporter saw
    // replaced, is certainly gone; a boot never comes back (R6.4).
    if (from == boot || retired(from)) return std::size_t{0};
    retire(from);
    if (boots.current == from) boots.current.clear();
    if (!retired(boot)) boots.current = boot;
    return drop_where(agent, [&](const std::string& b) { return b == from; });
  }
  // Without `from`: every other boot of the agent goes.
  if (boots.current == boot) return std::size_t{0};
  if (retired(boot)) {
    return Error(ErrorCode::kStaleEpoch, "boot " + boot + " of agent " + agent + " is gone");
  }
  if (!boots.current.empty()) retire(boots.current);
  for (const std::string& b : std::set<std::string>(boots.seen)) {
    if (b != boot) retire(b);
  }
  boots.current = boot;
  return drop_where(agent, [&](const std::string& b) { return b != boot; });
}

void Directory::evict_over_capacity(const std::string* keep) {
  auto it = lru_.begin();
  while (keys_.size() > options_.max_keys && it != lru_.end()) {
    auto entry = keys_.find(it->second);
    ++it;
    if (entry->second.leases > 0) continue;  // a lease keeps a key while it is read
    if (keep != nullptr && entry->first == *keep) continue;
    remove(entry);
    ++evictions_;
  }
}

}  // namespace rcxl::directory
