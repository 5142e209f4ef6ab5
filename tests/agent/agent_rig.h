// A simulated memory node running the Agent, and a raw protocol client that
// speaks framed JSON over the sim transport (PROTOCOL.md, byte for byte).
#pragma once

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <deque>
#include <memory>
#include <string>

#include "backends/sim/sim_memory_pool.h"
#include "backends/sim/sim_nic.h"
#include "backends/sim/sim_world.h"
#include "core/agent/agent.h"
#include "core/extension/recording_extension.h"
#include "core/protocol/auth.h"
#include "core/protocol/framed_conn.h"

namespace rcxl::agent::testing {

using namespace std::chrono_literals;
using protocol::Json;

inline constexpr char kSecret[] = "s3cret";
inline constexpr char kBootId[] = "0b5e7c1a-boot";

class TestClient {
 public:
  TestClient(sim::SimWorld& world, sim::SimNode& node, runtime::Address agent)
      : world_(world), strand_(node.make_strand("test-client")) {
    node.transport().connect(agent, *strand_, [this](Result<std::shared_ptr<runtime::Conn>> c) {
      if (!c.ok()) {
        closed_ = true;
        return;
      }
      conn_ = protocol::FramedConn::Make(std::move(c).value(), 1u << 24);
      conn_->start(
          *strand_, [this](Json m) { replies_.push_back(std::move(m)); },
          [this](const Status&) { closed_ = true; });
    });
    greeting = next();
  }
  ~TestClient() {
    if (conn_) conn_->abort();
  }

  // Waits for the next frame (a reply, or the greeting).
  Json next() {
    const auto limit = world_.loop().now() + 30s;
    Status st = world_.run_until([&] { return !replies_.empty() || closed_; }, limit);
    if (replies_.empty()) {
      if (!closed_) ADD_FAILURE() << "no reply: " << st.ToString();
      return Json();
    }
    Json out = std::move(replies_.front());
    replies_.pop_front();
    return out;
  }
  void send(const Json& request) { conn_->send(request); }
  void send_raw(std::string bytes) { conn_->raw().send(std::move(bytes)); }
  Json call(const Json& request) {
    send(request);
    return next();
  }
  bool has_reply() const { return !replies_.empty(); }
  // Runs the world until the agent closed the connection.
  bool wait_closed() {
    (void)world_.run_until([&] { return closed_; }, world_.loop().now() + 30s);
    return closed_;
  }
  bool closed() const { return closed_; }
  void close() { conn_->close(); }

  // The correct answer to the greeting's challenge.
  std::string auth(const std::string& secret = kSecret) const {
    return protocol::hmac_sha256_hex(secret, greeting["challenge"].get<std::string>());
  }
  // Says hello and keeps the boot and conn id it answers.
  Json hello() {
    Json reply =
        call({{"op", "hello"}, {"id", 1}, {"version", 1}, {"client", "test"}, {"auth", auth()}});
    if (reply.value("ok", false)) {
      boot = reply["boot"].get<std::string>();
      conn = reply["conn"].get<std::uint64_t>();
    }
    return reply;
  }

  struct Alloc {
    std::uint64_t region = 0;
    std::string handle;
    std::string read_handle;
  };
  Alloc alloc(std::uint64_t size = 1 << 20) {
    Json r = call({{"op", "alloc"}, {"id", 2}, {"size", size}});
    EXPECT_TRUE(r.value("ok", false)) << r.dump();
    if (!r.value("ok", false)) return {};
    return {r["region"].get<std::uint64_t>(), r["handle"].get<std::string>(),
            r["read_handle"].get<std::string>()};
  }
  Json map(std::uint64_t region, const std::string& handle, bool fresh = false) {
    Json request = {
        {"op", "map"}, {"id", 3}, {"region", region}, {"handle", handle}, {"epoch", boot}};
    if (fresh) request["fresh"] = true;
    return call(request);
  }
  // Gives the region back under its owner handle.
  Json free(const Alloc& a) {
    return call({{"op", "free"}, {"id", 5}, {"region", a.region}, {"handle", a.handle}});
  }
  Json hint(const std::string& action, const std::string& name, Json ranges, Json handles) {
    const bool token = action == "write_hint" || action == "write_wait";
    Json request = {{"op", "extension"}, {"id", 4}, {"action", action}, {"epoch", boot}};
    request[token ? "token" : "request"] = name;
    if (!ranges.is_null()) {
      request["ranges"] = std::move(ranges);
      request["handles"] = std::move(handles);
    }
    return call(request);
  }
  Json read_hint(const std::string& name, const Alloc& a, std::uint64_t offset = 0,
                 std::uint64_t length = 4096) {
    return hint("read_hint", name, Json::array({{a.region, offset, length}}),
                {{std::to_string(a.region), a.handle}});
  }
  Json read_hint_end(const std::string& name) { return hint("read_hint_end", name, {}, {}); }

  std::string boot;
  std::uint64_t conn = 0;
  Json greeting;

 private:
  sim::SimWorld& world_;
  std::unique_ptr<runtime::Strand> strand_;
  std::shared_ptr<protocol::FramedConn> conn_;
  std::deque<Json> replies_;
  bool closed_ = false;
};

inline std::string code_of(const Json& reply) {
  if (!reply.is_object()) return "no reply";
  if (!reply.contains("error")) return "ok";
  return reply["error"].value("code", "");
}

// The memory node ("mem") with its pool and NIC, a GPU node ("gpu") for clients.
struct AgentRig {
  explicit AgentRig(std::uint64_t seed = 1) : world(seed) {}
  ~AgentRig() { agent.reset(); }

  AgentConfig config() const {
    AgentConfig c;
    c.listen = {{"mem", 7000}};
    c.auth_secret = kSecret;
    c.boot_id = kBootId;
    return c;
  }
  Status start(std::unique_ptr<ext::RegionExtension> extension) {
    return start(std::move(extension), config());
  }
  Status start(std::unique_ptr<ext::RegionExtension> extension, AgentConfig c) {
    agent = std::make_unique<Agent>(mem, pool, mem_nic, std::move(extension), std::move(c));
    return agent->start();
  }
  // The recording extension with `config` (its log at /log).
  std::unique_ptr<ext::RegionExtension> recording(Json config = Json::object()) {
    if (!config.contains("log")) config["log"] = "/log";
    auto parsed = ext::RecordingConfig::FromJson(config);
    EXPECT_TRUE(parsed.ok()) << parsed.status().ToString() << " " << config.dump();
    return std::make_unique<ext::RecordingExtension>(mem, *parsed);
  }
  std::unique_ptr<TestClient> client() {
    return std::make_unique<TestClient>(world, gpu, runtime::Address{"mem", 7000});
  }
  std::unique_ptr<TestClient> hello_client() {
    auto c = client();
    Json reply = c->hello();
    EXPECT_TRUE(reply.value("ok", false)) << reply.dump();
    return c;
  }
  // The recording extension's log lines, parsed.
  std::vector<Json> log_lines(const std::string& hook = "") {
    std::vector<Json> out;
    auto text = mem.files().read_file("/log");
    if (!text.ok()) return out;
    std::size_t start = 0;
    while (start < text->size()) {
      const auto end = text->find('\n', start);
      Json line = Json::parse(text->substr(start, end - start));
      if (hook.empty() || line["hook"] == hook) out.push_back(line);
      if (end == std::string::npos) break;
      start = end + 1;
    }
    return out;
  }
  void set_generation(const std::string& text) {
    ASSERT_TRUE(mem.files().write_file("/gen", text).ok());
  }
  void run_for(runtime::Duration d) { world.run_for(d); }

  sim::SimWorld world;
  sim::SimFabric fabric{world};
  sim::SimNode& mem = world.add_node("mem");
  sim::SimNode& gpu = world.add_node("gpu");
  sim::SimNic& mem_nic = fabric.add_nic("mem");
  sim::SimNic& gpu_nic = fabric.add_nic("gpu");
  sim::SimMemoryPool pool{64ull << 20};
  std::unique_ptr<Agent> agent;
};

class MockExtension : public ext::RegionExtension {
 public:
  MockExtension() {
    using ::testing::_;
    using ::testing::Return;
    ON_CALL(*this, name()).WillByDefault(Return("mock"));
    ON_CALL(*this, validate_access(_)).WillByDefault(Return(Status()));
    ON_CALL(*this, mapped(_, _)).WillByDefault(Return(Status()));
    ON_CALL(*this, retire(_)).WillByDefault(Return(true));
    ON_CALL(*this, hint(_)).WillByDefault(Return(Status()));
    ON_CALL(*this, has_memory_generation()).WillByDefault(Return(false));
    ON_CALL(*this, connection_closed(_)).WillByDefault(Return(Status()));
    ON_CALL(*this, hint_actions())
        .WillByDefault(Return(
            std::vector<std::string>{"read_hint", "read_hint_end", "write_hint", "read_promote"}));
  }
  MOCK_METHOD(std::string, name, (), (const, override));
  MOCK_METHOD(Status, validate_access, (const ext::RegionInfo&), (override));
  MOCK_METHOD(Status, mapped, (const ext::RegionInfo&, bool), (override));
  MOCK_METHOD(bool, retire, (const ext::RegionInfo&), (override));
  MOCK_METHOD(Status, hint, (const ext::Hint&), (override));
  MOCK_METHOD(void, close, (), (override));
  MOCK_METHOD(bool, has_memory_generation, (), (const, override));
  MOCK_METHOD(std::optional<std::string>, memory_generation, (), (override));
  MOCK_METHOD(Status, connection_closed, (std::uint64_t), (override));
  MOCK_METHOD(std::vector<std::string>, hint_actions, (), (const, override));
};

}  // namespace rcxl::agent::testing
