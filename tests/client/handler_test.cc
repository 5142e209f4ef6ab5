// Handler's data path against the real agent (recording extension) on the sim
// runtime: write-then-register, prefix loads, fresh maps, boot changes.
#include "core/client/handler.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <optional>

#include "tests/client/client_rig.h"
#include "tests/forwarding_nic.h"

namespace rcxl::client::testing {
namespace {

// The agent restarts on the same node boot without its region table (anon:
// memory): region ids start again at 1 and nothing tells clients.
Status restart_without_region_table(MemoryNode& mem,
                                    std::unique_ptr<ext::RegionExtension> extension = nullptr) {
  mem.agent->stop();
  agent::AgentConfig config;
  config.listen = {mem.address()};
  config.auth_secret = kSecret;
  config.boot_id = "boot-of-mem";  // the same node boot: no boot change to see
  mem.agent =
      std::make_unique<agent::Agent>(*mem.node, *mem.pool, *mem.nic, std::move(extension), config);
  return mem.agent->start();
}

// Someone saw the boot `key` was stored under replaced (the agent itself still
// serves it): the directory retires that boot. Returns the key's location.
directory::Location retire_boot_of(ClientRig& rig, const std::string& key) {
  auto& directory = rig.directory_server->directory();
  const auto stored_at = directory.find(key);
  if (!stored_at) {
    ADD_FAILURE() << key << " is not in the directory";
    return {};
  }
  EXPECT_TRUE(
      directory.boot_changed(stored_at->agent, stored_at->boot + "~9", stored_at->boot).ok());
  return *stored_at;
}

// SPEC R1.2 (review, session 30): a location is a peer's number too. One
// longer than a chunk (registered by another client of the group) was read
// whole: up to a region per key. It is a miss now, counted.
TEST(Handler, R1_2_ALocationLongerThanAChunkIsAMissNotARead) {
  ClientRig rig;
  rig.add_memory("mem");
  Handler& h = rig.handler(rig.config());
  ASSERT_EQ(rig.store(h, {item("k0", "alpha")})->stored, 1u);
  auto& directory = rig.directory_server->directory();
  directory::Location big = *directory.find("k0");
  big.length = h.config().region_size_bytes - big.offset;  // inside the region's mapping
  ASSERT_TRUE(directory.register_key("big", big).ok());
  directory::Location chunk = big;
  chunk.length = h.config().chunk_size_bytes;  // a whole chunk is still a value
  ASSERT_TRUE(directory.register_key("chunk", chunk).ok());
  Handler& reader = rig.handler(rig.config());
  auto loaded = rig.load(reader, {"big"});
  ASSERT_TRUE(loaded.ok()) << loaded.status().ToString();
  EXPECT_EQ(loaded->values.size(), 0u);
  EXPECT_EQ(reader.stats().oversized_locations, 1u);
  EXPECT_EQ(reader.stats().reads_posted, 0u);
  loaded = rig.load(reader, {"chunk"});
  ASSERT_TRUE(loaded.ok()) << loaded.status().ToString();
  ASSERT_EQ(loaded->values.size(), 1u);
  EXPECT_EQ(loaded->values[0].size(), h.config().chunk_size_bytes);
  EXPECT_EQ(reader.stats().oversized_locations, 1u);
}

// Read mappings are cached per (agent, region, read handle), and a freed
// region's entry was never read again: the cache is bounded
// (read_map_cache_limit), and a reconnect to one agent drops only its own
// (review, session 30: a hello to any agent cleared every agent's).
TEST(Handler, R1_2_TheReadMapCacheIsBoundedAndAReconnectDropsOnlyItsAgents) {
  ClientRig rig;
  auto& mem = rig.add_memory("mem");
  rig.add_memory("mem2");
  Config on_mem2 = rig.config();
  on_mem2.first_agent = 1;
  ASSERT_EQ(rig.store(rig.handler(rig.config()), {item("a", "on-mem")})->stored, 1u);
  ASSERT_EQ(rig.store(rig.handler(on_mem2), {item("b", "on-mem2")})->stored, 1u);
  ASSERT_EQ(rig.directory_server->directory().find("b")->agent, "mem2:7000");
  Config small = rig.config();
  small.read_map_cache_limit = 1;
  Handler& tight = rig.handler(small);
  for (const char* key : {"a", "b", "a"}) {
    auto loaded = rig.load(tight, {key});
    ASSERT_TRUE(loaded.ok()) << loaded.status().ToString();
    EXPECT_EQ(loaded->values.size(), 1u) << key;
    EXPECT_EQ(tight.regions().read_maps_cached(), 1u) << key;
  }
  Handler& reader = rig.handler(rig.config());
  ASSERT_EQ(rig.load(reader, {"a"})->values.size(), 1u);
  ASSERT_EQ(rig.load(reader, {"b"})->values.size(), 1u);
  EXPECT_EQ(reader.regions().read_maps_cached(), 2u);
  rig.world.network().drop_connections("mem2");
  rig.world.run_for(5ms);
  // The first READ goes through the mapping mem2 dropped with the connection:
  // a miss, which drops that entry; the next load says hello again and maps.
  EXPECT_EQ(rig.load(reader, {"b"})->values.size(), 0u);
  EXPECT_EQ(reader.stats().remote_access_errors, 1u);
  ASSERT_EQ(rig.load(reader, {"b"})->values.size(), 1u);
  const auto maps = mem.agent->metrics().maps;
  ASSERT_EQ(rig.load(reader, {"a"})->values.size(), 1u);
  EXPECT_EQ(mem.agent->metrics().maps, maps) << "mem's read map was dropped by mem2's hello";
  EXPECT_EQ(reader.regions().read_maps_cached(), 2u);
}

TEST(Handler, R1_6_StoreThenLoadMovesRealBytesAndReleasesTheLease) {
  ClientRig rig;
  rig.add_memory("mem");
  Handler& h = rig.handler(rig.config());
  auto stored = rig.store(h, {item("k0", "alpha"), item("k1", "beta")});
  ASSERT_TRUE(stored.ok()) << stored.status().ToString();
  EXPECT_EQ(stored->stored, 2u);
  // Another reader (its own handler, its own connections) gets the bytes.
  Handler& reader = rig.handler(rig.config());
  auto loaded = rig.load(reader, {"k0", "k1", "missing", "k0"});
  ASSERT_TRUE(loaded.ok()) << loaded.status().ToString();
  ASSERT_EQ(loaded->values.size(), 2u);  // prefix: stops at the first miss
  EXPECT_EQ(text_of(loaded->values[0]), "alpha");
  EXPECT_EQ(text_of(loaded->values[1]), "beta");
  EXPECT_EQ(reader.stats().read_batches, 1u);  // one batch per agent
  rig.world.run_for(10ms);
  EXPECT_EQ(rig.directory_server->directory().open_leases(), 0u);
}

// docs/agent.md, *RDMA connect proofs*: against an agent started with
// --rdma-auth proof, a writer and a reader connect their queue pairs with the
// proof of their control connections and move the bytes as before.
TEST(Handler, R1_6_QueuePairsCarryTheirProofToAnAgentThatAsksForOne) {
  ClientRig rig;
  rig.add_memory("mem", Json::object(), 256ull << 20,
                 [](agent::AgentConfig& c) { c.rdma_connect_proofs = true; });
  Handler& writer = rig.handler(rig.config());
  auto stored = rig.store(writer, {item("k0", "alpha")});
  ASSERT_TRUE(stored.ok()) << stored.status().ToString();
  EXPECT_EQ(stored->stored, 1u);
  Handler& reader = rig.handler(rig.config());
  auto loaded = rig.load(reader, {"k0"});
  ASSERT_TRUE(loaded.ok()) << loaded.status().ToString();
  ASSERT_EQ(loaded->values.size(), 1u);
  EXPECT_EQ(text_of(loaded->values[0]), "alpha");
}

// The sim RNIC, but the queue pairs made before break_all() fail every post
// with kUnavailable, as a verbs QP does whose reconnect the agent rejected
// (its proof names a control connection since replaced).
class BreakableNic final : public rcxl::testing::ForwardingNic {
 public:
  using ForwardingNic::ForwardingNic;
  void connect_with_proof(const std::string& endpoint, runtime::Strand& strand, std::string proof,
                          ConnectHandler done) override {
    ++connects;
    inner_.connect_with_proof(
        endpoint, strand, std::move(proof),
        [this, done = std::move(done)](Result<std::shared_ptr<runtime::QueuePair>> qp) {
          if (!qp.ok()) return done(std::move(qp));
          done(std::shared_ptr<runtime::QueuePair>(
              std::make_shared<Breakable>(std::move(qp).value(), broken_before_, connects)));
        });
  }
  void break_all() { broken_before_ = std::make_shared<int>(connects); }
  int connects = 0;

 private:
  class Breakable final : public runtime::QueuePair {
   public:
    Breakable(std::shared_ptr<runtime::QueuePair> inner, std::shared_ptr<int>& broken_before,
              int number)
        : inner_(std::move(inner)), broken_before_(broken_before), number_(number) {}
    void post(std::vector<runtime::RdmaOp> ops, CompletionHandler done) override {
      if (broken_before_ && number_ <= *broken_before_) {
        return done(std::vector<Status>(ops.size(),
                                        Error(ErrorCode::kUnauthenticated, "the peer rejected")));
      }
      inner_->post(std::move(ops), std::move(done));
    }
    std::string peer() const override { return inner_->peer(); }

   private:
    std::shared_ptr<runtime::QueuePair> inner_;
    std::shared_ptr<int>& broken_before_;
    int number_;
  };
  std::shared_ptr<int> broken_before_;
};

// docs/client.md, *The data path backs off*: an agent whose control
// connection answers but whose RDMA endpoint does not was asked for a connect
// by every store, and its free pages were used first, so stores never moved
// to another agent: each one failed. A failed connect now keeps stores away
// from it for unreachable_backoff (its pages parked, no region allocated
// there), loads of its keys miss at once, and it is tried again after.
TEST(Handler, R1_6_AnAgentWhoseRdmaEndpointIsUnreachableGetsNoStoresForTheBackoff) {
  ClientRig rig;
  auto& mem = rig.add_memory("mem");
  rig.add_memory("mem2");
  const Config config = rig.config();
  ASSERT_EQ(rig.store(rig.handler(config), {item("old", "old-bytes")})->stored, 1u);
  ASSERT_EQ(rig.directory_server->directory().find("old")->agent, "mem:7000");
  BreakableNic nic(rig.gpu_nic);
  Handler h(rig.gpu, config, nic);
  mem.nic->set_accepting(false);
  auto first = rig.store(h, {item("k0", "v0")});  // a region on mem, then no queue pair
  ASSERT_TRUE(first.ok()) << first.status().ToString();
  EXPECT_EQ(first->stored, 0u);
  EXPECT_EQ(first->first_failure.code(), ErrorCode::kUnavailable);
  EXPECT_EQ(nic.connects, 1);
  for (int i = 1; i <= 5; ++i) {
    const std::string key = "k" + std::to_string(i);
    auto stored = rig.store(h, {item(key, "v" + std::to_string(i))});
    ASSERT_TRUE(stored.ok()) << stored.status().ToString();
    EXPECT_EQ(stored->stored, 1u) << key << ": " << stored->first_failure.ToString();
    auto where = rig.directory_server->directory().find(key);
    ASSERT_TRUE(where.has_value()) << key;
    EXPECT_EQ(where->agent, "mem2:7000") << key;
  }
  EXPECT_EQ(nic.connects, 2);  // mem2's
  EXPECT_EQ(h.stats().rdma_pauses, 1u);
  const auto maps = mem.agent->metrics().maps;
  auto missed = rig.load(h, {"old"});
  ASSERT_TRUE(missed.ok()) << missed.status().ToString();
  EXPECT_TRUE(missed->values.empty());
  EXPECT_EQ(missed->stopped_by.code(), ErrorCode::kUnavailable);
  EXPECT_EQ(nic.connects, 2);                  // asked nothing of mem's endpoint
  EXPECT_EQ(mem.agent->metrics().maps, maps);  // nor mapped its region to read
  // After the backoff mem is tried again, and its parked pages come first.
  mem.nic->set_accepting(true);
  rig.world.run_for(config.unreachable_backoff + 1ms);
  auto loaded = rig.load(h, {"old"});
  ASSERT_TRUE(loaded.ok()) << loaded.status().ToString();
  ASSERT_EQ(loaded->values.size(), 1u);
  EXPECT_EQ(text_of(loaded->values[0]), "old-bytes");
  ASSERT_EQ(rig.store(h, {item("k6", "v6")})->stored, 1u);
  EXPECT_EQ(rig.directory_server->directory().find("k6")->agent, "mem:7000");
  EXPECT_EQ(nic.connects, 3);
}

// With every agent's RDMA endpoint out of reach a store fails without a connect, and
// says which endpoint and what to check.
TEST(Handler, R1_6_AStoreWithNoReachableEndpointFailsWithoutAConnectSayingWhy) {
  ClientRig rig;
  auto& mem = rig.add_memory("mem");
  BreakableNic nic(rig.gpu_nic);
  Handler h(rig.gpu, rig.config(), nic);
  mem.nic->set_accepting(false);
  ASSERT_EQ(rig.store(h, {item("k0", "v0")})->stored, 0u);
  const auto t0 = rig.world.loop().now();
  auto refused = rig.store(h, {item("k1", "v1")});
  EXPECT_LT(rig.world.loop().now() - t0, 1ms);  // a directory round trip, no connect
  ASSERT_FALSE(refused.ok());
  EXPECT_EQ(refused.status().code(), ErrorCode::kUnavailable);
  EXPECT_NE(refused.status().message().find("RDMA endpoint of mem:7000 (mem)"), std::string::npos)
      << refused.status().ToString();
  EXPECT_EQ(nic.connects, 1);
}

// The same once a queue pair was made: the agent's process ended and nothing
// listens on its endpoint, so every op of the kept queue pair fails
// unavailable. The queue pair is dropped; the next store's connect fails and
// starts the backoff (ops that failed in a restart say nothing of whether the
// endpoint is back); then stores go to mem2, where each used to pay a
// reconnect on mem and fail.
TEST(Handler, R1_6_AKeptQueuePairWhosePeerIsGoneStartsTheBackoff) {
  ClientRig rig;
  auto& mem = rig.add_memory("mem");
  rig.add_memory("mem2");
  BreakableNic nic(rig.gpu_nic);
  Handler h(rig.gpu, rig.config(), nic);
  ASSERT_EQ(rig.store(h, {item("k0", "v0")})->stored, 1u);
  ASSERT_EQ(rig.directory_server->directory().find("k0")->agent, "mem:7000");
  mem.nic->set_accepting(false);
  mem.nic->end_process();
  rig.world.run_for(1ms);                       // its DREQ arrives
  for (const std::string key : {"k1", "k2"}) {  // the kept QP's post, then the connect
    auto failed = rig.store(h, {item(key, "v")});
    ASSERT_TRUE(failed.ok()) << failed.status().ToString();
    EXPECT_EQ(failed->stored, 0u) << key;
    EXPECT_EQ(failed->first_failure.code(), ErrorCode::kUnavailable) << key;
  }
  for (int i = 3; i <= 6; ++i) {
    const std::string key = "k" + std::to_string(i);
    auto stored = rig.store(h, {item(key, "v")});
    ASSERT_TRUE(stored.ok()) << stored.status().ToString();
    EXPECT_EQ(stored->stored, 1u) << key << ": " << stored->first_failure.ToString();
    auto where = rig.directory_server->directory().find(key);
    ASSERT_TRUE(where.has_value()) << key;
    EXPECT_EQ(where->agent, "mem2:7000") << key;
  }
  EXPECT_EQ(nic.connects, 3);  // mem, the failed one to mem, mem2
  EXPECT_EQ(h.stats().rdma_pauses, 1u);
}

// docs/agent.md, *RDMA connect proofs*: a queue pair whose connection broke
// and could not be made again is dropped after the post that found it, so the
// next store connects anew (with the proof of the current control connection).
TEST(Handler, R1_6_AQueuePairThatCannotReconnectIsReplacedOnTheNextUse) {
  ClientRig rig;
  rig.add_memory("mem");
  BreakableNic nic(rig.gpu_nic);
  Handler h(rig.gpu, rig.config(), nic);
  ASSERT_TRUE(rig.store(h, {item("k0", "alpha")}).ok());
  EXPECT_EQ(nic.connects, 1);
  nic.break_all();
  auto failed = rig.store(h, {item("k1", "beta")});
  EXPECT_TRUE(!failed.ok() || failed->stored == 0)
      << (failed.ok() ? "" : failed.status().ToString());
  auto stored = rig.store(h, {item("k2", "gamma")});
  ASSERT_TRUE(stored.ok()) << stored.status().ToString();
  EXPECT_EQ(stored->stored, 1u);
  EXPECT_EQ(nic.connects, 2);
  auto loaded = rig.load(h, {"k2"});
  ASSERT_TRUE(loaded.ok());
  ASSERT_EQ(loaded->values.size(), 1u);
  EXPECT_EQ(text_of(loaded->values[0]), "gamma");
}

// docs/agent.md, *RDMA connect proofs*: after an agent restart the proof the
// client kept names a control connection that closed with the old process.
// A queue pair connecting with it was refused for good: nothing made the
// client say hello again, so every store failed (review, session 26).
TEST(Handler, R1_3_AQueuePairAfterAnAgentRestartConnectsWithTheNewHellosProof) {
  ClientRig rig;
  agent::AgentConfig agent_config;
  auto& mem = rig.add_memory("mem", Json::object(), 256ull << 20, [&](agent::AgentConfig& c) {
    c.rdma_connect_proofs = true;
    agent_config = c;
  });
  BreakableNic nic(rig.gpu_nic);
  Handler h(rig.gpu, rig.config(), nic);
  ASSERT_EQ(rig.store(h, {item("k0", "alpha")})->stored, 1u);
  // The agent process restarts: its control connections close, its challenges are new.
  mem.agent->stop();
  mem.agent.reset();
  mem.agent = std::make_unique<agent::Agent>(*mem.node, *mem.pool, *mem.nic, nullptr, agent_config);
  ASSERT_TRUE(mem.agent->start().ok());
  nic.break_all();  // its queue pairs went with it
  (void)rig.store(h, {item("k1", "beta")});
  std::size_t stored = 0;
  for (int i = 2; i < 6 && stored == 0; ++i) {
    auto r = rig.store(h, {item("k" + std::to_string(i), "gamma")});
    if (r.ok()) stored = r->stored;
  }
  EXPECT_EQ(stored, 1u);
}

// The same after a restart that turns proofs on: the hello the client kept
// says the agent wants none, so it connected with none, was refused, and
// nothing made it say hello again (diff review, session 26).
TEST(Handler, R1_3_AnAgentThatRestartsAskingForProofsGetsThem) {
  ClientRig rig;
  agent::AgentConfig agent_config;
  auto& mem = rig.add_memory("mem", Json::object(), 256ull << 20,
                             [&](agent::AgentConfig& c) { agent_config = c; });
  BreakableNic nic(rig.gpu_nic);
  Handler h(rig.gpu, rig.config(), nic);
  ASSERT_EQ(rig.store(h, {item("k0", "alpha")})->stored, 1u);
  mem.agent->stop();
  mem.agent.reset();
  agent_config.rdma_connect_proofs = true;
  mem.agent = std::make_unique<agent::Agent>(*mem.node, *mem.pool, *mem.nic, nullptr, agent_config);
  ASSERT_TRUE(mem.agent->start().ok());
  nic.break_all();
  std::size_t stored = 0;
  for (int i = 1; i < 6 && stored == 0; ++i) {
    auto r = rig.store(h, {item("k" + std::to_string(i), "gamma")});
    if (r.ok()) stored = r->stored;
  }
  EXPECT_EQ(stored, 1u);
}

// A NIC whose first `refusals` connects the peer refuses (a proof it does not take).
class RefusingNic final : public rcxl::testing::ForwardingNic {
 public:
  RefusingNic(runtime::Nic& inner, int refusals) : ForwardingNic(inner), refusals_(refusals) {}
  void connect_with_proof(const std::string& endpoint, runtime::Strand& strand, std::string proof,
                          ConnectHandler done) override {
    if (refusals_-- > 0) {
      return strand.post([done] { done(Error(ErrorCode::kUnauthenticated, "proof refused")); });
    }
    inner_.connect_with_proof(endpoint, strand, std::move(proof), std::move(done));
  }

 private:
  int refusals_;
};

// A refused connect means the agent does not know the control connection
// whose proof it got (a half-open one, its peer restarted unseen): the client
// starts that connection over, so the next connect has a live proof. Before,
// a connection that stayed open was never found dead (diff review, session 26).
TEST(Handler, R1_3_ARefusedConnectStartsTheControlConnectionOver) {
  ClientRig rig;
  auto& mem = rig.add_memory("mem");
  RefusingNic nic(rig.gpu_nic, 1);
  Handler h(rig.gpu, rig.config(), nic);
  auto refused = rig.store(h, {item("k0", "alpha")});
  EXPECT_TRUE(!refused.ok() || refused->stored == 0u);
  rig.world.run_for(10ms);
  EXPECT_EQ(mem.agent->metrics().connections_closed, 1u);  // the map connection, given up
  // Its holds went with it: the next store may meet its region's old rkey once.
  std::size_t stored = 0;
  for (int i = 1; i < 4 && stored == 0; ++i) {
    auto r = rig.store(h, {item("k" + std::to_string(i), "beta")});
    if (r.ok()) stored = r->stored;
  }
  EXPECT_EQ(stored, 1u);
}

// Own regions come from the pool round robin from `first_agent` (mod the
// pool): clients with different starts spread their first regions.
TEST(Handler, R1_6_FirstAgentSpreadsClientsOverThePool) {
  ClientRig rig;
  rig.add_memory("mem0");
  rig.add_memory("mem1");
  auto regions = [&](const std::string& m) { return rig.memory[m].agent->metrics().regions; };
  Handler& a = rig.handler(rig.config());  // first_agent 0
  ASSERT_EQ(rig.store(a, {item("a", "x")})->stored, 1u);
  EXPECT_EQ(regions("mem0"), 1u);
  EXPECT_EQ(regions("mem1"), 0u);
  Config starts_at_1 = rig.config();
  starts_at_1.first_agent = 3;  // 3 mod 2
  Handler& b = rig.handler(starts_at_1);
  ASSERT_EQ(rig.store(b, {item("b", "y")})->stored, 1u);
  EXPECT_EQ(regions("mem0"), 1u);
  EXPECT_EQ(regions("mem1"), 1u);
  EXPECT_EQ(text_of(rig.load(a, {"b"})->values.at(0)), "y");
}

TEST(Handler, R1_1_FirstWriterWinsAndTheLoserGivesItsPageBack) {
  ClientRig rig;
  rig.add_memory("mem");
  Handler& a = rig.handler(rig.config());
  Handler& b = rig.handler(rig.config());
  ASSERT_EQ(rig.store(a, {item("k", "first")})->stored, 1u);
  const std::size_t free_before = b.free_pages();
  auto second = rig.store(b, {item("k", "second")});
  ASSERT_TRUE(second.ok());
  EXPECT_EQ(second->already_present, 1u);
  EXPECT_EQ(b.free_pages(), free_before == 0 ? 256u : free_before);  // 1 MiB of 4 KiB pages
  EXPECT_EQ(text_of(rig.load(b, {"k"})->values.at(0)), "first");
}

// A register the directory refuses because it retired the location's boot
// (an agent that came back into a boot the directory saw replaced) is not a
// key already there: the store reports it failed, not present, and the page
// goes back. Before, both read as "already present" (stored, for the engine).
// A directory that answers registers with booleans only (before session 19):
// the writer probes the refused keys to tell present from refused.
// The sim RNIC, counting the posts whose every WRITE completed: a test can stop
// the world between a store's WRITEs and its register.
class WriteCountingNic final : public rcxl::testing::ForwardingNic {
 public:
  using ForwardingNic::ForwardingNic;
  void connect_with_proof(const std::string& endpoint, runtime::Strand& strand, std::string proof,
                          ConnectHandler done) override {
    inner_.connect_with_proof(
        endpoint, strand, std::move(proof),
        [this, done = std::move(done)](Result<std::shared_ptr<runtime::QueuePair>> qp) {
          if (!qp.ok()) return done(std::move(qp));
          done(std::shared_ptr<runtime::QueuePair>(
              std::make_shared<Counting>(std::move(qp).value(), written)));
        });
  }
  int written = 0;

 private:
  class Counting final : public runtime::QueuePair {
   public:
    Counting(std::shared_ptr<runtime::QueuePair> inner, int& written)
        : inner_(std::move(inner)), written_(written) {}
    void post(std::vector<runtime::RdmaOp> ops, CompletionHandler done) override {
      inner_->post(std::move(ops), [this, done = std::move(done)](std::vector<Status> statuses) {
        if (std::all_of(statuses.begin(), statuses.end(), [](const Status& s) { return s.ok(); }))
          ++written_;
        done(std::move(statuses));
      });
    }
    std::string peer() const override { return inner_->peer(); }

   private:
    std::shared_ptr<runtime::QueuePair> inner_;
    int& written_;
  };
};

// A page parked under a retired boot whose region the agent then lost (its
// remap answered not_found, no boot change) is never stored into: when the
// agent's boot later moves, the store takes a live region's page instead of
// failing on the lost one's.
TEST(Handler, R6_1_APageParkedInARegionTheAgentLostIsNotStoredIntoAfterTheBootMoves) {
  ClientRig rig;
  auto& mem = rig.add_memory("mem");
  WriteCountingNic nic(rig.gpu_nic);
  Handler h(rig.gpu, rig.config(), nic);
  ASSERT_EQ(rig.store(h, {item("k0", "alpha")})->stored, 1u);
  const std::string old_boot = retire_boot_of(rig, "k0").boot;
  // k1's WRITE lands; before its register is answered (refused: the boot is
  // retired) the agent restarts without its region table, so the remap that
  // the refusal asks for finds the region gone.
  std::optional<Result<StoreResult>> k1;
  const int written = nic.written;
  h.store({item("k1", "beta")}, [&](Result<StoreResult> r) { k1 = std::move(r); });
  ASSERT_TRUE(rig.world.run_until([&] { return nic.written > written; }).ok());
  ASSERT_FALSE(k1.has_value());
  ASSERT_TRUE(restart_without_region_table(mem).ok());
  ASSERT_TRUE(rig.world.run_until([&] { return k1.has_value(); }).ok());
  ASSERT_TRUE(k1->ok()) << k1->status().ToString();
  EXPECT_EQ((*k1)->failed, 1u);
  rig.world.run_for(100ms);
  ASSERT_EQ(h.regions().regions_lost(), 1u);
  EXPECT_EQ(h.free_pages(), 0u);
  // The agent's boot moves (news from another connection, as a write wait's
  // hello would bring it): the refusal ends.
  h.regions().observe_peer_boot(mem.key(), old_boot, old_boot + "~1");
  rig.world.run_for(10ms);
  EXPECT_EQ(h.free_pages(), 0u);  // the parked page went with its region
}

TEST(Handler, R6_1_ARegisterRefusedForARetiredBootIsAFailureNotAlreadyPresent) {
  ClientRig rig(11, {}, /*booleans_only=*/true);
  rig.add_memory("mem");
  rig.add_memory("mem2");
  Handler& h = rig.handler(rig.config());  // its regions on mem (first_agent 0)
  ASSERT_EQ(rig.store(h, {item("k0", "alpha")})->stored, 1u);
  retire_boot_of(rig, "k0");
  const std::size_t free_before = h.free_pages();
  auto r = rig.store(h, {item("k1", "beta"), item("k2", "gamma")});
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(r->stored, 0u);
  EXPECT_EQ(r->already_present, 0u);
  EXPECT_EQ(r->failed, 2u);
  EXPECT_EQ(r->first_failure.code(), ErrorCode::kBootChanged) << r->first_failure.ToString();
  EXPECT_NE(r->first_failure.message().find("'k1'"), std::string::npos)
      << r->first_failure.ToString();
  EXPECT_EQ(h.free_pages(), free_before);  // both pages went back
  EXPECT_TRUE(rig.load(h, {"k1"})->values.empty());
  // A key another writer (on mem2, whose boot is live) stored first still
  // reads as present, in the same batch.
  Config on_mem2 = rig.config();
  on_mem2.first_agent = 1;
  Handler& other = rig.handler(on_mem2);
  ASSERT_EQ(rig.store(other, {item("k3", "delta")})->stored, 1u);
  auto mixed = rig.store(h, {item("k3", "mine"), item("k4", "epsilon")});
  ASSERT_TRUE(mixed.ok());
  EXPECT_EQ(mixed->already_present, 1u);
  EXPECT_EQ(mixed->failed, 1u);
  // A key there after one that is not is asked on its own.
  auto after = rig.store(h, {item("k5", "zeta"), item("k3", "mine again")});
  ASSERT_TRUE(after.ok());
  EXPECT_EQ(after->already_present, 1u);
  EXPECT_EQ(after->failed, 1u);
  EXPECT_NE(after->first_failure.message().find("'k5'"), std::string::npos)
      << after->first_failure.ToString();
}

// The directory says why (outcomes): a register refused because the agent's
// boot was seen replaced fails at once, without a probe, and the writer's
// stores move to another agent; a key another writer stored first is present.
TEST(Handler, R6_1_ARegisterRefusedForARetiredBootMovesStoresToAnotherAgent) {
  ClientRig rig;
  rig.add_memory("mem");
  rig.add_memory("mem2");
  Handler& h = rig.handler(rig.config());  // its regions on mem (first_agent 0)
  ASSERT_EQ(rig.store(h, {item("k0", "alpha")})->stored, 1u);
  retire_boot_of(rig, "k0");
  const std::uint64_t calls = h.directory().calls();
  auto r = rig.store(h, {item("k1", "beta"), item("k2", "gamma")});
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(r->stored, 0u);
  EXPECT_EQ(r->failed, 2u);
  EXPECT_EQ(r->first_failure.code(), ErrorCode::kBootChanged) << r->first_failure.ToString();
  EXPECT_NE(r->first_failure.message().find("'k1'"), std::string::npos)
      << r->first_failure.ToString();
  EXPECT_EQ(h.directory().calls(), calls + 1);  // the register; no probe
  EXPECT_EQ(h.stats().boot_retired_refusals, 2u);
  EXPECT_EQ(h.free_pages(), 0u);  // mem's pages are out of use
  // The next store goes to mem2 and is stored; a key present stays present.
  Config on_mem2 = rig.config();
  on_mem2.first_agent = 1;
  Handler& other = rig.handler(on_mem2);
  ASSERT_EQ(rig.store(other, {item("k3", "delta")})->stored, 1u);
  auto next = rig.store(h, {item("k3", "mine"), item("k4", "epsilon")});
  ASSERT_TRUE(next.ok()) << next.status().ToString();
  EXPECT_EQ(next->already_present, 1u);
  EXPECT_EQ(next->stored, 1u);
  EXPECT_EQ(rig.directory_server->directory().find("k4")->agent, "mem2:7000");
  auto loaded = rig.load(h, {"k4"});
  ASSERT_TRUE(loaded.ok());
  ASSERT_EQ(loaded->values.size(), 1u);
  EXPECT_EQ(text_of(loaded->values[0]), "epsilon");
}

// With only that agent, stores fail saying why (no region allocated for
// pages the directory would refuse) until the refusal is lifted: after
// unreachable_backoff the parked pages are tried again, and once the agent's
// boot has moved the writer stores again.
TEST(Handler, R6_1_WithOnlyARetiredBootStoresFailSayingWhyUntilTheBootMoves) {
  ClientRig rig;
  auto& mem = rig.add_memory("mem", {{"generation_file", "/gen"}});
  Handler& h = rig.handler(rig.config());
  ASSERT_EQ(rig.store(h, {item("k0", "alpha")})->stored, 1u);
  retire_boot_of(rig, "k0");
  EXPECT_EQ(rig.store(h, {item("k1", "beta")})->failed, 1u);
  const std::uint64_t regions = h.stats().regions_allocated;
  auto refused = rig.store(h, {item("k2", "gamma")});
  ASSERT_FALSE(refused.ok());
  EXPECT_EQ(refused.status().code(), ErrorCode::kNoSpace);
  EXPECT_NE(refused.status().message().find("refuses the boot of mem:7000"), std::string::npos)
      << refused.status().ToString();
  EXPECT_EQ(h.stats().regions_allocated, regions);
  // Lifted while the boot is still refused: one store tries a parked page,
  // is refused again, and the page is parked again (no region allocated).
  rig.world.run_for(6s);
  auto again = rig.store(h, {item("k2", "gamma")});
  ASSERT_TRUE(again.ok()) << again.status().ToString();
  EXPECT_EQ(again->failed, 1u);
  EXPECT_EQ(h.stats().regions_allocated, regions);
  EXPECT_FALSE(rig.store(h, {item("k2", "gamma")}).ok());  // refused for another 5 s
  mem.set_generation("2");                                 // the agent's boot moves
  rig.world.run_for(6s);  // past the generation poll and the backoff
  // The first store after may meet the old registration (its WRITE fails and
  // shows the new boot); from then on the writer stores under the new boot.
  auto k3 = rig.store(h, {item("k3", "delta")});
  EXPECT_TRUE(!k3.ok() || k3->stored == 0u);
  rig.world.run_for(100ms);  // the map that failed WRITE asks for comes back
  auto stored = rig.store(h, {item("k4", "epsilon")});
  ASSERT_TRUE(stored.ok()) << stored.status().ToString();
  EXPECT_EQ(stored->stored, 1u);
}

// The directory's memory of boots is bounded: once it forgot the retired boot
// it takes registers under it again, and the writer, which tries its parked
// pages again after unreachable_backoff, stores there again without the
// agent's boot moving.
TEST(Handler, R6_1_AWriterStoresAgainOnceTheDirectoryForgotTheRetiredBoot) {
  ClientRig rig(11, {.max_boot_records = 3});
  rig.add_memory("mem");
  Handler& h = rig.handler(rig.config());
  ASSERT_EQ(rig.store(h, {item("k0", "alpha")})->stored, 1u);
  const directory::Location stored_at = retire_boot_of(rig, "k0");
  auto& directory = rig.directory_server->directory();
  EXPECT_EQ(rig.store(h, {item("k1", "beta")})->failed, 1u);
  // Other agents' boots push the retired one out of the directory's memory.
  for (int i = 0; i < 4; ++i) {
    ASSERT_TRUE(directory.boot_changed("other:" + std::to_string(i), "b2", "b1").ok());
  }
  ASSERT_TRUE(directory.register_key("probe", {stored_at.agent, stored_at.boot, 99, "rh", 0, 1})
                  .ok());  // the boot is taken again
  const std::uint64_t regions = h.stats().regions_allocated;
  rig.world.run_for(6s);
  auto stored = rig.store(h, {item("k2", "gamma")});
  ASSERT_TRUE(stored.ok()) << stored.status().ToString();
  EXPECT_EQ(stored->stored, 1u);
  EXPECT_EQ(h.stats().regions_allocated, regions);  // on a parked page
}

// A reader that trusts only its pool (only_pool_agents) takes a location
// naming another agent as a miss and never connects to that agent; by
// default it reaches any agent the directory names.
TEST(Handler, R6_1_AReaderOfOnlyItsPoolMissesAForeignAgentsKeys) {
  ClientRig rig;
  auto& mem = rig.add_memory("mem");
  auto& mem2 = rig.add_memory("mem2");
  Config on_mem2 = rig.config();
  on_mem2.first_agent = 1;
  Handler& writer = rig.handler(on_mem2);
  ASSERT_EQ(rig.store(writer, {item("k", "far")})->stored, 1u);
  Config pool_only = rig.config();
  pool_only.agents = {mem.address()};
  pool_only.only_pool_agents = true;
  Handler& careful = rig.handler(pool_only);
  auto missed = rig.load(careful, {"k"});
  ASSERT_TRUE(missed.ok()) << missed.status().ToString();
  EXPECT_TRUE(missed->values.empty());
  EXPECT_EQ(careful.stats().foreign_locations, 1u);
  EXPECT_EQ(careful.regions().known(mem2.key()), nullptr);  // never connected
  rig.world.run_for(10ms);
  EXPECT_EQ(rig.directory_server->directory().open_leases(), 0u);  // its lease went back
  Config trusting = pool_only;
  trusting.only_pool_agents = false;
  Handler& reader = rig.handler(trusting);
  EXPECT_EQ(text_of(rig.load(reader, {"k"})->values.at(0)), "far");
  // The scheduler's lookup counts what the load takes (review, session 32:
  // it promised the foreign hit, which the load then missed).
  ASSERT_EQ(rig.store(careful, {item("near", "mine")})->stored, 1u);
  auto lookup = [&](Handler& h) {
    std::optional<Result<std::size_t>> hits;
    h.lookup({"near", "k"}, [&](Result<std::size_t> r) { hits = std::move(r); });
    EXPECT_TRUE(rig.world.run_until([&] { return hits.has_value(); }).ok());
    return hits && hits->ok() ? **hits : std::size_t{99};
  };
  EXPECT_EQ(lookup(careful), 1u);
  EXPECT_EQ(rig.load(careful, {"near", "k"})->values.size(), 1u);
  EXPECT_EQ(lookup(reader), 2u);
}

TEST(Handler, R1_2_OversizeItemsAreRefusedAndChangeNothing) {
  ClientRig rig;
  rig.add_memory("mem");
  Handler& h = rig.handler(rig.config());
  auto r = rig.store(h, {item("k", std::string(4097, 'x'))});
  EXPECT_EQ(r.status().code(), ErrorCode::kBadRequest);
  EXPECT_EQ(h.stats().regions_allocated, 0u);
  EXPECT_EQ(rig.directory_server->directory().size(), 0u);
}

// A region smaller than a chunk holds no page: the store allocated region
// after region (each succeeding, each empty) until every agent was full.
TEST(Handler, R1_2_ARegionThatHoldsNoChunkIsRefusedWithoutAllocating) {
  ClientRig rig;
  auto& mem = rig.add_memory("mem");
  Config c = rig.config();
  c.chunk_size_bytes = 8192;
  c.region_size_bytes = 4096;
  Handler& h = rig.handler(c);
  auto r = rig.store(h, {item("k", "v")});
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), ErrorCode::kBadRequest);
  EXPECT_NE(r.status().message().find("raise region_size_bytes"), std::string::npos)
      << r.status().message();
  EXPECT_EQ(h.stats().regions_allocated, 0u);
  EXPECT_EQ(mem.agent->metrics().regions, 0u);
}

TEST(Handler, R5_1_OwnMapsCarryFreshUntilTheFirstReplyRetriesIncluded) {
  ClientRig rig;
  // Region 1's mapped() fails: the map is refused and retried, fresh each time.
  auto& mem = rig.add_memory("mem", {{"fail_mapped_regions", {1}}});
  Config c = rig.config();
  Handler& h = rig.handler(c);
  auto r = rig.store(h, {item("k", "v")});
  EXPECT_FALSE(r.ok());
  auto mapped = mem.log("mapped");
  ASSERT_EQ(mapped.size(), static_cast<std::size_t>(c.map_attempts));
  for (const auto& line : mapped) {
    EXPECT_EQ(line["region"], 1);
    EXPECT_EQ(line["fresh"], true);
  }
  EXPECT_EQ(h.regions().fresh_maps_sent(), static_cast<std::uint64_t>(c.map_attempts));
  // The next region maps at once, fresh.
  ASSERT_TRUE(rig.store(h, {item("k", "v")}).ok());
  mapped = mem.log("mapped");
  EXPECT_EQ(mapped.back()["region"], 2);
  EXPECT_EQ(mapped.back()["fresh"], true);
  const auto fresh_before = h.regions().fresh_maps_sent();
  const auto maps_before = h.regions().own_maps_sent();
  // After a reply, maps of that region (here after a reconnect) are not fresh.
  rig.world.network().drop_connections("mem");
  rig.world.run_for(10ms);
  std::optional<Result<AgentHello>> hello;
  h.strand().post([&] { h.regions().hello(mem.key(), [&](auto r) { hello = std::move(r); }); });
  ASSERT_TRUE(rig.wait(hello).ok());
  rig.world.run_for(10ms);
  EXPECT_GT(h.regions().own_maps_sent(), maps_before);
  EXPECT_EQ(h.regions().fresh_maps_sent(), fresh_before);
}

// Starts a 1 MiB alloc on the handler's strand; `out` gets its result.
void start_alloc(Handler& h, const std::string& agent, std::optional<Result<OwnRegion>>& out) {
  h.strand().post([&h, agent, &out] {
    h.regions().allocate(agent, 1 << 20, [&out](Result<OwnRegion> r) { out = std::move(r); });
  });
}
// A 1 MiB alloc, run to its end.
Result<OwnRegion> alloc_now(ClientRig& rig, Handler& h, const std::string& agent) {
  std::optional<Result<OwnRegion>> out;
  start_alloc(h, agent, out);
  return rig.wait(out);
}

// An alloc whose reply was lost (the connection dropped after the agent made
// the region) left a region nobody held, for good. Its token is asked again
// before the next alloc to that agent; the agent answers the same region,
// and the client frees it (docs/client.md, *Known limits*).
TEST(Handler, R1_5_AnAllocWhoseReplyWasLostIsAskedAgainAndItsRegionFreed) {
  ClientRig rig;
  auto& mem = rig.add_memory("mem");
  Handler& h = rig.handler(rig.config());
  ASSERT_EQ(rig.store(h, {item("a", "a-bytes")})->stored, 1u);  // region 1
  ASSERT_EQ(mem.agent->metrics().regions, 1u);
  std::optional<Result<OwnRegion>> lost;
  start_alloc(h, mem.key(), lost);
  // The agent made region 2; its reply is on the wire when the connection drops.
  ASSERT_TRUE(rig.world.run_until([&] { return mem.agent->metrics().regions == 2; }).ok());
  rig.world.network().drop_connections("mem");
  ASSERT_FALSE(rig.wait(lost).ok());
  EXPECT_EQ(h.regions().unanswered_allocs(), 1u);
  auto region = alloc_now(rig, h, mem.key());
  ASSERT_TRUE(region.ok()) << region.status().ToString();
  EXPECT_EQ(region->region, 3u);
  rig.world.run_for(10ms);
  EXPECT_EQ(mem.agent->metrics().allocs_answered_again, 1u);
  EXPECT_EQ(h.regions().unanswered_allocs_freed(), 1u);
  EXPECT_EQ(h.regions().unanswered_allocs(), 0u);
  EXPECT_EQ(mem.agent->metrics().regions, 2u);  // 1 and 3: region 2 went back
  EXPECT_EQ(text_of(rig.load(h, {"a"})->values.at(0)), "a-bytes");
}

// The free of a region an ask named is lost too: the token stays kept, and a
// later alloc asks again and frees it then.
TEST(Handler, R1_5_ARegionWhoseFreeWasLostIsAskedAboutAgain) {
  ClientRig rig;
  auto& mem = rig.add_memory("mem");
  Handler& h = rig.handler(rig.config());
  ASSERT_EQ(rig.store(h, {item("a", "a-bytes")})->stored, 1u);  // region 1
  std::optional<Result<OwnRegion>> lost;
  start_alloc(h, mem.key(), lost);
  ASSERT_TRUE(rig.world.run_until([&] { return mem.agent->metrics().regions == 2; }).ok());
  rig.world.network().drop_connections("mem");  // region 2's reply is lost
  ASSERT_FALSE(rig.wait(lost).ok());
  std::optional<Result<OwnRegion>> next;
  start_alloc(h, mem.key(), next);
  // The ask named region 2 and its free is on the wire: that is lost too.
  ASSERT_TRUE(rig.world.run_until([&] { return h.regions().unanswered_allocs_freed() == 1; }).ok());
  rig.world.network().drop_connections("mem");
  (void)rig.wait(next);
  rig.world.run_for(10ms);
  ASSERT_GE(h.regions().unanswered_allocs(), 1u);  // region 2's token is still kept
  for (int i = 0; i < 3 && h.regions().unanswered_allocs() > 0; ++i) {
    ASSERT_TRUE(alloc_now(rig, h, mem.key()).ok());
    rig.world.run_for(10ms);
  }
  EXPECT_EQ(h.regions().unanswered_allocs(), 0u);
  // Every region at the agent is one the client holds: none was left behind.
  EXPECT_EQ(mem.agent->metrics().regions, h.regions().own_regions().size());
}

// An alloc lost before the agent saw it made nothing: asked again (made_only)
// the agent says not_found and allocates nothing, so the alloc behind the
// question still finds room in a pool that holds one more region.
TEST(Handler, R1_5_AnAllocLostBeforeTheAgentSawItIsAskedAgainWithoutAllocating) {
  ClientRig rig;
  auto& mem = rig.add_memory("mem", Json::object(), 2u << 20);  // two 1 MiB regions
  Handler& h = rig.handler(rig.config());
  ASSERT_EQ(rig.store(h, {item("a", "a-bytes")})->stored, 1u);  // region 1
  std::optional<Result<OwnRegion>> lost;
  start_alloc(h, mem.key(), lost);
  rig.world.run_for(1us);  // the alloc is on the wire
  rig.world.network().drop_connections("mem");
  ASSERT_FALSE(rig.wait(lost).ok());
  ASSERT_EQ(mem.agent->metrics().regions, 1u);  // it never arrived
  ASSERT_EQ(h.regions().unanswered_allocs(), 1u);
  auto region = alloc_now(rig, h, mem.key());
  ASSERT_TRUE(region.ok()) << region.status().ToString();
  EXPECT_EQ(region->region, 2u);
  EXPECT_EQ(h.regions().unanswered_allocs(), 0u);
  EXPECT_EQ(h.regions().unanswered_allocs_freed(), 0u);
  EXPECT_EQ(mem.agent->metrics().regions, 2u);
}

TEST(Handler, R6_1_AfterABootChangeReadersMissAndOwnersAllocateAnew) {
  ClientRig rig;
  auto& mem = rig.add_memory("mem", {{"generation_file", "/gen"}});
  Handler& owner = rig.handler(rig.config());
  Handler& reader = rig.handler(rig.config());
  ASSERT_EQ(rig.store(owner, {item("old", "stale-bytes")})->stored, 1u);
  auto before = rig.load(reader, {"old"});
  ASSERT_EQ(before->values.size(), 1u);
  EXPECT_EQ(text_of(before->values[0]), "stale-bytes");

  mem.set_generation("2");  // a device reset: the agent's boot moves on
  rig.world.run_for(300ms);
  auto after = rig.load(reader, {"old"});
  ASSERT_TRUE(after.ok());
  EXPECT_TRUE(after->values.empty());  // a miss, never the stale bytes

  // The owner's WRITE through the gone registration fails; the map that
  // follows learns the boot; its regions go back; the next store allocates anew.
  auto failed = rig.store(owner, {item("new", "fresh-bytes")});
  rig.world.run_for(50ms);
  EXPECT_EQ(owner.regions().boot_changes(), 1u)
      << (failed.ok() ? std::to_string(failed->stored) + "/" + std::to_string(failed->failed)
                      : failed.status().ToString())
      << " remote errors " << owner.stats().remote_access_errors;
  EXPECT_TRUE(owner.regions().own_regions().empty() ||
              owner.regions().own_regions().begin()->first.second != 1u);
  if (!failed.ok() || failed->stored == 0) {
    ASSERT_EQ(rig.store(owner, {item("new", "fresh-bytes")})->stored, 1u);
  }
  auto mapped = mem.log("mapped");
  ASSERT_GE(mapped.size(), 2u);
  EXPECT_NE(mapped.back()["region"], 1);
  EXPECT_EQ(mapped.back()["fresh"], true);  // fresh again only for the new region
  rig.world.run_for(10ms);
  EXPECT_TRUE(rig.load(reader, {"old"})->values.empty());
  auto fresh = rig.load(reader, {"new"});
  ASSERT_EQ(fresh->values.size(), 1u);
  EXPECT_EQ(text_of(fresh->values[0]), "fresh-bytes");
  EXPECT_FALSE(rig.directory_server->directory().find("old").has_value());
}

// SPEC R6.3: a READ through a dropped registration fails, and the load says
// why its hits ended there (rcxl-kv prints it), not only that they did.
TEST(Handler, R6_3_ALoadWhoseReadFailedSaysWhyTheHitsEnded) {
  ClientRig rig;
  auto& mem = rig.add_memory("mem", {{"generation_file", "/gen"}});
  Handler& owner = rig.handler(rig.config());
  Handler& reader = rig.handler(rig.config());
  ASSERT_EQ(rig.store(owner, {item("k", "bytes")})->stored, 1u);
  auto warm = rig.load(reader, {"k"});  // maps the region: the next load reads at once
  ASSERT_EQ(warm->values.size(), 1u);
  EXPECT_TRUE(warm->stopped_by.ok());
  auto plain_miss = rig.load(reader, {"nothing"});
  EXPECT_TRUE(plain_miss->stopped_by.ok());

  mem.set_generation("2");  // the agent drops its registrations on its next poll
  rig.world.run_for(150ms);
  auto after = rig.load(reader, {"k"});
  ASSERT_TRUE(after.ok());
  EXPECT_TRUE(after->values.empty());
  EXPECT_EQ(after->stopped_by.code(), ErrorCode::kRemoteAccess) << after->stopped_by.ToString();

  // The owner's WRITE through the dropped registration: counted and explained.
  auto store = rig.store(owner, {item("k2", "more")});
  ASSERT_TRUE(store.ok());
  EXPECT_EQ(store->failed, 1u);
  EXPECT_FALSE(store->first_failure.ok());
}

// An owner's own keys are read through its own region's mapping: a READ that
// met the dropped registration only forgot read-handle mappings, so every
// load of those keys failed the same way until a store happened to write into
// the region (review, session 26). It maps the region again, as a failed
// WRITE does, and learns the boot.
TEST(Handler, R6_3_AnOwnersFailedReadMapsItsOwnRegionAgain) {
  ClientRig rig;
  auto& mem = rig.add_memory("mem", {{"generation_file", "/gen"}});
  Config config = rig.config();
  config.read_hints = false;  // no hint's stale_epoch tells the boot first
  config.write_hints = false;
  Handler& owner = rig.handler(config);
  ASSERT_EQ(rig.store(owner, {item("k", "bytes")})->stored, 1u);
  mem.set_generation("2");
  rig.world.run_for(300ms);
  auto failed = rig.load(owner, {"k"});
  ASSERT_TRUE(failed.ok());
  EXPECT_EQ(failed->stopped_by.code(), ErrorCode::kRemoteAccess) << failed->stopped_by.ToString();
  rig.world.run_for(50ms);
  EXPECT_EQ(owner.regions().boot_changes(), 1u);
  auto next = rig.load(owner, {"k"});
  ASSERT_TRUE(next.ok());
  EXPECT_TRUE(next->stopped_by.ok()) << next->stopped_by.ToString();  // a miss, not an error
  EXPECT_TRUE(next->values.empty());
}

// A key the directory has on an agent the reader cannot reach read as a
// plain miss: rcxl-kv printed "k: miss" with no reason (review, session 26).
TEST(Handler, R6_1_AKeyOnAnAgentNotReachedIsAMissThatSaysWhy) {
  ClientRig rig;
  rig.add_memory("mem");
  Config config = rig.config();
  config.reply_timeout = 200ms;
  Handler& writer = rig.handler(config);
  Handler& reader = rig.handler(config);
  ASSERT_EQ(rig.store(writer, {item("k", "v")})->stored, 1u);
  rig.world.network().partition("mem");
  auto loaded = rig.load(reader, {"k"});
  ASSERT_TRUE(loaded.ok()) << loaded.status().ToString();
  EXPECT_TRUE(loaded->values.empty());
  EXPECT_FALSE(loaded->stopped_by.ok());
  rig.world.network().heal("mem");
  auto plain = rig.load(reader, {"nothing"});
  ASSERT_TRUE(plain.ok());
  EXPECT_TRUE(plain->stopped_by.ok());  // a key nobody stored says nothing
}

// News of a boot that was already replaced (e.g. a reply another connection
// got before the change, handled after it) changes nothing: no regions go back
// and the directory is not told to drop the live boot's keys.
TEST(Handler, R6_1_ALateReportOfAReplacedBootChangesNothing) {
  ClientRig rig;
  auto& mem = rig.add_memory("mem", {{"generation_file", "/gen"}});
  Handler& owner = rig.handler(rig.config());
  ASSERT_EQ(rig.store(owner, {item("old", "old-bytes")})->stored, 1u);
  const std::string old_boot = owner.regions().known(mem.key())->boot;
  mem.set_generation("2");
  rig.world.run_for(300ms);
  for (int i = 0; i < 3 && !rig.directory_server->directory().find("new"); ++i) {
    (void)rig.store(owner, {item("new", "new-bytes")});
    rig.world.run_for(50ms);
  }
  ASSERT_TRUE(rig.directory_server->directory().find("new").has_value());
  ASSERT_EQ(owner.regions().boot_changes(), 1u);
  const auto own_before = owner.regions().own_regions().size();
  ASSERT_GE(own_before, 1u);

  bool posted = false;
  owner.strand().post([&] {
    owner.regions().observe_boot(mem.key(), old_boot);
    posted = true;
  });
  ASSERT_TRUE(rig.world.run_until([&] { return posted; }).ok());
  rig.world.run_for(50ms);
  EXPECT_EQ(owner.regions().boot_changes(), 1u);
  EXPECT_EQ(owner.regions().own_regions().size(), own_before);
  EXPECT_NE(owner.regions().known(mem.key())->boot, old_boot);
  EXPECT_TRUE(rig.directory_server->directory().find("new").has_value());
  auto loaded = rig.load(owner, {"new"});
  ASSERT_EQ(loaded->values.size(), 1u);
  EXPECT_EQ(text_of(loaded->values[0]), "new-bytes");
}

// What the agent says on the map connection itself is the boot now, even one
// seen before (`:unknown` recurs; a restart without a region table counts its
// unknown periods anew): the client adopts it instead of ignoring it for good.
TEST(Handler, R6_1_ABootTheMapConnectionReportsAgainIsAdopted) {
  ClientRig rig;
  auto& mem = rig.add_memory("mem", {{"generation_file", "/gen"}});
  Handler& owner = rig.handler(rig.config());
  ASSERT_EQ(rig.store(owner, {item("a", "a-bytes")})->stored, 1u);
  const std::string first = owner.regions().known(mem.key())->boot;
  for (const char* generation : {"2", "1"}) {
    mem.set_generation(generation);
    rig.world.run_for(300ms);
    for (int i = 0; i < 3; ++i) {
      (void)rig.store(owner, {item(std::string("k") + generation + std::to_string(i), "v")});
      rig.world.run_for(50ms);
    }
  }
  EXPECT_EQ(owner.regions().boot_changes(), 2u);
  EXPECT_EQ(owner.regions().known(mem.key())->boot, first);
  EXPECT_EQ(rig.directory_server->directory().find("a"), std::nullopt);
}

// Keys stored under a boot that no live client saw end (their writer is gone;
// the reader met the agent after the reset) used to stay in the directory for
// good, ending every load's prefix there. The first reader to meet one asks the
// agent; its stale_epoch answer tells the directory that boot is gone.
TEST(Handler, R6_1_KeysOfABootNobodySawEndAreDroppedByTheFirstReader) {
  ClientRig rig;
  auto& mem = rig.add_memory("mem", {{"generation_file", "/gen"}});
  {
    Handler& writer = rig.handler(rig.config());
    ASSERT_EQ(rig.store(writer, {item("k", "old-bytes")})->stored, 1u);
  }
  rig.handlers.clear();  // the writer process is gone
  mem.set_generation("2");
  rig.world.run_for(300ms);
  ASSERT_TRUE(rig.directory_server->directory().find("k").has_value());
  Handler& reader = rig.handler(rig.config());
  auto loaded = rig.load(reader, {"k"});
  ASSERT_TRUE(loaded.ok());
  EXPECT_TRUE(loaded->values.empty());  // a miss, never the old bytes
  rig.world.run_for(50ms);
  EXPECT_FALSE(rig.directory_server->directory().find("k").has_value());
  EXPECT_EQ(reader.regions().boot_changes(), 0u);  // it never believed the old boot
}

// A reader behind the agent (it believed an older boot) finds a key stored
// under the agent's boot now: its map's stale_epoch brings it up to date, a hit.
TEST(Handler, R6_1_AReaderBehindTheAgentCatchesUpInsteadOfMissing) {
  ClientRig rig;
  auto& mem = rig.add_memory("mem", {{"generation_file", "/gen"}});
  Handler& reader = rig.handler(rig.config());
  Handler& writer = rig.handler(rig.config());
  ASSERT_EQ(rig.store(writer, {item("before", "b")})->stored, 1u);
  ASSERT_EQ(rig.load(reader, {"before"})->values.size(), 1u);  // reader knows boot :1
  mem.set_generation("2");
  rig.world.run_for(300ms);
  for (int i = 0; i < 3 && !rig.directory_server->directory().find("new"); ++i) {
    (void)rig.store(writer, {item("new", "fresh")});
    rig.world.run_for(50ms);
  }
  ASSERT_TRUE(rig.directory_server->directory().find("new").has_value());
  ASSERT_NE(reader.regions().known(mem.key())->boot,
            rig.directory_server->directory().find("new")->boot);  // the reader is behind
  auto loaded = rig.load(reader, {"new"});
  ASSERT_EQ(loaded->values.size(), 1u);
  EXPECT_EQ(text_of(loaded->values[0]), "fresh");
}

// An agent restarted without its region table (no --state-file: anon memory)
// keeps its boot but knows none of the regions: the owner's remap answers
// not_found. The owner gives such a region up and allocates anew, instead of
// failing every later store on its pages.
TEST(Handler, R6_1_AnOwnRegionTheAgentNoLongerKnowsIsGivenUp) {
  ClientRig rig;
  auto& mem = rig.add_memory("mem");
  Handler& owner = rig.handler(rig.config());
  ASSERT_EQ(rig.store(owner, {item("before", "old-bytes")})->stored, 1u);
  ASSERT_EQ(owner.regions().own_regions().size(), 1u);

  ASSERT_TRUE(restart_without_region_table(mem).ok());
  rig.world.run_for(100ms);

  std::size_t stored = 0;
  for (int i = 0; i < 4; ++i) {
    auto r = rig.store(owner, {item("after-" + std::to_string(i), "new-bytes")});
    ASSERT_TRUE(r.ok()) << r.status().ToString();
    stored += r->stored;
    rig.world.run_for(50ms);
  }
  EXPECT_GE(stored, 3u);  // at most the first, which meets the gone region, fails
  EXPECT_EQ(owner.regions().boot_changes(), 0u);
  EXPECT_EQ(owner.regions().regions_lost(), 1u);
  EXPECT_EQ(owner.regions().own_regions().size(), 1u);
  EXPECT_EQ(owner.stats().regions_allocated, 2u);  // one before the restart, one after
  auto loaded = rig.load(owner, {"after-3"});
  ASSERT_EQ(loaded->values.size(), 1u);
  EXPECT_EQ(text_of(loaded->values[0]), "new-bytes");
  // The given-up region's key went from the directory; the new region (which
  // has the same id at the restarted agent) keeps its keys.
  EXPECT_FALSE(rig.directory_server->directory().find("before").has_value());
  EXPECT_TRUE(rig.directory_server->directory().find("after-3").has_value());
}

}  // namespace
}  // namespace rcxl::client::testing

namespace rcxl::client::testing {
namespace {

// SPEC R6.1 (never another key's bytes as a hit): after an agent restart that
// keeps its boot but not its region table, region ids start again. A reader
// that has cached a mapping of the new region 1 must not read an old key's
// location in the old region 1 through it: mappings count per read handle.
TEST(Handler, R6_1_AReusedRegionIdDoesNotServeAnOldLocationThroughANewMapping) {
  ClientRig rig;
  auto& mem = rig.add_memory("mem");
  Handler& old_owner = rig.handler(rig.config());
  ASSERT_EQ(rig.store(old_owner, {item("old", "old-bytes")})->stored, 1u);

  ASSERT_TRUE(restart_without_region_table(mem).ok());
  rig.world.run_for(100ms);

  Handler& new_owner = rig.handler(rig.config());
  ASSERT_EQ(rig.store(new_owner, {item("new", "new-bytes")})->stored, 1u);
  Handler& reader = rig.handler(rig.config());
  auto fresh = rig.load(reader, {"new"});
  ASSERT_EQ(fresh->values.size(), 1u);
  EXPECT_EQ(text_of(fresh->values[0]), "new-bytes");
  // "old" still names region 1 (its writer is idle): a miss, never "new-bytes".
  auto old = rig.load(reader, {"old"});
  ASSERT_TRUE(old.ok()) << old.status().ToString();
  EXPECT_TRUE(old->values.empty()) << text_of(old->values[0]);
  // The agent refused the old read handle (bad_range): the reader had the
  // directory drop that region's keys; the new region's stay.
  rig.world.run_for(50ms);
  EXPECT_FALSE(rig.directory_server->directory().find("old").has_value());
  EXPECT_TRUE(rig.directory_server->directory().find("new").has_value());
}

// SPEC R6.1: keys in a region the agent no longer has (restarted without its
// region table, same boot) go from the directory when a reader finds the
// region gone (not_found), even though their writer is gone and never learnt
// it. Until then every load stopped there and nobody could store them again.
TEST(Handler, R6_1_AReaderThatFindsARegionGoneHasItsKeysDropped) {
  ClientRig rig;
  auto& mem = rig.add_memory("mem");
  {
    Handler writer(rig.gpu, rig.config(), rig.gpu_nic);
    ASSERT_EQ(rig.store(writer, {item("k", "old-bytes"), item("k2", "old-2")})->stored, 2u);
  }
  ASSERT_TRUE(restart_without_region_table(mem).ok());
  rig.world.run_for(100ms);
  Handler& reader = rig.handler(rig.config());
  auto gone = rig.load(reader, {"k"});
  ASSERT_TRUE(gone.ok()) << gone.status().ToString();
  EXPECT_TRUE(gone->values.empty());
  rig.world.run_for(50ms);
  EXPECT_FALSE(rig.directory_server->directory().find("k").has_value());
  EXPECT_FALSE(rig.directory_server->directory().find("k2").has_value());  // same region
  Handler& rewriter = rig.handler(rig.config());
  ASSERT_EQ(rig.store(rewriter, {item("k", "new-bytes")})->stored, 1u);  // not "already present"
  auto again = rig.load(reader, {"k"});
  ASSERT_EQ(again->values.size(), 1u);
  EXPECT_EQ(text_of(again->values[0]), "new-bytes");
}

// SPEC R6.1: stores across an agent restart that keeps its boot but not its
// region table (region ids start again at 1) never leave a key serving another
// key's bytes. Pages carry their region's handle (Handler::own_region_of), so
// a page of the old region 1 is never written into a new region 1. With a real
// agent the owner learns of the loss before it allocates again (a new
// connection maps what it holds first); malformed_reply_test's
// R6_1_AnAllocReplyReissuingAHeldRegionIdGivesTheOldRegionUp makes the alloc come first.
TEST(Handler, R6_1_StoresAcrossARestartWithoutTheRegionTableNeverServeAnotherKeysBytes) {
  ClientRig rig;
  const Json waits = {{"actions", {"write_hint", "write_wait"}}, {"write_wait_delay_ms", 200}};
  auto& mem = rig.add_memory("mem", waits);
  Config config = rig.config();
  config.read_hints = true;  // write hints and waits follow
  config.write_wait_ms = 1000;
  Handler& owner = rig.handler(config);
  ASSERT_EQ(rig.store(owner, {item("a", "a-bytes")})->stored, 1u);  // 255 pages stay free

  Json ext_config = waits;
  ext_config["log"] = "/log";
  auto parsed = ext::RecordingConfig::FromJson(ext_config);
  ASSERT_TRUE(parsed.ok());
  ASSERT_TRUE(restart_without_region_table(
                  mem, std::make_unique<ext::RecordingExtension>(*mem.node, *parsed))
                  .ok());

  // Both take free pages of the old region 1 at once; the first holds its
  // page through a 200 ms write wait while the second allocates anew (id 1).
  std::vector<StoreItem> held = {item("held", "held-bytes")};
  std::vector<StoreItem> big;
  for (int i = 0; i < 300; ++i)
    big.push_back(item("b" + std::to_string(i), "big-" + std::to_string(i)));
  std::optional<Result<StoreResult>> held_done, big_done;
  owner.store(held, [&](Result<StoreResult> r) { held_done = std::move(r); });
  owner.store(big, [&](Result<StoreResult> r) { big_done = std::move(r); });
  ASSERT_TRUE(rig.world.run_until([&] { return held_done && big_done; }).ok());
  std::vector<StoreItem> later;
  for (int i = 0; i < 250; ++i)
    later.push_back(item("l" + std::to_string(i), "later-" + std::to_string(i)));
  for (int round = 0; round < 3; ++round) {
    (void)rig.store(owner, later);
    rig.world.run_for(300ms);
  }

  Handler& reader = rig.handler(rig.config());
  std::size_t checked = 0;
  for (const auto* batch : {&held, &big, &later}) {
    for (const auto& it : *batch) {
      auto got = rig.load(reader, {it.key});
      ASSERT_TRUE(got.ok());
      if (got->values.empty()) continue;  // a miss is allowed; another key's bytes are not
      ++checked;
      EXPECT_EQ(got->values[0], it.bytes) << it.key << " read " << text_of(got->values[0]);
    }
  }
  EXPECT_GT(checked, 0u);
}

// SPEC R1.2: a key that is not UTF-8 is refused before any page is taken
// (the wire would replace its invalid bytes, and two such keys would be one
// key at the directory); the store after it stores as before.
TEST(Handler, R1_2_AKeyTheDirectoryCannotTakeIsRefusedBeforeAnyPageIsTaken) {
  ClientRig rig;
  rig.add_memory("mem");
  Handler& h = rig.handler(rig.config());
  auto refused = rig.store(h, {item("ok", "v"), item("a\xff", "w")});
  ASSERT_FALSE(refused.ok());
  EXPECT_EQ(refused.status().code(), ErrorCode::kBadRequest);
  EXPECT_NE(refused.status().message().find("not valid UTF-8"), std::string::npos);
  EXPECT_EQ(h.stats().regions_allocated, 0u);
  // So is a key longer than the directory takes.
  auto too_long = rig.store(h, {item(std::string(directory::kMaxKeyBytes + 1, 'k'), "w")});
  ASSERT_FALSE(too_long.ok());
  EXPECT_EQ(too_long.status().code(), ErrorCode::kBadRequest);
  EXPECT_NE(too_long.status().message().find("hash a longer one"), std::string::npos);
  EXPECT_EQ(h.stats().regions_allocated, 0u);
  EXPECT_EQ(rig.store(h, {item("a\xc3\xa9", "v")})->stored, 1u);  // valid UTF-8 (é)
  auto loaded = rig.load(h, {"a\xc3\xa9"});
  ASSERT_EQ(loaded->values.size(), 1u);
  EXPECT_EQ(text_of(loaded->values[0]), "v");
}

// SPEC R1.2 (every call answers): a store of no items answers at once, and
// the next store is not held behind it.
TEST(Handler, R1_2_AStoreOfNoItemsAnswers) {
  ClientRig rig;
  rig.add_memory("mem");
  Handler& h = rig.handler(rig.config());
  auto none = rig.store(h, {});
  ASSERT_TRUE(none.ok()) << none.status().ToString();
  EXPECT_EQ(none->stored, 0u);
  EXPECT_EQ(rig.store(h, {item("k", "v")})->stored, 1u);
}

// SPEC R6.1: a map reply sent before this client learned of a newer boot (on
// another connection) names the replaced boot; adopting it would turn the
// boot back and tell the directory to retire the live one. Late news is
// ignored; the agent saying the old boot again to a request sent under the
// new belief would still be taken.
TEST(Handler, R6_1_AMapReplyOlderThanTheBelievedBootDoesNotTurnItBack) {
  ClientRig rig;
  auto& mem = rig.add_memory("mem", {{"generation_file", "/gen"}});
  Handler& owner = rig.handler(rig.config());
  ASSERT_EQ(rig.store(owner, {item("k", "bytes")})->stored, 1u);
  const std::string was = owner.regions().known(mem.key())->boot;
  const auto region = owner.regions().own_regions().begin()->second;
  Handler& reader = rig.handler(rig.config());
  ASSERT_EQ(rig.load(reader, {"k"})->values.size(), 1u);  // believes `was`
  std::optional<Result<Mapping>> mapped;
  reader.strand().post([&] {
    // Sent under `was`; before its reply, news of a newer boot arrives.
    reader.regions().forget_read_mapping(mem.key(), region.region);
    reader.regions().map_for_read(mem.key(), region.region, region.read_handle,
                                  [&](const Result<Mapping>& m) { mapped = m; });
    reader.regions().observe_boot(mem.key(), was + "-newer");
  });
  (void)rig.wait(mapped);
  rig.world.run_for(10ms);
  EXPECT_EQ(reader.regions().known(mem.key())->boot, was + "-newer");
}

TEST(Handler, R1_6_ALargeLoadIsOneBatchPerAgentWithoutDeepRecursion) {
  ClientRig rig;
  rig.add_memory("mem");
  Config c = rig.config();
  c.region_size_bytes = 64ull << 20;
  Handler& h = rig.handler(c);
  std::vector<StoreItem> items;
  std::vector<std::string> keys;
  for (int i = 0; i < 5000; ++i) {
    keys.push_back("k" + std::to_string(i));
    items.push_back(item(keys.back(), "value-" + std::to_string(i)));
  }
  ASSERT_EQ(rig.store(h, items)->stored, 5000u);
  auto loaded = rig.load(h, keys);
  ASSERT_EQ(loaded->values.size(), 5000u);
  EXPECT_EQ(text_of(loaded->values[4321]), "value-4321");
  EXPECT_EQ(h.stats().read_batches, 1u);
}

// One run of a small workload; its trace hash is the run's fingerprint.
std::string run_once(std::uint64_t seed) {
  ClientRig rig(seed);
  rig.add_memory("mem", {{"actions", {"read_hint", "read_hint_end", "write_hint", "write_wait"}}});
  rig.add_memory("mem2");
  Config c = rig.config();
  c.read_hints = true;
  c.region_size_bytes = 4 * 4096;
  Handler& h = rig.handler(c);
  std::vector<StoreItem> items;
  std::vector<std::string> keys;
  for (int i = 0; i < 12; ++i) {
    keys.push_back("k" + std::to_string(i));
    items.push_back(item(keys.back(), "v" + std::to_string(i)));
  }
  EXPECT_EQ(rig.store(h, items)->stored, 12u);
  h.hint_read("q", keys);
  EXPECT_EQ(rig.load(h, keys, true)->values.size(), 12u);
  h.end_read_hint("q");
  rig.settle(h);
  return rig.world.trace().hash_hex();
}

TEST(Handler, SameSeedSameTraceHash) {
  const std::string first = run_once(5);
  EXPECT_EQ(first, run_once(5));
  EXPECT_NE(first, run_once(6));  // the seed reaches the trace (handles, challenges)
}

}  // namespace
}  // namespace rcxl::client::testing
