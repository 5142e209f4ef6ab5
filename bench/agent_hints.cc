// Agent hot paths (docs/performance.md):
//  (a) 4096-range read_hint decode: nlohmann DOM (the old path) vs the simdjson
//      fast path, and the whole agent (decode + checks + extension) on the sim
//      runtime; ranges/s and the ratio to the nlohmann baseline of the same run;
//  (b) connect + greeting + hello + map round trips on loopback TCP with the
//      thread runtime (real Agent in-process, `--nic none`).
#include <arpa/inet.h>
#include <benchmark/benchmark.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cstdio>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "apps/rcxl-agent/none_nic.h"
#include "backends/sim/sim_memory_pool.h"
#include "backends/sim/sim_nic.h"
#include "backends/sim/sim_world.h"
#include "backends/verbs/anon_memory_pool.h"
#include "backends/verbs/thread_runtime.h"
#include "core/agent/agent.h"
#include "core/protocol/auth.h"
#include "core/protocol/fast_request_decoder.h"

namespace {

using namespace rcxl;
using protocol::Json;
constexpr std::size_t kRanges = 4096;

std::string read_hint_frame(std::uint64_t region, const std::string& handle,
                            const std::string& epoch) {
  Json ranges = Json::array();
  for (std::size_t i = 0; i < kRanges; ++i) ranges.push_back({region, i * 4096, 4096});
  return Json{{"op", "extension"},
              {"id", 4},
              {"action", "read_hint"},
              {"epoch", epoch},
              {"request", "bench"},
              {"ranges", ranges},
              {"handles", {{std::to_string(region), handle}}}}
      .dump();
}

void BM_DecodeNlohmann(benchmark::State& state) {
  const std::string frame = read_hint_frame(7, std::string(32, 'a'), "boot:1");
  for (auto _ : state) {
    auto decoded = protocol::reference_decode(frame);
    if (!decoded.ok()) state.SkipWithError("decode failed");
    benchmark::DoNotOptimize(decoded);
  }
  state.SetItemsProcessed(state.iterations() * kRanges);
  state.SetBytesProcessed(state.iterations() * frame.size());
}
BENCHMARK(BM_DecodeNlohmann);

void BM_DecodeSimdjson(benchmark::State& state) {
  const std::string frame = read_hint_frame(7, std::string(32, 'a'), "boot:1");
  protocol::FastRequestDecoder decoder;
  for (auto _ : state) {
    std::string copy = frame;  // the agent decodes the frame string it owns
    auto decoded = decoder.try_decode(copy);
    if (!decoded) state.SkipWithError("fast path declined");
    benchmark::DoNotOptimize(decoded);
  }
  state.SetItemsProcessed(state.iterations() * kRanges);
  state.SetBytesProcessed(state.iterations() * frame.size());
}
BENCHMARK(BM_DecodeSimdjson);

class CountingExtension : public ext::RegionExtension {
 public:
  std::string name() const override { return "count"; }
  Status hint(const ext::Hint& hint) override {
    ranges += hint.ranges.size();
    return {};
  }
  std::uint64_t ranges = 0;
};

// The whole agent on the sim runtime: frame over the sim network, decode, checks, hint().
void BM_AgentReadHintSim(benchmark::State& state) {
  sim::SimWorld world(1);
  sim::SimFabric fabric(world);
  sim::SimNode& mem = world.add_node("mem");
  sim::SimNode& gpu = world.add_node("gpu");
  sim::SimNic& nic = fabric.add_nic("mem");
  sim::SimMemoryPool pool(64ull << 20);
  agent::AgentConfig config;
  config.listen = {{"mem", 7000}};
  config.auth_secret = "k";
  config.boot_id = "boot";
  config.max_frame_bytes = 1u << 24;
  auto extension = std::make_unique<CountingExtension>();
  auto* counter = extension.get();
  agent::Agent agent(mem, pool, nic, std::move(extension), config);
  if (!agent.start().ok()) return state.SkipWithError("agent start");

  auto strand = gpu.make_strand("bench-client");
  std::shared_ptr<protocol::FramedConn> conn;
  std::vector<Json> replies;
  gpu.transport().connect({"mem", 7000}, *strand, [&](Result<std::shared_ptr<runtime::Conn>> c) {
    if (!c.ok()) return;
    conn = protocol::FramedConn::Make(std::move(c).value(), 1u << 24);
    conn->start(
        *strand, [&](Json m) { replies.push_back(std::move(m)); }, [](const Status&) {});
  });
  auto next = [&] {
    (void)world.run_until([&] { return !replies.empty(); });
    Json out = replies.empty() ? Json() : replies.front();
    if (!replies.empty()) replies.erase(replies.begin());
    return out;
  };
  auto call = [&](const Json& m) {
    conn->send(m);
    return next();
  };
  Json greeting = next();
  const std::string auth = protocol::hmac_sha256_hex("k", greeting["challenge"].get<std::string>());
  if (call({{"op", "hello"}, {"id", 1}, {"auth", auth}})["ok"] != true) {
    return state.SkipWithError("hello");
  }
  Json alloc = call({{"op", "alloc"}, {"id", 2}, {"size", kRanges * 4096}});
  const auto region = alloc["region"].get<std::uint64_t>();
  const auto handle = alloc["handle"].get<std::string>();
  if (call({{"op", "map"},
            {"id", 3},
            {"region", region},
            {"handle", handle},
            {"epoch", "boot"}})["ok"] != true) {
    return state.SkipWithError("map");
  }
  const std::string frame = protocol::encode_frame(read_hint_frame(region, handle, "boot"));
  for (auto _ : state) {
    conn->raw().send(frame);
    if (next()["ok"] != true) return state.SkipWithError("hint refused");
  }
  state.SetItemsProcessed(state.iterations() * kRanges);
  if (counter->ranges != state.iterations() * kRanges) state.SkipWithError("ranges lost");
  conn->abort();
  agent.stop();
  world.run_for(std::chrono::milliseconds(10));
}
BENCHMARK(BM_AgentReadHintSim);

// --- (b) hello + map on loopback TCP, thread runtime

class TcpClient {
 public:
  explicit TcpClient(int port) {
    fd_ = ::socket(AF_INET, SOCK_STREAM, 0);
    int one = 1;
    ::setsockopt(fd_, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
    sockaddr_in addr{};
    addr.sin_family = AF_INET;
    addr.sin_port = htons(static_cast<std::uint16_t>(port));
    addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    ok_ = ::connect(fd_, reinterpret_cast<sockaddr*>(&addr), sizeof addr) == 0;
  }
  ~TcpClient() { ::close(fd_); }
  bool ok() const { return ok_; }
  Json next() {
    while (frames_.empty()) {
      char buffer[65536];
      const ssize_t n = ::recv(fd_, buffer, sizeof buffer, 0);
      if (n <= 0 || !decoder_.feed(std::string_view(buffer, n), frames_).ok()) return Json();
    }
    Json m = Json::parse(frames_.front());
    frames_.erase(frames_.begin());
    return m;
  }
  Json call(const Json& m) {
    const std::string frame = protocol::encode_frame(m.dump());
    if (::send(fd_, frame.data(), frame.size(), MSG_NOSIGNAL) != static_cast<ssize_t>(frame.size()))
      return Json();
    return next();
  }

 private:
  int fd_ = -1;
  bool ok_ = false;
  protocol::FrameDecoder decoder_;
  std::vector<std::string> frames_;
};

struct TcpAgent {
  verbs::ThreadRuntime rt{verbs::ThreadRuntime::Options{runtime::LogLevel::kWarn}};
  std::unique_ptr<runtime::MemoryPool> pool;
  apps::NoneNic nic;
  std::unique_ptr<agent::Agent> agent;
  int port = 0;
  std::uint64_t region = 0;
  std::string handle;

  bool start() {
    auto p = verbs::AnonMemoryPool::create(16ull << 20, false);
    if (!p.ok()) return false;
    pool = std::move(p).value();
    agent::AgentConfig config;
    config.listen = {{"127.0.0.1", 0}};
    config.auth_secret = "k";
    config.boot_id = "tboot";
    agent = std::make_unique<agent::Agent>(rt, *pool, nic, std::make_unique<CountingExtension>(),
                                           config);
    if (!agent->start().ok()) return false;
    port = agent->listen_addresses().at(0).port;
    auto owner = hello();
    if (!owner) return false;
    Json alloc = owner->call({{"op", "alloc"}, {"id", 2}, {"size", 1 << 20}});
    region = alloc.value("region", std::uint64_t{0});
    handle = alloc.value("handle", std::string());
    return region != 0;
  }
  std::unique_ptr<TcpClient> hello() {
    auto c = std::make_unique<TcpClient>(port);
    if (!c->ok()) return nullptr;
    Json greeting = c->next();
    if (!greeting.contains("challenge")) return nullptr;
    const auto auth = protocol::hmac_sha256_hex("k", greeting["challenge"].get<std::string>());
    if (c->call({{"op", "hello"}, {"id", 1}, {"auth", auth}})["ok"] != true) return nullptr;
    return c;
  }
  Json map(TcpClient& c) {
    return c.call(
        {{"op", "map"}, {"id", 3}, {"region", region}, {"handle", handle}, {"epoch", "tboot"}});
  }
};

// A new connection each time: connect, greeting, hello (HMAC), map (registers: the
// previous connection's close dropped the only hold).
void BM_HelloMapTcp(benchmark::State& state) {
  TcpAgent a;
  if (!a.start()) return state.SkipWithError("agent start");
  for (auto _ : state) {
    auto c = a.hello();
    if (!c || a.map(*c)["ok"] != true) return state.SkipWithError("hello/map failed");
  }
  a.agent->stop();
}
BENCHMARK(BM_HelloMapTcp)->UseRealTime()->Unit(benchmark::kMicrosecond);

// One connection: map (registers) + release (deregisters) round trips.
void BM_MapReleaseTcp(benchmark::State& state) {
  TcpAgent a;
  if (!a.start()) return state.SkipWithError("agent start");
  auto c = a.hello();
  if (!c) return state.SkipWithError("hello");
  const Json release = {{"op", "release"}, {"id", 5}, {"region", a.region}, {"handle", a.handle}};
  for (auto _ : state) {
    if (a.map(*c)["ok"] != true || c->call(release)["ok"] != true) {
      return state.SkipWithError("map/release failed");
    }
  }
  a.agent->stop();
}
BENCHMARK(BM_MapReleaseTcp)->UseRealTime()->Unit(benchmark::kMicrosecond);

// Prints each run as usual, then the ranges/s ratios to the nlohmann baseline.
class RatioReporter : public benchmark::ConsoleReporter {
 public:
  void ReportRuns(const std::vector<Run>& runs) override {
    ConsoleReporter::ReportRuns(runs);
    for (const auto& run : runs) {
      auto it = run.counters.find("items_per_second");
      if (it != run.counters.end()) rates_[run.benchmark_name()] = it->second.value;
    }
  }
  void Finalize() override {
    ConsoleReporter::Finalize();
    auto base = rates_.find("BM_DecodeNlohmann");
    if (base == rates_.end() || base->second <= 0) return;
    std::printf("\nranges/s (ratio to BM_DecodeNlohmann of this run):\n");
    for (const auto& [name, rate] : rates_) {
      std::printf("  %-24s %8.2f M ranges/s  x%.1f\n", name.c_str(), rate / 1e6,
                  rate / base->second);
    }
  }

 private:
  std::map<std::string, double> rates_;
};

}  // namespace

int main(int argc, char** argv) {
  benchmark::Initialize(&argc, argv);
  if (benchmark::ReportUnrecognizedArguments(argc, argv)) return 1;
  RatioReporter reporter;
  benchmark::RunSpecifiedBenchmarks(&reporter);
  benchmark::Shutdown();
  return 0;
}
