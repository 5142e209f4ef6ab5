// The agent's pure parts: request decoding (R1.2), auth (R1.3), the allocator
// (R1.5) and the boot tracker (R6.1, R6.4).
#include <gtest/gtest.h>

#include <cstdlib>
#include <fstream>

#include "core/agent/agent.h"
#include "core/agent/agent_metrics.h"
#include "core/agent/boot_tracker.h"
#include "core/agent/region_allocator.h"
#include "core/protocol/auth.h"
#include "core/protocol/messages.h"
#include "core/runtime/transport.h"

namespace rcxl::agent {
namespace {

using namespace std::chrono_literals;
using protocol::Json;

TEST(Messages, R1_2_ReadHintDecodesRangesAndHandles) {
  Json m = Json::parse(R"({"op":"extension","id":3,"action":"read_hint","epoch":"b:1",
      "request":"q","ranges":[[7,0,4096],[8,4096,1]],"handles":{"7":"h7","8":"h8","9":"h9"}})");
  auto r = protocol::parse_request(m);
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  const auto& e = std::get<protocol::ExtensionRequest>(*r);
  EXPECT_EQ(e.action, protocol::Action::kReadHint);
  EXPECT_EQ(e.epoch, "b:1");
  EXPECT_EQ(e.name, "q");
  EXPECT_EQ(e.ranges, (std::vector<protocol::WireRange>{{7, 0, 4096}, {8, 4096, 1}}));
  EXPECT_EQ(e.handles.at(8), "h8");
  EXPECT_EQ(*protocol::parse_request_id(m), 3);
}

TEST(Messages, R1_2_FieldErrorsAreBadRequest) {
  for (
      const char* text : {
          R"({"op":"map","region":1,"handle":"h"})",
          R"({"op":"map","region":1.0,"handle":"h","epoch":"e"})",
          R"({"op":"hello","version":2})",
          R"({"op":"extension","action":"read_hint_end"})",
          R"({"op":"extension","action":"read_hint_end","request":"q","epoch":5})",
          R"({"op":"extension","action":"read_hint","request":"q","epoch":"e","ranges":[[1,0,1]],"handles":{"01":"h"}})",
          R"({"op":"extension","action":"write_wait","token":"t","epoch":"e","ranges":[],"handles":{},"timeout_ms":10001})",
      }) {
    auto r = protocol::parse_request(Json::parse(text));
    ASSERT_FALSE(r.ok()) << text;
    EXPECT_EQ(r.status().code(), ErrorCode::kBadRequest) << text;
  }
  EXPECT_EQ(protocol::parse_request_id(Json::parse(R"({"id":-1})")).status().code(),
            ErrorCode::kBadRequest);
  EXPECT_TRUE(protocol::parse_request_id(Json::parse(R"({})"))->is_null());
  // PROTOCOL: --auth none takes any auth; with a secret a non-string one is
  // auth_failed (no auth to check), not a field error.
  auto number_auth = protocol::parse_request(Json::parse(R"({"op":"hello","auth":5})"));
  ASSERT_TRUE(number_auth.ok());
  EXPECT_FALSE(std::get<protocol::HelloRequest>(*number_auth).auth.has_value());
}

// A client that sends an optional field as null (Python's None) means it
// absent: `fresh: null` is a map without fresh, as `client` and `epoch` are.
TEST(Messages, R5_2_FreshNullIsAbsent) {
  auto r = protocol::parse_request(
      Json::parse(R"({"op":"map","region":1,"handle":"h","epoch":"e","fresh":null})"));
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_FALSE(std::get<protocol::MapRequest>(*r).fresh);
  auto yes = protocol::parse_request(
      Json::parse(R"({"op":"map","region":1,"handle":"h","epoch":"e","fresh":"yes"})"));
  EXPECT_EQ(yes.status().code(), ErrorCode::kBadRequest);
}

TEST(Messages, R3_1_ReadHintEndAndPromoteNeedNoEpochOrRanges) {
  for (const char* text : {R"({"op":"extension","action":"read_hint_end","request":"q"})",
                           R"({"op":"extension","action":"read_promote","request":"q"})"}) {
    auto r = protocol::parse_request(Json::parse(text));
    ASSERT_TRUE(r.ok()) << text;
    EXPECT_FALSE(std::get<protocol::ExtensionRequest>(*r).epoch.has_value());
  }
}

TEST(Auth, R1_3_HmacSha256MatchesRfc4231) {
  // RFC 4231 test case 2.
  EXPECT_EQ(protocol::hmac_sha256_hex("Jefe", "what do ya want for nothing?"),
            "5bdcc146bf60754e6a042426089575c75a003f089d2739839dec58b964ec3843");
  EXPECT_TRUE(
      protocol::verify_auth("Jefe", "what do ya want for nothing?",
                            "5BDCC146BF60754E6A042426089575C75A003F089D2739839DEC58B964EC3843"));
  EXPECT_FALSE(protocol::verify_auth("Jefe", "what do ya want for nothing?", "5bdc"));
  EXPECT_EQ(protocol::secret_from_file_contents("s3cret \n\t"), "s3cret");
  EXPECT_FALSE(protocol::constant_time_equal("abc", "abd"));
}

// Death tests run in a fresh process (threadsafe style) that reads
// OPENSSL_CONF at its first use of OpenSSL: this one loads only the null
// provider, so SHA-256 and HMAC are missing there. The caller unsets it after.
void use_only_the_null_openssl_provider() {
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  const std::string conf = ::testing::TempDir() + "rcxl-openssl-null.cnf";
  {
    std::ofstream out(conf);
    out << "openssl_conf = init\n[init]\nproviders = providers\n"
           "[providers]\nnull = null_provider\n[null_provider]\nactivate = 1\n";
  }
  ASSERT_EQ(setenv("OPENSSL_CONF", conf.c_str(), 1), 0);
}

// R1.3: an HMAC that fails (here OpenSSL loads only its null provider, so
// SHA-256 is missing) gave an empty digest, and an empty `auth` matched it:
// the hello authenticated with no secret at all (review, session 26). Run in
// a fresh process so OpenSSL reads OPENSSL_CONF at its first use.
TEST(Auth, R1_3_AnHmacThatFailsAuthenticatesNothing) {
  use_only_the_null_openssl_provider();
  // Exit 2 says the setup did not break HMAC (the test would prove nothing).
  EXPECT_EXIT(
      {
        const bool broken = protocol::hmac_sha256_hex("k", "challenge").size() != 64;
        std::exit(!broken ? 2 : protocol::verify_auth("k", "challenge", "") ? 1 : 0);
      },
      ::testing::ExitedWithCode(0), "");
  unsetenv("OPENSSL_CONF");
}

// Alloc tokens are kept by their SHA-256 (FIPS 180-2's "abc" vector): a
// std::map lookup by the token itself took longer the more of a guess's
// leading bytes matched a live token (review, session 26).
TEST(Auth, R1_5_AllocTokensAreKeptByTheirDigest) {
  EXPECT_EQ(protocol::sha256_hex("abc"),
            "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
  EXPECT_EQ(Agent::token_key("abc"), protocol::sha256_hex("abc"));
  EXPECT_EQ(Agent::token_key(""), "");
}

// In a process without SHA-256 (checked: 2 if it has it): 0 when two tokens
// still get two non-empty keys, else 1.
int tokens_without_sha256_exit_code() {
  if (!protocol::sha256_hex("a").empty()) return 2;
  const std::string a = Agent::token_key("a");
  const std::string b = Agent::token_key("b");
  return !a.empty() && !b.empty() && a != b ? 0 : 1;
}

// Without SHA-256 every token's digest was "": two clients' tokens shared one
// key and the second alloc got the first one's region and owner handle
// (diff review, session 26). Tokens stay apart.
TEST(Auth, R1_5_WithoutSha256TwoTokensStillHaveTwoKeys) {
  use_only_the_null_openssl_provider();
  EXPECT_EXIT(std::exit(tokens_without_sha256_exit_code()), ::testing::ExitedWithCode(0), "");
  unsetenv("OPENSSL_CONF");
}

// docs/agent.md, *RDMA connect proofs*: 16 characters of the challenge, then
// 32 of HMAC-SHA256(secret, "rcxl-rdma-connect " + challenge); rdma_cm's zero
// padding after it is taken, anything else is not.
TEST(Auth, R1_3_AConnectProofIsTheChallengesPrefixAndItsHmac) {
  const std::string challenge(64, 'c');
  const std::string proof = protocol::connect_proof("k", challenge);
  ASSERT_EQ(proof.size(), protocol::kConnectProofBytes);
  EXPECT_EQ(proof.substr(0, 16), challenge.substr(0, 16));
  EXPECT_EQ(proof.substr(16),
            protocol::hmac_sha256_hex("k", "rcxl-rdma-connect " + challenge).substr(0, 32));
  EXPECT_TRUE(protocol::verify_connect_proof("k", challenge, proof));
  EXPECT_TRUE(protocol::verify_connect_proof("k", challenge, proof + std::string(8, '\0')));
  EXPECT_FALSE(protocol::verify_connect_proof("k", challenge, proof + "x"));
  EXPECT_FALSE(protocol::verify_connect_proof("k", challenge, proof.substr(0, 47)));
  EXPECT_FALSE(protocol::verify_connect_proof("other", challenge, proof));
  EXPECT_FALSE(protocol::verify_connect_proof("k", std::string(64, 'd'), proof));
}

TEST(RegionAllocator, R1_5_FirstFitAlignedAndMerging) {
  RegionAllocator a(10 * 4096 + 100);
  EXPECT_EQ(a.free_bytes(), 10u * 4096);
  EXPECT_EQ(a.allocate(4096), 0u);
  EXPECT_EQ(a.allocate(2 * 4096), 4096u);
  EXPECT_EQ(a.allocate(4096), 3u * 4096);
  EXPECT_FALSE(a.allocate(100).has_value());
  a.release(4096, 2 * 4096);
  EXPECT_EQ(a.allocate(4096), 4096u);  // first fit: the hole
  EXPECT_FALSE(a.allocate(7 * 4096).has_value());
  a.release(4096, 4096);
  a.release(0, 4096);
  a.release(3 * 4096, 4096);
  EXPECT_EQ(a.allocate(10 * 4096), 0u);  // merged back into one extent
}

TEST(BootTracker, R6_4_GraceUnknownAndCountedPeriods) {
  BootTracker t("id", true, 2s);
  t.start("g");
  EXPECT_EQ(t.boot(), "id:g");
  using C = BootTracker::Change;
  EXPECT_EQ(t.observe(std::nullopt, 10s), C::kNone);
  EXPECT_EQ(t.observe(std::nullopt, 11s), C::kNone);
  EXPECT_EQ(t.observe(std::string("g"), 11500ms), C::kNone);  // grace resets
  EXPECT_EQ(t.observe(std::nullopt, 12s), C::kNone);
  EXPECT_EQ(t.observe(std::nullopt, 14s), C::kUnknown);
  EXPECT_EQ(t.boot(), "id:unknown");
  EXPECT_EQ(t.observe(std::nullopt, 20s), C::kNone);
  EXPECT_EQ(t.observe(std::string("g"), 21s), C::kKnownAgain);
  EXPECT_EQ(t.boot(), "id:g~1");
  EXPECT_EQ(t.observe(std::string("h"), 22s), C::kGeneration);
  EXPECT_EQ(t.boot(), "id:h~1");  // the suffix stays
  EXPECT_EQ(t.sequence(), 3u);
  BootTracker plain("id", false, 2s);
  EXPECT_EQ(plain.observe(std::nullopt, 100s), C::kNone);
  EXPECT_EQ(plain.boot(), "id");
}

TEST(AgentMetrics, R3_3_PrometheusTextHasLabelsAndValues) {
  AgentMetrics m;
  m.hints_accepted["read_hint"] = 4;
  m.hints_refused["too_many_hint_requests"] = 2;
  m.open_hint_requests = 3;
  const std::string text = metrics_text(m);
  EXPECT_NE(text.find("rcxl_agent_hints_accepted_total{action=\"read_hint\"} 4"),
            std::string::npos);
  EXPECT_NE(text.find("rcxl_agent_hints_refused_total{code=\"too_many_hint_requests\"} 2"),
            std::string::npos);
  EXPECT_NE(
      text.find("# TYPE rcxl_agent_open_hint_requests gauge\nrcxl_agent_open_hint_requests 3"),
      std::string::npos);
}

}  // namespace
}  // namespace rcxl::agent

namespace rcxl::runtime {
namespace {

// SPEC R1.3: --auth none only on loopback. A name that starts like a loopback
// literal can resolve to any address, so only literals (and localhost) count.
TEST(Address, R1_3_OnlyLoopbackLiteralsAreLoopback) {
  for (const char* host : {"127.0.0.1", "127.1.2.3", "::1", "localhost"}) {
    EXPECT_TRUE((Address{host, 1}).is_loopback()) << host;
  }
  for (const char* host : {"127.evil.example", "127.0.0.1.evil.example", "127.0.0", "127.0.0.256",
                           "127..0.1", "1127.0.0.1", "10.0.0.1", "0127.0.0.1x", ""}) {
    EXPECT_FALSE((Address{host, 1}).is_loopback()) << host;
  }
}

}  // namespace
}  // namespace rcxl::runtime
