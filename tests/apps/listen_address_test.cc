// The --listen checks rcxl-agent and rcxl-directory make before they open
// anything (apps/listen_address.h): judged on what the names resolve to.
#include "apps/listen_address.h"

#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <netinet/in.h>

#include <cstring>

namespace {

using rcxl::verbs::SocketAddress;

// A socket address of an IPv4 or (with a ':') IPv6 literal, port 0.
SocketAddress socket_address(const std::string& host) {
  SocketAddress a;
  const bool v6 = host.find(':') != std::string::npos;
  auto* in = reinterpret_cast<sockaddr_in*>(&a.storage);
  auto* in6 = reinterpret_cast<sockaddr_in6*>(&a.storage);
  a.storage.ss_family = v6 ? AF_INET6 : AF_INET;
  void* bytes = v6 ? static_cast<void*>(&in6->sin6_addr) : static_cast<void*>(&in->sin_addr);
  EXPECT_EQ(inet_pton(a.storage.ss_family, host.c_str(), bytes), 1) << host;
  a.length = v6 ? sizeof *in6 : sizeof *in;
  return a;
}

bool contains(const std::string& text, const std::string& part) {
  return text.find(part) != std::string::npos;
}

// SPEC R7 (--auth none, loopback listeners only): a name is as local as what
// it resolves to; "localhost" in /etc/hosts may say 10.0.0.5.
TEST(ListenAddress, R7_LoopbackIsJudgedOnTheResolvedAddress) {
  for (const char* host : {"127.0.0.1", "127.200.3.4"})
    EXPECT_TRUE(is_loopback(socket_address(host))) << host;
  for (const char* host : {"::1", "::ffff:127.0.0.1"})
    EXPECT_TRUE(is_loopback(socket_address(host))) << host;
  for (const char* host : {"10.0.0.5", "0.0.0.0", "128.0.0.1"}) {
    EXPECT_FALSE(is_loopback(socket_address(host))) << host;
  }
  for (const char* host : {"::", "::ffff:10.0.0.5", "fe80::1", "::2"}) {
    EXPECT_FALSE(is_loopback(socket_address(host))) << host;
  }
  const std::vector<SocketAddress> localhost = {socket_address("::1"), socket_address("10.0.0.5"),
                                                socket_address("127.0.0.1")};
  const SocketAddress* outside = rcxl::apps::first_not_loopback(localhost);
  ASSERT_NE(outside, nullptr);
  EXPECT_EQ(rcxl::verbs::to_address(outside->get()).host, "10.0.0.5");
  EXPECT_EQ(rcxl::apps::first_not_loopback({socket_address("::1"), socket_address("127.0.0.1")}),
            nullptr);
}

// SPEC R7 (--listen, each address once): two spellings of one socket are a
// repeat, named as such, not a bind that says another process holds the port.
TEST(ListenAddress, R7_TwoSpellingsOfOneAddressAreARepeat) {
  const auto st = rcxl::apps::check_listen_addresses(
      "--listen", {{"127.0.0.1", 7781}, {"127.0.0.1", 0}, {"127.1", 7781}}, false);
  ASSERT_FALSE(st.ok());
  EXPECT_EQ(st.code(), rcxl::ErrorCode::kBadRequest);
  EXPECT_TRUE(contains(st.message(), "--listen 127.0.0.1:7781 and 127.1:7781 are one address"))
      << st.message();
  // Names whose address lists only overlap may bind apart (localhost falls
  // back to 127.0.0.1 when [::1] is taken): only equal lists are a repeat.
  const std::vector<SocketAddress> both = {socket_address("::1"), socket_address("127.0.0.1")};
  EXPECT_FALSE(rcxl::apps::same_addresses(both, {socket_address("::1")}));
  EXPECT_TRUE(rcxl::apps::same_addresses(both, both));
  // Port 0 binds a new port each time; other ports and hosts are other sockets.
  EXPECT_TRUE(
      rcxl::apps::check_listen_addresses(
          "--listen", {{"127.0.0.1", 0}, {"127.1", 0}, {"127.0.0.2", 7781}, {"127.1", 7782}}, false)
          .ok());
}

// SPEC R7: a listen name that does not resolve names the flag and the fix
// (it said "cannot resolve 'X'" from deep in the start, after the pool opened).
TEST(ListenAddress, R7_ANameThatDoesNotResolveNamesTheFlag) {
  const auto st = rcxl::apps::check_listen_addresses(
      "--listen", {{"127.0.0.1", 0}, {"no-such-host.invalid", 7400}}, false);
  ASSERT_FALSE(st.ok());
  EXPECT_EQ(st.code(), rcxl::ErrorCode::kBadRequest);
  EXPECT_TRUE(contains(st.message(), "--listen no-such-host.invalid:7400: cannot resolve"))
      << st.message();
  EXPECT_TRUE(contains(st.message(), "give a name or address of this host")) << st.message();
}

// SPEC R7: under --auth none a literal outside loopback is refused before anything opens.
TEST(ListenAddress, R7_AuthNoneRefusesAnAddressBeyondLoopback) {
  EXPECT_TRUE(
      rcxl::apps::check_listen_addresses("--listen", {{"127.0.0.1", 0}, {"::1", 0}}, true).ok());
  const auto st = rcxl::apps::check_listen_addresses("--listen", {{"0.0.0.0", 0}}, true);
  ASSERT_FALSE(st.ok());
  EXPECT_TRUE(contains(st.message(), "--auth none needs loopback listeners only, not 0.0.0.0:0;"))
      << st.message();
}

}  // namespace
