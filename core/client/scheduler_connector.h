// The engine's scheduler role (SPEC R3.8): hints a request when its
// asynchronous load is first found (or on arrival with read_hint_on_arrival),
// ends the hint when the engine reports the load done (finished_recving), with
// request-finished as the fallback; a hint is ended once. A request is hinted
// once, except that the load found after a hint on arrival hints again (that
// one may have opened nothing; the agent's copy is skipped if it is open).
// Only the scheduler sends read hints, so loads are not hinted twice. Hint state is kept
// for at most 65536 requests; the oldest is ended past that. Engine events are
// methods; thread-safe (one mutex: the engine may call from several threads).
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <mutex>
#include <string>
#include <vector>

#include "core/client/handler.h"

namespace rcxl::client {

class SchedulerConnector {
 public:
  explicit SchedulerConnector(Handler& handler) : handler_(handler) {}

  void on_request_arrival(const std::string& request, std::vector<std::string> keys);
  // The engine found that `request` will load `keys` asynchronously.
  void on_async_load_found(const std::string& request, std::vector<std::string> keys);
  // The engine's finished_recving: the request's load is done.
  void on_finished_recving(const std::string& request);
  void on_request_finished(const std::string& request);
  // The scheduler's lookup: how many leading keys hit (shares the directory client, R3.9).
  void lookup(const std::vector<std::string>& keys, std::function<void(Result<std::size_t>)> done);

  std::size_t tracked() const;
  std::uint64_t hints_sent() const;
  std::uint64_t ends_sent() const;
  std::uint64_t forced_ends() const;
  std::uint64_t lookups() const;  // lookup calls (each one directory probe)

 private:
  struct State {
    std::uint64_t seq = 0;
    bool ended = false;
    bool on_arrival = false;  // hinted on arrival only: the load found may hint again
  };
  // `load_found`: from on_async_load_found, which hints again a request
  // whose arrival hint may have opened nothing.
  void hint_once(const std::string& request, std::vector<std::string> keys,
                 bool load_found = false);
  void end_once(State& state, const std::string& request);

  Handler& handler_;
  mutable std::mutex mutex_;
  std::map<std::string, State> requests_;
  std::map<std::uint64_t, std::string> order_;  // oldest first
  std::uint64_t seq_ = 0;
  std::uint64_t hints_ = 0;
  std::uint64_t ends_ = 0;
  std::uint64_t forced_ends_ = 0;
  std::uint64_t lookups_ = 0;
};

}  // namespace rcxl::client
