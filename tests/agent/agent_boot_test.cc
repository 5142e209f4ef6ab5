// SPEC R6: boots and memory generations, and R6.5's map that races a reset.
#include <set>
#include <utility>

#include "tests/agent/agent_rig.h"

namespace rcxl::agent::testing {
namespace {

using ::testing::_;
using ::testing::NiceMock;
using ::testing::Return;

const std::string kGenBoot = std::string(kBootId);

TEST(AgentBoot, R6_1_WithoutAGenerationHookTheBootIsTheBootId) {
  AgentRig rig;
  ASSERT_TRUE(rig.start(rig.recording()).ok());
  EXPECT_EQ(rig.hello_client()->boot, kGenBoot);
}

TEST(AgentBoot, R6_2_AGenerationThatCannotBeReadAtStartStopsTheAgent) {
  AgentRig rig;
  Status st = rig.start(rig.recording({{"generation_file", "/gen"}}));
  EXPECT_EQ(st.code(), ErrorCode::kGenerationUnknown) << st.ToString();
  EXPECT_NE(st.message().find("generation"), std::string::npos) << st.ToString();
  AgentRig empty;
  empty.set_generation("  \n");
  EXPECT_FALSE(empty.start(empty.recording({{"generation_file", "/gen"}})).ok());
}

TEST(AgentBoot, R6_3_AGenerationChangeDropsEveryMappingHoldAndHint) {
  AgentRig rig;
  rig.set_generation("7\n");
  ASSERT_TRUE(rig.start(rig.recording({{"generation_file", "/gen"}})).ok());
  auto c = rig.hello_client();
  EXPECT_EQ(c->boot, kGenBoot + ":7");
  auto a = c->alloc();
  Json map = c->map(a.region, a.handle);
  ASSERT_EQ(code_of(map), "ok");
  EXPECT_EQ(map["boot"], kGenBoot + ":7");
  ASSERT_EQ(code_of(c->read_hint("q", a)), "ok");
  const auto old_boot = c->boot;

  rig.set_generation("8");
  // The default poll (SPEC R6.2: every 0.1 s) reads it within one interval;
  // a window of 150 ms let a poll of 140 ms pass (session-33 audit).
  const auto set_at = rig.world.loop().now();
  while (rig.agent->boot() != kGenBoot + ":8" && rig.world.loop().now() - set_at < 1s) {
    rig.run_for(1ms);
  }
  EXPECT_LE(rig.world.loop().now() - set_at, AgentConfig{}.generation_poll + 1ms);
  EXPECT_EQ(AgentConfig{}.generation_poll, 100ms);
  EXPECT_EQ(rig.agent->boot(), kGenBoot + ":8");
  EXPECT_EQ(rig.mem_nic.registrations(), 0u);
  EXPECT_FALSE(rig.agent->holds(c->conn, a.region));
  EXPECT_EQ(rig.agent->open_hint_requests(c->conn), 0u);
  EXPECT_EQ(rig.agent->metrics().boot_changes, 1u);

  Json stale = c->map(a.region, a.handle);
  EXPECT_EQ(code_of(stale), "stale_epoch");
  EXPECT_EQ(stale["boot"], kGenBoot + ":8");
  EXPECT_EQ(rig.mem_nic.registrations(), 0u);
  c->boot = stale["boot"];
  Json again = c->map(a.region, a.handle);
  EXPECT_EQ(code_of(again), "ok");
  EXPECT_EQ(again["boot"], kGenBoot + ":8");
  EXPECT_NE(again["rkey"], map["rkey"]);
  EXPECT_EQ(rig.hello_client()->boot, kGenBoot + ":8");
  EXPECT_NE(old_boot, c->boot);
}

// PROTOCOL Boot: the change closes the open hint requests of every connection,
// and every action that carries an epoch (write hints and waits too) answers
// stale_epoch with the boot, changing nothing.
TEST(AgentBoot, R6_3_EveryConnectionAndEveryEpochActionSeesTheNewBoot) {
  AgentRig rig;
  rig.set_generation("7");
  ASSERT_TRUE(rig.start(rig.recording({{"generation_file", "/gen"},
                                       {"actions",
                                        {"read_hint", "read_hint_end", "write_hint", "read_promote",
                                         "write_wait"}}}))
                  .ok());
  auto owner = rig.hello_client();
  auto a = owner->alloc();
  ASSERT_EQ(code_of(owner->map(a.region, a.handle)), "ok");
  auto other = rig.hello_client();
  ASSERT_EQ(code_of(owner->read_hint("q1", a)), "ok");
  ASSERT_EQ(code_of(other->read_hint("q2", a)), "ok");
  rig.set_generation("8");
  rig.run_for(150ms);
  EXPECT_EQ(rig.agent->open_hint_requests(owner->conn), 0u);
  EXPECT_EQ(rig.agent->open_hint_requests(other->conn), 0u);
  EXPECT_EQ(rig.agent->metrics().open_hint_requests, 0u);
  // Closed at the extension too, as their ends would: it holds what they
  // asked for (a cxl_ssd pins their pages) and no end will come from clients,
  // whose read_hint_end now answers {} without reaching it.
  std::set<std::pair<std::uint64_t, std::string>> ended;
  for (const auto& line : rig.log_lines("hint")) {
    if (line["action"] == "read_hint_end") ended.emplace(line["conn"], line["request"]);
  }
  EXPECT_EQ(ended, (std::set<std::pair<std::uint64_t, std::string>>{{owner->conn, "q1"},
                                                                    {other->conn, "q2"}}));
  EXPECT_EQ(rig.agent->metrics().hint_requests_closed_by_boot_change, 2u);
  const auto hints_logged = rig.log_lines("hint").size();
  EXPECT_EQ(code_of(owner->call(
                {{"op", "extension"}, {"id", 8}, {"action", "read_hint_end"}, {"request", "q1"}})),
            "ok");
  EXPECT_EQ(rig.log_lines("hint").size(), hints_logged);  // not open: not passed on
  const Json ranges = Json::array({{a.region, 0, 4096}});
  const Json handles = {{std::to_string(a.region), a.handle}};
  Json write_hint = owner->hint("write_hint", "t1", ranges, handles);
  EXPECT_EQ(code_of(write_hint), "stale_epoch") << write_hint.dump();
  EXPECT_EQ(write_hint["boot"], kGenBoot + ":8");
  Json wait = owner->call({{"op", "extension"},
                           {"id", 9},
                           {"action", "write_wait"},
                           {"token", "t2"},
                           {"epoch", owner->boot},
                           {"ranges", ranges},
                           {"handles", handles},
                           {"timeout_ms", 10}});
  EXPECT_EQ(code_of(wait), "stale_epoch") << wait.dump();
  EXPECT_EQ(wait["boot"], kGenBoot + ":8");
  EXPECT_EQ(rig.agent->metrics().write_waits, 0u);
}

TEST(AgentBoot, R6_3_BootChangeObserverSeesEachNewBootOnceInOrder) {
  AgentRig rig;
  rig.set_generation("1");
  std::vector<std::string> seen;
  auto config = rig.config();
  config.on_boot_change = [&](const std::string& boot) { seen.push_back(boot); };
  ASSERT_TRUE(rig.start(rig.recording({{"generation_file", "/gen"}}), config).ok());
  rig.run_for(150ms);
  EXPECT_TRUE(seen.empty());  // the boot read at start is not a change
  rig.set_generation("2");
  rig.run_for(350ms);  // several polls read the same new value
  rig.set_generation("3");
  rig.run_for(150ms);
  EXPECT_EQ(seen, (std::vector<std::string>{kGenBoot + ":2", kGenBoot + ":3"}));
}

TEST(AgentBoot, R6_4_UnknownPeriodsGiveNewBootsEvenWithTheSameGeneration) {
  AgentRig rig;
  rig.set_generation("5");
  ASSERT_TRUE(rig.start(rig.recording({{"generation_file", "/gen"}})).ok());
  auto c = rig.hello_client();
  auto a = c->alloc();
  ASSERT_EQ(code_of(c->map(a.region, a.handle)), "ok");
  std::vector<std::string> boots = {rig.agent->boot()};

  rig.mem.files().remove("/gen");
  // Within the grace (SPEC R6.4: 2 s) the old generation stands; it ends
  // within a poll after it (1500/+700 ms windows let 1.6 s pass: session-33 audit).
  EXPECT_EQ(AgentConfig{}.generation_grace, 2s);
  const auto removed_at = rig.world.loop().now();
  while (rig.agent->boot() == kGenBoot + ":5" && rig.world.loop().now() - removed_at < 5s) {
    rig.run_for(1ms);
  }
  EXPECT_GE(rig.world.loop().now() - removed_at, 2s);
  EXPECT_LE(rig.world.loop().now() - removed_at, 2s + AgentConfig{}.generation_poll + 1ms);
  rig.run_for(100ms);
  boots.push_back(rig.agent->boot());
  EXPECT_EQ(rig.mem_nic.registrations(), 0u);
  c->boot = boots.back();
  EXPECT_EQ(code_of(c->map(a.region, a.handle)), "generation_unknown");
  EXPECT_EQ(rig.mem_nic.registrations(), 0u);

  rig.set_generation("5");
  rig.run_for(150ms);
  boots.push_back(rig.agent->boot());

  rig.mem.files().set_unreadable("/gen", true);
  rig.run_for(2200ms);
  boots.push_back(rig.agent->boot());
  rig.mem.files().set_unreadable("/gen", false);
  rig.run_for(150ms);
  boots.push_back(rig.agent->boot());

  EXPECT_EQ(boots,
            (std::vector<std::string>{kGenBoot + ":5", kGenBoot + ":unknown", kGenBoot + ":5~1",
                                      kGenBoot + ":unknown", kGenBoot + ":5~2"}));
  EXPECT_EQ(rig.agent->metrics().unknown_periods, 2u);
  EXPECT_EQ(rig.agent->metrics().boot_changes, 4u);
  c->boot = boots.back();
  EXPECT_EQ(code_of(c->map(a.region, a.handle)), "ok");
  EXPECT_EQ(rig.hello_client()->boot, kGenBoot + ":5~2");
}

// An unknown period closes open requests as a generation change does, and the
// extension hears their ends (a cxl_ssd's generation does not change in it, so
// it would otherwise keep their pins until the connection closes). An
// extension that takes no ends is sent none (R4.2).
TEST(AgentBoot, R6_4_AnUnknownPeriodEndsOpenHintRequestsAtTheExtension) {
  for (const bool takes_ends : {true, false}) {
    SCOPED_TRACE(takes_ends ? "takes read_hint_end" : "takes read_hint only");
    AgentRig rig;
    rig.set_generation("5");
    const Json actions =
        takes_ends ? Json::array({"read_hint", "read_hint_end"}) : Json::array({"read_hint"});
    ASSERT_TRUE(rig.start(rig.recording({{"generation_file", "/gen"}, {"actions", actions}})).ok());
    auto c = rig.hello_client();
    auto a = c->alloc();
    ASSERT_EQ(code_of(c->map(a.region, a.handle)), "ok");
    ASSERT_EQ(code_of(c->read_hint("q", a)), "ok");
    rig.mem.files().remove("/gen");
    rig.run_for(2200ms);
    ASSERT_EQ(rig.agent->boot(), kGenBoot + ":unknown");
    auto lines = rig.log_lines("hint");
    ASSERT_EQ(lines.size(), takes_ends ? 2u : 1u);
    if (takes_ends) {
      EXPECT_EQ(lines[1]["action"], "read_hint_end");
      EXPECT_EQ(lines[1]["request"], "q");
      EXPECT_EQ(lines[1]["conn"], c->conn);
    }
    EXPECT_EQ(rig.agent->metrics().hint_requests_closed_by_boot_change, 1u);
  }
}

// A generation is glued into the boot: one holding the boot's delimiters, a
// byte a JSON reply cannot carry as it is, or `unknown` would let boots repeat
// or never match the epoch clients send back (every map stale_epoch). At start
// it stops the agent and says why; later it counts as cannot tell.
TEST(AgentBoot, R6_1_AGenerationThatCannotBePartOfABootIsRefusedAtStart) {
  const std::vector<std::string> unusable = {"3~1",     "a:b",       "7\xff",
                                             "unknown", "has space", std::string(65, '7')};
  for (const std::string& bad : unusable) {
    SCOPED_TRACE(bad);
    AgentRig rig;
    rig.set_generation(bad);
    const Status st = rig.start(rig.recording({{"generation_file", "/gen"}}));
    EXPECT_EQ(st.code(), ErrorCode::kGenerationUnknown) << st.ToString();
    EXPECT_NE(st.message().find("cannot be part of the boot"), std::string::npos) << st.ToString();
  }
  AgentRig ok;
  ok.set_generation(std::string(64, '7'));
  EXPECT_TRUE(ok.start(ok.recording({{"generation_file", "/gen"}})).ok());
}

TEST(AgentBoot, R6_4_AGenerationWithTheBootsDelimitersIsCannotTellAndNoBootRepeats) {
  AgentRig rig;
  rig.set_generation("3");
  ASSERT_TRUE(rig.start(rig.recording({{"generation_file", "/gen"}})).ok());
  std::vector<std::string> boots = {rig.agent->boot()};
  rig.set_generation("3~1");
  rig.run_for(1500ms);  // within the grace: as a failed read, the old generation stands
  EXPECT_EQ(rig.agent->boot(), kGenBoot + ":3");
  rig.run_for(700ms);
  boots.push_back(rig.agent->boot());
  rig.set_generation("3");
  rig.run_for(150ms);
  boots.push_back(rig.agent->boot());
  rig.set_generation("7\xff");
  rig.run_for(2200ms);
  boots.push_back(rig.agent->boot());
  EXPECT_EQ(boots, (std::vector<std::string>{kGenBoot + ":3", kGenBoot + ":unknown",
                                             kGenBoot + ":3~1", kGenBoot + ":unknown"}));
}

TEST(AgentBoot, R6_2_HelloReadsTheGenerationAtOnce) {
  AgentRig rig;
  rig.set_generation("1");
  AgentConfig config = rig.config();
  config.generation_poll = 1000s;  // only hello can notice
  config.sweep_interval = 1000s;
  ASSERT_TRUE(rig.start(rig.recording({{"generation_file", "/gen"}}), config).ok());
  rig.set_generation("2");
  EXPECT_EQ(rig.hello_client()->boot, kGenBoot + ":2");
}

// R6.4 as a client sees it: a hello during the unknown period answers the
// `:unknown` boot; a new generation after it still carries the period count.
TEST(AgentBoot, R6_4_AHelloDuringTheUnknownPeriodAndANewGenerationAfterIt) {
  AgentRig rig;
  rig.set_generation("5");
  ASSERT_TRUE(rig.start(rig.recording({{"generation_file", "/gen"}})).ok());
  rig.mem.files().remove("/gen");
  rig.run_for(2200ms);  // past the 2 s grace
  EXPECT_EQ(rig.hello_client()->boot, kGenBoot + ":unknown");
  rig.set_generation("6");
  rig.run_for(150ms);
  EXPECT_EQ(rig.hello_client()->boot, kGenBoot + ":6~1");
}

// R6.2's other readers, each alone: a map (its reply is stale_epoch with the
// new boot), and the sweep (the boot moves with no request and no poll).
TEST(AgentBoot, R6_2_AMapAndTheSweepEachReadTheGeneration) {
  AgentRig rig;
  rig.set_generation("1");
  AgentConfig config = rig.config();
  config.generation_poll = 1000s;
  config.sweep_interval = 1000s;
  ASSERT_TRUE(rig.start(rig.recording({{"generation_file", "/gen"}}), config).ok());
  auto c = rig.hello_client();
  auto a = c->alloc();
  rig.set_generation("2");
  Json map = c->map(a.region, a.handle);  // only the map can notice
  EXPECT_EQ(code_of(map), "stale_epoch") << map.dump();
  EXPECT_EQ(map["boot"], kGenBoot + ":2");

  AgentRig swept;
  swept.set_generation("1");
  AgentConfig sweeping = swept.config();
  sweeping.generation_poll = 1000s;
  sweeping.sweep_interval = 100ms;  // only the sweep can notice
  ASSERT_TRUE(swept.start(swept.recording({{"generation_file", "/gen"}}), sweeping).ok());
  swept.set_generation("2");
  swept.run_for(250ms);
  EXPECT_EQ(swept.agent->boot(), kGenBoot + ":2");
}

// An extension whose mapped() resets the device (the generation moves on).
class ResettingExtension : public NiceMock<MockExtension> {
 public:
  explicit ResettingExtension(sim::SimFileSystem& files) : files_(files) {
    ON_CALL(*this, has_memory_generation()).WillByDefault(Return(true));
    ON_CALL(*this, memory_generation()).WillByDefault([this]() -> std::optional<std::string> {
      auto text = files_.read_file("/gen");
      if (!text.ok()) return std::nullopt;
      return *text;
    });
  }
  sim::SimFileSystem& files_;
};

TEST(AgentBoot, R6_5_AMapWhoseBootChangedWhileItRanFailsAndDropsItsRegistration) {
  AgentRig rig;
  rig.set_generation("1");
  auto mock = std::make_unique<ResettingExtension>(rig.mem.files());
  auto* ext = mock.get();
  AgentConfig config = rig.config();
  config.generation_poll = 1000s;
  config.sweep_interval = 1000s;
  ASSERT_TRUE(rig.start(std::move(mock), config).ok());
  auto c = rig.hello_client();
  auto a = c->alloc();
  EXPECT_CALL(*ext, mapped(_, _))
      .WillOnce([&](const ext::RegionInfo&, bool) {
        EXPECT_TRUE(rig.mem.files().write_file("/gen", "2").ok());
        return Status();
      })
      .WillOnce(Return(Status()));
  Json reply = c->map(a.region, a.handle, /*fresh=*/true);
  EXPECT_EQ(code_of(reply), "boot_changed") << reply.dump();
  EXPECT_EQ(rig.mem_nic.registrations(), 0u);
  EXPECT_FALSE(rig.agent->holds(c->conn, a.region));
  EXPECT_EQ(rig.agent->boot(), kGenBoot + ":2");
  c->boot = rig.agent->boot();
  EXPECT_EQ(code_of(c->map(a.region, a.handle)), "ok");
  EXPECT_EQ(rig.mem_nic.registrations(), 1u);
}

TEST(AgentBoot, R6_3_RdmaThroughARegistrationFromBeforeTheResetFails) {
  AgentRig rig;
  rig.set_generation("1");
  ASSERT_TRUE(rig.start(rig.recording({{"generation_file", "/gen"}})).ok());
  auto c = rig.hello_client();
  auto a = c->alloc();
  Json map = c->map(a.region, a.handle);
  ASSERT_EQ(code_of(map), "ok");
  std::shared_ptr<runtime::QueuePair> qp;
  auto strand = rig.gpu.make_strand("rdma");
  rig.gpu_nic.connect("mem", *strand,
                      [&](Result<std::shared_ptr<runtime::QueuePair>> r) { qp = r.value(); });
  rig.run_for(1ms);
  ASSERT_TRUE(qp);
  rig.set_generation("2");
  rig.run_for(150ms);
  std::vector<std::byte> buf(16);
  std::optional<std::vector<Status>> out;
  qp->post({{runtime::RdmaOp::Kind::kRead, buf, map["addr"].get<std::uint64_t>(),
             map["rkey"].get<std::uint32_t>()}},
           [&](std::vector<Status> s) { out = std::move(s); });
  rig.run_for(1ms);
  ASSERT_TRUE(out);
  EXPECT_EQ((*out)[0].code(), ErrorCode::kRemoteAccess);
}

}  // namespace
}  // namespace rcxl::agent::testing
