// A blocking face of the client Handler for a command-line tool: each call
// posts to the Handler and waits (with a deadline) for its answer. Apps may
// block; core never does.
#pragma once

#include <chrono>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "core/client/handler.h"

namespace rcxl::kv {

// What a caller wants to know after a run (read on the Handler's strand).
struct KvCounts {
  client::HandlerStats handler;
  std::uint64_t boot_changes = 0;
  std::uint64_t fresh_maps = 0;
  std::uint64_t hints_queued = 0;
  std::uint64_t hint_messages = 0;
  std::uint64_t hints_dropped = 0;
  std::string hint_messages_by_action;  // "read_hint:4,read_promote:4"
};

class KvClient {
 public:
  KvClient(runtime::Runtime& rt, client::Config config, runtime::Nic& nic,
           std::chrono::milliseconds timeout);
  ~KvClient();

  Result<client::StoreResult> store(std::vector<client::StoreItem> items);
  // With `request` set the load is announced first as the engine would:
  // read_hint, read_promote, then the load, then read_hint_end (SPEC R3.4, R4.5).
  Result<client::LoadResult> load(std::vector<std::string> keys, const std::string& request = "");
  KvCounts counts();

 private:
  client::Handler handler_;
  std::chrono::milliseconds timeout_;
};

}  // namespace rcxl::kv
