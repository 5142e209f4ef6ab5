#include "scenarios/rcxl_engine_kv.h"

#include <algorithm>
#include <cstring>

namespace rcxl::scenarios {

std::vector<std::byte> RcxlEngineKv::chunk_bytes_of(const std::string& key) const {
  std::vector<std::byte> out(sample_, std::byte{'.'});
  std::memcpy(out.data(), key.data(), std::min<std::size_t>(key.size(), out.size()));
  return out;
}

void RcxlEngineKv::on_arrival(const KvRequest& r) {
  scheduler_.on_request_arrival(r.id, r.chunk_keys);
}

void RcxlEngineKv::lookup(const KvRequest& r, LookupDone done) {
  const std::string id = r.id;
  std::vector<std::string> keys = r.chunk_keys;
  scheduler_.lookup(keys, [this, id, keys, done](Result<std::size_t> hits) {
    const std::size_t n = hits.ok() ? std::min(*hits, keys.size()) : 0;
    if (n > 0) {
      // SPEC R3.8: the scheduler hints when it first finds the asynchronous load.
      scheduler_.on_async_load_found(id, {keys.begin(), keys.begin() + static_cast<long>(n)});
    }
    done(n);
  });
}

void RcxlEngineKv::on_load_done(const KvRequest& r) {
  scheduler_.on_finished_recving(r.id);
}

void RcxlEngineKv::on_finished(const KvRequest& r) {
  scheduler_.on_request_finished(r.id);
  worker_.on_request_finished(r.id);
}

void RcxlEngineKv::load(const KvRequest& r, std::size_t chunks, LoadDone done) {
  std::vector<std::string> keys(r.chunk_keys.begin(),
                                r.chunk_keys.begin() + static_cast<long>(chunks));
  ++loads_started_;
  if (load_hook_) load_hook_(loads_started_);
  auto finish = [this, asked = keys.size(), done](std::size_t good) {
    if (good < asked) {
      ++short_loads_;
      missed_chunks_ += asked - good;
    }
    done(good);
  };
  worker_.start_load(r.id, keys, [this, keys, finish](Result<client::LoadResult> result) {
    if (!result.ok()) {
      ++failed_loads_;
      return finish(0);
    }
    // Only a prefix of hits counts; a wrong chunk ends it (and is a violation).
    std::size_t good = 0;
    for (const auto& value : result->values) {
      const auto expected = chunk_bytes_of(keys[good]);
      if (value.size() < expected.size() ||
          !std::equal(expected.begin(), expected.end(), value.begin())) {
        ++stale_reads_;
        break;
      }
      ++good;
    }
    finish(good);
  });
}

void RcxlEngineKv::store(const KvRequest& r, std::size_t first, std::size_t end, StoreDone done) {
  std::vector<client::StoreItem> items;
  for (std::size_t i = first; i < end; ++i) {
    client::StoreItem item{r.chunk_keys[i], chunk_bytes_of(r.chunk_keys[i])};
    item.wire_bytes = chunk_bytes_;
    items.push_back(std::move(item));
  }
  ++stores_started_;
  if (store_hook_) store_hook_(stores_started_);
  worker_.save(std::move(items), [this, done](Result<client::StoreResult> result) {
    if (!result.ok() || result->failed > 0) ++failed_stores_;
    // Chunks another writer stored first are not this store's bytes.
    done(result.ok() ? result->stored : 0);
  });
}

}  // namespace rcxl::scenarios
