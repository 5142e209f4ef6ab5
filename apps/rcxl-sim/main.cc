// rcxl-sim: the deterministic simulator's command line.
#include <CLI/CLI.hpp>
#include <cstdio>
#include <vector>

#include "backends/sim/sim_world.h"
#include "core/protocol/echo_service.h"

namespace {

// Two nodes ping each other through the core echo protocol on the simulated
// network; prints the trace hash (same seed => same hash).
int run_demo(std::uint64_t seed, int pings) {
  rcxl::sim::SimWorld world(seed);
  auto& server_node = world.add_node("memory-node");
  auto& client_node = world.add_node("gpu-node");
  auto server_strand = server_node.make_strand("echo");
  auto client_strand = client_node.make_strand("echo");
  rcxl::protocol::EchoServer server(server_node, *server_strand);
  if (auto addr = server.start({"memory-node", 7000}); !addr.ok()) {
    std::fprintf(stderr, "rcxl-sim: %s\n", addr.status().ToString().c_str());
    return 1;
  }
  rcxl::protocol::EchoClient client(client_node, *client_strand);
  bool ok = false;
  client.run({"memory-node", 7000}, pings, [&](rcxl::Result<std::vector<std::string>> r) {
    ok = r.ok() && static_cast<int>(r->size()) == pings;
  });
  const rcxl::Status status = world.run_until([&] { return ok; });
  if (!status.ok()) {
    std::fprintf(stderr, "rcxl-sim: demo failed: %s\n  reproduce: rcxl-sim demo --seed %llu\n",
                 status.ToString().c_str(), static_cast<unsigned long long>(seed));
    return 1;
  }
  std::printf("demo: %d pings echoed in %.3f ms of virtual time, %llu trace lines\n", pings,
              rcxl::runtime::to_millis(world.loop().now()),
              static_cast<unsigned long long>(world.trace().lines()));
  std::printf("trace hash: %s\n", world.trace().hash_hex().c_str());
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"rcxl-sim: run rcxl on the deterministic simulator (virtual time, seeded faults)"};
  app.require_subcommand(1);
  std::uint64_t seed = 1;
  int pings = 10;
  auto* demo = app.add_subcommand("demo", "ping between two simulated nodes; prints the trace hash");
  demo->add_option("--seed", seed, "the run's seed (same seed => same trace hash)");
  demo->add_option("--pings", pings, "how many pings")->check(CLI::Range(1, 1000000));
  CLI11_PARSE(app, argc, argv);
  if (demo->parsed()) return run_demo(seed, pings);
  return 0;
}
