// A simulated deployment for client tests: memory nodes running the real Agent
// with the `recording` extension, a directory node, and a GPU node for
// Handlers. Time is virtual; every wait is a run_until.
#pragma once

#include <gtest/gtest.h>

#include <cstring>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "backends/sim/sim_memory_pool.h"
#include "backends/sim/sim_network.h"
#include "backends/sim/sim_nic.h"
#include "backends/sim/sim_world.h"
#include "core/agent/agent.h"
#include "core/client/handler.h"
#include "core/directory/directory_server.h"
#include "core/extension/recording_extension.h"

namespace rcxl::client::testing {

using namespace std::chrono_literals;
using Json = nlohmann::json;

inline constexpr char kSecret[] = "s3cret";

struct MemoryNode {
  std::string name;
  sim::SimNode* node = nullptr;
  sim::SimNic* nic = nullptr;
  std::unique_ptr<sim::SimMemoryPool> pool;
  std::unique_ptr<agent::Agent> agent;

  runtime::Address address() const { return {name, 7000}; }
  std::string key() const { return address().ToString(); }
  // The recording extension's log lines for `hook` (and `action` when given).
  std::vector<Json> log(const std::string& hook, const std::string& action = "") const {
    std::vector<Json> out;
    auto text = node->files().read_file("/log");
    if (!text.ok()) return out;
    std::size_t start = 0;
    while (start < text->size()) {
      const auto end = text->find('\n', start);
      Json line = Json::parse(text->substr(start, end - start));
      if (line["hook"] == hook && (action.empty() || line.value("action", "") == action)) {
        out.push_back(line);
      }
      if (end == std::string::npos) break;
      start = end + 1;
    }
    return out;
  }
  void set_generation(const std::string& g) {
    ASSERT_TRUE(node->files().write_file("/gen", g).ok());
  }
};

class ClientRig {
 public:
  // `booleans_only`: the directory answers registers as before session 19
  // (no outcomes), so writers probe refused keys.
  explicit ClientRig(std::uint64_t seed = 11, directory::DirectoryOptions directory_options = {},
                     bool booleans_only = false)
      : world(seed) {
    directory_strand = dir_node.make_strand("directory");
    directory_server = std::make_unique<directory::DirectoryServer>(
        dir_node, *directory_strand,
        directory::DirectoryServerOptions{.directory = directory_options,
                                          .secret = kSecret,
                                          .max_frame_bytes = 1u << 24,
                                          .booleans_only_register_reply = booleans_only});
    EXPECT_TRUE(directory_server->start({"dir", 7100}).ok());
  }
  ~ClientRig() {
    handlers.clear();
    for (auto& [name, m] : memory) {
      if (m.agent) m.agent->stop();
    }
  }

  // A memory node whose recording extension takes `extension` (null: no extension).
  // `adjust` changes the agent's configuration before it starts.
  MemoryNode& add_memory(const std::string& name, Json extension = Json::object(),
                         std::uint64_t pool_bytes = 256ull << 20,
                         const std::function<void(agent::AgentConfig&)>& adjust = nullptr) {
    MemoryNode& m = memory[name];
    m.name = name;
    m.node = &world.add_node(name);
    m.nic = &fabric.add_nic(name);
    m.pool = std::make_unique<sim::SimMemoryPool>(pool_bytes);
    std::unique_ptr<ext::RegionExtension> ext;
    if (!extension.is_null()) {
      extension["log"] = "/log";
      if (extension.contains("generation_file")) m.set_generation("1");
      auto parsed = ext::RecordingConfig::FromJson(extension);
      EXPECT_TRUE(parsed.ok()) << parsed.status().ToString();
      ext = std::make_unique<ext::RecordingExtension>(*m.node, *parsed);
    }
    agent::AgentConfig config;
    config.listen = {m.address()};
    config.auth_secret = kSecret;
    config.boot_id = "boot-of-" + name;
    if (adjust) adjust(config);
    m.agent = std::make_unique<agent::Agent>(*m.node, *m.pool, *m.nic, std::move(ext), config);
    EXPECT_TRUE(m.agent->start().ok());
    return m;
  }

  Config config() const {
    Config c;
    c.directory = {"dir", 7100};
    for (const auto& [name, m] : memory) c.agents.push_back(m.address());
    c.secret = kSecret;
    c.chunk_size_bytes = 4096;
    c.region_size_bytes = 1 << 20;
    return c;
  }
  Handler& handler(Config c, std::shared_ptr<directory::DirectoryClient> shared = nullptr) {
    handlers.push_back(std::make_unique<Handler>(gpu, std::move(c), gpu_nic, std::move(shared)));
    return *handlers.back();
  }

  template <typename T>
  T wait(std::optional<T>& slot, runtime::Duration limit = 60s) {
    Status st = world.run_until([&] { return slot.has_value(); }, world.loop().now() + limit);
    EXPECT_TRUE(st.ok()) << st.ToString();
    if (!slot) ADD_FAILURE() << "never finished";
    return std::move(*slot);
  }
  Result<StoreResult> store(Handler& h, std::vector<StoreItem> items) {
    std::optional<Result<StoreResult>> out;
    h.store(std::move(items), [&](Result<StoreResult> r) { out = std::move(r); });
    auto r = wait(out);
    return r;
  }
  Result<LoadResult> load(Handler& h, std::vector<std::string> keys, bool engine_hinted = false) {
    std::optional<Result<LoadResult>> out;
    h.load(
        std::move(keys), [&](Result<LoadResult> r) { out = std::move(r); }, engine_hinted);
    return wait(out);
  }
  // Lets queued hints go out and their replies come back.
  void settle(Handler& h) {
    bool posted_ran = false;  // the strand is FIFO: every earlier enqueue ran first
    h.hints().strand().post([&] { posted_ran = true; });
    (void)world.run_until([&] { return posted_ran && h.hints().idle(); }, world.loop().now() + 60s);
    world.run_for(5ms);
  }

  sim::SimWorld world;
  sim::SimFabric fabric{world};
  sim::SimNode& dir_node = world.add_node("dir");
  sim::SimNode& gpu = world.add_node("gpu");
  sim::SimNic& gpu_nic = fabric.add_nic("gpu");
  std::unique_ptr<runtime::Strand> directory_strand;
  std::unique_ptr<directory::DirectoryServer> directory_server;
  std::map<std::string, MemoryNode> memory;
  std::vector<std::unique_ptr<Handler>> handlers;
};

inline std::vector<std::byte> bytes_of(const std::string& s) {
  std::vector<std::byte> out(s.size());
  std::memcpy(out.data(), s.data(), s.size());
  return out;
}
inline std::string text_of(const std::vector<std::byte>& b) {
  return std::string(reinterpret_cast<const char*>(b.data()), b.size());
}
inline StoreItem item(const std::string& key, const std::string& value) {
  return {key, bytes_of(value)};
}

}  // namespace rcxl::client::testing
