// SPEC R2.2 (validate_access, mapped, retire and the sweep) and R5.2 (fresh).
#include "tests/agent/agent_rig.h"
#include "tests/forwarding_nic.h"
#include "tests/json_mutator.h"

namespace rcxl::agent::testing {
namespace {

using ::testing::_;
using ::testing::NiceMock;
using ::testing::Return;

TEST(AgentRegions, R2_2_ValidateAccessRefusalIsRefusedAndMapsNothing) {
  AgentRig rig;
  ASSERT_TRUE(rig.start(rig.recording({{"refuse_regions", {1}}})).ok());
  auto c = rig.hello_client();
  auto a = c->alloc();
  EXPECT_EQ(code_of(c->map(a.region, a.handle)), "refused");
  EXPECT_EQ(rig.mem_nic.registrations(), 0u);
  EXPECT_FALSE(rig.agent->holds(c->conn, a.region));
  EXPECT_TRUE(rig.log_lines("mapped").empty());
  auto b = c->alloc();
  EXPECT_EQ(code_of(c->map(b.region, b.handle)), "ok");
}

// PROTOCOL: `refused` is validate_access saying no; a hook that raised is
// `extension_failed` (which a client retries), and maps nothing either way.
TEST(AgentRegions, R2_2_AValidateAccessThatRaisesIsExtensionFailedNotRefused) {
  AgentRig rig;
  auto mock = std::make_unique<NiceMock<MockExtension>>();
  auto* ext = mock.get();
  ASSERT_TRUE(rig.start(std::move(mock)).ok());
  EXPECT_CALL(*ext, validate_access(_))
      .WillOnce([](const ext::RegionInfo&) -> Status { throw std::runtime_error("boom"); })
      .WillOnce(Return(Error(ErrorCode::kRefused, "not this one")))
      .WillRepeatedly(Return(Status()));
  auto c = rig.hello_client();
  auto a = c->alloc();
  EXPECT_EQ(code_of(c->map(a.region, a.handle)), "extension_failed");
  EXPECT_EQ(rig.mem_nic.registrations(), 0u);
  EXPECT_FALSE(rig.agent->holds(c->conn, a.region));
  EXPECT_EQ(code_of(c->map(a.region, a.handle)), "refused");
  EXPECT_EQ(rig.mem_nic.registrations(), 0u);
  EXPECT_EQ(code_of(c->map(a.region, a.handle)), "ok");
}

// The sim RNIC, but registrations fail while `full` (its MR table or the
// locked-memory limit exhausted) and deregistrations while `stuck`
// (ibv_dereg_mr can return EBUSY or an I/O error: the registration stays live).
class FailingNic final : public rcxl::testing::ForwardingNic {
 public:
  using ForwardingNic::ForwardingNic;
  Result<runtime::Registration> register_memory(runtime::MemoryPool& pool, std::uint64_t offset,
                                                std::uint64_t length, unsigned access) override {
    if (full) return Error(ErrorCode::kUnavailable, "ibv_reg_mr: Cannot allocate memory");
    return inner_.register_memory(pool, offset, length, access);
  }
  Status deregister(const runtime::Registration& r) override {
    if (stuck) return Error(ErrorCode::kIoError, "ibv_dereg_mr: Device or resource busy");
    return inner_.deregister(r);
  }
  bool full = false;
  bool stuck = false;
};

// The rig's agent (recording extension) started on `nic` instead of the sim RNIC.
Status start_on(AgentRig& rig, FailingNic& nic) {
  rig.agent = std::make_unique<Agent>(rig.mem, rig.pool, nic, rig.recording(), rig.config());
  return rig.agent->start();
}

// PROTOCOL.md lists no code for the agent's own failures: a NIC that cannot
// register answers no_space (a PROTOCOL code), and the map changes nothing.
TEST(AgentRegions, R2_2_ANicThatCannotRegisterAnswersNoSpaceAndChangesNothing) {
  AgentRig rig;
  FailingNic nic(rig.mem_nic);
  nic.full = true;
  ASSERT_TRUE(start_on(rig, nic).ok());
  auto c = rig.hello_client();
  auto a = c->alloc();
  Json refused = c->map(a.region, a.handle, true);
  EXPECT_EQ(code_of(refused), "no_space") << refused.dump();
  EXPECT_TRUE(rcxl::testing::wire_error_codes().count(code_of(refused)));
  EXPECT_EQ(rig.mem_nic.registrations(), 0u);
  EXPECT_FALSE(rig.agent->holds(c->conn, a.region));
  EXPECT_EQ(rig.agent->metrics().maps_refused, 1u);
  nic.full = false;
  EXPECT_EQ(code_of(c->map(a.region, a.handle, true)), "ok");
  EXPECT_EQ(rig.mem_nic.registrations(), 1u);
  ASSERT_EQ(rig.log_lines("mapped").size(), 1u);
  EXPECT_EQ(rig.log_lines("mapped")[0]["fresh"], true);  // still its first map
  rig.agent.reset();  // before `nic`, which it deregisters through
}

TEST(AgentRegions, R2_2_AFailedMappedKeepsTheRegionOutOfUseUntilALaterMapSucceeds) {
  AgentRig rig;
  auto mock = std::make_unique<NiceMock<MockExtension>>();
  auto* ext = mock.get();
  ASSERT_TRUE(rig.start(std::move(mock)).ok());
  auto c = rig.hello_client();
  auto a = c->alloc();
  EXPECT_CALL(*ext, mapped(_, true))
      .WillOnce(Return(Error(ErrorCode::kInternal, "cannot drop stale pages")))
      .WillOnce(Return(Status()));
  EXPECT_EQ(code_of(c->map(a.region, a.handle, true)), "extension_failed");
  EXPECT_EQ(rig.mem_nic.registrations(), 0u);
  EXPECT_EQ(code_of(c->read_hint("q", a)), "bad_range");  // out of use
  // The retry is still fresh: no map reply has gone out (SPEC R5.1 "retries included").
  EXPECT_EQ(code_of(c->map(a.region, a.handle, true)), "ok");
  EXPECT_EQ(rig.mem_nic.registrations(), 1u);
}

TEST(AgentRegions, R2_2_RetireRefusalsKeepTheRegionUntilTheSweepGetsAYes) {
  AgentRig rig;
  ASSERT_TRUE(rig.start(rig.recording({{"retire_refusals", 2}})).ok());
  auto c = rig.hello_client();
  const auto total = rig.agent->free_bytes();
  auto a = c->alloc(1 << 20);
  ASSERT_EQ(code_of(c->map(a.region, a.handle)), "ok");
  ASSERT_EQ(code_of(c->free(a)), "ok");
  EXPECT_EQ(rig.mem_nic.registrations(), 0u);  // deregistered at once
  EXPECT_EQ(rig.agent->retiring_regions(), 1u);
  EXPECT_EQ(rig.agent->free_bytes(), total - (1 << 20));
  EXPECT_EQ(code_of(c->map(a.region, a.handle)), "not_found");
  rig.run_for(1100ms);  // sweep 1: second no
  EXPECT_EQ(rig.agent->retiring_regions(), 1u);
  rig.run_for(1000ms);  // sweep 2: yes
  EXPECT_EQ(rig.agent->retiring_regions(), 0u);
  EXPECT_EQ(rig.agent->free_bytes(), total);
  EXPECT_EQ(rig.log_lines("retire").size(), 3u);
  rig.run_for(2000ms);
  EXPECT_EQ(rig.log_lines("retire").size(), 3u);  // never asked again
}

// SPEC R6.3 (review, session 32): a failed deregister was logged and
// forgotten, and the freed region's memory went to the next alloc while the
// old rkey still reached it. The registration is kept and tried again at each
// sweep; the region is retired only once it is gone.
TEST(AgentRegions, R6_3_ARegistrationTheNicWouldNotDropKeepsItsMemoryOutOfUse) {
  AgentRig rig;
  FailingNic nic(rig.mem_nic);
  nic.stuck = true;
  ASSERT_TRUE(start_on(rig, nic).ok());
  auto c = rig.hello_client();
  const auto total = rig.agent->free_bytes();
  auto a = c->alloc(1 << 20);
  ASSERT_EQ(code_of(c->map(a.region, a.handle)), "ok");
  ASSERT_EQ(code_of(c->free(a)), "ok");
  rig.run_for(2100ms);  // two sweeps, each failing again
  EXPECT_EQ(rig.mem_nic.registrations(), 1u);
  EXPECT_EQ(rig.agent->metrics().registrations, 1u);
  EXPECT_EQ(rig.agent->metrics().lingering_registrations, 1u);
  EXPECT_EQ(rig.agent->retiring_regions(), 1u);
  EXPECT_EQ(rig.agent->free_bytes(), total - (1 << 20));
  EXPECT_TRUE(rig.log_lines("retire").empty());  // not asked while the rkey lives
  nic.stuck = false;
  rig.run_for(1000ms);
  EXPECT_EQ(rig.mem_nic.registrations(), 0u);
  EXPECT_EQ(rig.agent->metrics().lingering_registrations, 0u);
  EXPECT_EQ(rig.agent->retiring_regions(), 0u);
  EXPECT_EQ(rig.agent->free_bytes(), total);
  EXPECT_EQ(rig.log_lines("retire").size(), 1u);
}

struct FreshCase {
  std::unique_ptr<TestClient> owner;
  TestClient::Alloc region;
};

// docs/agent.md, *Alloc tokens*: an alloc retried with its token (its first
// reply lost to a timeout or a dropped connection) answers the region the
// first made, on any connection, and allocates nothing; with another size it
// is refused and changes nothing. The hello says the agent takes tokens.
TEST(AgentRegions, R1_5_AnAllocRetriedWithItsTokenAnswersTheRegionItMade) {
  AgentRig rig;
  ASSERT_TRUE(rig.start(rig.recording()).ok());
  auto c = rig.client();
  Json hello = c->hello();
  EXPECT_EQ(hello.value("alloc_tokens", false), true) << hello.dump();
  const Json alloc = {{"op", "alloc"}, {"id", 2}, {"size", 8192}, {"token", "t-1"}};
  Json first = c->call(alloc);
  ASSERT_EQ(code_of(first), "ok") << first.dump();
  const std::uint64_t free_after_first = rig.agent->free_bytes();
  auto other = rig.hello_client();  // the retry comes on a new connection
  EXPECT_EQ(other->call(alloc), first);
  Json asked = alloc;
  asked["made_only"] = true;
  EXPECT_EQ(other->call(asked), first);
  EXPECT_EQ(rig.agent->free_bytes(), free_after_first);
  EXPECT_EQ(rig.agent->metrics().allocs_answered_again, 2u);
  Json resized = other->call({{"op", "alloc"}, {"id", 3}, {"size", 4096}, {"token", "t-1"}});
  EXPECT_EQ(code_of(resized), "bad_request") << resized.dump();
  EXPECT_EQ(rig.agent->free_bytes(), free_after_first);
  // Another token, or none (also as null, like any optional field), is another region.
  Json second = c->call({{"op", "alloc"}, {"id", 4}, {"size", 8192}, {"token", "t-2"}});
  EXPECT_NE(second["region"], first["region"]);
  EXPECT_NE(c->alloc(8192).region, first["region"].get<std::uint64_t>());
  Json untokened = c->call({{"op", "alloc"}, {"id", 5}, {"size", 8192}, {"token", nullptr}});
  ASSERT_EQ(code_of(untokened), "ok") << untokened.dump();
  EXPECT_NE(untokened["region"], first["region"]);
}

// A token whose region was freed, or that a made_only ask found unused, is
// withdrawn: the first alloc with it, if it still comes (it waited on another
// connection), makes nothing that nobody would ask about again.
TEST(AgentRegions, R1_5_AnAllocWithAWithdrawnTokenMakesNothing) {
  AgentRig rig;
  ASSERT_TRUE(rig.start(rig.recording()).ok());
  auto c = rig.hello_client();
  Json first = c->call({{"op", "alloc"}, {"id", 2}, {"size", 8192}, {"token", "t-1"}});
  ASSERT_EQ(
      code_of(c->call(
          {{"op", "free"}, {"id", 3}, {"region", first["region"]}, {"handle", first["handle"]}})),
      "ok");
  const std::uint64_t free_bytes = rig.agent->free_bytes();
  const std::uint64_t regions = rig.agent->metrics().regions;
  for (const Json& late :
       {Json{{"op", "alloc"}, {"id", 4}, {"size", 8192}, {"token", "t-1"}},
        Json{{"op", "alloc"}, {"id", 5}, {"size", 8192}, {"token", "t-2"}, {"made_only", true}},
        Json{{"op", "alloc"}, {"id", 6}, {"size", 8192}, {"token", "t-2"}}}) {
    Json reply = c->call(late);
    EXPECT_EQ(code_of(reply), "not_found") << late.dump() << " -> " << reply.dump();
    EXPECT_EQ(rig.agent->free_bytes(), free_bytes);
    EXPECT_EQ(rig.agent->metrics().regions, regions);
  }
  // Past the newest 4096 withdrawn tokens the oldest is forgotten.
  for (int i = 0; i < 4096; ++i) {
    c->send({{"op", "alloc"},
             {"id", 100 + i},
             {"size", 4096},
             {"token", "w-" + std::to_string(i)},
             {"made_only", true}});
  }
  for (int i = 0; i < 4096; ++i) ASSERT_EQ(code_of(c->next()), "not_found") << i;
  EXPECT_EQ(code_of(c->call({{"op", "alloc"}, {"id", 7}, {"size", 8192}, {"token", "t-1"}})), "ok");
  EXPECT_EQ(code_of(c->call({{"op", "alloc"}, {"id", 8}, {"size", 4096}, {"token", "w-4095"}})),
            "not_found");
}

TEST(AgentRegions, R5_2_FreshOnlyWithTheOwnerHandleOnTheFirstMap) {
  AgentRig rig;
  rig.set_generation("1");
  ASSERT_TRUE(rig.start(rig.recording({{"generation_file", "/gen"}})).ok());
  auto owner = rig.hello_client();
  auto reader = rig.hello_client();
  auto mapped_fresh = [&]() {
    auto lines = rig.log_lines("mapped");
    return lines.empty() ? Json() : lines.back()["fresh"];
  };
  auto release = [&](TestClient& c, const TestClient::Alloc& a) {
    ASSERT_EQ(
        code_of(c.call({{"op", "release"}, {"id", 9}, {"region", a.region}, {"handle", a.handle}})),
        "ok");
  };
  // Read handle + fresh: not fresh.
  auto r1 = owner->alloc();
  ASSERT_EQ(code_of(reader->map(r1.region, r1.read_handle, true)), "ok");
  EXPECT_EQ(mapped_fresh(), false);
  // Owner handle without fresh: not fresh.
  auto r2 = owner->alloc();
  ASSERT_EQ(code_of(owner->map(r2.region, r2.handle, false)), "ok");
  EXPECT_EQ(mapped_fresh(), false);
  // Owner + fresh on the first map: fresh.
  auto r3 = owner->alloc();
  ASSERT_EQ(code_of(owner->map(r3.region, r3.handle, true)), "ok");
  EXPECT_EQ(mapped_fresh(), true);
  const auto mapped_lines = rig.log_lines("mapped").size();
  // A later map of a registered region only adds a hold: mapped is not called.
  ASSERT_EQ(code_of(reader->map(r3.region, r3.read_handle, true)), "ok");
  EXPECT_EQ(rig.log_lines("mapped").size(), mapped_lines);
  // After a dereg (all holds released) and a remap: not fresh, even with the owner's word.
  release(*owner, r3);
  TestClient::Alloc r3_read{r3.region, r3.read_handle, ""};
  release(*reader, r3_read);
  EXPECT_EQ(rig.mem_nic.registrations(), 2u);  // r1, r2 only
  ASSERT_EQ(code_of(owner->map(r3.region, r3.handle, true)), "ok");
  EXPECT_EQ(mapped_fresh(), false);
  // After a boot change dropped everything: still not fresh.
  rig.set_generation("2");
  rig.run_for(150ms);
  owner->boot = rig.agent->boot();
  ASSERT_EQ(code_of(owner->map(r3.region, r3.handle, true)), "ok");
  EXPECT_EQ(mapped_fresh(), false);
  auto last = rig.log_lines("mapped").back();
  EXPECT_EQ(last, (Json{{"hook", "mapped"}, {"region", r3.region}, {"fresh", false}}));
}

// One RDMA op from the GPU node through `map`'s rkey; its status.
Status rdma(AgentRig& rig, runtime::RdmaOp::Kind kind, std::span<std::byte> buf, const Json& map) {
  std::shared_ptr<runtime::QueuePair> qp;
  auto strand = rig.gpu.make_strand("rdma");
  rig.gpu_nic.connect("mem", *strand,
                      [&](Result<std::shared_ptr<runtime::QueuePair>> r) { qp = r.value(); });
  rig.run_for(1ms);
  if (!qp) return Error(ErrorCode::kUnavailable, "no queue pair");
  std::optional<std::vector<Status>> out;
  qp->post({{kind, buf, map["addr"].get<std::uint64_t>(), map["rkey"].get<std::uint32_t>()}},
           [&](std::vector<Status> s) { out = std::move(s); });
  rig.run_for(1ms);
  return out ? (*out)[0] : Error(ErrorCode::kUnavailable, "no completion");
}

// Two clients of a started agent: one allocated a region, the other reads it.
struct OwnerAndReader {
  std::unique_ptr<TestClient> owner;
  std::unique_ptr<TestClient> reader;
  TestClient::Alloc a;
};

OwnerAndReader owner_and_reader(AgentRig& rig) {
  OwnerAndReader o{rig.hello_client(), rig.hello_client(), {}};
  o.a = o.owner->alloc();
  return o;
}

// docs/agent.md, *Security model*: a map under the read handle gets an rkey
// registered for READ only, so a reader cannot overwrite the owner's KV; the
// owner's rkey still takes both. The extension hears of the region once.
TEST(AgentRegions, R1_5_AReadHandleMapGetsAnRkeyThatTakesNoWrites) {
  AgentRig rig;
  ASSERT_TRUE(rig.start(rig.recording()).ok());
  auto [owner, reader, a] = owner_and_reader(rig);
  Json own = owner->map(a.region, a.handle, true);
  ASSERT_EQ(code_of(own), "ok");
  Json read = reader->map(a.region, a.read_handle);
  ASSERT_EQ(code_of(read), "ok") << read.dump();
  EXPECT_NE(read["rkey"], own["rkey"]);
  EXPECT_EQ(read["addr"], own["addr"]);
  EXPECT_EQ(rig.mem_nic.registrations(), 2u);
  EXPECT_EQ(rig.agent->metrics().registrations, 2u);
  EXPECT_EQ(rig.log_lines("validate_access").size(), 1u);
  EXPECT_EQ(rig.log_lines("mapped").size(), 1u);
  // A second reader map adds a hold, not a registration.
  ASSERT_EQ(reader->map(a.region, a.read_handle)["rkey"], read["rkey"]);
  EXPECT_EQ(rig.mem_nic.registrations(), 2u);

  std::vector<std::byte> kv(16, std::byte{0x5a});
  ASSERT_TRUE(rdma(rig, runtime::RdmaOp::Kind::kWrite, kv, own).ok());
  std::vector<std::byte> junk(16, std::byte{0x11});
  EXPECT_EQ(rdma(rig, runtime::RdmaOp::Kind::kWrite, junk, read).code(), ErrorCode::kRemoteAccess);
  std::vector<std::byte> got(16);
  ASSERT_TRUE(rdma(rig, runtime::RdmaOp::Kind::kRead, got, read).ok());
  EXPECT_EQ(got, kv);  // the refused WRITE changed nothing

  // Both go with the region: neither rkey reaches it after the free.
  ASSERT_EQ(code_of(owner->free(a)), "ok");
  EXPECT_EQ(rig.mem_nic.registrations(), 0u);
  EXPECT_EQ(rdma(rig, runtime::RdmaOp::Kind::kRead, got, read).code(), ErrorCode::kRemoteAccess);
  EXPECT_EQ(rdma(rig, runtime::RdmaOp::Kind::kRead, got, own).code(), ErrorCode::kRemoteAccess);
}

// A reader may map first: its map tells the extension (never fresh); the
// owner's later map only adds the read-write rkey. A region stays registered
// under both until its last holder lets go.
TEST(AgentRegions, R1_5_AReaderMapsFirstAndTheOwnerAddsItsRkeyLater) {
  AgentRig rig;
  ASSERT_TRUE(rig.start(rig.recording()).ok());
  auto [owner, reader, a] = owner_and_reader(rig);
  Json read = reader->map(a.region, a.read_handle, true);
  ASSERT_EQ(code_of(read), "ok");
  EXPECT_FALSE(rig.agent->registration(a.region).has_value());
  ASSERT_TRUE(rig.agent->read_registration(a.region).has_value());
  ASSERT_EQ(rig.log_lines("mapped").size(), 1u);
  EXPECT_EQ(rig.log_lines("mapped")[0]["fresh"], false);
  ASSERT_EQ(code_of(reader->read_hint("q", {a.region, a.read_handle, ""})), "ok");
  Json own = owner->map(a.region, a.handle, true);
  ASSERT_EQ(code_of(own), "ok");
  EXPECT_EQ(rig.log_lines("mapped").size(), 1u);
  EXPECT_EQ(rig.log_lines("validate_access").size(), 1u);
  std::vector<std::byte> kv(8, std::byte{0x42});
  EXPECT_TRUE(rdma(rig, runtime::RdmaOp::Kind::kWrite, kv, own).ok());
  EXPECT_EQ(rdma(rig, runtime::RdmaOp::Kind::kWrite, kv, read).code(), ErrorCode::kRemoteAccess);
  // The owner lets go: the reader still holds, so both stay.
  ASSERT_EQ(code_of(owner->call(
                {{"op", "release"}, {"id", 9}, {"region", a.region}, {"handle", a.handle}})),
            "ok");
  EXPECT_EQ(rig.mem_nic.registrations(), 2u);
  ASSERT_EQ(code_of(reader->call(
                {{"op", "release"}, {"id", 9}, {"region", a.region}, {"handle", a.read_handle}})),
            "ok");
  EXPECT_EQ(rig.mem_nic.registrations(), 0u);
}

// A second registration the NIC cannot make answers no_space and leaves the
// first, its holds and the extension as they were.
TEST(AgentRegions, R1_5_AReadOnlyRegistrationTheNicCannotMakeChangesNothing) {
  AgentRig rig;
  FailingNic nic(rig.mem_nic);
  ASSERT_TRUE(start_on(rig, nic).ok());
  auto [owner, reader, a] = owner_and_reader(rig);
  Json own = owner->map(a.region, a.handle, true);
  ASSERT_EQ(code_of(own), "ok");
  nic.full = true;
  Json refused = reader->map(a.region, a.read_handle);
  EXPECT_EQ(code_of(refused), "no_space") << refused.dump();
  EXPECT_NE(refused["error"]["message"].get<std::string>().find("--reader-rkeys shared"),
            std::string::npos)
      << refused.dump();
  EXPECT_EQ(rig.mem_nic.registrations(), 1u);
  EXPECT_FALSE(rig.agent->holds(reader->conn, a.region));
  EXPECT_TRUE(rig.agent->holds(owner->conn, a.region));
  EXPECT_EQ(rig.agent->registration(a.region)->rkey, own["rkey"].get<std::uint32_t>());
  EXPECT_EQ(rig.log_lines("mapped").size(), 1u);
  nic.full = false;
  EXPECT_EQ(code_of(reader->map(a.region, a.read_handle)), "ok");
  EXPECT_EQ(rig.mem_nic.registrations(), 2u);
  rig.agent.reset();  // before `nic`, which it deregisters through
}

// `--reader-rkeys shared`: every map gets the owner's read-write rkey (one
// registration per region, as before session 23).
TEST(AgentRegions, R1_5_SharedReaderRkeysGiveReadersTheOwnersRkey) {
  AgentRig rig;
  AgentConfig config = rig.config();
  config.read_only_reader_rkeys = false;
  ASSERT_TRUE(rig.start(rig.recording(), config).ok());
  auto [owner, reader, a] = owner_and_reader(rig);
  Json own = owner->map(a.region, a.handle);
  Json read = reader->map(a.region, a.read_handle);
  ASSERT_EQ(code_of(read), "ok");
  EXPECT_EQ(read["rkey"], own["rkey"]);
  EXPECT_EQ(rig.mem_nic.registrations(), 1u);
  std::vector<std::byte> kv(8, std::byte{0x42});
  EXPECT_TRUE(rdma(rig, runtime::RdmaOp::Kind::kWrite, kv, read).ok());
}

TEST(AgentRegions, R2_5_RecordingLogsEveryHookCall) {
  AgentRig rig;
  ASSERT_TRUE(rig.start(rig.recording()).ok());
  auto c = rig.hello_client();
  auto a = c->alloc(8192);
  ASSERT_EQ(code_of(c->map(a.region, a.handle, true)), "ok");
  ASSERT_EQ(code_of(c->read_hint("q1", a, 0, 4096)), "ok");
  ASSERT_EQ(code_of(c->free(a)), "ok");
  c->close();
  rig.run_for(10ms);
  rig.agent->stop();
  const std::uint64_t r = a.region;
  EXPECT_EQ(rig.log_lines(), (std::vector<Json>{
                                 {{"hook", "validate_access"}, {"region", r}},
                                 {{"hook", "mapped"}, {"region", r}, {"fresh", true}},
                                 {{"hook", "hint"},
                                  {"conn", c->conn},
                                  {"action", "read_hint"},
                                  {"request", "q1"},
                                  {"ranges", Json::array({{r, 0, 4096}})}},
                                 {{"hook", "retire"}, {"region", r}},
                                 {{"hook", "connection_closed"}, {"conn", c->conn}},
                                 {{"hook", "close"}},
                             }));
}

}  // namespace
}  // namespace rcxl::agent::testing

namespace rcxl::agent::testing {
namespace {

TEST(AgentRegions, R7_StopDeregistersEveryMappingClosesConnectionsAndClosesTheExtension) {
  AgentRig rig;
  ASSERT_TRUE(rig.start(rig.recording()).ok());
  auto c = rig.hello_client();
  auto a = c->alloc();
  ASSERT_EQ(code_of(c->map(a.region, a.handle)), "ok");
  ASSERT_EQ(code_of(c->read_hint("q", a)), "ok");
  EXPECT_EQ(rig.mem_nic.registrations(), 1u);
  rig.agent->stop();
  EXPECT_EQ(rig.mem_nic.registrations(), 0u);
  EXPECT_EQ(rig.agent->metrics().open_hint_requests, 0u);
  // Gone from the gauge, so counted as closed with their connection.
  EXPECT_EQ(rig.agent->metrics().hint_requests_closed_by_disconnect, 1u);
  EXPECT_TRUE(c->wait_closed());
  EXPECT_EQ(rig.log_lines("close").size(), 1u);
  EXPECT_TRUE(rig.log_lines("connection_closed").empty());  // the extension is closed already
  rig.agent->stop();                                        // idempotent
  EXPECT_EQ(rig.log_lines("close").size(), 1u);
}

}  // namespace
}  // namespace rcxl::agent::testing
