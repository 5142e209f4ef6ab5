// What the serving-engine model asks of the KV layer, as a vLLM KV connector
// sees it: the scheduler's lookups and events, the worker's loads and stores.
// Bound to rcxl's connectors by scenarios/engine/rcxl_engine_kv.*.
#pragma once

#include <cstddef>
#include <functional>
#include <string>
#include <vector>

namespace rcxl::scenarios {

struct KvRequest {
  std::string id;  // "c3-t2": conversation 3, turn 2
  int conversation = 0;
  int turn = 0;
  // Keys of the context's full chunks, in order: the prefix a load may reuse.
  std::vector<std::string> chunk_keys;
};

class EngineKv {
 public:
  using LookupDone = std::function<void(std::size_t hit_chunks)>;
  // loaded < requested: the rest were misses (e.g. a boot changed); recompute them.
  using LoadDone = std::function<void(std::size_t loaded_chunks)>;
  // How many of the chunks this store wrote (the rest failed, or another
  // writer had stored them first).
  using StoreDone = std::function<void(std::size_t stored_chunks)>;

  virtual ~EngineKv() = default;
  // --- scheduler role
  virtual void on_arrival(const KvRequest& /*request*/) {}
  // How many leading chunks are stored remotely (the scheduler finds the async load).
  virtual void lookup(const KvRequest& request, LookupDone done) = 0;
  // The engine reports the request's load done (vLLM finished_recving).
  virtual void on_load_done(const KvRequest& /*request*/) {}
  virtual void on_finished(const KvRequest& /*request*/) {}
  // --- worker role
  virtual void load(const KvRequest& request, std::size_t chunks, LoadDone done) = 0;
  // Stores chunks [first, end) of the request's context (write-behind).
  virtual void store(const KvRequest& request, std::size_t first, std::size_t end,
                     StoreDone done) = 0;
};

}  // namespace rcxl::scenarios
