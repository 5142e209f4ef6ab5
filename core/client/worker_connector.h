// The engine's worker role (SPEC R3.8, R4.1, R4.5): at a request's load start
// it promotes the request once (read_promote to every agent of the pool that
// takes it), then loads without hinting (the scheduler hinted); saves run one
// after another on a write-behind strand, each a Handler::store with its write
// hints and waits, off the request path. Thread-safe. Destroying it drops the
// saves not yet started (their `done` never runs, as with a Handler's pending
// work); a save already in the handler still completes and calls its `done`.
#pragma once

#include <atomic>
#include <cstdint>
#include <deque>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "core/client/handler.h"
#include "core/runtime/strand_gate.h"

namespace rcxl::client {

class WorkerConnector {
 public:
  WorkerConnector(runtime::Runtime& rt, Handler& handler);
  ~WorkerConnector();
  WorkerConnector(const WorkerConnector&) = delete;
  WorkerConnector& operator=(const WorkerConnector&) = delete;

  // Promote (once per request) and load; `done` runs on the handler's strand.
  void start_load(const std::string& request, std::vector<std::string> keys,
                  Handler::LoadDone done);
  // Queued behind earlier saves; `done` runs on the handler's strand.
  void save(std::vector<StoreItem> items, Handler::StoreDone done);
  void on_request_finished(const std::string& request);

  // Saves queued or in the handler, not yet done.
  std::size_t pending_saves() const { return pending_saves_->load(); }
  std::uint64_t promotes_sent() const;

 private:
  struct Save {
    std::vector<StoreItem> items;
    Handler::StoreDone done;
  };
  void next_save();

  Handler& handler_;
  mutable std::mutex mutex_;
  std::map<std::string, std::uint64_t> promoted_;  // request -> seq
  std::map<std::uint64_t, std::string> promoted_order_;
  std::uint64_t seq_ = 0;
  std::uint64_t promotes_ = 0;
  // Shared: a completion may run after the connector is gone.
  std::shared_ptr<std::atomic<std::size_t>> pending_saves_ =
      std::make_shared<std::atomic<std::size_t>>(0);
  std::deque<Save> saves_;  // confined to write_behind_
  bool saving_ = false;     // confined to write_behind_
  // A store's completion (on the handler's strand) comes back through this; the
  // destructor closes it, so none reaches the strand once it is going.
  std::shared_ptr<runtime::StrandGate> back_to_write_behind_;
  // Last: destroyed first, its thread joined before the members its tasks use.
  std::unique_ptr<runtime::Strand> write_behind_;
};

}  // namespace rcxl::client
