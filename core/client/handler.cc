#include "core/client/handler.h"

#include <algorithm>
#include <optional>
#include <set>

namespace rcxl::client {

struct Handler::StoreJob {
  std::vector<StoreItem> items;
  std::vector<Page> pages;
  std::vector<Status> written;  // per item
  std::string token;
  RangesByAgent ranges;  // per agent, write order, owner handles
  StoreDone done;
};

struct Handler::LoadJob {
  std::vector<std::string> keys;
  std::vector<directory::Location> locations;
  std::vector<Mapping> mappings;  // per location, once resolved
  std::vector<std::uint64_t> leases;
  std::size_t valid = 0;  // leading locations that are readable
  std::vector<std::vector<std::byte>> buffers;
  std::vector<Status> read;  // per valid location
  std::string hint_name;     // R3.7, when this load hinted itself
  bool engine_hinted = false;
  bool boot_checked = false;  // a location's boot was asked about once
  // Why the prefix ended at a location whose agent could not be asked (its
  // map failed, not for a region or boot that is gone): a miss with a reason.
  Status unreached;
  // The READs must end by then: past it the lease may be gone and the
  // pages written again for other keys (directory reclaim).
  std::optional<runtime::Instant> read_deadline;
  LoadDone done;
};

Handler::Handler(runtime::Runtime& rt, Config config, runtime::Nic& nic,
                 std::shared_ptr<directory::DirectoryClient> directory)
    : config_(std::move(config)),
      log_(rt.log_sink(), "client"),
      clock_(rt.clock()),
      directory_(std::move(directory)),
      nic_(nic),
      strand_(rt.make_strand("handler")) {
  if (!directory_) {
    directory_strand_ = rt.make_strand("directory-client");
    directory_ = std::make_shared<directory::DirectoryClient>(
        rt, *directory_strand_,
        directory::RpcConnection::Options{.address = config_.directory,
                                          .secret = config_.secret,
                                          .client_name = config_.client_name + "/directory",
                                          .reply_timeout = config_.reply_timeout});
  }
  reply_gate_ = std::make_shared<runtime::StrandGate>(*strand_);
  regions_ = std::make_unique<RegionMapClient>(rt, *strand_, config_);
  hints_ = std::make_unique<MemoryHints>(rt, config_, *directory_);
  waits_ = std::make_unique<MemoryWaits>(rt, *strand_, config_);
  qps_ = std::make_unique<QueuePairs>(
      nic, *strand_, clock_, config_,
      [this](const std::string& agent, std::function<void(Result<std::string>)> give) {
        // The proof of the control connection's live hello, asked for by that
        // hello: after an agent restart the kept one names a closed connection
        // and may not say the agent wants one (the hello reconnects; a live
        // one answers at once).
        regions_->hello(agent, [give = std::move(give)](const Result<AgentHello>& now) {
          if (!now.ok()) return give(now.status());
          give(now->rdma_connect_proof ? now->connect_proof : std::string());
        });
      },
      [this](const std::string& agent) { regions_->start_over(agent); },
      [this](const std::string& agent, const std::string& endpoint, runtime::Instant until) {
        // A load's agent outside the pool takes no stores anyway (the QP backoff covers it).
        if (std::none_of(config_.agents.begin(), config_.agents.end(),
                         [&](const runtime::Address& a) { return agent_key(a) == agent; })) {
          return;
        }
        // Stores go to other agents meanwhile; its pages wait, parked.
        log_.warn("the RDMA endpoint of ", agent, " (", endpoint,
                  ") could not be reached: no stores there for ",
                  runtime::to_millis(config_.unreachable_backoff), " ms or until its boot moves");
        ++stats_.rdma_pauses;
        rdma_unreachable_[agent] = {endpoint, until};
        sort_refused_boots();
      });
  std::weak_ptr<bool> alive = alive_;
  regions_->set_boot_listener([this, alive](const std::string& agent, const std::string& old_boot,
                                            const std::string& new_boot,
                                            const std::vector<OwnRegion>& lost) {
    if (!alive.expired()) on_boot_change(agent, old_boot, new_boot, lost);
  });
  regions_->set_region_lost_listener([this, alive](const std::string& agent, const OwnRegion& r) {
    if (alive.expired()) return;
    // Free and parked pages alike: a parked page is stored into once its boot's refusal ends.
    auto of_region = [&](const Page& p) {
      return p.agent == agent && p.region == r.region && p.handle == r.handle;
    };
    std::erase_if(free_pages_, of_region);
    std::erase_if(parked_pages_, of_region);
    // Its keys are unreadable now; the boot did not change, so nothing else drops them.
    directory_->drop_region(agent, r.region, r.read_handle);
  });
  // SPEC R6.1: keys in a region the agent no longer has go too, even when
  // their owner never learns it (gone, idle, or its own drop was lost).
  regions_->set_read_region_gone_listener(
      [this, alive](const std::string& agent, std::uint64_t region, const std::string& handle) {
        if (!alive.expired()) directory_->drop_region(agent, region, handle);
      });
  // SPEC R6.1: keys under a boot the agent has left go, even when no client
  // that saw it leave told the directory (its writer may be gone).
  regions_->set_boot_gone_listener(
      [this, alive](const std::string& agent, const std::string& gone, const std::string& now) {
        if (!alive.expired()) directory_->boot_changed(agent, now, gone);
      });
  // Boot news from the waits connection counts only if it follows what this
  // client believes: a stale_epoch answer to a wait sent under an older boot
  // (or a first hello racing a map reply) could turn the boot back, free
  // every own region and retire the live boot at the directory.
  waits_->set_boot_observer(
      [this, alive](const std::string& agent, const std::string& from, const std::string& to) {
        if (!alive.expired()) regions_->observe_peer_boot(agent, from, to);
      });
  // The hint strand is another strand: its news about boots is posted over.
  // Through the gate, not strand_: this runs on the hint thread, which may still
  // answer while the handler is being destroyed (the gate is closed first).
  hints_->set_boot_observer([this, alive, gate = reply_gate_](const std::string& agent,
                                                              const std::string& from,
                                                              const std::string& to) {
    gate->post([this, alive, agent, from, to] {
      if (!alive.expired()) regions_->observe_peer_boot(agent, from, to);
    });
  });
}

const OwnRegion* Handler::own_region_of(const Page& page) const {
  auto own = regions_->own_regions().find({page.agent, page.region});
  if (own == regions_->own_regions().end() || own->second.handle != page.handle) return nullptr;
  return &own->second;
}

Handler::~Handler() {
  // A directory client shared with others may answer after this: drop it.
  reply_gate_->close();
  *alive_ = false;
  // strand_ is the last member, so it goes first: a task still running on it
  // finishes while every other member is alive.
}

void Handler::on_boot_change(const std::string& agent, const std::string& old_boot,
                             const std::string& new_boot, const std::vector<OwnRegion>&) {
  refused_boots_.erase(agent);     // a new boot: the directory takes its registers
  rdma_unreachable_.erase(agent);  // and it may listen again
  qps_->forget_unreachable(agent);
  // The regions went before this is called (`lost`, and any lost earlier on a
  // not_found): only pages of regions still held stay in use.
  auto gone = [&](const Page& p) { return p.agent == agent && own_region_of(p) == nullptr; };
  for (auto it = parked_pages_.begin(); it != parked_pages_.end();) {
    if (it->agent != agent) {
      ++it;
      continue;
    }
    if (!gone(*it)) free_pages_.push_back(*it);
    it = parked_pages_.erase(it);
  }
  std::erase_if(free_pages_, gone);
  // SPEC R6.1: the directory drops every location stored under the old boot.
  directory_->boot_changed(agent, new_boot, old_boot);
  hints_->observe_boot(agent, old_boot, new_boot);  // its next hints go under the new boot
  waits_->observe_boot(agent, new_boot);            // and its next waits
}

// ---------------------------------------------------------------- hints

void Handler::hint_read(std::string request, std::vector<std::string> keys) {
  if (!config_.read_hints) return;
  hints_->read_hint(std::move(request), std::move(keys));
}

void Handler::end_read_hint(std::string request) {
  if (!config_.read_hints) return;
  hints_->end_read_hint(std::move(request));
}

void Handler::promote_read(std::string request) {
  if (!config_.effective_read_promotes()) return;
  hints_->read_promote(std::move(request));
}

void Handler::lookup(const std::vector<std::string>& keys,
                     std::function<void(Result<std::size_t>)> done) {
  // A reader of its pool only counts what its load would take (R1.1): the
  // scheduler otherwise promised hits on foreign agents that load as misses.
  const bool pool_only = config_.only_pool_agents;
  std::weak_ptr<bool> alive = alive_;
  directory_->probe(
      keys, /*with_locations=*/pool_only,
      [this, alive, pool_only, done = std::move(done)](Result<directory::ProbeReply> reply) {
        if (alive.expired()) return;
        if (!reply.ok()) return done(reply.status());
        if (!pool_only) return done(reply->hits);
        std::size_t loadable = 0;
        for (const auto& l : reply->locations) {
          if (loadable == reply->hits || !loads_from(l)) break;
          ++loadable;
        }
        done(loadable);
      },
      reply_gate_);
}

// ---------------------------------------------------------------- pages

void Handler::reserve_pages(std::size_t n, std::size_t agents_tried,
                            std::function<void(Result<std::vector<Page>>)> done,
                            bool reclaim_asked) {
  if (!refused_boots_.empty() || !rdma_unreachable_.empty()) sort_refused_boots();
  if (free_pages_.size() >= n) {
    const auto end = free_pages_.begin() + static_cast<std::ptrdiff_t>(n);
    std::vector<Page> pages(free_pages_.begin(), end);
    free_pages_.erase(free_pages_.begin(), end);
    return done(std::move(pages));
  }
  if (!reclaim_asked && !regions_->own_regions().empty()) {
    // Pages of keys the directory let go are reused before the pool grows:
    // otherwise a long-running writer whose keys are evicted fills every agent.
    std::vector<directory::RegionRef> refs;
    for (const auto& [key, own] : regions_->own_regions()) {
      refs.push_back({own.agent, own.region, own.read_handle});
    }
    // Each ask starts at another region: one request may not name them all.
    std::rotate(refs.begin(),
                refs.begin() + static_cast<std::ptrdiff_t>(reclaim_rotation_++ % refs.size()),
                refs.end());
    // Up to a region's worth: under steady eviction most stores then find
    // free pages and ask nothing.
    const std::size_t wanted = std::max<std::size_t>(
        n - free_pages_.size(), config_.region_size_bytes / config_.chunk_size_bytes);
    std::weak_ptr<bool> alive = alive_;
    directory_->reclaim(
        refs, wanted,
        [this, alive, n, agents_tried,
         done = std::move(done)](Result<std::vector<directory::Location>> back) mutable {
          if (alive.expired()) return;
          if (back.ok()) {
            take_reclaimed(*back);
          } else {
            log_.debug("reclaim failed (a new region instead): ", back.status().ToString());
          }
          reserve_pages(n, agents_tried, std::move(done), /*reclaim_asked=*/true);
        },
        reply_gate_,
        // Given out after the call timed out: the pages are still this client's.
        [this, alive](Result<std::vector<directory::Location>> late) {
          if (!alive.expired() && late.ok()) take_reclaimed(*late);
        });
    return;
  }
  if (config_.region_size_bytes < config_.chunk_size_bytes) {
    // A region would hold no chunk: allocating on would drain every agent's pool.
    return done(Error(ErrorCode::kBadRequest,
                      "region_size_bytes " + std::to_string(config_.region_size_bytes) +
                          " holds no chunk of chunk_size_bytes " +
                          std::to_string(config_.chunk_size_bytes) + "; raise region_size_bytes"));
  }
  if (config_.agents.empty() || agents_tried >= config_.agents.size()) {
    if (!refused_boots_.empty()) {
      return done(Error(ErrorCode::kNoSpace,
                        "no agent could give a region; the directory refuses the boot of " +
                            refused_boots_.begin()->first +
                            " (it saw that boot replaced): it is tried again after "
                            "unreachable_backoff, and stores resume once its boot moves (a "
                            "memory reset or restart) or the directory forgets that boot; or "
                            "give the client more agents"));
    }
    if (!rdma_unreachable_.empty()) {
      const auto& [agent, pause] = *rdma_unreachable_.begin();
      return done(Error(
          ErrorCode::kUnavailable,
          "no agent could give a region; the RDMA endpoint of " + agent + " (" + pause.endpoint +
              ") could not be reached (is the agent's RDMA NIC up (its --nic), and the "
              "client's nic_endpoint right?): it is tried again after "
              "unreachable_backoff"));
    }
    return done(Error(ErrorCode::kNoSpace, "no agent could give a region"));
  }
  const std::string agent =
      agent_key(config_.agents[(config_.first_agent + next_agent_++) % config_.agents.size()]);
  if (const AgentHello* hello = regions_->known(agent);
      rdma_unreachable_.count(agent) != 0 ||
      (hello != nullptr && boot_refused(agent, hello->boot))) {
    return reserve_pages(n, agents_tried + 1, std::move(done), /*reclaim_asked=*/true);
  }
  std::weak_ptr<bool> alive = alive_;
  regions_->allocate(
      agent, config_.region_size_bytes,
      [this, alive, n, agents_tried, done = std::move(done)](Result<OwnRegion> region) mutable {
        if (alive.expired()) return;
        if (!region.ok()) {
          log_.warn("alloc failed: ", region.status().ToString());
          return reserve_pages(n, agents_tried + 1, std::move(done), /*reclaim_asked=*/true);
        }
        ++stats_.regions_allocated;
        for (std::uint64_t off = 0; off + config_.chunk_size_bytes <= region->size;
             off += config_.chunk_size_bytes) {
          free_pages_.push_back({region->agent, region->region, off, region->handle});
        }
        reserve_pages(n, 0, std::move(done), /*reclaim_asked=*/true);
      });
}

// ---------------------------------------------------------------- zero copy

std::shared_ptr<LocalRegistration> Handler::register_local(const std::vector<runtime::RdmaOp>& ops,
                                                           std::shared_ptr<const void> owner) {
  if (!config_.zero_copy || !nic_.needs_local_registration()) return nullptr;
  return std::make_shared<LocalRegistration>(nic_, ops, std::move(owner));
}

// ---------------------------------------------------------------- store

void Handler::store(std::vector<StoreItem> items, StoreDone done) {
  auto job = std::make_shared<StoreJob>();
  job->items = std::move(items);
  job->done = std::move(done);
  std::weak_ptr<bool> alive = alive_;
  strand_->post([this, alive, job] {
    if (alive.expired()) return;
    for (const auto& item : job->items) {
      if (item.key.empty() || item.bytes.empty() || item.size() > config_.chunk_size_bytes ||
          item.size() < item.bytes.size()) {
        return job->done(
            Error(ErrorCode::kBadRequest, "every item needs a key and 1..chunk_size_bytes bytes"));
      }
    }
    // Refused here, before pages are taken: the directory client refuses such
    // a key too, and a register refused whole keeps its pages out of use.
    for (std::size_t i = 0; i < job->items.size(); ++i) {
      if (Status s = directory::check_key(job->items[i].key, i); !s.ok()) return job->done(s);
    }
    // Nothing to write: answered here, or no agent's step would ever answer it.
    if (job->items.empty()) return job->done(StoreResult{});
    ++stats_.stores;
    start_store(job);
  });
}

RangesByAgent Handler::subset(const RangesByAgent& all, const std::set<std::string>& agents) const {
  RangesByAgent out;
  for (const auto& [agent, list] : all) {
    if (agents.count(agent)) out[agent] = list;
  }
  return out;
}

void Handler::start_store(std::shared_ptr<StoreJob> job) {
  std::weak_ptr<bool> alive = alive_;
  reserve_pages(job->items.size(), 0, [this, alive, job](Result<std::vector<Page>> pages) {
    if (alive.expired()) return;
    if (!pages.ok()) return job->done(pages.status());
    job->pages = std::move(pages).value();
    job->token = config_.client_name + "-store-" + std::to_string(++seq_);
    std::set<std::string> agents;
    for (std::size_t i = 0; i < job->items.size(); ++i) {
      const Page& page = job->pages[i];
      job->ranges[page.agent].add({page.region, page.offset, job->items[i].size()}, page.handle);
      agents.insert(page.agent);
    }
    const bool hints_on = config_.effective_write_hints();
    // SPEC R4.3: the budget runs from here, the plan (connects, hellos) included.
    const runtime::Instant wait_start = clock_.now();
    const runtime::Instant deadline = wait_start + std::chrono::milliseconds(config_.write_wait_ms);
    auto held = [this, wait_start] {
      stats_.longest_write_wait = std::max(stats_.longest_write_wait, clock_.now() - wait_start);
    };
    auto after_plan = [this, alive, job, agents, hints_on, deadline,
                       held](const std::set<std::string>& takes_wait) {
      if (alive.expired()) return;
      std::set<std::string> others;
      for (const auto& a : agents) {
        if (!takes_wait.count(a)) others.insert(a);
      }
      // R4.1: queued before the WRITEs are posted; R4.3: others still get one.
      if (hints_on && !others.empty()) hints_->write_hint(job->token, subset(job->ranges, others));
      if (takes_wait.empty()) {
        held();
        return write_and_register(job);
      }
      waits_->wait(job->token, subset(job->ranges, takes_wait), deadline,
                   [this, alive, job, hints_on, held](const std::set<std::string>& not_asked) {
                     if (alive.expired()) return;
                     held();
                     if (hints_on && !not_asked.empty()) {
                       hints_->write_hint(job->token, subset(job->ranges, not_asked));
                     }
                     write_and_register(job);  // whatever the answers were
                   });
    };
    // A write wait is a write hint that waits: with write hints off nothing is
    // asked (the seed: "off unless maru_read_hints is set", which write hints follow).
    if (config_.write_wait_ms == 0 || !hints_on) return after_plan({});
    waits_->plan({agents.begin(), agents.end()}, deadline, after_plan);
  });
}

void Handler::write_and_register(std::shared_ptr<StoreJob> job) {
  job->written.assign(job->items.size(), Error(ErrorCode::kInternal, "not written"));
  std::map<std::string, std::vector<std::size_t>> by_agent;
  for (std::size_t i = 0; i < job->items.size(); ++i) by_agent[job->pages[i].agent].push_back(i);
  auto remaining = std::make_shared<std::size_t>(by_agent.size());
  std::weak_ptr<bool> alive = alive_;
  for (auto& entry : by_agent) {
    // Named copies: lambdas may not capture structured bindings before clang 16.
    const std::string agent = entry.first;
    const std::vector<std::size_t> indexes = entry.second;
    qps_->get(agent, [this, alive, job, agent, indexes,
                      remaining](Result<std::shared_ptr<runtime::QueuePair>> qp) {
      if (alive.expired()) return;
      auto finish_agent = [this, job, remaining] {
        if (--*remaining == 0) register_written(job);
      };
      std::vector<runtime::RdmaOp> ops;
      std::vector<std::size_t> posted;
      for (auto i : indexes) {
        const OwnRegion* own = own_region_of(job->pages[i]);
        if (!qp.ok()) {
          job->written[i] = qp.status();
          continue;
        }
        if (own == nullptr) {
          job->written[i] = Error(ErrorCode::kBootChanged, "region went back");
          continue;
        }
        auto& item = job->items[i];
        runtime::RdmaOp op{runtime::RdmaOp::Kind::kWrite, std::span<std::byte>(item.bytes),
                           own->mapping.addr + job->pages[i].offset, own->mapping.rkey};
        if (item.wire_bytes) op.length = item.wire_bytes;
        ops.push_back(op);
        posted.push_back(i);
      }
      if (ops.empty()) return finish_agent();
      stats_.writes_posted += ops.size();
      // Held by the completion: deregistered when it runs or is dropped unrun.
      auto registered = register_local(ops, job);
      (*qp)->post(std::move(ops), [this, alive, job, posted, finish_agent, agent, registered,
                                   through = qp->get()](std::vector<Status> statuses) {
        if (registered) registered->release();
        if (alive.expired()) return;
        qps_->forget_if_broken(agent, through, statuses);
        std::set<std::uint64_t> gone_registrations;
        for (std::size_t k = 0; k < posted.size() && k < statuses.size(); ++k) {
          job->written[posted[k]] = statuses[k];
          if (statuses[k].code() == ErrorCode::kRemoteAccess) {
            gone_registrations.insert(job->pages[posted[k]].region);
            ++stats_.remote_access_errors;
          }
        }
        // Each registration that is gone: a map shows whether the boot moved.
        for (std::uint64_t region : gone_registrations) regions_->recheck(agent, region);
        finish_agent();
      });
    });
  }
}

void Handler::register_written(std::shared_ptr<StoreJob> job) {
  std::vector<std::pair<std::string, directory::Location>> entries;
  std::vector<std::size_t> indexes;
  auto result = std::make_shared<StoreResult>();
  for (std::size_t i = 0; i < job->items.size(); ++i) {
    const Page& page = job->pages[i];
    const OwnRegion* own = own_region_of(page);
    if (!job->written[i].ok() || own == nullptr) {
      ++result->failed;
      if (result->first_failure.ok()) {
        result->first_failure = !job->written[i].ok()
                                    ? job->written[i]
                                    : Error(ErrorCode::kBootChanged, "the region went back");
      }
      if (own != nullptr) free_pages_.push_back(page);
      continue;
    }
    entries.emplace_back(job->items[i].key,
                         directory::Location{page.agent, own->mapping.boot, page.region,
                                             own->read_handle, page.offset, job->items[i].size()});
    indexes.push_back(i);
  }
  if (entries.empty()) return job->done(*result);
  std::weak_ptr<bool> alive = alive_;
  directory_->register_keys_answered(
      entries,
      [this, alive, job, indexes, result,
       entries](Result<std::vector<directory::RegisterAnswer>> answers) {
        if (alive.expired()) return;
        // register_keys answers every entry, or fails the call (its pages then
        // stay out of use: some keys may be registered).
        if (!answers.ok()) return job->done(answers.status());
        auto refused = std::make_shared<std::vector<std::size_t>>();
        for (std::size_t k = 0; k < indexes.size(); ++k) {
          const Page& page = job->pages[indexes[k]];
          switch ((*answers)[k]) {
            case directory::RegisterAnswer::kRegistered:
              ++result->stored;
              break;
            case directory::RegisterAnswer::kAlreadyPresent:
              ++result->already_present;
              if (own_region_of(page) != nullptr) free_pages_.push_back(page);
              break;
            case directory::RegisterAnswer::kBootRetired: {
              // Its page stays out of use: every register under that boot is refused.
              const directory::Location& l = entries[k].second;
              ++result->failed;
              ++stats_.boot_retired_refusals;
              if (result->first_failure.ok()) {
                result->first_failure = Error(
                    ErrorCode::kBootChanged,
                    "the directory refuses '" + job->items[indexes[k]].key + "' under boot " +
                        l.boot + " of agent " + l.agent +
                        ": it saw that boot replaced (an agent that came back under a boot it "
                        "had left); stores go to other agents, and this one is tried again "
                        "after unreachable_backoff or once its boot moves");
              }
              stop_storing_under(page, l.boot);
              break;
            }
            case directory::RegisterAnswer::kRefused:
              // A directory that does not say why: probed below.
              refused->push_back(indexes[k]);
              if (own_region_of(page) != nullptr) free_pages_.push_back(page);
              break;
          }
        }
        sort_out_refused(job, result, std::move(refused));
      },
      reply_gate_);
}

namespace {
Status refused_and_not_there(const std::string& key) {
  return Error(ErrorCode::kBootChanged,
               "the directory refused '" + key +
                   "' and does not have it: its region's boot is one the directory saw "
                   "replaced (e.g. an agent restarted into an old boot), or the key went in "
                   "between");
}
}  // namespace

void Handler::sort_out_refused(std::shared_ptr<StoreJob> job, std::shared_ptr<StoreResult> result,
                               std::shared_ptr<const std::vector<std::size_t>> refused) {
  if (refused->empty()) return job->done(*result);
  std::vector<std::string> keys;
  keys.reserve(refused->size());
  for (std::size_t i : *refused) keys.push_back(job->items[i].key);
  std::weak_ptr<bool> alive = alive_;
  auto fail = [result](const Status& why) {
    ++result->failed;
    if (result->first_failure.ok()) result->first_failure = why;
  };
  // One probe answers the leading keys that are there (a re-store: all of
  // them, usually); the first that is not was refused for its boot, and each
  // key after it is asked on its own, all at once.
  directory_->probe(
      keys, false,
      [this, alive, job, result, keys, fail](Result<directory::ProbeReply> reply) {
        if (alive.expired()) return;
        if (!reply.ok()) {
          // Not stored by us either way; which way is unknown, so not "present".
          for (std::size_t k = 0; k < keys.size(); ++k) fail(reply.status());
          return job->done(*result);
        }
        const std::size_t there = std::min(reply->hits, keys.size());
        result->already_present += there;
        if (there == keys.size()) return job->done(*result);
        fail(refused_and_not_there(keys[there]));
        const std::size_t rest = keys.size() - there - 1;
        if (rest == 0) return job->done(*result);
        auto pending = std::make_shared<std::size_t>(rest);
        for (std::size_t k = there + 1; k < keys.size(); ++k) {
          directory_->probe(
              {keys[k]}, false,
              [alive, job, result, key = keys[k], fail,
               pending](Result<directory::ProbeReply> one) {
                if (alive.expired()) return;
                if (!one.ok()) {
                  fail(one.status());
                } else if (one->hits > 0) {
                  ++result->already_present;
                } else {
                  fail(refused_and_not_there(key));
                }
                if (--*pending == 0) job->done(*result);
              },
              reply_gate_);
        }
      },
      reply_gate_);
}

void Handler::stop_storing_under(const Page& page, const std::string& boot) {
  const OwnRegion* own = own_region_of(page);
  if (own == nullptr || own->mapping.boot != boot) return;  // that region went already
  const std::string& agent = page.agent;
  if (boot_refused(agent, boot)) {
    parked_pages_.push_back(page);  // lifted with the others
    return;
  }
  const AgentHello* hello = regions_->known(agent);
  if (hello == nullptr || hello->boot != boot) {
    // News of a boot this client already left marks nothing: the page goes
    // back (a boot change sorts it out, or a later refusal parks it).
    free_pages_.push_back(page);
    return;
  }
  parked_pages_.push_back(page);
  log_.warn("the directory refuses registers under boot ", boot, " of agent ", agent,
            " (it saw that boot replaced): no stores there for ",
            runtime::to_millis(config_.unreachable_backoff), " ms or until its boot moves");
  refused_boots_[agent] = {boot, clock_.now() + config_.unreachable_backoff};
  sort_refused_boots();
  // Often another client saw the boot move first: a map shows it at once.
  regions_->recheck(agent, page.region);
}

void Handler::sort_refused_boots() {
  const runtime::Instant now = clock_.now();
  std::set<std::string> lifted;
  for (auto it = refused_boots_.begin(); it != refused_boots_.end();) {
    if (now < it->second.lift_at) {
      ++it;
      continue;
    }
    // Tried again: the next store through these pages asks the directory anew.
    lifted.insert(it->first);
    it = refused_boots_.erase(it);
  }
  for (auto it = rdma_unreachable_.begin(); it != rdma_unreachable_.end();) {
    if (now < it->second.lift_at) {
      ++it;
      continue;
    }
    lifted.insert(it->first);  // the next store through these pages connects anew
    it = rdma_unreachable_.erase(it);
  }
  for (auto p = parked_pages_.begin(); p != parked_pages_.end();) {
    const OwnRegion* own = own_region_of(*p);
    if (lifted.count(p->agent) == 0 ||
        (own != nullptr && stores_paused(p->agent, own->mapping.boot))) {
      ++p;
      continue;
    }
    if (own != nullptr) free_pages_.push_front(*p);
    p = parked_pages_.erase(p);
  }
  // Free pages under a boot still refused, or of an agent not reached, wait
  // with the parked ones.
  for (auto p = free_pages_.begin(); p != free_pages_.end();) {
    const OwnRegion* own = own_region_of(*p);
    if (own == nullptr) {
      p = free_pages_.erase(p);
    } else if (stores_paused(p->agent, own->mapping.boot)) {
      parked_pages_.push_back(*p);
      p = free_pages_.erase(p);
    } else {
      ++p;
    }
  }
}

bool Handler::boot_refused(const std::string& agent, const std::string& boot) const {
  auto it = refused_boots_.find(agent);
  return it != refused_boots_.end() && it->second.boot == boot;
}

bool Handler::stores_paused(const std::string& agent, const std::string& boot) const {
  return boot_refused(agent, boot) || rdma_unreachable_.count(agent) != 0;
}

void Handler::take_reclaimed(const std::vector<directory::Location>& locations) {
  for (const auto& l : locations) {
    auto own = regions_->own_regions().find({l.agent, l.region});
    // Only a page of the region as this client holds it now, under the boot it
    // was written in: anything else is not this client's to write.
    if (own == regions_->own_regions().end() || own->second.read_handle != l.read_handle ||
        own->second.mapping.boot != l.boot || l.offset % config_.chunk_size_bytes != 0 ||
        own->second.size < config_.chunk_size_bytes ||
        l.offset > own->second.size - config_.chunk_size_bytes) {
      continue;
    }
    Page page{l.agent, l.region, l.offset, own->second.handle};
    const bool listed = std::any_of(free_pages_.begin(), free_pages_.end(), [&](const Page& p) {
      return p.agent == page.agent && p.region == page.region && p.offset == page.offset;
    });
    if (listed) continue;
    free_pages_.push_back(std::move(page));
    ++stats_.pages_reclaimed;
  }
}

// ---------------------------------------------------------------- load

void Handler::load(std::vector<std::string> keys, LoadDone done, bool engine_hinted) {
  auto job = std::make_shared<LoadJob>();
  job->keys = std::move(keys);
  job->done = std::move(done);
  job->engine_hinted = engine_hinted;
  std::weak_ptr<bool> alive = alive_;
  strand_->post([this, alive, job] {
    if (alive.expired()) return;
    ++stats_.loads;
    const runtime::Instant asked = clock_.now();
    directory_->lookup(
        job->keys,
        [this, alive, job, asked](Result<directory::LookupReply> reply) {
          if (alive.expired()) return;
          if (!reply.ok()) return job->done(reply.status());
          job->locations = std::move(reply->locations);
          job->leases = std::move(reply->leases);
          // Counted from the ask: the directory started the lease later.
          if (reply->shortest_lease) job->read_deadline = asked + *reply->shortest_lease;
          job->mappings.resize(job->locations.size());
          resolve_locations(job, 0);
        },
        reply_gate_);
  });
}

bool Handler::accept_location(LoadJob& job, std::size_t index, const Result<Mapping>& mapping) {
  const auto& l = job.locations[index];
  const AgentHello* hello = regions_->known(l.agent);
  // R6.1: stored under a boot that is gone = a miss, never stale bytes.
  const bool valid = mapping.ok() && mapping->boot == l.boot && hello != nullptr &&
                     hello->boot == l.boot && l.offset + l.length <= mapping->size;
  if (!valid) {
    if (mapping.ok()) ++stats_.boot_misses;
    return false;
  }
  job.mappings[index] = *mapping;
  job.valid = index + 1;
  return true;
}

bool Handler::loads_from(const directory::Location& l) const {
  // R1.2: no value is longer than a chunk (store refuses one); a longer
  // location would have a load allocate and READ up to a region per key.
  return config_.reaches(l.agent) && l.length <= config_.chunk_size_bytes;
}

void Handler::resolve_locations(std::shared_ptr<LoadJob> job, std::size_t index) {
  // Cached mappings resolve in a loop (a large load must not recurse per key).
  for (; index < job->locations.size(); ++index) {
    const auto& l = job->locations[index];
    if (!loads_from(l)) {
      // A miss from here on, and no connection to a foreign agent.
      ++(config_.reaches(l.agent) ? stats_.oversized_locations : stats_.foreign_locations);
      return read_batches(job);
    }
    // An endpoint in its backoff: the prefix ends here, before any map or hint.
    if (auto why = qps_->unreachable(l.agent)) {
      job->unreached = *why;
      return read_batches(job);
    }
    auto cached = regions_->cached_mapping(l.agent, l.region, l.read_handle);
    if (!cached) break;
    if (!accept_location(*job, index, *cached)) return check_location_boot(job, index, *cached);
  }
  if (index == job->locations.size()) return read_batches(job);
  const auto& l = job->locations[index];
  std::weak_ptr<bool> alive = alive_;
  regions_->map_for_read(l.agent, l.region, l.read_handle,
                         [this, alive, job, index](const Result<Mapping>& mapping) {
                           if (alive.expired()) return;
                           if (!accept_location(*job, index, mapping)) {
                             return check_location_boot(job, index, mapping);
                           }
                           resolve_locations(job, index + 1);
                         });
}

void Handler::note_unreached(LoadJob& job, const Status& map_failure) {
  const ErrorCode code = map_failure.code();
  // A region or boot that is gone is a plain miss; an agent not reached is not.
  if (code != ErrorCode::kNotFound && code != ErrorCode::kBadRange &&
      code != ErrorCode::kStaleEpoch && code != ErrorCode::kBootChanged) {
    job.unreached = map_failure;
  }
}

void Handler::check_location_boot(std::shared_ptr<LoadJob> job, std::size_t index,
                                  const Result<Mapping>& mapping) {
  const auto& l = job->locations[index];
  if (!mapping.ok()) {
    note_unreached(*job, mapping.status());
    return read_batches(job);
  }
  // Only a boot mismatch is worth a question, and one per load.
  if (mapping->boot == l.boot || job->boot_checked) return read_batches(job);
  job->boot_checked = true;
  std::weak_ptr<bool> alive = alive_;
  regions_->check_location_boot(l.agent, l.region, l.read_handle, l.boot,
                                [this, alive, job, index](const Result<Mapping>& current) {
                                  if (alive.expired()) return;
                                  // This client was behind: the location's boot is the agent's.
                                  if (current.ok() && accept_location(*job, index, current)) {
                                    return resolve_locations(job, index + 1);
                                  }
                                  if (!current.ok()) note_unreached(*job, current.status());
                                  read_batches(job);
                                });
}

void Handler::read_batches(std::shared_ptr<LoadJob> job) {
  if (job->valid == 0) return finish_load(job);
  job->buffers.resize(job->valid);
  job->read.assign(job->valid, Error(ErrorCode::kInternal, "not read"));
  std::map<std::string, std::vector<std::size_t>> by_agent;
  RangesByAgent ranges;
  for (std::size_t i = 0; i < job->valid; ++i) {
    const auto& l = job->locations[i];
    by_agent[l.agent].push_back(i);
    ranges[l.agent].add({l.region, l.offset, l.length}, l.read_handle);
  }
  // R3.7: with read hints on and no early hint from the engine, the load
  // hints itself as its READs start, under a name of its own.
  if (config_.effective_hint_loads() && !job->engine_hinted) {
    job->hint_name = config_.client_name + "-load-" + std::to_string(++seq_);
    ++stats_.load_hints;
    hints_->read_hint_ranges(job->hint_name, ranges);
  }
  auto remaining = std::make_shared<std::size_t>(by_agent.size());
  std::weak_ptr<bool> alive = alive_;
  for (auto& [agent, indexes] : by_agent) {
    auto post_reads = [this, alive, job, agent = agent, indexes = indexes, remaining] {
      if (alive.expired()) return;
      qps_->get(agent, [this, alive, job, agent, indexes,
                        remaining](Result<std::shared_ptr<runtime::QueuePair>> qp) {
        if (alive.expired()) return;
        if (!qp.ok()) {
          for (auto i : indexes) job->read[i] = qp.status();
          if (--*remaining == 0) finish_load(job);
          return;
        }
        std::vector<runtime::RdmaOp> ops;
        for (auto i : indexes) {
          const auto& l = job->locations[i];
          const std::uint64_t sample = config_.payload_sample_bytes;
          job->buffers[i].resize(sample ? std::min<std::uint64_t>(sample, l.length) : l.length);
          runtime::RdmaOp op{runtime::RdmaOp::Kind::kRead, std::span<std::byte>(job->buffers[i]),
                             job->mappings[i].addr + l.offset, job->mappings[i].rkey};
          if (sample) op.length = l.length;
          ops.push_back(op);
        }
        stats_.reads_posted += ops.size();
        ++stats_.read_batches;
        // Held by the completion: deregistered when it runs or is dropped unrun.
        auto registered = register_local(ops, job);
        auto on_done = [this, alive, job, agent, indexes, remaining, registered,
                        through = qp->get()](std::vector<Status> statuses) {
          if (registered) registered->release();
          if (alive.expired()) return;
          qps_->forget_if_broken(agent, through, statuses);
          std::set<std::uint64_t> gone_registrations;
          for (std::size_t k = 0; k < indexes.size() && k < statuses.size(); ++k) {
            job->read[indexes[k]] = statuses[k];
            if (statuses[k].code() == ErrorCode::kRemoteAccess) {
              ++stats_.remote_access_errors;
              gone_registrations.insert(job->locations[indexes[k]].region);
            }
          }
          for (std::uint64_t region : gone_registrations) {
            // The registration is gone: map again next time, learning the boot.
            regions_->forget_read_mapping(agent, region);
            // An own region's READs go through its own mapping: map it now, as
            // a failed WRITE does, or every load of its keys fails the same way.
            if (regions_->own_regions().count({agent, region})) regions_->recheck(agent, region);
          }
          if (--*remaining == 0) finish_load(job);
        };
        if (config_.gate_reads) {
          gated_reads(agent, *qp, std::move(ops), job, indexes, std::move(on_done));
        } else {
          (*qp)->post(std::move(ops), std::move(on_done));
        }
      });
    };
    post_reads();
  }
}

// PAPER P3's replaced design (#124): every READ waits for a round trip to the
// memory side first. A READ is what the seed calls one: a load's batch for one
// peer ("without read_wait the batch is one READ"), posted whole once the gate,
// a read_hint of its ranges in READ order, is answered.
void Handler::gated_reads(const std::string& agent, std::shared_ptr<runtime::QueuePair> qp,
                          std::vector<runtime::RdmaOp> ops, std::shared_ptr<LoadJob> job,
                          const std::vector<std::size_t>& indexes,
                          std::function<void(std::vector<Status>)> done) {
  RangeList ranges;
  for (auto i : indexes) {
    const auto& l = job->locations[i];
    ranges.add({l.region, l.offset, l.length}, l.read_handle);
  }
  const std::string token = config_.client_name + "-gate-" + std::to_string(++seq_);
  std::weak_ptr<bool> alive = alive_;
  waits_->gate(
      agent, token, std::move(ranges),
      [this, alive, agent, qp, token, ops = std::move(ops), done = std::move(done)]() mutable {
        if (alive.expired()) return;
        qp->post(std::move(ops),
                 [this, alive, agent, token, done = std::move(done)](std::vector<Status> s) {
                   if (!alive.expired()) waits_->end_gate(agent, token);
                   done(std::move(s));
                 });
      });
}

void Handler::finish_load(std::shared_ptr<LoadJob> job) {
  if (!job->hint_name.empty()) hints_->end_read_hint(job->hint_name);
  for (std::uint64_t lease : job->leases) directory_->release(lease);
  LoadResult result;
  if (job->read_deadline && !job->read.empty() && clock_.now() > *job->read_deadline) {
    // The lease may have ended while the READs ran: the bytes may be another
    // key's (its page given back and written again). A miss, never them.
    ++stats_.lease_outlasted;
    result.stopped_by = Error(ErrorCode::kTimeout, "the READs outlasted the lookup's lease");
    return job->done(std::move(result));
  }
  for (std::size_t i = 0; i < job->read.size(); ++i) {
    if (!job->read[i].ok()) {  // prefix: a failed READ is a miss, never stale bytes
      result.stopped_by = job->read[i];
      break;
    }
    result.values.push_back(std::move(job->buffers[i]));
  }
  if (result.stopped_by.ok()) result.stopped_by = job->unreached;
  job->done(std::move(result));
}

}  // namespace rcxl::client
