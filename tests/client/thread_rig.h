// Client tests on the thread runtime (real OS threads, TCP on loopback): a
// directory server, and one agent whose NIC is a LoopbackNic, so stores and
// loads move bytes without RDMA.
#pragma once

#include <gtest/gtest.h>

#include <future>
#include <memory>
#include <string>

#include "backends/verbs/anon_memory_pool.h"
#include "backends/verbs/thread_runtime.h"
#include "core/agent/agent.h"
#include "core/client/config.h"
#include "core/directory/directory_client.h"
#include "core/directory/directory_server.h"
#include "tests/client/loopback_nic.h"

namespace rcxl::client::testing {

// A directory server on the thread runtime and one client for everybody to share.
struct DirectoryOnThreads {
  verbs::ThreadRuntime rt{verbs::ThreadRuntime::Options{.log_level = runtime::LogLevel::kError}};
  std::unique_ptr<runtime::Strand> server_strand = rt.make_strand("directory-server");
  directory::DirectoryServer server{
      rt, *server_strand, {.directory = {}, .secret = "s", .max_frame_bytes = 1u << 20}};
  std::unique_ptr<runtime::Strand> client_strand = rt.make_strand("directory-client");
  std::shared_ptr<directory::DirectoryClient> shared;
  runtime::Address address;

  Status start() {
    std::promise<Result<runtime::Address>> started;
    server_strand->post([&] { started.set_value(server.start({"127.0.0.1", 0})); });
    auto bound = started.get_future().get();
    if (!bound.ok()) return bound.status();
    address = *bound;
    shared = std::make_shared<directory::DirectoryClient>(
        rt, *client_strand, directory::RpcConnection::Options{.address = address, .secret = "s"});
    return {};
  }
  ~DirectoryOnThreads() {
    std::promise<void> stopped;
    server_strand->post([&] {
      server.stop();
      stopped.set_value();
    });
    stopped.get_future().wait();
  }
};

// The directory and one agent (16 MiB anon pool, no extension) on threads.
struct AgentOnThreads {
  DirectoryOnThreads d;
  LoopbackNic nic;
  std::unique_ptr<runtime::MemoryPool> pool;
  std::unique_ptr<agent::Agent> agent;

  // `latency`: how long each RDMA op takes on the NIC's thread.
  explicit AgentOnThreads(runtime::Duration latency = runtime::Duration::zero()) : nic(latency) {
    EXPECT_TRUE(d.start().ok());
    auto p = verbs::AnonMemoryPool::create(16ull << 20, false);
    EXPECT_TRUE(p.ok()) << p.status().ToString();
    pool = std::move(p).value();
    agent::AgentConfig config;
    config.listen = {{"127.0.0.1", 0}};
    config.auth_secret = "s";
    config.boot_id = "thread-boot";
    agent = std::make_unique<agent::Agent>(d.rt, *pool, nic, nullptr, config);
    EXPECT_TRUE(agent->start().ok());
  }
  ~AgentOnThreads() { agent.reset(); }

  Config config() const {
    Config c;
    c.directory = d.address;
    c.agents = {agent->listen_addresses().at(0)};
    c.secret = "s";
    c.chunk_size_bytes = 4096;
    c.region_size_bytes = 1 << 20;
    return c;
  }
};

}  // namespace rcxl::client::testing
