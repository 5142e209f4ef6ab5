// Binds the engine model to rcxl's connectors as a vLLM KV connector would:
// the scheduler looks up and hints, the worker promotes, loads and stores.
// It also checks every loaded chunk's bytes (the no-stale-bytes invariant).
#pragma once

#include <cstdint>
#include <functional>
#include <string>

#include "core/client/handler.h"
#include "core/client/scheduler_connector.h"
#include "core/client/worker_connector.h"
#include "scenarios/engine/engine_kv.h"

namespace rcxl::scenarios {

class RcxlEngineKv final : public EngineKv {
 public:
  RcxlEngineKv(client::SchedulerConnector& scheduler, client::WorkerConnector& worker,
               std::uint64_t chunk_bytes, std::uint32_t sample_bytes)
      : scheduler_(scheduler), worker_(worker), chunk_bytes_(chunk_bytes), sample_(sample_bytes) {}

  void on_arrival(const KvRequest& r) override;
  void lookup(const KvRequest& r, LookupDone done) override;
  void on_load_done(const KvRequest& r) override;
  void on_finished(const KvRequest& r) override;
  void load(const KvRequest& r, std::size_t chunks, LoadDone done) override;
  void store(const KvRequest& r, std::size_t first, std::size_t end, StoreDone done) override;

  // The real bytes a chunk carries: its key, padded (a KV chunk's content is a
  // function of its key, so any other bytes under that key are wrong).
  std::vector<std::byte> chunk_bytes_of(const std::string& key) const;
  std::uint64_t stale_reads() const { return stale_reads_; }
  std::uint64_t failed_loads() const { return failed_loads_; }
  std::uint64_t failed_stores() const { return failed_stores_; }
  // Reader misses: loads that returned fewer chunks than the lookup found
  // (failed ones included), and the chunks they left to recompute.
  std::uint64_t short_loads() const { return short_loads_; }
  std::uint64_t missed_chunks() const { return missed_chunks_; }
  // Told the count of loads (stores) started so far as each one starts (fault triggers).
  void on_load_start(std::function<void(std::uint64_t nth)> hook) { load_hook_ = std::move(hook); }
  void on_store_start(std::function<void(std::uint64_t nth)> hook) {
    store_hook_ = std::move(hook);
  }

 private:
  client::SchedulerConnector& scheduler_;
  client::WorkerConnector& worker_;
  std::uint64_t chunk_bytes_;
  std::uint32_t sample_;
  std::uint64_t stale_reads_ = 0;
  std::uint64_t failed_loads_ = 0;
  std::uint64_t failed_stores_ = 0;
  std::uint64_t short_loads_ = 0;
  std::uint64_t missed_chunks_ = 0;
  std::uint64_t loads_started_ = 0;
  std::function<void(std::uint64_t)> load_hook_;
  std::uint64_t stores_started_ = 0;
  std::function<void(std::uint64_t)> store_hook_;
};

}  // namespace rcxl::scenarios
