// The Agent on the thread runtime (a strand per connection = a thread per
// connection): maps of one region racing on two connections (SPEC R2.2: mapped
// once; both hold it), and hints from many connections at once (SPEC R3.2).
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <atomic>
#include <mutex>
#include <thread>

#include "apps/rcxl-agent/none_nic.h"
#include "backends/verbs/anon_memory_pool.h"
#include "backends/verbs/thread_runtime.h"
#include "core/agent/agent.h"
#include "core/protocol/auth.h"
#include "tests/agent/tcp_wire.h"

namespace rcxl::agent {
namespace {

using rcxl::testing::Json;
using rcxl::testing::Wire;
using namespace std::chrono_literals;

// Slow mapped(): the second map arrives while the first is still registering.
class SlowMapExtension : public ext::RegionExtension {
 public:
  std::string name() const override { return "slow"; }
  Status mapped(const ext::RegionInfo&, bool) override {
    ++mapped_calls;
    std::this_thread::sleep_for(200ms);
    return {};
  }
  Status hint(const ext::Hint&) override {
    ++hints;
    return {};
  }
  std::atomic<int> mapped_calls{0};
  std::atomic<int> hints{0};
};

struct ThreadRig {
  verbs::ThreadRuntime rt{verbs::ThreadRuntime::Options{runtime::LogLevel::kWarn}};
  std::unique_ptr<runtime::MemoryPool> pool;
  apps::NoneNic nic;
  SlowMapExtension* ext = nullptr;
  std::unique_ptr<Agent> agent;
  int port = 0;

  ThreadRig() {
    auto p = verbs::AnonMemoryPool::create(16ull << 20, false);
    EXPECT_TRUE(p.ok());
    pool = std::move(p).value();
    auto e = std::make_unique<SlowMapExtension>();
    ext = e.get();
    AgentConfig config;
    config.listen = {{"127.0.0.1", 0}};
    config.auth_secret = "k";
    config.boot_id = "tboot";
    agent = std::make_unique<Agent>(rt, *pool, nic, std::move(e), config);
    EXPECT_TRUE(agent->start().ok());
    port = agent->listen_addresses().at(0).port;
  }
  ~ThreadRig() { agent.reset(); }

  std::unique_ptr<Wire> hello() {
    auto w = std::make_unique<Wire>(port);
    Json greeting = w->next();
    Json reply = w->call(
        {{"op", "hello"},
         {"id", 1},
         {"auth", protocol::hmac_sha256_hex("k", greeting["challenge"].get<std::string>())}});
    EXPECT_EQ(reply["ok"], true) << reply.dump();
    return w;
  }
};

TEST(AgentThreads, R2_2_RacingMapsOfOneRegionCallMappedOnceAndBothHold) {
  ThreadRig rig;
  auto a = rig.hello();
  auto b = rig.hello();
  Json alloc = a->call({{"op", "alloc"}, {"id", 2}, {"size", 1 << 20}});
  ASSERT_EQ(alloc["ok"], true);
  const Json map = {{"op", "map"},
                    {"id", 3},
                    {"region", alloc["region"]},
                    {"handle", alloc["read_handle"]},
                    {"epoch", "tboot"}};
  Json reply_a;
  Json reply_b;
  std::thread ta([&] { reply_a = a->call(map); });
  std::this_thread::sleep_for(50ms);  // b arrives while a's mapped() runs
  std::thread tb([&] { reply_b = b->call(map); });
  ta.join();
  tb.join();
  EXPECT_EQ(reply_a["ok"], true) << reply_a.dump();
  EXPECT_EQ(reply_b["ok"], true) << reply_b.dump();
  EXPECT_EQ(rig.ext->mapped_calls.load(), 1);
  EXPECT_EQ(rig.agent->metrics().maps, 2u);
  EXPECT_EQ(rig.agent->metrics().registrations, 1u);
}

TEST(AgentThreads, R3_2_HintsFromManyConnectionsAtOnce) {
  ThreadRig rig;
  auto owner = rig.hello();
  Json alloc = owner->call({{"op", "alloc"}, {"id", 2}, {"size", 1 << 20}});
  ASSERT_EQ(owner->call({{"op", "map"},
                         {"id", 3},
                         {"region", alloc["region"]},
                         {"handle", alloc["handle"]},
                         {"epoch", "tboot"}})["ok"],
            true);
  constexpr int kThreads = 4;
  constexpr int kHints = 200;
  std::vector<std::thread> threads;
  std::atomic<int> ok{0};
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&, t] {
      auto w = rig.hello();
      for (int i = 0; i < kHints; ++i) {
        const std::string name = "t" + std::to_string(t) + "-" + std::to_string(i);
        Json hint = {
            {"op", "extension"},
            {"id", i},
            {"action", "read_hint"},
            {"epoch", "tboot"},
            {"request", name},
            {"ranges", Json::array({{alloc["region"], i * 4096, 4096}})},
            {"handles", {{std::to_string(alloc["region"].get<int>()), alloc["read_handle"]}}}};
        if (w->call(hint)["ok"] == true) ++ok;
        if (w->call({{"op", "extension"},
                     {"id", i},
                     {"action", "read_hint_end"},
                     {"request", name}})["ok"] == true) {
          ++ok;
        }
      }
    });
  }
  for (auto& th : threads) th.join();
  EXPECT_EQ(ok.load(), 2 * kThreads * kHints);
  EXPECT_EQ(rig.ext->hints.load(), 2 * kThreads * kHints);
  EXPECT_EQ(rig.agent->metrics().open_hint_requests, 0u);
}

// Hook order, kept by the test (the extension dies with the agent).
struct Events {
  std::mutex mu;
  std::vector<std::string> list;
  std::atomic<bool> mapped_done{false};
  void add(std::string event) {
    std::lock_guard lock(mu);
    list.push_back(std::move(event));
  }
  std::vector<std::string> get() {
    std::lock_guard lock(mu);
    return list;
  }
};

// mapped() takes 200 ms, so that a free or the agent's end overlaps it.
class OrderExtension : public ext::RegionExtension {
 public:
  explicit OrderExtension(std::shared_ptr<Events> events) : events_(std::move(events)) {}
  std::string name() const override { return "order"; }
  Status mapped(const ext::RegionInfo&, bool) override {
    events_->add("mapped-begin");
    std::this_thread::sleep_for(200ms);
    events_->add("mapped-end");
    events_->mapped_done = true;
    return {};
  }
  bool retire(const ext::RegionInfo&) override {
    events_->add("retire");
    return true;
  }
  Status hint(const ext::Hint&) override { return {}; }

 private:
  std::shared_ptr<Events> events_;
};

struct OrderRig {
  verbs::ThreadRuntime rt{verbs::ThreadRuntime::Options{runtime::LogLevel::kWarn}};
  std::unique_ptr<runtime::MemoryPool> pool;
  apps::NoneNic nic;
  std::shared_ptr<Events> events = std::make_shared<Events>();
  std::unique_ptr<Agent> agent;
  int port = 0;

  OrderRig() {
    auto p = verbs::AnonMemoryPool::create(16ull << 20, false);
    EXPECT_TRUE(p.ok());
    pool = std::move(p).value();
    AgentConfig config;
    config.listen = {{"127.0.0.1", 0}};
    config.auth_secret = "k";
    config.boot_id = "tboot";
    config.sweep_interval = 20ms;
    agent =
        std::make_unique<Agent>(rt, *pool, nic, std::make_unique<OrderExtension>(events), config);
    EXPECT_TRUE(agent->start().ok());
    port = agent->listen_addresses().at(0).port;
  }
  std::unique_ptr<Wire> hello() {
    auto w = std::make_unique<Wire>(port);
    Json greeting = w->next();
    Json reply = w->call(
        {{"op", "hello"},
         {"id", 1},
         {"auth", protocol::hmac_sha256_hex("k", greeting["challenge"].get<std::string>())}});
    EXPECT_EQ(reply["ok"], true) << reply.dump();
    return w;
  }
};

TEST(AgentThreads, R2_4_FreeDuringAMapRetiresOnlyAfterThatMapIsDone) {
  OrderRig rig;
  auto mapper = rig.hello();
  auto owner = rig.hello();
  Json alloc = owner->call({{"op", "alloc"}, {"id", 2}, {"size", 1 << 20}});
  ASSERT_EQ(alloc["ok"], true);
  Json map_reply;
  std::thread t([&] {
    map_reply = mapper->call({{"op", "map"},
                              {"id", 3},
                              {"region", alloc["region"]},
                              {"handle", alloc["read_handle"]},
                              {"epoch", "tboot"}});
  });
  std::this_thread::sleep_for(50ms);  // inside mapped()
  Json freed = owner->call(
      {{"op", "free"}, {"id", 4}, {"region", alloc["region"]}, {"handle", alloc["handle"]}});
  EXPECT_EQ(freed["ok"], true) << freed.dump();
  t.join();
  EXPECT_EQ(map_reply["error"]["code"], "not_found") << map_reply.dump();
  for (int i = 0; i < 200 && rig.agent->retiring_regions() > 0; ++i) {
    std::this_thread::sleep_for(10ms);
  }
  EXPECT_EQ(rig.agent->retiring_regions(), 0u);
  EXPECT_EQ(rig.events->get(), (std::vector<std::string>{"mapped-begin", "mapped-end", "retire"}));
  EXPECT_FALSE(rig.agent->registration(alloc["region"].get<std::uint64_t>()).has_value());
}

TEST(AgentThreads, R1_DestroyingTheAgentWaitsForARunningMap) {
  OrderRig rig;
  auto mapper = rig.hello();
  Json alloc = mapper->call({{"op", "alloc"}, {"id", 2}, {"size", 1 << 20}});
  ASSERT_EQ(alloc["ok"], true);
  std::thread t([&] {
    (void)mapper->call({{"op", "map"},
                        {"id", 3},
                        {"region", alloc["region"]},
                        {"handle", alloc["handle"]},
                        {"epoch", "tboot"}});
  });
  std::this_thread::sleep_for(50ms);  // inside mapped()
  rig.agent.reset();
  // The map's task finished before the agent's state (and the extension) went.
  EXPECT_TRUE(rig.events->mapped_done.load());
  t.join();
}

}  // namespace
}  // namespace rcxl::agent
