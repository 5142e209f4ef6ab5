// Bandwidth probe: two VerbsNic instances in one process (like perftest's
// server and client in one VM), `depth` single-op posts kept in flight, `iters`
// ops of `size` bytes. Prints one line ci/rxe-vm compares with ib_*_bw.
#include <CLI/CLI.hpp>
#include <chrono>
#include <condition_variable>
#include <cstdio>
#include <mutex>

#include "backends/verbs/anon_memory_pool.h"
#include "backends/verbs/thread_strand.h"
#include "backends/verbs/verbs_nic.h"

namespace rcxl::verbs {
namespace {

struct ProbeConfig {
  std::string device = "rxe0";
  std::string op = "write";
  std::uint64_t size = 65536;
  unsigned depth = 128;
  std::uint64_t iters = 5000;
  bool zero_copy = true;
};

int run_probe(const ProbeConfig& config) {
  auto pool = AnonMemoryPool::create(config.size * config.depth, true);
  VerbsNicOptions memory_options;
  memory_options.device = config.device;
  auto memory = VerbsNic::open(memory_options);
  VerbsNicOptions client_options;
  client_options.device = config.device;
  client_options.listen = false;
  client_options.max_send_wr = std::max(config.depth, 1u);
  client_options.bounce_bytes_per_qp =
      std::max<std::uint64_t>(client_options.bounce_bytes_per_qp, config.size * config.depth);
  client_options.max_wr_bytes = std::max<std::uint64_t>(config.size, 1);
  auto client = VerbsNic::open(client_options);
  if (!pool || !memory || !client) {
    std::fprintf(stderr, "probe setup failed: %s %s %s\n", pool.status().ToString().c_str(),
                 memory.status().ToString().c_str(), client.status().ToString().c_str());
    return 1;
  }
  auto reg = (*memory)->register_memory(**pool, 0, (*pool)->size(),
                                        runtime::kAccessRemoteRead | runtime::kAccessRemoteWrite);
  std::vector<std::byte> local(config.size * config.depth);
  if (!reg || (config.zero_copy && !(*client)->register_local(local).ok())) {
    std::fprintf(stderr, "probe registration failed\n");
    return 1;
  }
  ThreadStrand strand("probe");
  std::mutex mu;
  std::condition_variable cv;
  std::shared_ptr<runtime::QueuePair> qp;
  Status failure;
  bool connected = false;
  (*client)->connect((*memory)->endpoint(), strand, [&](auto result) {
    std::lock_guard lock(mu);
    if (result.ok())
      qp = *result;
    else
      failure = result.status();
    connected = true;
    cv.notify_all();
  });
  {
    std::unique_lock lock(mu);
    cv.wait(lock, [&] { return connected; });
  }
  if (!qp) {
    std::fprintf(stderr, "connect failed: %s\n", failure.ToString().c_str());
    return 1;
  }
  const auto kind =
      config.op == "read" ? runtime::RdmaOp::Kind::kRead : runtime::RdmaOp::Kind::kWrite;
  std::uint64_t posted = 0;
  std::uint64_t completed = 0;
  std::function<void(unsigned)> post_one = [&](unsigned slot) {
    std::span<std::byte> buffer(local.data() + slot * config.size, config.size);
    runtime::RdmaOp op{kind, buffer, reg->addr + slot * config.size, reg->rkey, 0};
    ++posted;
    qp->post({op}, [&, slot](std::vector<Status> statuses) {
      std::lock_guard lock(mu);
      if (!statuses[0].ok() && failure.ok()) failure = statuses[0];
      ++completed;
      if (posted < config.iters && failure.ok()) post_one(slot);
      cv.notify_all();
    });
  };
  const auto start = std::chrono::steady_clock::now();
  {
    std::lock_guard lock(mu);
    for (unsigned slot = 0; slot < config.depth && posted < config.iters; ++slot) post_one(slot);
  }
  {
    std::unique_lock lock(mu);
    cv.wait(lock, [&] { return completed == posted && (posted == config.iters || !failure.ok()); });
  }
  const double seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  if (!failure.ok()) {
    std::fprintf(stderr, "probe op failed: %s\n", failure.ToString().c_str());
    return 1;
  }
  const double gbps = static_cast<double>(config.size) * config.iters * 8 / seconds / 1e9;
  std::printf(
      "@@ rcxl_probe op=%s size=%llu depth=%u iters=%llu zero_copy=%d seconds=%.3f gbps=%.4f\n",
      config.op.c_str(), static_cast<unsigned long long>(config.size), config.depth,
      static_cast<unsigned long long>(config.iters), config.zero_copy ? 1 : 0, seconds, gbps);
  return 0;
}

}  // namespace
}  // namespace rcxl::verbs

int main(int argc, char** argv) {
  rcxl::verbs::ProbeConfig config;
  CLI::App app{"RDMA bandwidth probe over VerbsNic (compare with ib_read_bw/ib_write_bw)"};
  app.add_option("--device", config.device, "RDMA device")->capture_default_str();
  app.add_option("--op", config.op, "read or write")
      ->check(CLI::IsMember({"read", "write"}))
      ->capture_default_str();
  app.add_option("--size", config.size, "bytes per op (perftest -s)")
      ->check(CLI::Range(1, 1 << 30))
      ->capture_default_str();
  app.add_option("--depth", config.depth, "ops in flight (perftest -t)")
      ->check(CLI::Range(1, 4096))
      ->capture_default_str();
  app.add_option("--iters", config.iters, "ops in total (perftest -n)")
      ->check(CLI::Range(1, 100000000))
      ->capture_default_str();
  app.add_flag("!--staged", config.zero_copy,
               "copy through the staging buffer (no register_local)");
  CLI11_PARSE(app, argc, argv);
  return rcxl::verbs::run_probe(config);
}
