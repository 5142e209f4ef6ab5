// MemoryWaits (SPEC R4.3, R4.6): a store's write waits, on connections of
// their own (one per agent, on the owner's strand) so a wait never holds up
// hints or region maps. The waits of one store share one budget
// (write_wait_ms); an agent that does not answer costs the reply timeout on
// top; an agent that cannot be reached is not asked for 5 s. Also the
// per-READ gate of the replaced design (PAPER P3). One call at a time per
// agent, as the seed's thread blocks on its call (R4.6). Strand-confined.
#pragma once

#include <cstdint>
#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "core/client/agent_hello.h"
#include "core/client/config.h"
#include "core/client/ranges.h"
#include "core/directory/rpc_connection.h"
#include "core/runtime/runtime.h"

namespace rcxl::client {

struct MemoryWaitsStats {
  std::uint64_t waits_sent = 0;
  std::uint64_t waits_answered = 0;
  std::uint64_t waits_failed = 0;     // timeout, closed, refused
  std::uint64_t skipped_backoff = 0;  // agent unreachable in the last 5 s
  std::uint64_t gates = 0;
  std::uint64_t gates_failed = 0;  // the READ went without its answer
};

class MemoryWaits {
 public:
  // `from`: the boot this connection believed before (the epoch a refused
  // message went under; "" before its first hello), so news older than the
  // map client's belief can be told apart (R6.4: a boot never turns back).
  using BootObserver =
      std::function<void(const std::string& agent, const std::string& from, const std::string& to)>;

  MemoryWaits(runtime::Runtime& rt, runtime::Strand& strand, const Config& config);
  ~MemoryWaits();
  void set_boot_observer(BootObserver observer) { boot_observer_ = std::move(observer); }

  // Which of `agents` take write_wait now (hello done, action advertised, not
  // in backoff), asked all at once; an agent not ready by `deadline` (the
  // store's wait budget) is left out, so connecting to several silent agents
  // costs one budget, not one reply timeout each. Unreachable agents enter
  // the 5 s backoff.
  void plan(std::vector<std::string> agents, runtime::Instant deadline,
            std::function<void(std::set<std::string>)> done);
  // Asks each agent in turn, all under one budget ending at `deadline` (the
  // store's, from before its plan); `done` gets the agents that were not
  // asked (budget spent) or whose wait was refused before the extension saw
  // it (stale_epoch, bad_range, a dropped connection...), so the store hints
  // them instead.
  void wait(const std::string& token, const RangesByAgent& ranges, runtime::Instant deadline,
            std::function<void(std::set<std::string> not_asked)> done);
  // PAPER P3, the replaced design (#124): one control round trip before each
  // READ (a load's batch for this agent). With read hints advertised it is a
  // read_hint of the READ's ranges in READ order, one message per 4096 ranges
  // (the memory side starts preparing them; the device holds the READ until
  // they are in), else a read_hint_end no-op. `done` runs once the replies (or
  // a failure) are in.
  void gate(const std::string& agent, const std::string& token, RangeList ranges,
            std::function<void()> done);
  // Ends a gate's read_hint after its READ (fire and forget).
  void end_gate(const std::string& agent, const std::string& token);

  // On the handler's strand, or between runs in sim (not thread-safe).
  const MemoryWaitsStats& stats() const { return stats_; }
  // A boot the client learnt elsewhere (a map reply): the next wait goes under it.
  void observe_boot(const std::string& agent, const std::string& boot);

 private:
  // A call waiting for the one before it on its peer's connection.
  struct Turn {
    std::function<void()> run;
    std::function<void()> expire;  // the budget ran out while it waited
    std::optional<runtime::TimerId> timer;
    bool over = false;  // ran or expired
  };
  struct Peer {
    std::shared_ptr<directory::RpcConnection> conn;
    AgentHello hello;
    std::string boot_at_connect;  // hello.boot as the current connect started
    runtime::Instant unreachable_until{0};
    bool calling = false;  // a call is out, not answered yet
    std::deque<std::shared_ptr<Turn>> turns;
  };
  Peer& peer(const std::string& agent);
  // Runs `run` once no call of `agent` is out and the turns before it ran.
  // The agent serves a connection's requests one after another, so a call
  // pipelined behind a held write_wait would spend its reply timeout, and a
  // wait its budget, in the agent's queue. `expire` (with `expire_at`) runs
  // instead if the turn has not come by then. `front`: the next piece of the
  // chain whose call was just answered, so it keeps its place.
  void in_turn(const std::string& agent, std::function<void()> run,
               runtime::Instant expire_at = runtime::Instant::max(),
               std::function<void()> expire = nullptr, bool front = false);
  // The one call of `agent` out at a time; its turn ends with the reply.
  void call(const std::string& agent, nlohmann::json message,
            directory::RpcConnection::ReplyHandler done,
            runtime::Duration extra_timeout = runtime::Duration(0));
  void next_turn(const std::string& agent);
  void gate_next(const std::string& agent, const std::string& token,
                 std::shared_ptr<std::vector<RangeList>> pieces, std::size_t index,
                 std::function<void()> done);
  void wait_next(std::shared_ptr<std::vector<std::pair<std::string, RangeList>>> pieces,
                 std::size_t index, std::string token, runtime::Instant deadline,
                 std::shared_ptr<std::set<std::string>> not_asked,
                 std::function<void(std::set<std::string>)> done);
  // wait_next's piece `index`, in its agent's turn; `rest` goes on with the next.
  void send_wait(const std::shared_ptr<std::vector<std::pair<std::string, RangeList>>>& pieces,
                 std::size_t index, const std::string& token, runtime::Instant deadline,
                 const std::shared_ptr<std::set<std::string>>& not_asked,
                 const std::shared_ptr<std::function<void()>>& rest);
  // `sent_under`: the epoch the failed message carried ("" for a connect that failed).
  void note_failure(const std::string& agent, const Status& status, const Json& reply,
                    const std::string& sent_under);

  runtime::Runtime& rt_;
  runtime::Strand& strand_;
  const Config& config_;
  std::map<std::string, Peer> peers_;
  // (agent, token) of gates that sent a read_hint: only those get an end.
  std::set<std::pair<std::string, std::string>> open_gates_;
  MemoryWaitsStats stats_;
  BootObserver boot_observer_;
  std::shared_ptr<bool> alive_ = std::make_shared<bool>(true);
};

}  // namespace rcxl::client
