#include "core/client/memory_waits.h"

#include <algorithm>

#include "core/client/unseen_by_extension.h"
#include "core/protocol/reply_fields.h"

namespace rcxl::client {

using Json = nlohmann::json;

MemoryWaits::MemoryWaits(runtime::Runtime& rt, runtime::Strand& strand, const Config& config)
    : rt_(rt), strand_(strand), config_(config) {}

MemoryWaits::~MemoryWaits() {
  *alive_ = false;
}

MemoryWaits::Peer& MemoryWaits::peer(const std::string& agent) {
  auto it = peers_.find(agent);
  if (it != peers_.end()) return it->second;
  Peer& p = peers_[agent];
  auto address = runtime::Address::Parse(agent);
  p.conn = directory::RpcConnection::Make(
      rt_, strand_,
      {.address = address.ok() ? *address : runtime::Address{agent, 0},
       .secret = config_.secret,
       .client_name = config_.client_name + "/waits",
       .reply_timeout = config_.reply_timeout});
  std::weak_ptr<bool> alive = alive_;
  p.conn->set_on_connecting([this, alive, agent] {
    if (!alive.expired()) peers_[agent].boot_at_connect = peers_[agent].hello.boot;
  });
  p.conn->set_on_hello([this, alive, agent](const Json& reply) {
    if (alive.expired()) return;
    Peer& q = peers_[agent];
    const std::string before = q.hello.boot;
    // A hello overtaken by newer news is not told (a wait refused under the
    // kept boot brings the agent's, if newer).
    const bool news = take_hello(q.hello, parse_agent_hello(reply), q.boot_at_connect);
    if (news && boot_observer_) boot_observer_(agent, before, q.hello.boot);
  });
  return p;
}

void MemoryWaits::plan(std::vector<std::string> agents, runtime::Instant deadline,
                       std::function<void(std::set<std::string>)> done) {
  struct Plan {
    std::set<std::string> takes;
    std::size_t pending = 0;
    bool finished = false;
    std::function<void(std::set<std::string>)> done;
  };
  auto state = std::make_shared<Plan>();
  state->done = std::move(done);
  auto finish = [](const std::shared_ptr<Plan>& st) {
    if (st->finished) return;
    st->finished = true;
    st->done(st->takes);
  };
  std::vector<std::string> asked;
  for (const auto& agent : agents) {
    if (rt_.clock().now() < peer(agent).unreachable_until) {
      ++stats_.skipped_backoff;  // SPEC R4.3: not asked for 5 s
      continue;
    }
    asked.push_back(agent);
  }
  state->pending = asked.size();
  std::weak_ptr<bool> alive = alive_;
  for (const auto& agent : asked) {
    peer(agent).conn->ensure_ready([this, alive, agent, state, finish](const Status& status) {
      if (alive.expired()) return;
      if (!status.ok()) {
        note_failure(agent, status, Json(), "");
      } else if (!state->finished && peers_[agent].hello.advertises("write_wait")) {
        state->takes.insert(agent);
      }
      if (--state->pending == 0) finish(state);
    });
  }
  if (state->pending == 0) return finish(state);
  // SPEC R4.3: the store's budget bounds its plan too; late agents get a write hint.
  const runtime::Duration left = std::max(deadline - rt_.clock().now(), runtime::Duration(0));
  strand_.post_after(left, [alive, state, finish] {
    if (!alive.expired()) finish(state);
  });
}

void MemoryWaits::note_failure(const std::string& agent, const Status& status, const Json& reply,
                               const std::string& sent_under) {
  Peer& p = peer(agent);
  // A hung agent (no reply in time) is as good as unreachable: asked again,
  // it would hold every store the whole budget (R4.3).
  if (status.code() == ErrorCode::kUnavailable || status.code() == ErrorCode::kClosed ||
      status.code() == ErrorCode::kTimeout) {
    p.unreachable_until = rt_.clock().now() + config_.unreachable_backoff;
  }
  if (status.code() == ErrorCode::kStaleEpoch) {
    const std::string boot = protocol::string_field(reply, "boot").value_or("");
    // R6.4: a belief that moved since the message left (a map reply, a hello)
    // is newer news than this refusal; it stays, and no one hears of the older.
    if (!boot.empty() && p.hello.boot == sent_under) {
      p.hello.boot = boot;
      if (boot_observer_) boot_observer_(agent, sent_under, boot);
    }
  }
}

void MemoryWaits::observe_boot(const std::string& agent, const std::string& boot) {
  auto it = peers_.find(agent);
  if (it != peers_.end() && !boot.empty()) it->second.hello.boot = boot;
}

void MemoryWaits::wait(const std::string& token, const RangesByAgent& ranges,
                       runtime::Instant deadline, std::function<void(std::set<std::string>)> done) {
  auto pieces = std::make_shared<std::vector<std::pair<std::string, RangeList>>>();
  for (const auto& [agent, list] : ranges) {
    for (auto& piece : list.split(config_.ranges_per_message())) {
      pieces->emplace_back(agent, std::move(piece));
    }
  }
  wait_next(pieces, 0, token, deadline, std::make_shared<std::set<std::string>>(), std::move(done));
}

void MemoryWaits::wait_next(std::shared_ptr<std::vector<std::pair<std::string, RangeList>>> pieces,
                            std::size_t index, std::string token, runtime::Instant deadline,
                            std::shared_ptr<std::set<std::string>> not_asked,
                            std::function<void(std::set<std::string>)> done) {
  if (index == pieces->size()) return done(*not_asked);
  const std::string agent = (*pieces)[index].first;
  // A store's later pieces for the same agent keep its place in the queue.
  const bool front = index > 0 && (*pieces)[index - 1].first == agent;
  // Both continuations below own the chain; exactly one of them runs.
  auto rest = std::make_shared<std::function<void()>>(
      [this, pieces, index, token, deadline, not_asked, done = std::move(done)]() mutable {
        wait_next(pieces, index + 1, std::move(token), deadline, not_asked, std::move(done));
      });
  in_turn(
      agent,
      [this, pieces, index, token, deadline, not_asked, rest] {
        send_wait(pieces, index, token, deadline, not_asked, rest);
      },
      deadline,
      [agent, not_asked, rest] {
        // The budget ran out behind another call of this agent (R4.3).
        not_asked->insert(agent);
        (*rest)();
      },
      front);
}

void MemoryWaits::send_wait(
    const std::shared_ptr<std::vector<std::pair<std::string, RangeList>>>& pieces,
    std::size_t index, const std::string& token, runtime::Instant deadline,
    const std::shared_ptr<std::set<std::string>>& not_asked,
    const std::shared_ptr<std::function<void()>>& rest) {
  const auto& [agent, list] = (*pieces)[index];
  const runtime::Duration left = deadline - rt_.clock().now();
  const auto left_ms = std::chrono::duration_cast<std::chrono::milliseconds>(left).count();
  Peer& p = peer(agent);
  // A connection that dropped since the plan would queue the wait behind a
  // reconnect and hello whose time no budget counts (R4.3): not asked either.
  if (left_ms < 1 || rt_.clock().now() < p.unreachable_until || !p.conn->ready()) {
    // The shared budget is spent (R4.3): the rest get a write hint instead.
    not_asked->insert(agent);
    return (*rest)();
  }
  const auto timeout_ms =
      static_cast<std::uint32_t>(std::min<std::int64_t>(left_ms, kMaxTimeoutMs));
  Json message = {{"op", "extension"},
                  {"action", "write_wait"},
                  {"epoch", p.hello.boot},
                  {"token", token},
                  {"timeout_ms", timeout_ms}};
  list.write_to(message);
  ++stats_.waits_sent;
  std::weak_ptr<bool> alive = alive_;
  // The reply may take timeout_ms; a silent agent costs the reply timeout on top.
  call(
      agent, std::move(message),
      [this, alive, not_asked, rest, agent = agent, epoch = p.hello.boot](const Status& status,
                                                                          const Json& reply) {
        if (alive.expired()) return;
        if (status.ok()) {
          ++stats_.waits_answered;
        } else {
          ++stats_.waits_failed;
          note_failure(agent, status, reply, epoch);
          // R4.1: an agent that heard nothing of the store gets a write hint.
          if (unseen_by_extension(status.code())) not_asked->insert(agent);
        }
        (*rest)();
      },
      std::chrono::milliseconds(timeout_ms));
}

void MemoryWaits::gate(const std::string& agent, const std::string& token, RangeList ranges,
                       std::function<void()> done) {
  ++stats_.gates;
  Peer& p = peer(agent);
  if (rt_.clock().now() < p.unreachable_until) {
    ++stats_.skipped_backoff;  // as a store's plan: a hung agent would hold every load
    return done();
  }
  std::weak_ptr<bool> alive = alive_;
  p.conn->ensure_ready([this, alive, agent, token, ranges = std::move(ranges),
                        done = std::move(done)](const Status& status) mutable {
    if (alive.expired()) return;
    if (!status.ok()) {
      ++stats_.gates_failed;
      note_failure(agent, status, Json(), "");
      return done();  // a gate never stops a READ
    }
    const Peer& p = peers_[agent];
    // Not write_wait: a write hint gives no leave to change the pages (R4.1).
    // An agent that takes no read hints has nothing to gate with, and the
    // client sends it no action it does not advertise (R4.2).
    if (!p.hello.advertises("read_hint") || !p.hello.advertises("read_hint_end")) return done();
    auto pieces =
        std::make_shared<std::vector<RangeList>>(ranges.split(config_.ranges_per_message()));
    gate_next(agent, token, pieces, 0, std::move(done));
  });
}

void MemoryWaits::gate_next(const std::string& agent, const std::string& token,
                            std::shared_ptr<std::vector<RangeList>> pieces, std::size_t index,
                            std::function<void()> done) {
  if (index >= pieces->size()) return done();
  auto run = [this, agent, token, pieces, index, done = std::move(done)]() mutable {
    Peer& p = peers_[agent];
    // Its turn may come after the call before it failed: not asked again then.
    if (rt_.clock().now() < p.unreachable_until) {
      ++stats_.skipped_backoff;
      return done();
    }
    if (!p.conn->ready()) {
      ++stats_.gates_failed;  // given up since: reconnecting would cost another reply timeout
      return done();
    }
    open_gates_.emplace(agent, token);  // the agent may open it: end it after the READ
    Json message = {
        {"op", "extension"}, {"action", "read_hint"}, {"epoch", p.hello.boot}, {"request", token}};
    (*pieces)[index].write_to(message);
    std::weak_ptr<bool> alive = alive_;
    call(agent, std::move(message),
         [this, alive, agent, token, pieces, index, done = std::move(done), epoch = p.hello.boot](
             const Status& status, const Json& reply) mutable {
           if (alive.expired()) return;
           if (!status.ok()) {
             // The READ goes now: asking the rest would cost a reply timeout per piece.
             ++stats_.gates_failed;
             note_failure(agent, status, reply, epoch);
             return done();
           }
           gate_next(agent, token, pieces, index + 1, std::move(done));
         });
  };
  // A gate's later pieces keep its place: calls queued meanwhile go after it.
  in_turn(agent, std::move(run), runtime::Instant::max(), nullptr, /*front=*/index > 0);
}

void MemoryWaits::end_gate(const std::string& agent, const std::string& token) {
  // A gate that asked nothing (backoff, no read hints, no connection) has nothing to end.
  if (open_gates_.erase({agent, token}) == 0) return;
  in_turn(agent, [this, agent, token] {
    const Peer& p = peers_[agent];
    // A connection given up since (closed, or silent past a reply timeout) closed
    // the request at the agent (R6.6): reconnecting only to end it would not.
    if (!p.hello.advertises("read_hint_end") || !p.conn->ready()) return;
    Json message = {{"op", "extension"},
                    {"action", "read_hint_end"},
                    {"epoch", p.hello.boot},
                    {"request", token}};
    call(agent, std::move(message), [](const Status&, const Json&) {});
  });
}

void MemoryWaits::in_turn(const std::string& agent, std::function<void()> run,
                          runtime::Instant expire_at, std::function<void()> expire, bool front) {
  Peer& p = peer(agent);
  if (!p.calling && p.turns.empty()) return run();
  auto turn = std::make_shared<Turn>();
  turn->run = std::move(run);
  if (expire) {
    turn->expire = std::move(expire);
    std::weak_ptr<bool> alive = alive_;
    const runtime::Duration left = std::max(expire_at - rt_.clock().now(), runtime::Duration(0));
    turn->timer = strand_.post_after(left, [alive, turn] {
      if (alive.expired() || turn->over) return;
      turn->over = true;
      turn->expire();
    });
  }
  if (front) {
    p.turns.push_front(std::move(turn));
  } else {
    p.turns.push_back(std::move(turn));
  }
}

void MemoryWaits::call(const std::string& agent, Json message,
                       directory::RpcConnection::ReplyHandler done,
                       runtime::Duration extra_timeout) {
  Peer& p = peer(agent);
  p.calling = true;
  std::weak_ptr<bool> alive = alive_;
  p.conn->call(
      std::move(message),
      [this, alive, agent, done = std::move(done)](const Status& status, const Json& reply) {
        if (alive.expired()) return;
        peers_[agent].calling = false;
        done(status, reply);
        if (!alive.expired()) next_turn(agent);
      },
      extra_timeout);
}

void MemoryWaits::next_turn(const std::string& agent) {
  Peer& p = peers_[agent];
  std::weak_ptr<bool> alive = alive_;
  // A turn that sends nothing (its budget spent, no connection) passes it on.
  while (!p.calling && !p.turns.empty()) {
    std::shared_ptr<Turn> turn = std::move(p.turns.front());
    p.turns.pop_front();
    if (turn->over) continue;
    turn->over = true;
    if (turn->timer) strand_.cancel(*turn->timer);
    turn->run();
    if (alive.expired()) return;  // a store's answer may have ended its owner
  }
}

}  // namespace rcxl::client
