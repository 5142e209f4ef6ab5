// Mutated requests of every op and action the agent takes (deterministic, fixed
// seed): the agent never crashes or hangs, every refusal carries a PROTOCOL.md
// code, and a refused request changes no state (SPEC R1.2, PROTOCOL.md
// "Requests and replies"). Run under RCXL_SANITIZE for the memory-safety half.
#include <functional>
#include <iostream>
#include <random>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include "core/protocol/frame_codec.h"
#include "tests/agent/agent_rig.h"
#include "tests/json_mutator.h"

namespace rcxl::agent::testing {
namespace {

// Mutations per request kind; enough to reach every field many times over.
constexpr int kMutationsPerKind = 1000;

// Hook calls that would mean a refused request reached the extension.
struct HookCounts {
  std::uint64_t validate = 0, mapped = 0, retire = 0, hints = 0, write_waits = 0;
  bool operator==(const HookCounts&) const = default;
};

// Takes every action and answers at once, counting what it is asked.
class CountingExtension : public ext::RegionExtension {
 public:
  explicit CountingExtension(HookCounts& counts) : counts_(counts) {}
  std::string name() const override { return "counting"; }
  Status validate_access(const ext::RegionInfo&) override {
    ++counts_.validate;
    return {};
  }
  Status mapped(const ext::RegionInfo&, bool) override {
    ++counts_.mapped;
    return {};
  }
  bool retire(const ext::RegionInfo&) override {
    ++counts_.retire;
    return true;
  }
  Status hint(const ext::Hint&) override {
    ++counts_.hints;
    return {};
  }
  std::vector<std::string> hint_actions() const override {
    return {"read_hint", "read_hint_end", "write_hint", "read_promote", "write_wait"};
  }
  void write_wait(const ext::WriteWait&, WriteWaitDone done) override {
    ++counts_.write_waits;
    done(Json(nullptr));
  }

 private:
  HookCounts& counts_;
};

// Everything a request could change, as the agent exposes it (refusal
// counters and the connection gauge left out: those change by design).
struct Snapshot {
  std::string boot;
  std::uint64_t free_bytes = 0;
  std::size_t retiring = 0;
  bool registered = false;
  bool holder_holds = false, mutator_holds = false, mutator_holds_victim = false;
  std::size_t holder_open = 0, mutator_open = 0;
  std::map<std::string, std::uint64_t> hints_accepted;
  std::uint64_t open_hint_requests = 0, write_waits = 0, maps = 0, registrations = 0,
                registrations_total = 0, boot_changes = 0, regions = 0;
  HookCounts hooks;
  bool operator==(const Snapshot&) const = default;

  std::string ToString() const {
    std::ostringstream out;
    out << "boot=" << boot << " free=" << free_bytes << " retiring=" << retiring
        << " registered=" << registered << " holds=" << holder_holds << mutator_holds
        << mutator_holds_victim << " open=" << holder_open << "/" << mutator_open
        << " open_total=" << open_hint_requests << " maps=" << maps << " regs=" << registrations
        << "/" << registrations_total << " regions=" << regions << " hooks=" << hooks.validate
        << "," << hooks.mapped << "," << hooks.retire << "," << hooks.hints << ","
        << hooks.write_waits;
    return out.str();
  }
};

// An agent with one region mapped and hinted by a "holder" connection, a
// spare "victim" region to free, and a "mutator" connection that sends the
// mutated requests (so a refusal that closes it touches none of the holder's state).
struct MutationRig : AgentRig {
  MutationRig() {
    EXPECT_TRUE(start(std::make_unique<CountingExtension>(hooks)).ok());
    holder = hello_client();
    region = holder->alloc(1 << 20);
    victim = holder->alloc(64 << 10);
    EXPECT_EQ(code_of(holder->map(region.region, region.handle)), "ok");
    EXPECT_EQ(code_of(holder->read_hint("held", region)), "ok");
    mutator = hello_client();
    baseline = snapshot();
  }

  Snapshot snapshot() const {
    Snapshot s;
    s.boot = agent->boot();
    s.free_bytes = agent->free_bytes();
    s.retiring = agent->retiring_regions();
    s.registered = agent->registration(region.region).has_value();
    s.holder_holds = agent->holds(holder->conn, region.region);
    s.mutator_holds = agent->holds(mutator->conn, region.region);
    s.mutator_holds_victim = agent->holds(mutator->conn, victim.region);
    s.holder_open = agent->open_hint_requests(holder->conn);
    s.mutator_open = agent->open_hint_requests(mutator->conn);
    const AgentMetrics m = agent->metrics();
    s.hints_accepted = m.hints_accepted;
    s.open_hint_requests = m.open_hint_requests;
    s.write_waits = m.write_waits;
    s.maps = m.maps;
    s.registrations = m.registrations;
    s.registrations_total = m.registrations_total;
    s.boot_changes = m.boot_changes;
    s.regions = m.regions;
    s.hooks = hooks;
    return s;
  }

  HookCounts hooks;
  std::vector<Json> odd_values;  // filled by the mutator on first use
  Snapshot baseline;
  std::unique_ptr<TestClient> holder;
  std::unique_ptr<TestClient> mutator;
  TestClient::Alloc region;
  TestClient::Alloc victim;
};

// ------------------------------------------------------------ the requests

using Template = std::function<Json(const MutationRig&)>;

Json ranges_of(std::uint64_t region, std::size_t n, std::uint64_t step = 4096) {
  Json out = Json::array();
  for (std::size_t i = 0; i < n; ++i) out.push_back({region, (i * step) % (1 << 20), 4096});
  return out;
}

Json extension(const MutationRig& rig, const std::string& action, bool with_ranges) {
  const bool by_token = action == "write_hint" || action == "write_wait";
  Json r = {{"op", "extension"}, {"id", 6}, {"action", action}, {"epoch", rig.mutator->boot}};
  r[by_token ? "token" : "request"] = "q1";
  if (with_ranges) {
    r["ranges"] = ranges_of(rig.region.region, 3, 8192);
    r["handles"] = {{std::to_string(rig.region.region), rig.region.read_handle}};
  }
  if (action == "write_wait") r["timeout_ms"] = 5;
  return r;
}

const std::vector<std::pair<std::string, Template>>& templates() {
  static const std::vector<std::pair<std::string, Template>> kTemplates = {
      {"hello",
       [](const MutationRig& rig) {
         return Json{{"op", "hello"},
                     {"id", 1},
                     {"version", 1},
                     {"client", "mutator"},
                     {"auth", rig.mutator->auth()}};
       }},
      {"alloc",
       [](const MutationRig&) {
         return Json{{"op", "alloc"}, {"id", 2}, {"size", 8192}};
       }},
      {"map",
       [](const MutationRig& rig) {
         return Json{{"op", "map"},
                     {"id", 3},
                     {"region", rig.victim.region},
                     {"handle", rig.victim.handle},
                     {"epoch", rig.mutator->boot},
                     {"fresh", true}};
       }},
      {"release",
       [](const MutationRig& rig) {
         return Json{{"op", "release"},
                     {"id", 4},
                     {"region", rig.region.region},
                     {"handle", rig.region.read_handle}};
       }},
      {"free",
       [](const MutationRig& rig) {
         return Json{{"op", "free"},
                     {"id", 5},
                     {"region", rig.victim.region},
                     {"handle", rig.victim.handle}};
       }},
      {"read_hint", [](const MutationRig& rig) { return extension(rig, "read_hint", true); }},
      {"read_hint_end",
       [](const MutationRig& rig) { return extension(rig, "read_hint_end", false); }},
      {"write_hint", [](const MutationRig& rig) { return extension(rig, "write_hint", true); }},
      {"read_promote",
       [](const MutationRig& rig) { return extension(rig, "read_promote", false); }},
      {"write_wait", [](const MutationRig& rig) { return extension(rig, "write_wait", true); }},
  };
  return kTemplates;
}

// ------------------------------------------------------------ the mutations

// Values of every JSON type and the edge numbers of the field rules.
std::vector<Json> make_odd_values(const MutationRig& rig) {
  const std::string r = std::to_string(rig.region.region);
  Json deep = Json::array();
  for (int i = 0; i < 200; ++i) deep = Json::array({deep});
  return {nullptr,
          true,
          false,
          "",
          "x",
          "NaN",
          "Infinity",
          "-0",
          "1e400",
          "18446744073709551616",
          0,
          1,
          -1,
          -9223372036854775807 - 1,
          4096,
          18446744073709551615ull,
          9223372036854775808ull,
          0.5,
          1.0,
          -0.0,
          1e300,
          Json::array(),
          Json::object(),
          Json::array({Json::array()}),
          Json::array({rig.region.region, 0, 4096}),
          ranges_of(rig.region.region, 4097),
          ranges_of(rig.region.region, 4096),
          Json::array({{rig.region.region, (1 << 20) - 4096, 8192}}),
          Json::array({{rig.region.region, 18446744073709547520ull, 8192}}),
          Json::array({{rig.region.region, 4096, 18446744073709551615ull}}),
          Json::array({{rig.region.region, 0, 0}}),
          Json::array({{rig.victim.region, 0, 4096}}),
          Json::array({{rig.region.region + 1000, 0, 4096}}),
          Json{{r, rig.region.handle}},
          Json{{r, rig.victim.handle}},
          Json{{"0" + r, rig.region.handle}},
          Json{{r, 7}},
          deep};
}

const std::vector<Json>& odd_values(MutationRig& rig) {
  if (rig.odd_values.empty()) rig.odd_values = make_odd_values(rig);
  return rig.odd_values;
}

// ------------------------------------------------------------ the check

struct Outcome {
  int accepted = 0;
  int refused = 0;
  int rebuilt = 0;
  std::map<std::string, int> codes;
};

// The state the templates rely on, without the counters that only grow.
bool same_structure(const Snapshot& a, const Snapshot& b) {
  return a.boot == b.boot && a.free_bytes == b.free_bytes && a.retiring == b.retiring &&
         a.registered == b.registered && a.holder_holds == b.holder_holds &&
         a.mutator_holds == b.mutator_holds && a.mutator_holds_victim == b.mutator_holds_victim &&
         a.holder_open == b.holder_open && a.mutator_open == b.mutator_open &&
         a.open_hint_requests == b.open_hint_requests && a.registrations == b.registrations &&
         a.regions == b.regions;
}

// Takes back what an accepted request did (an alloc, a map of the victim, a
// free of it, an open hint); false when the rig is not as it was built.
bool undo(MutationRig& rig, const Json& reply) {
  if (reply.contains("read_handle")) {  // an alloc: give it back
    rig.holder->call({{"op", "free"}, {"region", reply["region"]}, {"handle", reply["handle"]}});
  }
  Snapshot now = rig.snapshot();
  if (now.mutator_holds_victim) {
    rig.mutator->call(
        {{"op", "release"}, {"region", rig.victim.region}, {"handle", rig.victim.handle}});
  }
  if (now.regions < rig.baseline.regions) rig.victim = rig.holder->alloc(64 << 10);  // freed
  if (now.mutator_open > 0 || now.mutator_holds) {  // its close drops them
    rig.mutator.reset();
    rig.run_for(10ms);
    rig.mutator = rig.hello_client();
  }
  return same_structure(rig.snapshot(), rig.baseline);
}

// Sends `frame` on the rig's mutator; checks the reply, the closing rule and,
// for a refusal, that nothing changed. Returns whether the rig must be rebuilt.
bool check_one(MutationRig& rig, const std::string& frame, const std::string& what,
               Outcome& outcome) {
  const Snapshot before = rig.snapshot();
  rig.mutator->send_raw(frame);
  const Json reply = rig.mutator->next();
  if (!reply.is_object() || !reply.contains("ok") || !reply["ok"].is_boolean()) {
    ADD_FAILURE() << what << ": no well-formed reply (" << reply.dump() << ")";
    return true;
  }
  if (reply["ok"].get<bool>()) {
    ++outcome.accepted;
    // Accepted requests may change state: undo it, or start from a fresh rig.
    return !undo(rig, reply);
  }
  ++outcome.refused;
  const Json& error = reply["error"];
  const std::string code = error.is_object() ? error.value("code", "") : "";
  ++outcome.codes[code];
  EXPECT_TRUE(rcxl::testing::wire_error_codes().count(code))
      << what << ": code '" << code << "' in " << reply.dump();
  EXPECT_TRUE(error.is_object() && error.contains("message") && error["message"].is_string())
      << what << ": " << reply.dump();
  const bool closes = code == "bad_frame" || code == "auth_failed" || code == "unauthenticated";
  if (closes) {
    EXPECT_TRUE(rig.mutator->wait_closed()) << what << ": " << code << " left it open";
    rig.run_for(10ms);  // the agent's close handling (holds and hints of the mutator: none)
  } else {
    EXPECT_FALSE(rig.mutator->closed()) << what << ": " << code << " closed it";
  }
  const Snapshot after = rig.snapshot();
  EXPECT_TRUE(after == before) << what << " refused with " << code
                               << " but changed state:\n  before " << before.ToString()
                               << "\n  after  " << after.ToString();
  if (closes) rig.mutator = rig.hello_client();
  return after != before;
}

void mutate_kind(const std::string& kind, std::uint64_t seed) {
  const Template* make = nullptr;
  for (const auto& [name, t] : templates()) {
    if (name == kind) make = &t;
  }
  ASSERT_NE(make, nullptr) << kind;
  auto rig = std::make_unique<MutationRig>();
  {  // The unmutated request is accepted: the mutations start from a valid frame.
    const Json valid = (*make)(*rig);
    rig->mutator->send(valid);
    EXPECT_EQ(code_of(rig->mutator->next()), "ok") << kind << ": " << valid.dump();
    rig = std::make_unique<MutationRig>();
  }
  rcxl::testing::JsonMutator mutator(seed);
  Outcome outcome;
  for (int i = 0; i < kMutationsPerKind; ++i) {
    const std::string text = mutator.mutate((*make)(*rig), odd_values(*rig));
    const std::string what = kind + " #" + std::to_string(i) + " " + text.substr(0, 160);
    if (check_one(*rig, protocol::encode_frame(text), what, outcome)) {
      rig = std::make_unique<MutationRig>();
      ++outcome.rebuilt;
    }
    if (::testing::Test::HasFailure()) break;  // one clear failure, not thousands
  }
  // The mix reached both sides: refusals with several codes, and acceptances.
  EXPECT_GT(outcome.refused, kMutationsPerKind / 4) << kind;
  EXPECT_GE(outcome.codes.size(), 2u) << kind;
  std::string codes;
  for (const auto& [code, n] : outcome.codes) codes += " " + code + "=" + std::to_string(n);
  std::cout << kind << ": accepted " << outcome.accepted << ", refused " << outcome.refused << " ("
            << codes << " ), rigs rebuilt " << outcome.rebuilt << "\n";
}

TEST(AgentMutation, R1_2_MutatedHelloNeverCrashesAndRefusalsChangeNothing) {
  mutate_kind("hello", 11);
}
TEST(AgentMutation, R1_2_MutatedAllocNeverCrashesAndRefusalsChangeNothing) {
  mutate_kind("alloc", 12);
}
TEST(AgentMutation, R1_2_MutatedMapNeverCrashesAndRefusalsChangeNothing) {
  mutate_kind("map", 13);
}
TEST(AgentMutation, R1_2_MutatedReleaseNeverCrashesAndRefusalsChangeNothing) {
  mutate_kind("release", 14);
}
TEST(AgentMutation, R1_2_MutatedFreeNeverCrashesAndRefusalsChangeNothing) {
  mutate_kind("free", 15);
}
TEST(AgentMutation, R1_2_MutatedReadHintNeverCrashesAndRefusalsChangeNothing) {
  mutate_kind("read_hint", 16);
}
TEST(AgentMutation, R1_2_MutatedReadHintEndNeverCrashesAndRefusalsChangeNothing) {
  mutate_kind("read_hint_end", 17);
}
TEST(AgentMutation, R1_2_MutatedWriteHintNeverCrashesAndRefusalsChangeNothing) {
  mutate_kind("write_hint", 18);
}
TEST(AgentMutation, R1_2_MutatedReadPromoteNeverCrashesAndRefusalsChangeNothing) {
  mutate_kind("read_promote", 19);
}
TEST(AgentMutation, R1_2_MutatedWriteWaitNeverCrashesAndRefusalsChangeNothing) {
  mutate_kind("write_wait", 20);
}

// Frames the mutations above cannot make: a zero length and one past the maximum.
TEST(AgentMutation, R1_2_ZeroAndOversizeFramesAreBadFrameAndChangeNothing) {
  MutationRig rig;
  Outcome outcome;
  const std::string oversize_header("\x00\x10\x00\x01", 4);  // 1 MiB + 1
  for (const std::string& frame : {std::string(4, '\0'), oversize_header}) {
    EXPECT_FALSE(check_one(rig, frame, "frame header", outcome));
  }
  EXPECT_EQ(outcome.codes["bad_frame"], 2);
}

// The same mutations before hello: refused (unauthenticated unless the frame is
// already bad), the connection closed, nothing changed (SPEC R1.3).
TEST(AgentMutation, R1_3_MutatedRequestsBeforeHelloChangeNothing) {
  MutationRig rig;
  rcxl::testing::JsonMutator mutator(21);
  for (int i = 0; i < 200; ++i) {
    const auto& [kind, make] =
        templates()[1 + static_cast<std::size_t>(i) % (templates().size() - 1)];
    const std::string text = mutator.mutate(make(rig), odd_values(rig));
    auto stranger = rig.client();
    const Snapshot before = rig.snapshot();
    stranger->send_raw(protocol::encode_frame(text));
    const Json reply = stranger->next();
    const std::string code = code_of(reply);
    EXPECT_TRUE(code == "unauthenticated" || code == "bad_request" || code == "bad_frame")
        << kind << " " << text.substr(0, 160) << " -> " << reply.dump();
    // SPEC R1.3: refused before hello, whatever the code, and closed.
    EXPECT_TRUE(stranger->wait_closed()) << text.substr(0, 160);
    stranger.reset();
    rig.run_for(10ms);
    const Snapshot after = rig.snapshot();
    EXPECT_TRUE(after == before) << text.substr(0, 160) << "\n  before " << before.ToString()
                                 << "\n  after  " << after.ToString();
    if (::testing::Test::HasFailure()) break;
  }
}

}  // namespace
}  // namespace rcxl::agent::testing
