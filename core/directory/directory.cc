#include "core/directory/directory.h"

#include <algorithm>
#include <functional>
#include <set>

#include "core/protocol/messages.h"

namespace rcxl::directory {

std::optional<Location> Directory::find(const std::string& key) const {
  auto it = keys_.find(key);
  if (it == keys_.end() || it->second.doomed) return std::nullopt;
  return it->second.location;
}

void Directory::touch(std::map<std::string, Entry>::iterator it) {
  Entry& entry = it->second;
  const std::uint64_t use = ++use_clock_;
  if (entry.leases > 0) {
    entry.last_use = use;  // joins lru_ there when its last lease ends
    return;
  }
  // The node moves to the newest end: no allocation on a lookup's hot path.
  if (auto node = lru_.extract(entry.last_use); !node.empty()) {
    node.key() = use;
    lru_.insert(lru_.end(), std::move(node));
  } else {
    lru_.emplace_hint(lru_.end(), use, &it->first);
  }
  entry.last_use = use;
}

void Directory::remove(std::map<std::string, Entry>::iterator it) {
  if (it->second.doomed) --doomed_;
  // A key leaves with no lease left, so none of its old pages is still read.
  while (!it->second.old_pages.empty()) {
    forget_old_pages(&it->first, place_of(it->second.old_pages.front().location));
  }
  lru_.erase(it->second.last_use);
  auto place = places_.find(place_of(it->second.location));
  place->second.erase(&it->first);
  if (place->second.empty()) places_.erase(place);
  keys_.erase(it);
}

void Directory::remove_for_reclaim(std::map<std::string, Entry>::iterator it) {
  const Location location = it->second.location;
  remove(it);
  keep_for_reclaim(location);
}

void Directory::keep_for_reclaim(const Location& location) {
  if (options_.max_reclaimable == 0) {
    ++reclaimable_dropped_;
    return;
  }
  if (reclaimable_count_ >= options_.max_reclaimable) {
    // The oldest kept goes (its page stays unused): the bound holds while
    // owners that still ask keep getting their newest pages back.
    auto oldest = reclaimable_order_.begin();
    auto place = reclaimable_.find(oldest->second);
    place->second.erase(oldest->first);
    if (place->second.empty()) reclaimable_.erase(place);
    reclaimable_order_.erase(oldest);
    --reclaimable_count_;
    ++reclaimable_dropped_;
  }
  const Place place = place_of(location);
  const std::uint64_t age = next_reclaimable_++;
  reclaimable_[place].emplace(age, location);
  reclaimable_order_.emplace(age, place);
  ++reclaimable_count_;
}

std::map<Directory::Place, std::map<std::uint64_t, Location>>::iterator Directory::forget_place(
    std::map<Place, std::map<std::uint64_t, Location>>::iterator it) {
  for (const auto& [age, location] : it->second) reclaimable_order_.erase(age);
  reclaimable_count_ -= it->second.size();
  return reclaimable_.erase(it);
}

std::vector<Location> Directory::reclaim(const std::vector<RegionRef>& regions, std::size_t max) {
  std::vector<Location> out;
  for (const auto& ref : regions) {
    // A region's places (one per boot) are contiguous.
    auto it = reclaimable_.lower_bound({ref.agent, ref.region, ref.read_handle, std::string()});
    while (out.size() < max && it != reclaimable_.end() && std::get<0>(it->first) == ref.agent &&
           std::get<1>(it->first) == ref.region && std::get<2>(it->first) == ref.read_handle) {
      auto& kept = it->second;
      while (out.size() < max && !kept.empty()) {
        auto first = kept.begin();  // oldest first
        out.push_back(std::move(first->second));
        reclaimable_order_.erase(first->first);
        kept.erase(first);
        --reclaimable_count_;
      }
      it = kept.empty() ? reclaimable_.erase(it) : std::next(it);
    }
    if (out.size() >= max) break;
  }
  return out;
}

void Directory::forget_reclaimable(const std::string& agent, std::uint64_t region,
                                   const std::string& read_handle) {
  auto it = reclaimable_.lower_bound({agent, region, read_handle, std::string()});
  while (it != reclaimable_.end() && std::get<0>(it->first) == agent &&
         std::get<1>(it->first) == region &&
         (read_handle.empty() || std::get<2>(it->first) == read_handle)) {
    it = forget_place(it);
  }
}

void Directory::forget_reclaimable_boots(const std::string& agent,
                                         const std::function<bool(const std::string&)>& gone) {
  auto it = reclaimable_.lower_bound({agent, 0, std::string(), std::string()});
  while (it != reclaimable_.end() && std::get<0>(it->first) == agent) {
    it = gone(std::get<3>(it->first)) ? forget_place(it) : std::next(it);
  }
}

Result<RegisterOutcome> Directory::register_key(const std::string& key, const Location& location) {
  return register_keys({{key, location}}).front();
}

std::vector<Result<RegisterOutcome>> Directory::register_keys(
    const std::vector<std::pair<std::string, Location>>& entries) {
  std::vector<Result<RegisterOutcome>> out;
  out.reserve(entries.size());
  std::vector<const std::string*> batch;
  for (const auto& [key, location] : entries) {
    out.push_back(register_one(key, location));
    if (auto it = keys_.find(key); it != keys_.end()) batch.push_back(&it->first);
  }
  // Registered keys are the newest uses: evicting one would answer
  // "registered" for a key no lookup finds. With every other key leased the
  // directory stays over max_keys until a lease ends (release evicts then).
  std::sort(batch.begin(), batch.end());
  evict_over_capacity(batch);
  return out;
}

Result<RegisterOutcome> Directory::register_one(const std::string& key, const Location& location) {
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
  AgentBoots& agent_boots = boots_[location.agent];  // stays while records go (forget_record)
  if (!agent_boots.seen.count(location.boot)) {
    agent_boots.seen[location.boot] = remember_boot(location.agent, location.boot, BootKind::kSeen);
  }
  auto it = keys_.find(key);
  if (it != keys_.end() && !it->second.doomed) {
    touch(it);
    return RegisterOutcome::kAlreadyPresent;
  }
  if (it == keys_.end()) {
    it = keys_.try_emplace(key).first;
  } else {
    // A doomed key takes the new location; its leases still end on this key.
    // Their readers still read the old page: it goes to reclaim when the last
    // of them ends (a page its region or boot took along is forgotten).
    Entry& doomed = it->second;
    auto kept = std::find_if(doomed.old_pages.begin(), doomed.old_pages.end(),
                             [&](const OldPage& o) { return o.location == doomed.location; });
    if (doomed.reclaim_on_end && doomed.location != location && kept != doomed.old_pages.end()) {
      // Left before and taken again since: one entry, read by every lease now open.
      kept->last_lease = next_lease_ - 1;
      kept->readers = doomed.leases;
    } else if (doomed.reclaim_on_end && doomed.location != location) {
      if (old_pages_count_ >= options_.max_reclaimable ||
          doomed.old_pages.size() >= options_.max_old_pages_per_key) {
        ++reclaimable_dropped_;
      } else {
        doomed.old_pages.push_back({doomed.location, next_lease_ - 1, doomed.leases});
        old_page_places_[place_of(doomed.location)].insert(&it->first);
        ++old_pages_count_;
      }
    }
    auto place = places_.find(place_of(doomed.location));
    place->second.erase(&it->first);
    if (place->second.empty()) places_.erase(place);
    doomed.doomed = false;
    doomed.reclaim_on_end = false;
    --doomed_;
  }
  Entry& entry = it->second;
  entry.location = location;
  places_[place_of(location)].insert(&it->first);
  touch(it);
  return RegisterOutcome::kRegistered;
}

LookupResult Directory::lookup(const std::vector<std::string>& keys, runtime::Instant now) {
  expire_leases(now);
  LookupResult result;
  LeaseState lease;
  for (const auto& key : keys) {
    auto it = keys_.find(key);
    if (it == keys_.end() || it->second.doomed) break;  // prefix semantics for KV chunks
    touch(it);
    if (it->second.leases++ == 0) lru_.erase(it->second.last_use);  // a lease keeps it
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
    touch(it);  // a probe counts as a use (SPEC R3.4)
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
    --it->second.leases;
    settle_old_pages(it, lease_id);
    if (it->second.leases == 0 && it->second.doomed) {
      if (it->second.reclaim_on_end) {
        remove_for_reclaim(it);
      } else {
        remove(it);
      }
    } else if (it->second.leases == 0) {
      lru_.emplace(it->second.last_use, &it->first);  // evictable again, at its last use
    }
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
  return erase_keys(keys, /*reclaim=*/true);
}

std::size_t Directory::erase_keys(const std::vector<std::string>& keys, bool reclaim) {
  std::size_t n = 0;
  for (const auto& key : keys) {
    auto it = keys_.find(key);
    if (it == keys_.end()) continue;
    if (it->second.doomed) {
      // Deleted before; now its region is going too: its page is not reused.
      if (!reclaim) it->second.reclaim_on_end = false;
      continue;
    }
    ++n;
    if (it->second.leases > 0) {
      it->second.doomed = true;
      it->second.reclaim_on_end = reclaim;
      ++doomed_;
    } else if (reclaim) {
      remove_for_reclaim(it);
    } else {
      remove(it);
    }
  }
  return n;
}

void Directory::settle_old_pages(std::map<std::string, Entry>::iterator it,
                                 std::uint64_t lease_id) {
  auto& pages = it->second.old_pages;
  for (std::size_t i = 0; i < pages.size();) {
    if (lease_id > pages[i].last_lease || --pages[i].readers > 0) {
      ++i;
      continue;
    }
    const Location page = pages[i].location;
    pages.erase(pages.begin() + static_cast<std::ptrdiff_t>(i));
    --old_pages_count_;
    const Place place = place_of(page);
    const bool more_there = std::any_of(pages.begin(), pages.end(), [&](const OldPage& o) {
      return place_of(o.location) == place;
    });
    if (!more_there) {
      auto at = old_page_places_.find(place);
      at->second.erase(&it->first);
      if (at->second.empty()) old_page_places_.erase(at);
    }
    // Registered there again since, the page is the key's once more.
    if (it->second.location != page) keep_for_reclaim(page);
  }
}

void Directory::forget_old_pages(const std::string* key, const Place& place) {
  auto& pages = keys_.at(*key).old_pages;
  const auto gone = std::remove_if(pages.begin(), pages.end(),
                                   [&](const OldPage& o) { return place_of(o.location) == place; });
  old_pages_count_ -= static_cast<std::size_t>(pages.end() - gone);
  pages.erase(gone, pages.end());
  auto at = old_page_places_.find(place);
  if (at == old_page_places_.end()) return;
  at->second.erase(key);
  if (at->second.empty()) old_page_places_.erase(at);
}

void Directory::forget_old_pages_where(const Place& first,
                                       const std::function<bool(const Place&)>& same,
                                       const std::function<bool(const Place&)>& gone) {
  auto it = old_page_places_.lower_bound(first);
  while (it != old_page_places_.end() && same(it->first)) {
    if (!gone(it->first)) {
      ++it;
      continue;
    }
    const Place place = it->first;
    const KeySet keys = it->second;  // forget_old_pages erases the place at the last key
    for (const std::string* key : keys) forget_old_pages(key, place);
    it = old_page_places_.upper_bound(place);
  }
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
  // The region went back to its agent: nothing of it is written again.
  forget_reclaimable(agent, region, read_handle);
  forget_old_pages_where(
      {agent, region, read_handle, std::string()},
      [&](const Place& p) {
        return std::get<0>(p) == agent && std::get<1>(p) == region &&
               (read_handle.empty() || std::get<2>(p) == read_handle);
      },
      [](const Place&) { return true; });
  return erase_keys(doomed, /*reclaim=*/false);
}

std::size_t Directory::drop_where(const std::string& agent,
                                  const std::function<bool(const std::string&)>& gone) {
  std::vector<std::string> doomed;
  // The agent's places are contiguous; one per region, handle and boot.
  for (auto it = places_.lower_bound({agent, 0, std::string(), std::string()});
       it != places_.end() && std::get<0>(it->first) == agent; ++it) {
    if (!gone(std::get<3>(it->first))) continue;
    for (const std::string* key : it->second) {
      // A key doomed before (deleted while leased) was counted when it was
      // dropped; its memory is gone now, so its page is not given back.
      Entry& entry = keys_.at(*key);
      if (entry.doomed) {
        entry.reclaim_on_end = false;
      } else {
        doomed.push_back(*key);
      }
    }
  }
  forget_reclaimable_boots(agent, gone);
  forget_old_pages_where(
      {agent, 0, std::string(), std::string()},
      [&](const Place& p) { return std::get<0>(p) == agent; },
      [&](const Place& p) { return gone(std::get<3>(p)); });
  // The memory behind them is gone: a lease cannot keep them readable.
  for (const auto& key : doomed) {
    auto it = keys_.find(key);
    if (it->second.leases > 0) {
      it->second.doomed = true;
      it->second.reclaim_on_end = false;
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
  // The no-op and refused reports are told apart first, so they leave no
  // entry behind (an entry without records would never be forgotten).
  const auto known = boots_.find(agent);
  auto retired = [&](const std::string& b) {
    return known != boots_.end() && known->second.retired.count(b) > 0;
  };
  if (!from.empty()) {
    // Reports may arrive in any order: only `from`, which the reporter saw
    // replaced, is certainly gone; a boot never comes back (R6.4).
    if (from == boot || retired(from)) return std::size_t{0};
  } else {
    if (known != boots_.end() && known->second.current == boot) return std::size_t{0};
    if (retired(boot)) {
      // Quoted short: the reply must stay far below the frame its request filled.
      return Error(ErrorCode::kStaleEpoch, "boot " + protocol::quote_client_text(boot) +
                                               " of agent " + protocol::quote_client_text(agent) +
                                               " is gone");
    }
  }
  // Records forgotten on the way erase only other agents' entries: this one stays.
  AgentBoots& boots = boots_[agent];
  if (!from.empty()) {
    retire_boot(agent, boots, from);
    if (!boots.retired.count(boot)) set_current(agent, boots, boot);
    return drop_where(agent, [&](const std::string& b) { return b == from; });
  }
  // Without `from`: every other boot of the agent goes (each once: the
  // current boot is usually among those registered under, too).
  std::set<std::string> others;
  if (!boots.current.empty()) others.insert(boots.current);
  for (const auto& [b, record] : boots.seen) others.insert(b);
  others.erase(boot);
  for (const std::string& b : others) retire_boot(agent, boots, b);
  set_current(agent, boots, boot);
  return drop_where(agent, [&](const std::string& b) { return b != boot; });
}

std::uint64_t Directory::remember_boot(const std::string& agent, const std::string& boot,
                                       BootKind kind) {
  while (!boot_records_.empty() && boot_records_.size() >= options_.max_boot_records) {
    forget_record(boot_records_.begin()->first, agent);
  }
  const std::uint64_t record = next_boot_record_++;
  boot_records_[record] = {agent, boot, kind};
  return record;
}

// `busy`: the agent an operation is changing; its entry stays even if emptied
// (the caller holds a reference to it and adds a record next).
void Directory::forget_record(std::uint64_t record, const std::string& busy) {
  auto it = boot_records_.find(record);
  if (it == boot_records_.end()) return;
  auto agent = boots_.find(it->second.agent);
  if (agent != boots_.end()) {
    AgentBoots& boots = agent->second;
    switch (it->second.kind) {
      case BootKind::kCurrent:
        if (boots.current_record == record) {
          boots.current.clear();
          boots.current_record = 0;
        }
        break;
      case BootKind::kRetired:
        if (auto r = boots.retired.find(it->second.boot);
            r != boots.retired.end() && r->second == record) {
          boots.retired.erase(r);
        }
        break;
      case BootKind::kSeen:
        if (auto r = boots.seen.find(it->second.boot);
            r != boots.seen.end() && r->second == record) {
          boots.seen.erase(r);
        }
        break;
    }
    if (agent->first != busy && boots.current.empty() && boots.retired.empty() &&
        boots.seen.empty()) {
      boots_.erase(agent);
    }
  }
  boot_records_.erase(it);
}

void Directory::set_current(const std::string& agent, AgentBoots& boots, const std::string& boot) {
  if (boots.current_record != 0) forget_record(boots.current_record, agent);
  boots.current_record = remember_boot(agent, boot, BootKind::kCurrent);
  boots.current = boot;
}

void Directory::retire_boot(const std::string& agent, AgentBoots& boots, const std::string& boot) {
  if (boots.retired.count(boot)) return;  // retired already: one record per boot
  if (boots.current == boot && boots.current_record != 0) {
    forget_record(boots.current_record, agent);
  }
  if (auto seen = boots.seen.find(boot); seen != boots.seen.end()) {
    forget_record(seen->second, agent);
  }
  boots.retired[boot] = remember_boot(agent, boot, BootKind::kRetired);
}

void Directory::evict_over_capacity(const std::vector<const std::string*>& keep) {
  // Leased keys are not on lru_ (a lease keeps a key while it is read); the
  // keys passed over are only those of `keep`.
  auto it = lru_.begin();
  while (keys_.size() > options_.max_keys && it != lru_.end()) {
    const std::string* key = it->second;
    ++it;
    if (std::binary_search(keep.begin(), keep.end(), key)) continue;
    remove_for_reclaim(keys_.find(*key));
    ++evictions_;
  }
}

}  // namespace rcxl::directory
