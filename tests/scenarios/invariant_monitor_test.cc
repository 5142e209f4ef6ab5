// The run-time invariants (issue #6 item 6): each check fires on a planted
// violation and stays quiet on the legal sequence next to it.
#include "scenarios/invariant_monitor.h"

#include <gtest/gtest.h>

#include <optional>

#include "backends/sim/sim_memory_pool.h"
#include "backends/sim/sim_nic.h"
#include "backends/sim/sim_world.h"
#include "core/protocol/frame_codec.h"
#include "scenarios/checked_extension.h"
#include "scenarios/checked_nic.h"
#include "scenarios/checked_runtime.h"

namespace rcxl::scenarios {
namespace {

using namespace std::chrono_literals;
using runtime::RdmaOp;

struct FixedClock : runtime::Clock {
  runtime::Instant t{0};
  runtime::Instant now() const override { return t; }
};

ext::Hint hint(std::uint64_t conn, std::string action, std::string request,
               std::size_t ranges = 1) {
  ext::Hint h;
  h.conn = conn;
  h.action = std::move(action);
  h.request = std::move(request);
  h.ranges.assign(ranges, ext::Range{1, 0, 4096, 0});
  return h;
}

// What the agent's wire shows the monitor: region `region`'s alloc reply, then
// a map asking fresh under `handle`.
void alloc_then_map(InvariantMonitor& m, std::uint64_t region, const std::string& map_handle) {
  m.on_agent_frame_out(1, R"({"id":1,"ok":true,"region":)" + std::to_string(region) +
                              R"(,"size":4096,"handle":"own","read_handle":"rd"})");
  m.on_agent_frame_in(1, R"({"id":2,"op":"map","region":)" + std::to_string(region) +
                             R"(,"handle":")" + map_handle + R"(","epoch":"b:1","fresh":true})");
}

TEST(Invariants, R5_2_FreshOnlyOnTheFirstMapOfARegion) {
  FixedClock clock;
  InvariantMonitor m(clock, {});
  alloc_then_map(m, 7, "own");
  m.on_mapped({7, 0, 4096}, /*fresh=*/true, true);
  m.on_mapped({7, 0, 4096}, /*fresh=*/false, true);  // a reader's map
  EXPECT_EQ(m.violation_count(), 0u);
  m.on_mapped({7, 0, 4096}, /*fresh=*/true, true);  // fresh again: the device would drop KV
  ASSERT_EQ(m.violations().size(), 1u);
  EXPECT_NE(m.violations()[0].find("later map (SPEC R5.2)"), std::string::npos);
}

TEST(Invariants, R5_2_ARefusedFirstMapMayBeRetriedFresh) {
  FixedClock clock;
  InvariantMonitor m(clock, {});
  alloc_then_map(m, 3, "own");
  m.on_mapped({3, 0, 4096}, true, /*accepted=*/false);
  m.on_mapped({3, 0, 4096}, true, true);  // R5.1: retries carry fresh
  EXPECT_EQ(m.violation_count(), 0u);
}

TEST(Invariants, R5_2_FreshAskedUnderTheReadHandleMustNotReachTheExtension) {
  FixedClock clock;
  InvariantMonitor m(clock, {});
  alloc_then_map(m, 4, "rd");
  m.on_mapped({4, 0, 4096}, /*fresh=*/true, true);
  ASSERT_EQ(m.violations().size(), 1u);
  EXPECT_NE(m.violations()[0].find("under the owner handle (SPEC R5.2)"), std::string::npos);
}

// A fresh map under the owner handle that the agent refused (here by its
// epoch) licenses nothing: a reader's later map that reached the extension
// as fresh is a violation. Before, the licence outlived the refusal.
TEST(Invariants, R5_2_ARefusedOwnerMapDoesNotLicenseALaterFresh) {
  FixedClock clock;
  InvariantMonitor m(clock, {});
  alloc_then_map(m, 5, "own");
  m.on_agent_frame_out(1, R"({"id":2,"ok":false,"error":{"code":"stale_epoch","message":"x"}})");
  m.on_agent_frame_in(2, R"({"id":2,"op":"map","region":5,"handle":"rd","epoch":"b:1"})");
  m.on_mapped({5, 0, 4096}, /*fresh=*/true, true);
  ASSERT_EQ(m.violations().size(), 1u);
  EXPECT_NE(m.violations()[0].find("under the owner handle"), std::string::npos);
  // Nor does a map its connection closed on before any answer (diff review).
  InvariantMonitor closed(clock, {});
  alloc_then_map(closed, 7, "own");
  closed.on_agent_wire_closed(1);
  closed.on_mapped({7, 0, 4096}, /*fresh=*/true, true);
  EXPECT_EQ(closed.violation_count(), 1u);
  // The same id answered on another connection does not end this one's licence.
  InvariantMonitor legal(clock, {});
  alloc_then_map(legal, 6, "own");
  legal.on_agent_frame_out(2, R"({"id":2,"ok":false,"error":{"code":"bad_range","message":"x"}})");
  legal.on_mapped({6, 0, 4096}, /*fresh=*/true, true);
  EXPECT_EQ(legal.violation_count(), 0u);
}

// An owner's fresh map left unanswered by an agent that stopped licensed a
// later fresh for good: the connection's close may never reach the monitor
// (review, session 32). The stop takes every licence back.
TEST(Invariants, R5_2_AStoppedAgentsUnansweredFreshMapLicensesNothing) {
  FixedClock clock;
  InvariantMonitor m(clock, {});
  alloc_then_map(m, 5, "own");
  m.on_extension_closed();
  m.on_agent_frame_in(2, R"({"id":3,"op":"map","region":5,"handle":"rd","epoch":"b:1"})");
  m.on_mapped({5, 0, 4096}, /*fresh=*/true, true);
  ASSERT_EQ(m.violations().size(), 1u);
  EXPECT_NE(m.violations()[0].find("without a map asking for it"), std::string::npos);
}

TEST(Invariants, R5_2_FreshNobodyAskedForIsAViolation) {
  FixedClock clock;
  InvariantMonitor m(clock, {});
  // The region's alloc went out, but no map asked fresh (or one asked for another region).
  m.on_agent_frame_out(
      1, R"({"id":1,"ok":true,"region":5,"size":4096,"handle":"own","read_handle":"rd"})");
  m.on_agent_frame_in(
      1, R"({"id":2,"op":"map","region":6,"handle":"own","epoch":"b:1","fresh":true})");
  m.on_agent_frame_in(1, R"({"id":3,"op":"map","region":5,"handle":"own","epoch":"b:1"})");
  m.on_mapped({5, 0, 4096}, /*fresh=*/true, true);
  EXPECT_EQ(m.violation_count(), 1u);
}

TEST(Invariants, R5_2_FramesThatAreNotJsonOrNotMapsAreIgnored) {
  FixedClock clock;
  InvariantMonitor m(clock, {});
  m.on_agent_frame_in(1, "{\"op\":\"map\"");  // truncated: the agent refuses it
  m.on_agent_frame_in(1, "[\"map\"]");
  m.on_agent_frame_out(1, "{\"read_handle\": 1}");
  m.on_agent_frame_in(1, R"({"op":"map","region":-1,"handle":"own","fresh":true})");
  EXPECT_EQ(m.violation_count(), 0u);
  m.on_mapped({1, 0, 4096}, /*fresh=*/true, true);  // still nobody asked for region 1
  EXPECT_EQ(m.violation_count(), 1u);
}

// The agent's wire as the monitor sees it: frames cut anywhere by the stream
// reach it whole, in both directions, and the agent gets its bytes unchanged.
TEST(Invariants, R5_2_CheckedRuntimeShowsTheAgentsFramesWhole) {
  sim::SimWorld world(5);
  auto& mem = world.add_node("mem");
  auto& gpu = world.add_node("gpu");
  InvariantMonitor m(mem.clock(), {});
  CheckedRuntime agent_rt(mem, m);
  auto server_strand = agent_rt.make_strand("agent");
  auto client_strand = gpu.make_strand("client");
  std::shared_ptr<runtime::Conn> accepted;
  std::string received;
  auto listener = agent_rt.transport().listen(
      {"mem", 7000}, *server_strand, [&](std::shared_ptr<runtime::Conn> c) {
        accepted = c;
        c->start(
            *server_strand, [&](std::string_view b) { received.append(b); }, [](const Status&) {});
      });
  ASSERT_TRUE(listener.ok());
  std::shared_ptr<runtime::Conn> client;
  gpu.transport().connect({"mem", 7000}, *client_strand,
                          [&](Result<std::shared_ptr<runtime::Conn>> c) {
                            ASSERT_TRUE(c.ok());
                            client = c.value();
                            client->start(
                                *client_strand, [](std::string_view) {}, [](const Status&) {});
                          });
  ASSERT_TRUE(world.run_until([&] { return accepted && client; }).ok());
  accepted->send(protocol::encode_frame(
      R"({"id":1,"ok":true,"region":9,"size":4096,"handle":"own","read_handle":"rd"})"));
  const std::string map = protocol::encode_frame(
      R"({"id":2,"op":"map","region":9,"handle":"own","epoch":"b:1","fresh":true})");
  client->send(map.substr(0, 3));  // inside the length prefix
  client->send(map.substr(3, 20));
  client->send(map.substr(23));
  ASSERT_TRUE(world.run_until([&] { return received.size() == map.size(); }).ok());
  EXPECT_EQ(received, map);
  m.on_mapped({9, 0, 4096}, /*fresh=*/true, true);
  EXPECT_EQ(m.violation_count(), 0u);
  m.on_mapped({10, 0, 4096}, /*fresh=*/true, true);  // a region no map asked fresh for
  EXPECT_EQ(m.violation_count(), 1u);
  client->close();
  accepted->close();
  world.run_for(1s);
}

TEST(Invariants, R3_3_OpenHintsPerConnectionBounded) {
  FixedClock clock;
  InvariantMonitor m(clock, {.max_hint_requests = 2, .max_ranges_per_message = 4096});
  m.on_hint(hint(1, "read_hint", "a"), true);
  m.on_hint(hint(1, "read_hint", "b"), true);
  m.on_hint(hint(2, "read_hint", "c"), true);  // another connection has its own budget
  EXPECT_EQ(m.violation_count(), 0u);
  m.on_hint(hint(1, "read_hint", "d"), /*accepted=*/false);  // refused: nothing opened
  EXPECT_EQ(m.violation_count(), 0u);
  m.on_hint(hint(1, "read_hint", "e"), true);
  EXPECT_EQ(m.violation_count(), 1u);
}

TEST(Invariants, R3_3_EveryOpenedHintIsEndedOrClosed) {
  FixedClock clock;
  InvariantMonitor m(clock, {});
  m.on_hint(hint(1, "read_hint", "a"), true);
  m.on_hint(hint(1, "read_promote", "a"), true);  // opens nothing
  m.on_hint(hint(2, "read_hint", "b"), true);
  m.on_hint(hint(1, "read_hint_end", "a"), true);
  m.on_connection_closed(2);
  m.check_all_hints_closed();
  EXPECT_EQ(m.violation_count(), 0u);
  // SPEC R6.6: the extension was told of one close, with one request open.
  EXPECT_EQ(m.connection_closed_calls(), 1u);
  EXPECT_EQ(m.requests_open_at_close(), 1u);
  m.on_connection_closed(1);  // nothing open on it any more
  EXPECT_EQ(m.connection_closed_calls(), 2u);
  EXPECT_EQ(m.requests_open_at_close(), 1u);
  m.on_hint(hint(3, "read_hint", "left-open"), true);
  m.check_all_hints_closed();
  ASSERT_EQ(m.violations().size(), 1u);
  EXPECT_NE(m.violations()[0].find("left-open"), std::string::npos);
}

// The agent takes a request off its open set before the extension hears the
// end: an end the extension fails still closed it (review, session 25).
TEST(Invariants, R3_3_AnEndTheExtensionFailedStillClosesTheRequest) {
  FixedClock clock;
  InvariantMonitor m(clock, {});
  m.on_hint(hint(1, "read_hint", "a"), true);
  m.on_hint(hint(1, "read_hint_end", "a"), /*accepted=*/false);
  m.check_all_hints_closed();
  EXPECT_EQ(m.violation_count(), 0u);
}

TEST(Invariants, R3_3_AStoppedAgentClosesItsConnections) {
  FixedClock clock;
  InvariantMonitor m(clock, {});
  m.on_hint(hint(1, "read_hint", "a"), true);
  m.on_extension_closed();
  m.check_all_hints_closed();
  EXPECT_EQ(m.violation_count(), 0u);
}

// PROTOCOL Boot: the change closes every open request, and the agent ends each
// at the extension before it reports the change. One the extension never
// heard end is left open there (a cxl_ssd keeps its pins): a violation.
TEST(Invariants, R6_3_ABootChangeClosesOpenRequestsOnlyThroughTheirEnds) {
  FixedClock clock;
  InvariantMonitor m(clock, {});
  m.on_boot("n:1");
  m.on_hint(hint(1, "read_hint", "a"), true);
  m.on_hint(hint(1, "read_hint", "b"), true);
  m.on_hint(hint(1, "read_hint_end", "a"), true);  // the agent's end for a
  m.on_boot_change("n:2");
  m.check_all_hints_closed();
  ASSERT_EQ(m.violations().size(), 1u);
  EXPECT_NE(m.violations()[0].find("request b"), std::string::npos);
}

// The bound is SPEC's, not the client's config: a client configured past it
// is what the check is for.
TEST(Invariants, R3_5_HintQueueBound) {
  FixedClock clock;
  InvariantMonitor m(clock, {});
  m.check_client_hints("worker", 1024, 0);
  EXPECT_EQ(m.violation_count(), 0u);
  m.check_client_hints("scheduler", 1025, 0);
  ASSERT_EQ(m.violations().size(), 1u);
  EXPECT_NE(m.violations()[0].find("scheduler: 1025 waiting, allowed 1024"), std::string::npos)
      << m.violations()[0];
}

TEST(Invariants, R3_6_OpenHintedRequestBound) {
  FixedClock clock;
  InvariantMonitor m(clock, {});
  m.check_client_hints("worker", 0, 4096);
  EXPECT_EQ(m.violation_count(), 0u);
  m.check_client_hints("worker", 0, 4097);
  ASSERT_EQ(m.violations().size(), 1u);
  EXPECT_NE(m.violations()[0].find("R3.6"), std::string::npos) << m.violations()[0];
  EXPECT_NE(m.violations()[0].find("worker: 4097 open, allowed 4096"), std::string::npos)
      << m.violations()[0];
}

TEST(Invariants, R3_4_MessageRangeBound) {
  FixedClock clock;
  InvariantMonitor m(clock, {});
  m.on_hint(hint(1, "write_hint", "t", 4096), true);
  EXPECT_EQ(m.violation_count(), 0u);
  m.on_hint(hint(1, "write_hint", "t", 4097), true);
  ext::WriteWait w{1, "t2", std::vector<ext::Range>(4097), 50};
  m.on_write_wait(w);
  EXPECT_EQ(m.violations().size(), 2u);
}

// The agent refuses a message of more than 4096 ranges before its extension
// hears of it, so the bound is checked on the client's frames as they arrive.
TEST(Invariants, R3_4_AClientsMessageOfTooManyRangesIsCaughtOnTheWire) {
  FixedClock clock;
  InvariantMonitor m(clock, {});
  auto frame = [](std::size_t n) {
    nlohmann::json j = {{"id", 1},      {"op", "extension"}, {"action", "read_hint"},
                        {"epoch", "b"}, {"request", "q"},    {"ranges", nlohmann::json::array()}};
    for (std::size_t i = 0; i < n; ++i) j["ranges"].push_back({1, i * 4096, 4096});
    return j.dump();
  };
  m.on_agent_frame_in(1, frame(4096));
  EXPECT_EQ(m.violation_count(), 0u);
  m.on_agent_frame_in(1, frame(4097));
  ASSERT_EQ(m.violations().size(), 1u);
  EXPECT_NE(m.violations()[0].find("4097 ranges"), std::string::npos) << m.violations()[0];
}

TEST(Invariants, R6_4_ABootNeverRepeatsAfterAnUnknownPeriod) {
  FixedClock clock;
  InvariantMonitor m(clock, {});
  for (const char* b : {"n:1", "n:1", "n:unknown", "n:1~1", "n:unknown", "n:1~2", "n:2"})
    m.on_boot(b);
  EXPECT_EQ(m.violation_count(), 0u);
  m.on_boot("n:unknown");
  m.on_boot("n:1~1");  // the boot of the first period again: clients would trust old regions
  ASSERT_EQ(m.violations().size(), 1u);
  EXPECT_NE(m.violations()[0].find("unknown period"), std::string::npos);
}

// The boot checks judged only the agent's tracker (its boot-change callback):
// an agent that still told clients an old boot after a change passed (review,
// session 32). Replies on its wire count too.
TEST(Invariants, R6_4_ABootToldOnTheWireAfterItChangedIsCaught) {
  FixedClock clock;
  InvariantMonitor m(clock, {});
  m.on_boot("b:1");
  m.on_agent_frame_out(1, R"({"id":1,"ok":true,"boot":"b:1","conn":1})");  // hello
  m.on_boot_change("b:unknown");
  m.on_boot_change("b:1~1");
  m.on_agent_frame_out(1, R"({"id":2,"ok":true,"boot":"b:1~1","addr":0,"rkey":1,"size":4096})");
  EXPECT_EQ(m.violation_count(), 0u);
  m.on_agent_frame_out(2, R"({"id":1,"ok":true,"boot":"b:1","conn":2})");
  ASSERT_EQ(m.violations().size(), 1u);
  EXPECT_NE(m.violations()[0].find("after an unknown period"), std::string::npos);
}

TEST(Invariants, R4_3_WritesPostWithinTheWaitBudgetPlusReplyTimeout) {
  FixedClock clock;
  InvariantMonitor m(clock, {});
  m.check_write_wait("worker", 1050ms, 50ms + 1s);
  EXPECT_EQ(m.violation_count(), 0u);
  m.check_write_wait("worker", 1051ms, 50ms + 1s);
  EXPECT_EQ(m.violation_count(), 1u);
}

// A NIC that lies: every op succeeds, registered or not.
class LyingNic final : public runtime::Nic {
 public:
  struct Qp final : runtime::QueuePair {
    void post(std::vector<RdmaOp> ops, CompletionHandler done) override {
      done(std::vector<Status>(ops.size()));
    }
    std::string peer() const override { return "mem"; }
  };
  Result<runtime::Registration> register_memory(runtime::MemoryPool&, std::uint64_t offset,
                                                std::uint64_t length, unsigned) override {
    return runtime::Registration{offset, 42, length};
  }
  Status deregister(const runtime::Registration&) override { return {}; }
  std::string endpoint() const override { return "mem"; }
  void connect(const std::string&, runtime::Strand&, ConnectHandler done) override {
    done(std::shared_ptr<runtime::QueuePair>(std::make_shared<Qp>()));
  }
};

std::optional<std::vector<Status>> post_one(runtime::Nic& nic, runtime::Strand& strand,
                                            const runtime::Registration& reg,
                                            std::vector<std::byte>& buf, sim::SimWorld* world) {
  std::shared_ptr<runtime::QueuePair> qp;
  nic.connect("mem", strand, [&](Result<std::shared_ptr<runtime::QueuePair>> r) {
    if (r.ok()) qp = r.value();
  });
  if (world) {
    EXPECT_TRUE(world->run_until([&] { return qp != nullptr; }).ok());
  }
  std::optional<std::vector<Status>> out;
  qp->post({{RdmaOp::Kind::kRead, buf, reg.addr, reg.rkey}},
           [&](std::vector<Status> s) { out = std::move(s); });
  if (world) {
    EXPECT_TRUE(world->run_until([&] { return out.has_value(); }).ok());
  }
  return out;
}

TEST(Invariants, R6_3_RdmaThroughADroppedRegistrationIsCaughtOnALyingNic) {
  sim::SimWorld world(3);
  auto& node = world.add_node("gpu");
  auto strand = node.make_strand("data");
  InvariantMonitor m(node.clock(), {});
  LyingNic lying;
  CheckedNic nic(lying, node.clock(), m);
  sim::SimMemoryPool pool(1 << 16);
  auto reg = nic.register_memory(pool, 0, 4096, runtime::kAccessRemoteRead);
  ASSERT_TRUE(reg.ok());
  std::vector<std::byte> buf(64);
  ASSERT_TRUE(post_one(nic, *strand, *reg, buf, nullptr).has_value());
  EXPECT_EQ(m.violation_count(), 0u);  // registered: a success is right
  ASSERT_TRUE(nic.deregister(*reg).ok());
  ASSERT_TRUE(post_one(nic, *strand, *reg, buf, nullptr).has_value());
  ASSERT_EQ(m.violations().size(), 1u);
  EXPECT_NE(m.violations()[0].find("dropped registration"), std::string::npos);
}

// SPEC R6.3: a boot change drops every registration. RDMA posted through one
// since that succeeds is a violation even when the agent never called
// deregister for it (before, only a deregister marked a key dropped).
TEST(Invariants, R6_3_ABootChangeDropsEveryLiveRegistration) {
  FixedClock clock;
  InvariantMonitor m(clock, {});
  std::vector<std::byte> buf(64);
  const runtime::Registration old_reg{0x1000, 7, 4096};
  m.on_register(old_reg);
  clock.t = runtime::Instant(5ms);
  const RdmaOp read{RdmaOp::Kind::kRead, buf, 0x1000, 7};
  m.on_completion(read, runtime::Instant(4ms), Status());  // posted before the change
  m.on_boot_change("n:2");
  const runtime::Registration new_reg{0x2000, 8, 4096};
  m.on_register(new_reg);  // a map under the new boot
  clock.t = runtime::Instant(10ms);
  m.on_completion({RdmaOp::Kind::kRead, buf, 0x2000, 8}, runtime::Instant(9ms), Status());
  EXPECT_EQ(m.violation_count(), 0u);
  m.on_completion(read, runtime::Instant(9ms), Status());
  ASSERT_EQ(m.violations().size(), 1u);
  EXPECT_NE(m.violations()[0].find("dropped registration"), std::string::npos);
}

// SPEC R6.3 (review, session 32): an agent restart drops every registration
// of the old process, deregistered or not; the monitor took only the agent's
// own deregisters for it. And a later deregister (a retried, lingering one)
// does not move a boot change's earlier drop time on.
TEST(Invariants, R6_3_AProcessEndAndTheEarliestDropCount) {
  FixedClock clock;
  InvariantMonitor m(clock, {});
  std::vector<std::byte> buf(64);
  const RdmaOp read7{RdmaOp::Kind::kRead, buf, 0x1000, 7};
  const RdmaOp read8{RdmaOp::Kind::kRead, buf, 0x2000, 8};
  m.on_register({0x1000, 7, 4096});
  m.on_register({0x2000, 8, 4096});
  clock.t = runtime::Instant(5ms);
  m.on_process_end();
  clock.t = runtime::Instant(10ms);
  m.on_completion(read7, runtime::Instant(4ms), Status());  // posted before the end
  EXPECT_EQ(m.violation_count(), 0u);
  m.on_completion(read7, runtime::Instant(6ms), Status());
  EXPECT_EQ(m.violation_count(), 1u);
  m.on_register({0x2000, 8, 4096});  // the new process hands key 8 out again
  m.on_boot_change("n:2");           // dropped at 10 ms
  clock.t = runtime::Instant(20ms);
  m.on_deregister({0x2000, 8, 4096});  // retried late
  m.on_completion(read8, runtime::Instant(15ms), Status());
  EXPECT_EQ(m.violation_count(), 2u);
}

TEST(Invariants, R6_3_TheSimRnicFailsRdmaThroughADroppedRegistration) {
  sim::SimWorld world(4);
  sim::SimFabric fabric(world);
  auto& gpu = world.add_node("gpu");
  auto& mem = world.add_node("mem");
  auto& gpu_nic = fabric.add_nic("gpu");
  auto& mem_nic = fabric.add_nic("mem");
  auto strand = gpu.make_strand("data");
  InvariantMonitor m(mem.clock(), {});
  CheckedNic checked_mem(mem_nic, mem.clock(), m);
  CheckedNic checked_gpu(gpu_nic, gpu.clock(), m);
  sim::SimMemoryPool pool(1 << 16);
  auto reg = checked_mem.register_memory(pool, 0, 4096, runtime::kAccessRemoteRead);
  ASSERT_TRUE(reg.ok());
  ASSERT_TRUE(checked_mem.deregister(*reg).ok());
  std::vector<std::byte> buf(64);
  auto st = post_one(checked_gpu, *strand, *reg, buf, &world);
  ASSERT_TRUE(st.has_value());
  EXPECT_EQ((*st)[0].code(), ErrorCode::kRemoteAccess);
  EXPECT_EQ(m.violation_count(), 0u);
}

// The decorator passes answers through and reports what the extension accepted.
TEST(Invariants, R3_3_CheckedExtensionPassesEveryHookThrough) {
  struct Refusing final : ext::RegionExtension {
    std::string name() const override { return "refusing"; }
    Status hint(const ext::Hint&) override { return Error(ErrorCode::kExtensionFailed, "no"); }
    std::vector<std::string> hint_actions() const override { return {"read_hint", "x"}; }
  };
  FixedClock clock;
  InvariantMonitor m(clock, {.max_hint_requests = 1, .max_ranges_per_message = 4096});
  CheckedExtension ext(std::make_unique<Refusing>(), m);
  EXPECT_EQ(ext.name(), "refusing");
  EXPECT_EQ(ext.hint_actions().size(), 2u);
  EXPECT_EQ(ext.hint(hint(1, "read_hint", "a")).code(), ErrorCode::kExtensionFailed);
  EXPECT_EQ(ext.hint(hint(1, "read_hint", "b")).code(), ErrorCode::kExtensionFailed);
  m.check_all_hints_closed();
  EXPECT_EQ(m.violation_count(), 0u);  // refused hints open nothing
}

}  // namespace
}  // namespace rcxl::scenarios
