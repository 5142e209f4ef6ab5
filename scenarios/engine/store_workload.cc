#include "scenarios/engine/store_workload.h"

#include <algorithm>
#include <string>

namespace rcxl::scenarios {

StoreWorkload::StoreWorkload(runtime::Runtime& rt, EngineKv& kv, const WorkloadParams& params,
                             std::uint64_t chunk_bytes, int engine)
    : rt_(rt),
      kv_(kv),
      params_(params),
      chunk_bytes_(chunk_bytes),
      engine_(engine),
      strand_(rt.make_strand("store-workload")) {}

StoreWorkload::~StoreWorkload() = default;

void StoreWorkload::start() {
  strand_->post([this] {
    first_start_ = last_end_ = rt_.clock().now();
    next_store();
  });
}

void StoreWorkload::next_store() {
  if (done()) return;
  const std::size_t index = stores_done_;
  KvRequest store;
  store.id = "e" + std::to_string(engine_) + "/store" + std::to_string(index);
  store.conversation = static_cast<int>(index);
  for (int c = 0; c < params_.chunks_per_store; ++c) {
    store.chunk_keys.push_back(store.id + "/chunk" + std::to_string(c));
  }
  const std::size_t chunks = store.chunk_keys.size();
  kv_.store(store, 0, chunks, [this, chunks](std::size_t stored) {
    // The KV layer answers on its own strand; the books are this strand's.
    strand_->post([this, chunks, stored] {
      const runtime::Instant now = rt_.clock().now();
      // Failed chunks moved no bytes into the pool: counting them would make
      // a full pool look fast.
      const std::uint64_t bytes = std::min(stored, chunks) * chunk_bytes_;
      stores_failed_ += stored < chunks;
      const auto took = now - last_end_;
      // Bytes per nanosecond is GB/s.
      samples_.push_back({now, took.count() > 0
                                   ? static_cast<double>(bytes) / static_cast<double>(took.count())
                                   : 0.0});
      bytes_ += bytes;
      last_end_ = now;
      ++stores_done_;
      next_store();
    });
  });
}

}  // namespace rcxl::scenarios
