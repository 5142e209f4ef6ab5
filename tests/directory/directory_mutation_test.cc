// Mutated requests of every op the directory server takes (deterministic, fixed
// seed): it never crashes or hangs, every refusal carries a PROTOCOL.md code,
// and a refused request changes nothing (SPEC R1.2, docs/directory.md "Wire
// format"). Run under RCXL_SANITIZE for the memory-safety half.
#include <gtest/gtest.h>

#include <functional>
#include <iostream>
#include <random>
#include <set>
#include <string>
#include <vector>

#include "backends/sim/sim_world.h"
#include "core/directory/directory_server.h"
#include "core/protocol/auth.h"
#include "core/protocol/frame_codec.h"
#include "tests/json_mutator.h"

namespace rcxl::directory {
namespace {

using namespace std::chrono_literals;

constexpr int kMutationsPerOp = 600;
constexpr char kSecret[] = "s3cret";
const std::vector<std::string> kKeys = {"k0", "k1", "k2", "k3", "n0", "n1"};

Location loc(std::uint64_t offset, std::string boot = "boot1") {
  return {"mem:9000", std::move(boot), 3, "readhandle", offset, 4096};
}

// A raw framed connection to the server (the greeting kept).
class RawClient {
 public:
  RawClient(sim::SimWorld& world, sim::SimNode& node, runtime::Strand& strand) : world_(world) {
    node.transport().connect({"dir", 7000}, strand,
                             [this, &strand](Result<std::shared_ptr<runtime::Conn>> c) {
                               if (!c.ok()) {
                                 closed_ = true;
                                 return;
                               }
                               conn_ = protocol::FramedConn::Make(std::move(c).value(), 1u << 24);
                               conn_->start(
                                   strand, [this](Json m) { got_.push_back(std::move(m)); },
                                   [this](const Status&) { closed_ = true; });
                             });
    greeting = next();
  }
  ~RawClient() {
    if (conn_) conn_->abort();
  }
  Json next() {
    (void)world_.run_until([&] { return !got_.empty() || closed_; }, world_.loop().now() + 30s);
    if (got_.empty()) return Json();
    Json out = std::move(got_.front());
    got_.erase(got_.begin());
    return out;
  }
  void send_raw(const std::string& bytes) { conn_->raw().send(bytes); }
  Json call(const Json& request) {
    send_raw(protocol::encode_frame(request.dump()));
    return next();
  }
  bool wait_closed() {
    (void)world_.run_until([&] { return closed_; }, world_.loop().now() + 30s);
    return closed_;
  }
  bool closed() const { return closed_; }
  std::string auth() const {
    return protocol::hmac_sha256_hex(kSecret, greeting["challenge"].get<std::string>());
  }

  Json greeting;

 private:
  sim::SimWorld& world_;
  std::shared_ptr<protocol::FramedConn> conn_;
  std::vector<Json> got_;
  bool closed_ = false;
};

// What a request could change, as the directory exposes it.
struct Snapshot {
  std::size_t size = 0, leases = 0;
  std::uint64_t evictions = 0;
  std::size_t reclaimable = 0;
  std::vector<std::optional<Location>> found;
  bool operator==(const Snapshot&) const = default;
};

// Keys k0..k3 under mem:9000 boot1, k0 and k1 under a lease, one page kept
// for reclaim, and an
// authenticated connection that sends the mutated requests.
struct Rig {
  Rig() {
    EXPECT_TRUE(server.start({"dir", 7000}).ok());
    client = hello_client();
    Json entries = Json::array();
    for (int i = 0; i < 4; ++i) {
      entries.push_back({{"key", "k" + std::to_string(i)}, {"location", to_json(loc(i * 4096))}});
    }
    EXPECT_TRUE(client->call({{"op", "register"}, {"entries", entries}}).value("ok", false));
    Json looked = client->call({{"op", "lookup"}, {"keys", {"k0", "k1"}}});
    lease = looked.value("lease", std::uint64_t{0});
    EXPECT_NE(lease, 0u) << looked.dump();
    // r0's page is kept for reclaim (registered and deleted).
    Json r0 = {{"key", "r0"}, {"location", to_json(loc(4 * 4096))}};
    EXPECT_TRUE(client->call({{"op", "register"}, {"entries", {r0}}}).value("ok", false));
    EXPECT_TRUE(client->call({{"op", "delete"}, {"keys", {"r0"}}}).value("ok", false));
    EXPECT_EQ(server.directory().reclaimable(), 1u);
  }
  std::unique_ptr<RawClient> hello_client() {
    auto c = std::make_unique<RawClient>(world, client_node, *client_strand);
    Json hello = c->call({{"op", "hello"}, {"id", 1}, {"version", 1}, {"auth", c->auth()}});
    EXPECT_TRUE(hello.value("ok", false)) << hello.dump();
    return c;
  }
  Snapshot snapshot() {
    Snapshot s{server.directory().size(),
               server.directory().open_leases(),
               server.directory().evictions(),
               server.directory().reclaimable(),
               {}};
    for (const auto& key : kKeys) s.found.push_back(server.directory().find(key));
    return s;
  }

  sim::SimWorld world{5};
  sim::SimNode& server_node = world.add_node("dir");
  sim::SimNode& client_node = world.add_node("gpu");
  std::unique_ptr<runtime::Strand> server_strand = server_node.make_strand("dir");
  std::unique_ptr<runtime::Strand> client_strand = client_node.make_strand("client");
  // Leases outlive every run: an expiry is not a change the request made.
  DirectoryServer server{server_node,
                         *server_strand,
                         {.directory = {.max_keys = 100, .lease_ttl = 24h}, .secret = kSecret}};
  std::unique_ptr<RawClient> client;
  std::uint64_t lease = 0;
};

using Template = std::function<Json(const Rig&)>;

const std::vector<std::pair<std::string, Template>>& templates() {
  static const std::vector<std::pair<std::string, Template>> kTemplates = {
      {"hello",
       [](const Rig& rig) {
         return Json{{"op", "hello"},
                     {"id", 1},
                     {"version", 1},
                     {"client", "m"},
                     {"auth", rig.client->auth()}};
       }},
      {"register",
       [](const Rig&) {
         return Json{{"op", "register"},
                     {"id", 2},
                     {"entries",
                      {{{"key", "n0"}, {"location", to_json(loc(65536))}},
                       {{"key", "n1"}, {"location", to_json(loc(0, "boot2"))}}}}};
       }},
      {"lookup",
       [](const Rig&) {
         return Json{{"op", "lookup"}, {"id", 3}, {"keys", {"k0", "k2", "zz"}}};
       }},
      {"probe",
       [](const Rig&) {
         return Json{{"op", "probe"}, {"id", 4}, {"keys", {"k1", "k3"}}, {"with_locations", true}};
       }},
      {"release",
       [](const Rig& rig) {
         return Json{{"op", "release"}, {"id", 5}, {"lease", rig.lease}};
       }},
      {"delete",
       [](const Rig&) {
         return Json{{"op", "delete"}, {"id", 6}, {"keys", {"k3", "k0"}}};
       }},
      {"drop_region",
       [](const Rig&) {
         return Json{{"op", "drop_region"}, {"id", 7}, {"agent", "mem:9000"}, {"region", 3}};
       }},
      {"boot_changed",
       [](const Rig&) {
         return Json{{"op", "boot_changed"}, {"id", 8}, {"agent", "mem:9000"}, {"boot", "boot2"}};
       }},
      {"stats",
       [](const Rig&) {
         return Json{{"op", "stats"}, {"id", 9}};
       }},
      {"reclaim",
       [](const Rig&) {
         return Json{
             {"op", "reclaim"},
             {"id", 10},
             {"regions", {{{"agent", "mem:9000"}, {"region", 3}, {"read_handle", "readhandle"}}}},
             {"max", 4}};
       }},
  };
  return kTemplates;
}

std::vector<Json> make_odd_values() {
  Json deep = Json::array();
  for (int i = 0; i < 200; ++i) deep = Json::array({deep});
  Json many_keys = Json::array();
  for (int i = 0; i < 65537; ++i) many_keys.push_back("k");
  Json overflow = to_json(loc(18446744073709551615ull));
  Json zero = to_json(loc(0));
  zero["length"] = 0;
  return {nullptr,
          true,
          "",
          "x",
          "NaN",
          "-0",
          "1e400",
          0,
          -1,
          18446744073709551615ull,
          0.5,
          1.0,
          Json::array(),
          Json::object(),
          Json::array({""}),
          Json::array({Json::array()}),
          Json::array({{{"key", "n0"}}}),
          Json::array({{{"key", "n0"}, {"location", overflow}}}),
          Json::array({{{"key", "n0"}, {"location", zero}}}),
          Json::array({{{"key", ""}, {"location", to_json(loc(0))}}}),
          many_keys,
          to_json(loc(0)),
          deep};
}

const std::vector<Json>& odd_values() {
  static const std::vector<Json> kValues = make_odd_values();
  return kValues;
}

void mutate_op(const std::string& op, std::uint64_t seed) {
  const Template* make = nullptr;
  for (const auto& [name, t] : templates()) {
    if (name == op) make = &t;
  }
  ASSERT_NE(make, nullptr) << op;
  auto rig = std::make_unique<Rig>();
  {  // The unmutated request is accepted: the mutations start from a valid frame.
    const Json valid = (*make)(*rig);
    Json reply = rig->client->call(valid);
    EXPECT_TRUE(reply.value("ok", false)) << op << ": " << valid.dump() << " -> " << reply.dump();
    rig = std::make_unique<Rig>();
  }
  rcxl::testing::JsonMutator mutator(seed);
  int refused = 0, rebuilt = 0;
  std::map<std::string, int> codes;
  for (int i = 0; i < kMutationsPerOp && !::testing::Test::HasFailure(); ++i) {
    const std::string text = mutator.mutate((*make)(*rig), odd_values());
    const std::string what = op + " #" + std::to_string(i) + " " + text.substr(0, 160);
    const Snapshot before = rig->snapshot();
    rig->client->send_raw(protocol::encode_frame(text));
    const Json reply = rig->client->next();
    ASSERT_TRUE(reply.is_object() && reply.contains("ok") && reply["ok"].is_boolean())
        << what << ": no well-formed reply (" << reply.dump() << ")";
    if (reply["ok"].get<bool>()) {
      if (rig->snapshot() != before) {
        rig = std::make_unique<Rig>();
        ++rebuilt;
      }
      continue;
    }
    ++refused;
    const std::string code = reply["error"].value("code", "");
    ++codes[code];
    EXPECT_TRUE(rcxl::testing::wire_error_codes().count(code)) << what << ": " << reply.dump();
    EXPECT_TRUE(reply["error"].contains("message") && reply["error"]["message"].is_string())
        << what << ": " << reply.dump();
    const bool closes = code == "bad_frame" || code == "auth_failed" || code == "unauthenticated";
    if (closes) {
      EXPECT_TRUE(rig->client->wait_closed()) << what << ": " << code << " left it open";
    } else {
      EXPECT_FALSE(rig->client->closed()) << what << ": " << code << " closed it";
    }
    EXPECT_TRUE(rig->snapshot() == before)
        << what << " refused with " << code << " but changed the directory";
    if (closes) rig->client = rig->hello_client();
  }
  EXPECT_GT(refused, kMutationsPerOp / 4) << op;
  EXPECT_GE(codes.size(), 2u) << op;
  std::string summary;
  for (const auto& [code, n] : codes) summary += " " + code + "=" + std::to_string(n);
  std::cout << op << ": refused " << refused << " (" << summary << " ), rigs rebuilt " << rebuilt
            << "\n";
}

TEST(DirectoryMutation, R1_2_MutatedHelloNeverCrashesAndRefusalsChangeNothing) {
  mutate_op("hello", 31);
}
TEST(DirectoryMutation, R1_2_MutatedRegisterNeverCrashesAndRefusalsChangeNothing) {
  mutate_op("register", 32);
}
TEST(DirectoryMutation, R1_2_MutatedLookupNeverCrashesAndRefusalsChangeNothing) {
  mutate_op("lookup", 33);
}
TEST(DirectoryMutation, R1_2_MutatedProbeNeverCrashesAndRefusalsChangeNothing) {
  mutate_op("probe", 34);
}
TEST(DirectoryMutation, R1_2_MutatedReleaseNeverCrashesAndRefusalsChangeNothing) {
  mutate_op("release", 35);
}
TEST(DirectoryMutation, R1_2_MutatedDeleteNeverCrashesAndRefusalsChangeNothing) {
  mutate_op("delete", 36);
}
TEST(DirectoryMutation, R1_2_MutatedDropRegionNeverCrashesAndRefusalsChangeNothing) {
  mutate_op("drop_region", 37);
}
TEST(DirectoryMutation, R1_2_MutatedBootChangedNeverCrashesAndRefusalsChangeNothing) {
  mutate_op("boot_changed", 38);
}
TEST(DirectoryMutation, R1_2_MutatedStatsNeverCrashesAndRefusalsChangeNothing) {
  mutate_op("stats", 39);
}
TEST(DirectoryMutation, R1_2_MutatedReclaimNeverCrashesAndRefusalsChangeNothing) {
  mutate_op("reclaim", 40);
}

// stats.keys counts what a lookup can find; a key deleted while leased is
// counted apart, as doomed, until its last lease ends.
TEST(DirectoryStats, R1_1_StatsCountsLiveKeysAndDoomedOnesApart) {
  Rig rig;  // k0..k3, k0 and k1 leased
  auto stats = [&rig] { return rig.client->call({{"op", "stats"}, {"id", 2}}); };
  Json before = stats();
  EXPECT_EQ(before.value("keys", 0), 4) << before.dump();
  EXPECT_EQ(before.value("doomed", -1), 0) << before.dump();
  Json deleted = rig.client->call({{"op", "delete"}, {"id", 3}, {"keys", {"k0", "k2"}}});
  EXPECT_EQ(deleted.value("deleted", 0), 2) << deleted.dump();
  Json after = stats();
  EXPECT_EQ(after.value("keys", 0), 2) << after.dump();     // k1, k3
  EXPECT_EQ(after.value("doomed", -1), 1) << after.dump();  // k0, still leased
  Json released = rig.client->call({{"op", "release"}, {"id", 4}, {"lease", rig.lease}});
  EXPECT_TRUE(released.value("ok", false)) << released.dump();
  Json end = stats();
  EXPECT_EQ(end.value("keys", 0), 2) << end.dump();
  EXPECT_EQ(end.value("doomed", -1), 0) << end.dump();
}

// As the agent: a hello whose `client` is not a string is bad_request, and a
// connection that has not said hello is closed after it.
TEST(DirectoryMutation, R1_2_AHelloWhoseClientIsNotAStringIsRefused) {
  Rig rig;
  RawClient c(rig.world, rig.client_node, *rig.client_strand);
  Json hello =
      c.call({{"op", "hello"}, {"id", 1}, {"version", 1}, {"client", 5}, {"auth", c.auth()}});
  EXPECT_EQ(hello["error"]["code"], "bad_request") << hello.dump();
}

}  // namespace
}  // namespace rcxl::directory
