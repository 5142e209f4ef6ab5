// An agent process restart without a memory reset (AgentConfig::state_file):
// regions survive with their bytes, handles and ids; registrations do not (maps
// register again); a region mapped before is never passed fresh=true again
// (SPEC R5.1/R5.2); a freed region stays not_found; a bad state file stops the
// start (never silently reuse memory).
#include <cstring>
#include <functional>
#include <limits>

#include "tests/agent/agent_rig.h"

namespace rcxl::agent::testing {
namespace {

constexpr char kStateFile[] = "/var/lib/rcxl-agent/regions.json";
const std::string kGenBoot = std::string(kBootId);

struct RestartRig : AgentRig {
  // As the package installs it: the state file's directory exists.
  RestartRig() { mem.files().make_directory("/var/lib/rcxl-agent"); }
  AgentConfig config() const {
    AgentConfig c = AgentRig::config();
    c.state_file = kStateFile;
    return c;
  }
  Status start_agent(Json extension_config = Json::object()) {
    return AgentRig::start(recording(std::move(extension_config)), config());
  }
  // The agent process ends; node, pool, NIC and files stay.
  void kill_agent() {
    agent.reset();
    run_for(10ms);
  }

  std::vector<Status> post(std::vector<runtime::RdmaOp> ops) {
    if (!qp) {
      gpu_nic.connect("mem", *data, [this](Result<std::shared_ptr<runtime::QueuePair>> r) {
        if (r.ok()) qp = r.value();
      });
      EXPECT_TRUE(world.run_until([this] { return qp != nullptr; }).ok());
    }
    std::optional<std::vector<Status>> out;
    qp->post(std::move(ops), [&](std::vector<Status> s) { out = std::move(s); });
    EXPECT_TRUE(world.run_until([&] { return out.has_value(); }).ok());
    return out.value_or(std::vector<Status>{});
  }

  std::unique_ptr<runtime::Strand> data = gpu.make_strand("data");
  std::shared_ptr<runtime::QueuePair> qp;
};

std::vector<std::byte> bytes_of(const std::string& s) {
  std::vector<std::byte> out(s.size());
  std::memcpy(out.data(), s.data(), s.size());
  return out;
}

TEST(AgentRestart, R5_1_RegionsAndBytesSurviveAnAgentRestart) {
  RestartRig rig;
  ASSERT_TRUE(rig.start_agent().ok());
  auto owner = rig.hello_client();
  auto kept = owner->alloc(1 << 20);
  auto freed = owner->alloc(1 << 20);
  Json map = owner->map(kept.region, kept.handle, /*fresh=*/true);
  ASSERT_EQ(code_of(map), "ok") << map.dump();
  auto data = bytes_of("kv-bytes-that-survive");
  auto st = rig.post({{runtime::RdmaOp::Kind::kWrite, data, map["addr"].get<std::uint64_t>() + 64,
                       map["rkey"].get<std::uint32_t>()}});
  ASSERT_TRUE(st.at(0).ok()) << st[0].ToString();
  ASSERT_EQ(code_of(owner->call(
                {{"op", "free"}, {"id", 5}, {"region", freed.region}, {"handle", freed.handle}})),
            "ok");
  const std::uint64_t free_before = rig.agent->free_bytes();
  const std::string boot = owner->boot;
  owner.reset();
  rig.kill_agent();
  rig.qp.reset();

  ASSERT_TRUE(rig.start_agent().ok());
  EXPECT_EQ(rig.agent->free_bytes(), free_before);
  auto again = rig.hello_client();
  EXPECT_EQ(again->boot, boot);  // same node boot, same generation
  EXPECT_FALSE(rig.agent->registration(kept.region).has_value());  // maps register again
  // The client's remap after its first map reply carries no fresh (R5.1).
  Json remap = again->map(kept.region, kept.handle);
  ASSERT_EQ(code_of(remap), "ok") << remap.dump();
  std::vector<std::byte> back(data.size());
  st = rig.post({{runtime::RdmaOp::Kind::kRead, back, remap["addr"].get<std::uint64_t>() + 64,
                  remap["rkey"].get<std::uint32_t>()}});
  ASSERT_TRUE(st.at(0).ok()) << st[0].ToString();
  EXPECT_EQ(back, data);
  EXPECT_EQ(code_of(again->map(freed.region, freed.handle)), "not_found");
  EXPECT_EQ(code_of(again->map(kept.region, kept.read_handle)), "ok");  // read handle too
  // New regions get new ids and never the surviving region's memory.
  auto next = again->alloc(1 << 20);
  EXPECT_GT(next.region, freed.region);
  EXPECT_EQ(rig.agent->free_bytes(), free_before - (1 << 20));
}

// An agent that recorded an alloc and then went down before its reply went
// out: the client's retry with the same token finds the region after the
// restart (docs/agent.md, *Alloc tokens*).
TEST(AgentRestart, R1_5_AnAllocTokenSurvivesAnAgentRestart) {
  RestartRig rig;
  ASSERT_TRUE(rig.start_agent().ok());
  const Json alloc = {{"op", "alloc"}, {"id", 2}, {"size", 8192}, {"token", "t-1"}};
  Json first = rig.hello_client()->call(alloc);
  ASSERT_EQ(code_of(first), "ok") << first.dump();
  rig.kill_agent();
  ASSERT_TRUE(rig.start_agent().ok());
  const std::uint64_t free_before = rig.agent->free_bytes();
  EXPECT_EQ(rig.hello_client()->call(alloc), first);
  EXPECT_EQ(rig.agent->free_bytes(), free_before);
}

TEST(AgentRestart, R5_2_ARegionMappedBeforeTheRestartIsNeverFreshAgain) {
  RestartRig rig;
  ASSERT_TRUE(rig.start_agent().ok());
  auto owner = rig.hello_client();
  auto mapped = owner->alloc();
  auto unmapped = owner->alloc();
  ASSERT_EQ(code_of(owner->map(mapped.region, mapped.handle, true)), "ok");
  owner.reset();
  rig.kill_agent();
  ASSERT_TRUE(rig.mem.files().write_file("/log", "").ok());

  ASSERT_TRUE(rig.start_agent().ok());
  auto again = rig.hello_client();
  // Even a map that (wrongly) says fresh: the memory may hold the owner's data.
  ASSERT_EQ(code_of(again->map(mapped.region, mapped.handle, true)), "ok");
  ASSERT_EQ(code_of(again->map(unmapped.region, unmapped.handle, true)), "ok");
  auto lines = rig.log_lines("mapped");
  ASSERT_EQ(lines.size(), 2u);
  EXPECT_EQ(lines[0]["region"], mapped.region);
  EXPECT_EQ(lines[0]["fresh"], false);
  EXPECT_EQ(lines[1]["region"], unmapped.region);
  EXPECT_EQ(lines[1]["fresh"], true);  // never mapped: still the first map
}

TEST(AgentRestart, R2_2_ARetiringRegionStaysReservedUntilRetireAgrees) {
  RestartRig rig;
  ASSERT_TRUE(rig.start_agent({{"retire_refusals", 100}}).ok());
  auto owner = rig.hello_client();
  auto a = owner->alloc();
  ASSERT_EQ(code_of(owner->free(a)), "ok");
  EXPECT_EQ(rig.agent->retiring_regions(), 1u);
  const std::uint64_t free_bytes = rig.agent->free_bytes();
  owner.reset();
  rig.kill_agent();

  ASSERT_TRUE(rig.start_agent().ok());  // retire agrees now
  EXPECT_EQ(rig.agent->retiring_regions(), 1u);
  EXPECT_EQ(rig.agent->free_bytes(), free_bytes);
  auto again = rig.hello_client();
  EXPECT_EQ(code_of(again->map(a.region, a.handle)), "not_found");
  rig.run_for(2s);  // the sweep asks retire() again
  EXPECT_EQ(rig.agent->retiring_regions(), 0u);
  EXPECT_EQ(rig.agent->free_bytes(), free_bytes + (1 << 20));
  rig.kill_agent();
  ASSERT_TRUE(rig.start_agent().ok());
  EXPECT_EQ(rig.agent->retiring_regions(), 0u);  // the file says so too
}

// An alloc the state file cannot record is undone (it could be handed out
// twice after a restart) and answers no_space, a PROTOCOL.md code.
TEST(AgentRestart, R7_AnAllocTheStateFileCannotRecordIsUndoneWithNoSpace) {
  RestartRig rig;
  ASSERT_TRUE(rig.start_agent().ok());
  auto c = rig.hello_client();
  auto kept = c->alloc();
  const std::string table = rig.mem.files().read_file(kStateFile).value();
  rig.mem.files().set_unwritable(kStateFile, true);
  Json refused = c->call({{"op", "alloc"}, {"id", 9}, {"size", 1 << 20}, {"token", "t"}});
  EXPECT_EQ(code_of(refused), "no_space") << refused.dump();
  EXPECT_THAT(refused["error"]["message"].get<std::string>(), ::testing::HasSubstr("state-file"));
  EXPECT_EQ(rig.agent->metrics().regions, 1u);
  EXPECT_EQ(rig.mem.files().read_file(kStateFile).value(), table);
  // The undo took the token with the region: asked again, nothing was made.
  Json asked = c->call(
      {{"op", "alloc"}, {"id", 10}, {"size", 1 << 20}, {"token", "t"}, {"made_only", true}});
  EXPECT_EQ(code_of(asked), "not_found") << asked.dump();
  rig.mem.files().set_unwritable(kStateFile, false);
  auto next = c->alloc();
  EXPECT_NE(next.region, 0u);
  EXPECT_NE(next.region, kept.region);
  EXPECT_EQ(rig.agent->metrics().regions, 2u);
}

// A state file may carry any next_region: at 2^64-1 an alloc wrapped the id
// to 0, then 1, onto a live region's table entry (session 30 review). The
// last id is handed out and then allocs answer no_space.
TEST(AgentRestart, R7_RegionIdsNeverWrap) {
  const std::uint64_t max = std::numeric_limits<std::uint64_t>::max();
  RestartRig rig;
  ASSERT_TRUE(rig.start_agent().ok());
  const auto first = rig.hello_client()->alloc();
  rig.kill_agent();
  Json table = Json::parse(rig.mem.files().read_file(kStateFile).value());
  table["next_region"] = max - 1;
  ASSERT_TRUE(rig.mem.files().write_file(kStateFile, table.dump()).ok());
  ASSERT_TRUE(rig.start_agent().ok());
  auto c = rig.hello_client();
  EXPECT_EQ(c->alloc().region, max - 1);
  Json refused = c->call({{"op", "alloc"}, {"id", 9}, {"size", 1 << 20}});
  EXPECT_EQ(code_of(refused), "no_space") << refused.dump();
  EXPECT_THAT(refused["error"]["message"].get<std::string>(),
              ::testing::HasSubstr("region ids are used up"));
  EXPECT_EQ(rig.agent->metrics().regions, 2u);
  EXPECT_EQ(code_of(c->map(first.region, first.handle)), "ok");
}

// A free whose state-file write failed is written by a later sweep once the
// file takes writes again; before, a restart brought the region back live
// under its old handles (its owner had forgotten it: a leak until reboot).
TEST(AgentRestart, R7_AFreeTheStateFileMissedIsWrittenByALaterSweep) {
  RestartRig rig;
  ASSERT_TRUE(rig.start_agent().ok());
  auto owner = rig.hello_client();
  auto a = owner->alloc();
  rig.mem.files().set_unwritable(kStateFile, true);
  ASSERT_EQ(code_of(owner->free(a)), "ok");
  rig.mem.files().set_unwritable(kStateFile, false);
  rig.run_for(2s);  // a sweep
  owner.reset();
  rig.kill_agent();
  ASSERT_TRUE(rig.start_agent().ok());
  EXPECT_EQ(rig.agent->metrics().regions, 0u);
  EXPECT_EQ(code_of(rig.hello_client()->map(a.region, a.handle)), "not_found");
}

TEST(AgentRestart, R7_CorruptOrUnreadableStateFileFailsTheStart) {
  const std::vector<std::string> corrupt = {
      "{",
      "[]",
      R"({"version":2,"boot_id":"b","pool_size":67108864,"next_region":2,"regions":[]})",
      R"({"version":1,"boot_id":"b","pool_size":67108864,"next_region":2,"regions":[{"region":1}]})",
      // overlapping extents
      R"({"version":1,"boot_id":"0b5e7c1a-boot","pool_size":67108864,"next_region":3,"regions":[
        {"region":1,"offset":0,"size":8192,"handle":"h","read_handle":"r","mapped_before":true,"retiring":false},
        {"region":2,"offset":4096,"size":4096,"handle":"h","read_handle":"r","mapped_before":true,"retiring":false}]})",
      // an id at next_region (would be handed out again)
      R"({"version":1,"boot_id":"b","pool_size":67108864,"next_region":1,"regions":[
        {"region":1,"offset":0,"size":4096,"handle":"h","read_handle":"r","mapped_before":true,"retiring":false}]})",
      // past the pool
      R"({"version":1,"boot_id":"b","pool_size":67108864,"next_region":2,"regions":[
        {"region":1,"offset":67108864,"size":4096,"handle":"h","read_handle":"r","mapped_before":true,"retiring":false}]})",
  };
  for (const auto& text : corrupt) {
    RestartRig rig;
    ASSERT_TRUE(rig.mem.files().write_file(kStateFile, text).ok());
    Status st = rig.start_agent();
    EXPECT_FALSE(st.ok()) << text;
    EXPECT_THAT(st.message(), ::testing::HasSubstr(kStateFile)) << st.message();
    EXPECT_EQ(rig.mem.files().read_file(kStateFile).value(), text);  // left for the operator
  }
  RestartRig rig;
  ASSERT_TRUE(rig.mem.files().write_file(kStateFile, "{}").ok());
  rig.mem.files().set_unreadable(kStateFile, true);
  Status st = rig.start_agent();
  EXPECT_FALSE(st.ok());
  EXPECT_THAT(st.message(), ::testing::HasSubstr("cannot read the region table"));
}

// The agent's start after its state file was edited by `edit`.
Status restart_with_edited_table(const std::function<void(Json&)>& edit) {
  RestartRig rig;
  EXPECT_TRUE(rig.start_agent().ok());
  rig.hello_client()->alloc();
  rig.kill_agent();
  Json table = Json::parse(rig.mem.files().read_file(kStateFile).value());
  edit(table);
  EXPECT_TRUE(rig.mem.files().write_file(kStateFile, table.dump()).ok());
  return rig.start_agent();
}

TEST(AgentRestart, R7_APoolOfAnotherSizeFailsTheStart) {
  Status st = restart_with_edited_table([](Json& table) { table["pool_size"] = 1u << 20; });
  EXPECT_FALSE(st.ok());
  EXPECT_THAT(st.message(), ::testing::HasSubstr("pool of"));
  EXPECT_THAT(st.message(), ::testing::HasSubstr("remove the state file"));  // the fix
}

// A restart under `changed` (the config that says the old memory is gone)
// starts with an empty pool: the old region is not_found, ids go on.
void expect_an_empty_pool_after_a_restart(const std::function<void(AgentConfig&)>& changed) {
  RestartRig rig;
  ASSERT_TRUE(rig.start_agent().ok());
  auto a = rig.hello_client()->alloc();
  rig.kill_agent();
  AgentConfig c = rig.config();
  changed(c);
  ASSERT_TRUE(rig.AgentRig::start(rig.recording(), c).ok());
  EXPECT_EQ(rig.agent->free_bytes(), 64ull << 20);
  auto client = rig.hello_client();
  EXPECT_EQ(code_of(client->map(a.region, a.handle)), "not_found");
  EXPECT_GT(client->alloc().region, a.region);  // ids are not reused
}

TEST(AgentRestart, R6_1_ANewNodeBootStartsWithAnEmptyPool) {
  expect_an_empty_pool_after_a_restart([](AgentConfig& c) { c.boot_id = "another-boot"; });
}

// A pool created or grown at this start (its file removed, or a new path)
// holds zeros: restoring the table's regions under the same boot handed them
// out as the regions' bytes (review, session 26).
TEST(AgentRestart, R6_1_APoolMadeAnewDoesNotGetTheTablesRegionsBack) {
  expect_an_empty_pool_after_a_restart([](AgentConfig& c) { c.pool_is_new = true; });
}

// After a node reboot the old table is never loaded, so its pool size does not
// matter: a resized --memory must not stop the start (review, session 26).
TEST(AgentRestart, R6_1_ATableOfAnotherBootDoesNotNeedThePoolsOldSize) {
  Status st = restart_with_edited_table([](Json& table) {
    table["pool_size"] = 1u << 20;
    table["boot_id"] = "an-earlier-boot";
  });
  EXPECT_TRUE(st.ok()) << st.ToString();
}

TEST(AgentRestart, R1_NoStateFileKeepsNothing) {
  AgentRig rig;  // state_file empty
  ASSERT_TRUE(rig.start(rig.recording()).ok());
  auto a = rig.hello_client()->alloc();
  rig.agent.reset();
  ASSERT_TRUE(rig.start(rig.recording()).ok());
  EXPECT_EQ(code_of(rig.hello_client()->map(a.region, a.handle)), "not_found");
}

// An unknown period, then a restart: the boot goes on from `~1`; before, the
// restarted agent advertised the boot it had left (`:5`), which the directory
// had retired (registers refused for good) and readers could trust again.
TEST(AgentRestart, R6_4_TheUnknownPeriodCountSurvivesARestart) {
  RestartRig rig;
  rig.set_generation("5");
  ASSERT_TRUE(rig.start_agent({{"generation_file", "/gen"}}).ok());
  EXPECT_EQ(rig.agent->boot(), kGenBoot + ":5");
  rig.mem.files().remove("/gen");
  rig.run_for(2200ms);  // past the grace
  EXPECT_EQ(rig.agent->boot(), kGenBoot + ":unknown");
  rig.set_generation("5");
  rig.run_for(150ms);
  EXPECT_EQ(rig.agent->boot(), kGenBoot + ":5~1");
  rig.kill_agent();
  ASSERT_TRUE(rig.start_agent({{"generation_file", "/gen"}}).ok());
  EXPECT_EQ(rig.agent->boot(), kGenBoot + ":5~1");
  EXPECT_EQ(rig.hello_client()->boot, kGenBoot + ":5~1");
  // A new node boot starts the count again (its boot id already differs).
  rig.kill_agent();
  AgentConfig c = rig.config();
  c.boot_id = "another-boot";
  ASSERT_TRUE(rig.AgentRig::start(rig.recording({{"generation_file", "/gen"}}), c).ok());
  EXPECT_EQ(rig.agent->boot(), "another-boot:5");
}

// SPEC R6.4: an unknown period whose count the state file could not take
// does not end until it can; otherwise a restart would advertise the boot the
// period left (here :5), which the directory refuses for good.
TEST(AgentRestart, R6_4_AnUnknownPeriodEndsOnlyOnceItsCountIsInTheStateFile) {
  RestartRig rig;
  rig.set_generation("5");
  ASSERT_TRUE(rig.start_agent({{"generation_file", "/gen"}}).ok());
  rig.mem.files().set_unwritable(kStateFile, true);
  rig.mem.files().remove("/gen");
  rig.run_for(2200ms);  // past the grace; the count's write fails
  EXPECT_EQ(rig.agent->boot(), kGenBoot + ":unknown");
  rig.set_generation("5");
  rig.run_for(150ms);
  EXPECT_EQ(rig.agent->boot(), kGenBoot + ":unknown");  // readable, but not on disk
  rig.mem.files().set_unwritable(kStateFile, false);
  rig.run_for(2200ms);  // the write is tried again once per grace
  EXPECT_EQ(rig.agent->boot(), kGenBoot + ":5~1");
  rig.kill_agent();
  ASSERT_TRUE(rig.start_agent({{"generation_file", "/gen"}}).ok());
  EXPECT_EQ(rig.agent->boot(), kGenBoot + ":5~1");
}

}  // namespace
}  // namespace rcxl::agent::testing
