#include "core/client/memory_hints.h"

#include <algorithm>

#include "core/client/unseen_by_extension.h"
#include "core/protocol/reply_fields.h"

namespace rcxl::client {

MemoryHints::MemoryHints(runtime::Runtime& rt, const Config& config,
                         directory::DirectoryClient& directory)
    : rt_(rt), config_(config), directory_(directory), strand_(rt.make_strand("hints")) {
  reply_gate_ = std::make_shared<runtime::StrandGate>(*strand_);
}

MemoryHints::~MemoryHints() {
  // The directory client outlives this strand: a probe answered after now is dropped.
  reply_gate_->close();
  *alive_ = false;
  // strand_ is the last member, so it goes first: a task still running on it
  // finishes while every other member is alive.
}

MemoryHintsStats MemoryHints::stats() const {
  std::lock_guard<std::mutex> lock(stats_mutex_);
  MemoryHintsStats copy = stats_;
  return copy;
}

bool MemoryHints::idle() const {
  return queue_.empty() && !busy_;
}

void MemoryHints::read_hint(std::string request, std::vector<std::string> keys) {
  enqueue(ReadHintKeys{std::move(request), std::move(keys)}, false);
}
void MemoryHints::read_hint_ranges(std::string request, RangesByAgent ranges) {
  enqueue(ReadHintRanges{std::move(request), std::move(ranges)}, false);
}
void MemoryHints::end_read_hint(std::string request) {
  enqueue(ReadHintEnd{std::move(request)}, true);
}
void MemoryHints::write_hint(std::string token, RangesByAgent ranges) {
  enqueue(WriteHint{std::move(token), std::move(ranges)}, false);
}
void MemoryHints::read_promote(std::string request) {
  enqueue(ReadPromote{std::move(request)}, false);
}

void MemoryHints::enqueue(Item item, bool is_end) {
  std::weak_ptr<bool> alive = alive_;
  strand_->post([this, alive, item = std::move(item), is_end]() mutable {
    if (alive.expired()) return;
    if (is_end) return end_now(std::get<ReadHintEnd>(item).request);
    if (!is_end && queued_hints_ >= config_.max_queued_hints) {
      update_stats([](auto& s) { ++s.dropped; });  // SPEC R3.5
      return;
    }
    if (!is_end) ++queued_hints_;
    queue_.emplace_back(std::move(item), is_end);
    update_stats([&](auto& s) {
      if (!is_end) ++s.queued;
      s.max_queue_depth = std::max(s.max_queue_depth, queue_.size());
      s.max_queued_hints = std::max(s.max_queued_hints, queued_hints_);
    });
    pump();
  });
}

// The read hint or promote an item is, for its request's end; else null.
const std::string* MemoryHints::request_of(const Item& item) {
  if (const auto* h = std::get_if<ReadHintKeys>(&item)) return &h->request;
  if (const auto* h = std::get_if<ReadHintRanges>(&item)) return &h->request;
  if (const auto* h = std::get_if<ReadPromote>(&item)) return &h->request;
  return nullptr;
}

// SPEC R3.8: the end goes when it comes, not behind other requests' hints (a
// slow directory probe each could hold it for minutes, the request's bytes
// accounted at the agent all that time). Its own hints and promotes still
// queued are dropped: they would only open what it ends. A hint in flight
// ends once its messages are out (they share the connection, so the end
// follows); a promote in flight opens nothing, so the end goes at once.
void MemoryHints::end_now(const std::string& request) {
  std::erase_if(queue_, [&](const std::pair<Item, bool>& queued) {
    const std::string* r = request_of(queued.first);
    if (r == nullptr || *r != request) return false;
    --queued_hints_;
    update_stats([](auto& s) { ++s.ended_before_sent; });
    return true;
  });
  if (in_flight_ == request) {
    end_in_flight_ = true;
    return;
  }
  send_end(request);
}

void MemoryHints::pump() {
  if (busy_ || queue_.empty()) return;
  busy_ = true;
  auto [item, is_end] = std::move(queue_.front());
  queue_.pop_front();
  if (!is_end) --queued_hints_;
  auto holder = std::make_shared<Item>(std::move(item));
  // A promote opens nothing: its request's end need not wait for it.
  const std::string* request =
      std::holds_alternative<ReadPromote>(*holder) ? nullptr : request_of(*holder);
  in_flight_ = request != nullptr ? std::optional<std::string>(*request) : std::nullopt;
  std::weak_ptr<bool> alive = alive_;
  process(*holder, [this, alive, holder] {
    if (alive.expired()) return;
    // Its end came while it was out: it goes now, after its messages.
    if (end_in_flight_ && in_flight_) send_end(*in_flight_);
    end_in_flight_ = false;
    in_flight_.reset();
    // Later items go after this one's messages; a post keeps the stack flat.
    strand_->post([this, alive] {
      if (alive.expired()) return;
      busy_ = false;
      pump();
    });
  });
}

void MemoryHints::process(Item& item, Next next) {
  if (auto* h = std::get_if<ReadHintKeys>(&item)) {
    if (open_.count(h->request)) return next();  // hinted once
    update_stats([](auto& s) { ++s.probes; });
    std::weak_ptr<bool> alive = alive_;
    // A probe with locations: no lease, but it refreshes the keys' last use.
    directory_.probe(
        h->keys, /*with_locations=*/true,
        [this, alive, request = h->request,
         next = std::move(next)](Result<directory::ProbeReply> reply) {
          if (alive.expired()) return;
          // Its end came during the probe: nothing to open.
          if (end_in_flight_) return next();
          if (!reply.ok() || reply->locations.empty()) return next();
          auto locations =
              std::make_shared<std::vector<directory::Location>>(std::move(reply->locations));
          // Agents outside the pool get no connection (only_pool_agents).
          std::erase_if(*locations,
                        [this](const directory::Location& l) { return !config_.reaches(l.agent); });
          if (locations->empty()) return next();
          std::set<std::string> agents;
          for (const auto& l : *locations) agents.insert(l.agent);
          for_each_peer(
              {agents.begin(), agents.end()}, [](const std::string&, Peer*) {},
              [this, alive, request, locations, next] {
                if (alive.expired()) return;
                if (end_in_flight_) return next();  // ended while the agents connected
                auto epochs = hint_epochs(*locations);
                RangesByAgent ranges;
                for (const auto& l : *locations) {
                  auto epoch = epochs.find(l.agent);
                  // A location of a boot the agent left is advice about nothing.
                  if (epoch == epochs.end() || epoch->second != l.boot) continue;
                  ranges[l.agent].add({l.region, l.offset, l.length}, l.read_handle);
                }
                send_read_hint(request, std::move(ranges), next, std::move(epochs));
              });
        },
        reply_gate_);
    return;
  }
  if (auto* h = std::get_if<ReadHintRanges>(&item)) {
    if (open_.count(h->request)) return next();
    return send_read_hint(h->request, std::move(h->ranges), next);
  }
  if (std::get_if<ReadHintEnd>(&item) != nullptr) return next();  // ends go at once (end_now)
  if (auto* h = std::get_if<WriteHint>(&item)) {
    return send_ranged("write_hint", "token", h->token, std::move(h->ranges),
                       [next](const std::set<std::string>&) { next(); });
  }
  if (auto* h = std::get_if<ReadPromote>(&item)) return send_promote(h->request, next);
}

std::map<std::string, std::string> MemoryHints::hint_epochs(
    const std::vector<directory::Location>& locations) const {
  std::map<std::string, std::string> epochs;
  for (const auto& l : locations) {
    auto peer = peers_.find(l.agent);
    if (peer == peers_.end() || peer->second.hello.boot.empty()) continue;
    if (peer->second.past_boots.count(l.boot)) continue;  // a boot the agent left
    const std::string& known = peer->second.hello.boot;
    auto [it, first] = epochs.emplace(l.agent, l.boot);
    // The connection's boot wins when any location is under it; when none is,
    // the agent may have a boot this connection never saw (R6.1: a reset seen
    // only by the stores' connections), and the locations' boot is asked.
    if (!first && l.boot == known) it->second = known;
  }
  return epochs;
}

void MemoryHints::send_read_hint(const std::string& request, RangesByAgent ranges, Next next,
                                 std::map<std::string, std::string> epochs) {
  const std::uint64_t seq = ++open_seq_;
  RangedCallbacks callbacks;
  // Taken before the message goes, so no reply can come before it.
  callbacks.sending = [this, request, seq](const std::string& agent) {
    // SPEC R3.6: a request whose end never comes must not fill the agent's
    // limit; the oldest is ended before a new one opens, so the agent never
    // sees one over. Only here, once an agent takes the hint: one that opens
    // nothing, or names a request open already, ends no live request.
    while (!open_.contains(request) && !open_order_.empty() &&
           open_.size() >= config_.max_open_hint_requests) {
      send_end(open_order_.begin()->second);
      update_stats([](auto& s) { ++s.forced_ends; });
    }
    add_open(request, seq, agent);
  };
  callbacks.failed = [this, request, seq](const std::string& agent, std::size_t pieces,
                                          const Status& status, bool every_piece_unseen) {
    const ErrorCode code = status.code();
    // Certainly not open at the agent: its connection went (R6.6 ended it
    // there), every piece was refused before the extension saw it (it opened
    // nothing), or a hint sent as one message failed (the agent closed it). A
    // timeout, or a failed piece of a longer hint, may leave it open (a later
    // piece opens it again): the end still goes.
    const bool gone = code == ErrorCode::kClosed || code == ErrorCode::kUnavailable ||
                      every_piece_unseen || (pieces == 1 && code == ErrorCode::kExtensionFailed);
    if (gone) forget_open(request, seq, agent);
  };
  send_ranged(
      "read_hint", "request", request, std::move(ranges),
      [next = std::move(next)](const std::set<std::string>&) { next(); }, std::move(epochs),
      std::move(callbacks));
}

void MemoryHints::add_open(const std::string& request, std::uint64_t seq,
                           const std::string& agent) {
  auto [it, first] = open_.try_emplace(request);
  if (first) {
    it->second.seq = seq;
    open_order_[seq] = request;
  }
  it->second.agents.insert(agent);
  update_stats([&](auto& s) {
    s.open_requests = open_.size();
    s.max_open_requests = std::max(s.max_open_requests, open_.size());
  });
}

void MemoryHints::forget_open(const std::string& request, std::uint64_t seq,
                              const std::string& agent) {
  auto it = open_.find(request);
  if (it == open_.end() || it->second.seq != seq || it->second.agents.erase(agent) == 0) return;
  if (!it->second.agents.empty()) return;
  // No agent holds it open: it takes none of the client's R3.6 slots.
  open_order_.erase(it->second.seq);
  open_.erase(it);
  update_stats([&](auto& s) { s.open_requests = open_.size(); });
}

void MemoryHints::send_end(const std::string& request) {
  auto it = open_.find(request);
  if (it == open_.end()) return;  // never hinted, dropped, or ended already
  for (const auto& agent : it->second.agents) {
    auto peer = peers_.find(agent);
    // R4.2: only to an agent that takes ends (one that does not got no
    // read_hint either, unless its hello changed since); ended here all the same.
    if (peer == peers_.end() || !peer->second.hello.advertises("read_hint_end")) continue;
    // A connection that dropped took its open requests with it at the agent
    // (R6.6): the end would only start a reconnect, which later hints wait on.
    if (!peer->second.conn->ready()) continue;
    send(peer->second, agent,
         {{"op", "extension"},
          {"action", "read_hint_end"},
          {"epoch", peer->second.hello.boot},
          {"request", request}});
  }
  open_order_.erase(it->second.seq);
  open_.erase(it);
  update_stats([&](auto& s) { s.open_requests = open_.size(); });
}

void MemoryHints::send_ranged(const std::string& action, const char* name_field,
                              const std::string& name, RangesByAgent ranges,
                              std::function<void(std::set<std::string>)> done,
                              std::map<std::string, std::string> epochs,
                              RangedCallbacks callbacks) {
  auto shared = std::make_shared<RangesByAgent>(std::move(ranges));
  auto sent_to = std::make_shared<std::set<std::string>>();
  std::vector<std::string> agents;
  for (const auto& [agent, list] : *shared) {
    if (!list.empty()) agents.push_back(agent);
  }
  for_each_peer(
      std::move(agents),
      [this, shared, sent_to, action, name_field, name, epochs = std::move(epochs),
       callbacks = std::move(callbacks)](const std::string& agent, Peer* peer) {
        if (peer == nullptr || !peer->hello.advertises(action)) return;  // R4.2
        // A read_hint the agent could never take the end of would stay open
        // (and count against its limit, R3.3) until the connection closes.
        if (action == "read_hint" && !peer->hello.advertises("read_hint_end")) return;
        auto epoch = epochs.find(agent);
        const auto pieces = shared->at(agent).split(config_.ranges_per_message());
        if (callbacks.sending) callbacks.sending(agent);
        std::function<void(const Status&)> failed;
        if (callbacks.failed) {
          // Refusals the extension never saw, counted: when every piece got one,
          // the agent opened nothing.
          auto unseen = std::make_shared<std::size_t>(0);
          failed = [failed_cb = callbacks.failed, agent, n = pieces.size(),
                    unseen](const Status& s) {
            if (unseen_by_extension(s.code())) ++*unseen;
            failed_cb(agent, n, s, *unseen == n);
          };
        }
        for (const auto& piece : pieces) {
          Json message = {{"op", "extension"},
                          {"action", action},
                          {"epoch", epoch == epochs.end() ? peer->hello.boot : epoch->second},
                          {name_field, name}};
          piece.write_to(message);
          update_stats([&](auto& s) {
            s.max_ranges_in_message = std::max(s.max_ranges_in_message, piece.ranges.size());
          });
          send(*peer, agent, std::move(message), failed);
        }
        sent_to->insert(agent);
      },
      [sent_to, done = std::move(done)] { done(*sent_to); });
}

void MemoryHints::send_promote(const std::string& request, Next next) {
  std::vector<std::string> agents;
  for (const auto& a : config_.agents) agents.push_back(agent_key(a));
  for_each_peer(
      std::move(agents),
      [this, request](const std::string& agent, Peer* peer) {
        if (peer == nullptr || !peer->hello.advertises("read_promote")) return;
        send(*peer, agent,
             {{"op", "extension"},
              {"action", "read_promote"},
              {"epoch", peer->hello.boot},
              {"request", request}});
      },
      std::move(next));
}

void MemoryHints::for_each_peer(std::vector<std::string> agents,
                                std::function<void(const std::string&, Peer*)> fn, Next done) {
  if (agents.empty()) return done();
  const std::string agent = agents.front();
  agents.erase(agents.begin());
  std::weak_ptr<bool> alive = alive_;
  with_peer(agent, [this, alive, agent, agents = std::move(agents), fn, done](Peer* peer) mutable {
    if (alive.expired()) return;
    fn(agent, peer);
    for_each_peer(std::move(agents), std::move(fn), std::move(done));
  });
}

void MemoryHints::with_peer(const std::string& agent, std::function<void(Peer*)> fn) {
  auto it = peers_.find(agent);
  if (it == peers_.end()) {
    auto address = runtime::Address::Parse(agent);
    Peer peer;
    peer.conn = directory::RpcConnection::Make(
        rt_, *strand_,
        {.address = address.ok() ? *address : runtime::Address{agent, 0},
         .secret = config_.secret,
         .client_name = config_.client_name + "/hints",
         .reply_timeout = config_.reply_timeout});
    std::weak_ptr<bool> alive = alive_;
    peer.conn->set_on_connecting([this, alive, agent] {
      if (!alive.expired()) peers_[agent].boot_at_connect = peers_[agent].hello.boot;
    });
    peer.conn->set_on_hello([this, alive, agent](const Json& reply) {
      if (alive.expired()) return;
      Peer& p = peers_[agent];
      const std::string before = p.hello.boot;
      const bool news = take_hello(p.hello, parse_agent_hello(reply), p.boot_at_connect);
      if (!before.empty() && before != p.hello.boot) p.past_boots.insert(before);
      if (news && boot_observer_) boot_observer_(agent, before, p.hello.boot);
    });
    it = peers_.emplace(agent, std::move(peer)).first;
  }
  // An agent that could not be reached is skipped for a while: one dead agent
  // must not stall every hint behind its connect timeout.
  if (rt_.clock().now() < it->second.unreachable_until) {
    update_stats([](auto& s) { ++s.skipped_unreachable; });
    return fn(nullptr);
  }
  std::weak_ptr<bool> alive = alive_;
  // An agent whose last connect failed is probed in the background, skipped
  // meanwhile: waiting on it again would hold the queue up to a reply
  // timeout once per backoff. The first contact waits (a healthy agent
  // answers at once, and its first hint should go).
  if (it->second.failed_before && !it->second.conn->ready()) {
    it->second.unreachable_until = rt_.clock().now() + config_.unreachable_backoff;
    it->second.conn->ensure_ready([this, alive, agent](const Status& status) {
      if (!alive.expired()) note_connect(agent, status);
    });
    update_stats([](auto& s) { ++s.skipped_unreachable; });
    return fn(nullptr);
  }
  it->second.conn->ensure_ready([this, alive, agent, fn = std::move(fn)](const Status& status) {
    if (alive.expired()) return;
    note_connect(agent, status);
    fn(status.ok() ? &peers_[agent] : nullptr);
  });
}

void MemoryHints::note_connect(const std::string& agent, const Status& status) {
  Peer& p = peers_[agent];
  p.failed_before = !status.ok();
  // Skipped for the backoff after a failure; reachable again at once.
  p.unreachable_until =
      status.ok() ? runtime::Instant{0} : rt_.clock().now() + config_.unreachable_backoff;
}

void MemoryHints::send(Peer& peer, const std::string& agent, Json message,
                       std::function<void(const Status&)> failed) {
  const std::string action = message["action"].get<std::string>();
  const std::string epoch = message["epoch"].get<std::string>();
  update_stats([&](auto& s) { ++s.messages[action]; });
  // An accepted read or write hint proves its epoch is the agent's boot (R3.1
  // checks it); news only when it was not the boot this connection knew.
  const bool asks_boot =
      epoch != peer.hello.boot && (action == "read_hint" || action == "write_hint");
  std::weak_ptr<bool> alive = alive_;
  // Fire and forget: a reply matters when it names a newer boot, or when the
  // sender asked to hear of a failure (a read_hint's open slot).
  peer.conn->call(
      std::move(message), [this, alive, agent, asks_boot, epoch, failed = std::move(failed),
                           known = peer.hello.boot](const Status& status, const Json& reply) {
        if (alive.expired()) return;
        if (failed && !status.ok()) failed(status);
        std::string boot;
        if (status.code() == ErrorCode::kStaleEpoch) {
          boot = protocol::string_field(reply, "boot").value_or("");
        } else if (status.ok() && asks_boot) {
          boot = epoch;
        }
        Peer& p = peers_[agent];
        // A refused epoch is a boot the agent left, which never comes back
        // (R6.4): its locations are not hinted again. One this connection
        // never held (left before it connected) was asked for every hint.
        if (status.code() == ErrorCode::kStaleEpoch && epoch != boot && epoch != p.hello.boot) {
          p.past_boots.insert(epoch);
        }
        // Newer news came in meanwhile (a later reply, or the map path): keep it.
        if (boot.empty() || p.hello.boot != known || p.past_boots.count(boot)) {
          return;
        }
        observe_boot_here(agent, boot);
      });
}

void MemoryHints::observe_boot(const std::string& agent, const std::string& from,
                               const std::string& to) {
  std::weak_ptr<bool> alive = alive_;
  strand_->post([this, alive, agent, from, to] {
    if (alive.expired()) return;
    auto peer = peers_.find(agent);
    // A connection not yet made learns its boot from its own hello; one that
    // learnt another boot meanwhile keeps its own news.
    if (peer == peers_.end() || peer->second.hello.boot != from) return;
    move_boot(peer->second, to);  // no echo to the observer: the news came from there
  });
}

void MemoryHints::observe_boot_here(const std::string& agent, const std::string& boot) {
  Peer& p = peers_[agent];
  if (p.hello.boot == boot) return;
  const std::string from = p.hello.boot;
  move_boot(p, boot);
  if (boot_observer_) boot_observer_(agent, from, boot);
}

void MemoryHints::move_boot(Peer& peer, const std::string& boot) {
  if (peer.hello.boot == boot) return;
  if (!peer.hello.boot.empty()) peer.past_boots.insert(peer.hello.boot);
  peer.past_boots.erase(boot);
  peer.hello.boot = boot;
}

}  // namespace rcxl::client
