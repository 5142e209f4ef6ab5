// TcpTransport: the Conn semantics of core/runtime/transport.h over real TCP on
// loopback (ordered delivery on the start strand, close flushes, abort drops,
// one close handler call, never inline), and clean shutdown.
#include "backends/verbs/tcp_transport.h"

#include <arpa/inet.h>
#include <dirent.h>
#include <fcntl.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <future>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "backends/verbs/thread_strand.h"
#include "tests/runtime/blocking_wait.h"
#include "tests/tcp_buffers.h"

namespace rcxl::verbs {
namespace {

using runtime::Address;
using runtime::Conn;
using testing::eventually;
using testing::get_or_abort;
using testing::run_on;

std::size_t count_entries(const char* dir) {
  std::size_t n = 0;
  if (DIR* d = opendir(dir)) {
    while (readdir(d) != nullptr) ++n;
    closedir(d);
  }
  return n;
}
std::size_t open_fds() {
  return count_entries("/proc/self/fd");
}
std::size_t live_threads() {
  return count_entries("/proc/self/task");
}

// One end of a connection as a test sees it; touched only on its strand.
struct End {
  std::shared_ptr<Conn> conn;
  std::string received;
  int close_calls = 0;
  std::optional<Status> closed;
  bool delivered_off_strand = false;
};

// A listener, a client and the accepted server end, each end on its own strand.
class Pair {
 public:
  explicit Pair(TcpTransport& transport, const std::string& host = "127.0.0.1") {
    auto listener = transport.listen({host, 0}, server_strand, [this](std::shared_ptr<Conn> c) {
      server.conn = c;
      start(server, server_strand);
      accepted_.set_value();
    });
    ok_ = listener.ok();
    if (!ok_) return;
    listener_ = std::move(listener).value();
    std::promise<Result<std::shared_ptr<Conn>>> connected;
    auto result = connected.get_future();
    transport.connect(listener_->address(), client_strand,
                      [&connected](Result<std::shared_ptr<Conn>> c) { connected.set_value(c); });
    auto conn = get_or_abort(result, "connect");
    EXPECT_TRUE(conn.ok()) << conn.status().ToString();
    if (!conn.ok()) return;
    run_on(client_strand, [&] {
      client.conn = conn.value();
      start(client, client_strand);
    });
    auto accepted = accepted_.get_future();
    get_or_abort(accepted, "accept");
  }
  ~Pair() {
    // Handlers refer to this object: stop them on their own strands first.
    run_on(client_strand, [&] { client.conn.reset(); });
    run_on(server_strand, [&] { server.conn.reset(); });
  }
  bool ok() const { return ok_; }
  runtime::Listener& listener() { return *listener_; }

  ThreadStrand server_strand{"server"};
  ThreadStrand client_strand{"client"};
  End server;
  End client;

 private:
  static void start(End& end, ThreadStrand& strand) {
    end.conn->start(
        strand,
        [&end, &strand](std::string_view bytes) {
          if (!strand.running_here()) end.delivered_off_strand = true;
          end.received.append(bytes);
        },
        [&end](const Status& why) {
          ++end.close_calls;
          end.closed = why;
        });
  }

  std::unique_ptr<runtime::Listener> listener_;
  std::promise<void> accepted_;
  bool ok_ = false;
};

std::string numbered_chunks(int count) {
  std::string all;
  for (int i = 0; i < count; ++i) all += "<" + std::to_string(i) + ">";
  return all;
}

TEST(TcpTransport, ListenOnPortZeroReportsTheRealPort) {
  TcpTransport transport;
  Pair pair(transport);
  ASSERT_TRUE(pair.ok());
  EXPECT_NE(pair.listener().address().port, 0);
  EXPECT_EQ(pair.listener().address().host, "127.0.0.1");
  Address client_peer;
  run_on(pair.client_strand, [&] { client_peer = pair.client.conn->peer(); });
  EXPECT_EQ(client_peer, pair.listener().address());
}

TEST(TcpTransport, BytesArriveInOrderOnTheStartStrand) {
  TcpTransport transport;
  Pair pair(transport);
  ASSERT_TRUE(pair.ok());
  const std::string expected = numbered_chunks(5000);
  run_on(pair.client_strand, [&] {
    for (int i = 0; i < 5000; ++i) pair.client.conn->send("<" + std::to_string(i) + ">");
  });
  EXPECT_TRUE(eventually(pair.server_strand,
                         [&] { return pair.server.received.size() >= expected.size(); }));
  run_on(pair.server_strand, [&] {
    EXPECT_EQ(pair.server.received, expected);
    EXPECT_FALSE(pair.server.delivered_off_strand);
  });
}

TEST(TcpTransport, SendIsThreadSafe) {
  TcpTransport transport;
  Pair pair(transport);
  ASSERT_TRUE(pair.ok());
  std::shared_ptr<Conn> conn;
  run_on(pair.client_strand, [&] { conn = pair.client.conn; });
  std::vector<std::thread> senders;
  for (char tag : {'a', 'b', 'c', 'd'}) {
    senders.emplace_back([conn, tag] {
      for (int i = 0; i < 1000; ++i) conn->send(std::string(10, tag));
    });
  }
  for (auto& sender : senders) sender.join();
  EXPECT_TRUE(
      eventually(pair.server_strand, [&] { return pair.server.received.size() >= 40000u; }));
  run_on(pair.server_strand, [&] {
    EXPECT_EQ(pair.server.received.size(), 40000u);
    // Each send is contiguous: runs of one tag are multiples of 10 bytes.
    std::size_t run = 1;
    for (std::size_t i = 1; i <= pair.server.received.size(); ++i) {
      if (i < pair.server.received.size() &&
          pair.server.received[i] == pair.server.received[i - 1]) {
        ++run;
        continue;
      }
      EXPECT_EQ(run % 10, 0u);
      run = 1;
    }
  });
}

TEST(TcpTransport, CloseFlushesQueuedBytesThenEndsBothEnds) {
  TcpTransport transport;
  Pair pair(transport);
  ASSERT_TRUE(pair.ok());
  const std::string big(8 << 20, 'x');  // more than the socket buffers hold
  bool inside_close = false;
  bool handler_ran_inline = false;
  run_on(pair.client_strand, [&] {
    pair.client.conn->send(big);
    inside_close = true;
    pair.client.conn->close();
    handler_ran_inline = pair.client.close_calls != 0;
    inside_close = false;
    pair.client.conn->send("ignored after close");
  });
  EXPECT_TRUE(eventually(pair.server_strand, [&] { return pair.server.closed.has_value(); }));
  EXPECT_TRUE(eventually(pair.client_strand, [&] { return pair.client.closed.has_value(); }));
  EXPECT_FALSE(handler_ran_inline);
  run_on(pair.server_strand, [&] {
    EXPECT_EQ(pair.server.received.size(), big.size());
    EXPECT_EQ(pair.server.received, big);
    EXPECT_EQ(pair.server.closed->code(), ErrorCode::kClosed);
  });
  run_on(pair.client_strand, [&] { EXPECT_EQ(pair.client.closed->code(), ErrorCode::kClosed); });
}

TEST(TcpTransport, AbortDropsQueuedBytesAndEndsBothEnds) {
  TcpTransport transport;
  Pair pair(transport);
  ASSERT_TRUE(pair.ok());
  const std::string huge(64 << 20, 'y');  // far more than loopback buffers
  run_on(pair.client_strand, [&] {
    pair.client.conn->send(huge);
    pair.client.conn->abort();
    EXPECT_EQ(pair.client.close_calls, 0);  // posted, not inline
  });
  EXPECT_TRUE(eventually(pair.server_strand, [&] { return pair.server.closed.has_value(); }));
  EXPECT_TRUE(eventually(pair.client_strand, [&] { return pair.client.closed.has_value(); }));
  run_on(pair.server_strand, [&] { EXPECT_LT(pair.server.received.size(), huge.size()); });
  run_on(pair.client_strand, [&] { EXPECT_EQ(pair.client.received, ""); });
}

TEST(TcpTransport, CloseHandlerRunsExactlyOnce) {
  TcpTransport transport;
  Pair pair(transport);
  ASSERT_TRUE(pair.ok());
  run_on(pair.client_strand, [&] {
    pair.client.conn->close();
    pair.client.conn->abort();
    pair.client.conn->close();
  });
  EXPECT_TRUE(eventually(pair.server_strand, [&] { return pair.server.closed.has_value(); }));
  EXPECT_TRUE(eventually(pair.client_strand, [&] { return pair.client.closed.has_value(); }));
  // Anything still queued for either strand has run by now.
  run_on(pair.client_strand, [] {});
  run_on(pair.server_strand, [] {});
  run_on(pair.client_strand, [&] { EXPECT_EQ(pair.client.close_calls, 1); });
  run_on(pair.server_strand, [&] { EXPECT_EQ(pair.server.close_calls, 1); });
}

TEST(TcpTransport, PeerCloseIsSeenAsClosed) {
  TcpTransport transport;
  Pair pair(transport);
  ASSERT_TRUE(pair.ok());
  run_on(pair.server_strand, [&] {
    pair.server.conn->send("bye");
    pair.server.conn->close();
  });
  EXPECT_TRUE(eventually(pair.client_strand, [&] { return pair.client.closed.has_value(); }));
  run_on(pair.client_strand, [&] {
    EXPECT_EQ(pair.client.received, "bye");
    EXPECT_EQ(pair.client.closed->code(), ErrorCode::kClosed);
  });
}

// This process's socket whose local port is `local` and peer port `peer`, or -1.
int socket_between(std::uint16_t local, std::uint16_t peer) {
  for (int fd = 0; fd < 4096; ++fd) {
    sockaddr_storage a{}, b{};
    socklen_t la = sizeof a, lb = sizeof b;
    if (getsockname(fd, reinterpret_cast<sockaddr*>(&a), &la) != 0 || a.ss_family != AF_INET ||
        getpeername(fd, reinterpret_cast<sockaddr*>(&b), &lb) != 0) {
      continue;
    }
    if (ntohs(reinterpret_cast<sockaddr_in*>(&a)->sin_port) == local &&
        ntohs(reinterpret_cast<sockaddr_in*>(&b)->sin_port) == peer) {
      return fd;
    }
  }
  return -1;
}

int tcp_option(int fd, int level, int name) {
  int value = -1;
  socklen_t len = sizeof value;
  EXPECT_EQ(getsockopt(fd, level, name, &value, &len), 0) << name;
  return value;
}

// SPEC R6.6 needs a close to happen: a client host that died sends no FIN, and
// an agent that only answers never writes, so its connection (holds, hints, a
// --max-connections slot) stayed forever. Both ends probe an idle peer and end
// once it has not answered for a minute.
TEST(TcpTransport, R6_6_BothEndsProbeAnIdlePeerAndGiveUpAfterAMinute) {
  TcpTransport transport;
  Pair pair(transport);
  ASSERT_TRUE(pair.ok());
  Address client_local;
  run_on(pair.client_strand, [&] { client_local = pair.client.conn->local(); });
  const std::uint16_t server_port = pair.listener().address().port;
  for (const int fd : {socket_between(client_local.port, server_port),
                       socket_between(server_port, client_local.port)}) {
    ASSERT_GE(fd, 0);
    EXPECT_EQ(tcp_option(fd, SOL_SOCKET, SO_KEEPALIVE), 1);
    EXPECT_EQ(tcp_option(fd, IPPROTO_TCP, TCP_KEEPIDLE), 30);
    EXPECT_EQ(tcp_option(fd, IPPROTO_TCP, TCP_KEEPINTVL), 10);
    EXPECT_EQ(tcp_option(fd, IPPROTO_TCP, TCP_KEEPCNT), 3);
    EXPECT_EQ(tcp_option(fd, IPPROTO_TCP, TCP_USER_TIMEOUT), 60000);
  }
}

TEST(TcpTransport, ConnectToAClosedPortFailsWithAStatus) {
  TcpTransport transport;
  ThreadStrand strand("connect");
  Address free_port;
  {
    auto listener = transport.listen({"127.0.0.1", 0}, strand, [](std::shared_ptr<Conn>) {});
    ASSERT_TRUE(listener.ok());
    free_port = (*listener)->address();
  }  // closed: nobody listens there now
  std::promise<Status> result;
  auto status = result.get_future();
  transport.connect(free_port, strand,
                    [&](Result<std::shared_ptr<Conn>> c) { result.set_value(c.status()); });
  const Status s = get_or_abort(status, "connect");
  EXPECT_EQ(s.code(), ErrorCode::kUnavailable) << s.ToString();
}

// A peer's name that does not resolve is an unreachable peer (kUnavailable, as
// on the sim and the RDMA NIC: a DNS outage is not the caller's mistake); it
// was bad_request. A name no resolver could answer (a typo: a space, digits
// that are no IPv4 address) stays the caller's mistake, as a listener's is.
TEST(TcpTransport, UnresolvableHostFailsWithAStatus) {
  TcpTransport transport;
  ThreadStrand strand("connect");
  for (const auto& [host, code] : {std::pair{"no-such-host.invalid", ErrorCode::kUnavailable},
                                   std::pair{"not a host name", ErrorCode::kBadRequest},
                                   std::pair{"300.1.1.1", ErrorCode::kBadRequest}}) {
    std::promise<Status> result;
    auto status = result.get_future();
    transport.connect({host, 1}, strand,
                      [&](Result<std::shared_ptr<Conn>> c) { result.set_value(c.status()); });
    const Status st = get_or_abort(status, "connect");
    EXPECT_EQ(st.code(), code) << host << ": " << st.ToString();
  }
  auto listener = transport.listen({"no-such-host.invalid", 0}, strand, [](auto) {});
  ASSERT_FALSE(listener.ok());
  EXPECT_EQ(listener.status().code(), ErrorCode::kBadRequest);
}

TEST(TcpTransport, ListenOnATakenPortFails) {
  TcpTransport transport;
  ThreadStrand strand("listen");
  auto first = transport.listen({"127.0.0.1", 0}, strand, [](std::shared_ptr<Conn>) {});
  ASSERT_TRUE(first.ok());
  auto second = transport.listen((*first)->address(), strand, [](std::shared_ptr<Conn>) {});
  ASSERT_FALSE(second.ok());
  EXPECT_EQ(second.status().code(), ErrorCode::kUnavailable);
  EXPECT_NE(second.status().message().find("stop it or pick another port"), std::string::npos)
      << second.status().ToString();
}

TEST(TcpTransport, Ipv6Loopback) {
  TcpTransport transport;
  Pair pair(transport, "::1");
  if (!pair.ok()) GTEST_SKIP() << "no IPv6 loopback here";
  EXPECT_EQ(pair.listener().address().host, "::1");
  run_on(pair.client_strand, [&] { pair.client.conn->send("over v6"); });
  EXPECT_TRUE(eventually(pair.server_strand, [&] { return pair.server.received == "over v6"; }));
}

TEST(TcpTransport, ManyConnectionsOpenAndCloseWithoutLeaks) {
  // A sanitizer runtime starts a helper thread of its own at the first thread
  // creation (TSan's background thread) and keeps it: start it before counting.
  std::thread([] {}).join();
  const std::size_t fds_before = open_fds();
  const std::size_t threads_before = live_threads();
  {
    TcpTransport transport;
    for (int round = 0; round < 100; ++round) {
      Pair pair(transport);
      ASSERT_TRUE(pair.ok());
      run_on(pair.client_strand, [&] {
        pair.client.conn->send("hi");
        pair.client.conn->close();
      });
      ASSERT_TRUE(eventually(pair.server_strand, [&] { return pair.server.closed.has_value(); }));
      run_on(pair.server_strand, [&] { EXPECT_EQ(pair.server.received, "hi"); });
    }
  }
  EXPECT_EQ(open_fds(), fds_before);
  EXPECT_EQ(live_threads(), threads_before);
}

TEST(TcpTransport, DroppingAConnWhileBytesArriveAbortsIt) {
  TcpTransport transport;
  Pair pair(transport);
  ASSERT_TRUE(pair.ok());
  std::atomic<bool> stop{false};
  std::shared_ptr<Conn> server_conn;
  run_on(pair.server_strand, [&] { server_conn = pair.server.conn; });
  std::thread flood([&] {
    while (!stop) server_conn->send(std::string(4096, 'z'));
  });
  run_on(pair.client_strand, [&] { pair.client.conn.reset(); });  // the last handle
  EXPECT_TRUE(eventually(pair.server_strand, [&] { return pair.server.closed.has_value(); }));
  stop = true;
  flood.join();
}

TEST(TcpTransport, DestroyingTheTransportEndsItsConnections) {
  std::optional<Pair> pair;
  auto transport = std::make_unique<TcpTransport>();
  pair.emplace(*transport);
  ASSERT_TRUE(pair->ok());
  transport.reset();
  EXPECT_TRUE(eventually(pair->client_strand, [&] { return pair->client.closed.has_value(); }));
  EXPECT_TRUE(eventually(pair->server_strand, [&] { return pair->server.closed.has_value(); }));
  run_on(pair->client_strand, [&] {
    pair->client.conn->send("after the end");  // ignored, no crash
    EXPECT_EQ(pair->client.close_calls, 1);
  });
}

TEST(TcpTransport, ConnectRacingTransportShutdownStillAnswers) {
  TcpTransport server_transport;
  ThreadStrand strand("racer");
  auto listener = server_transport.listen({"127.0.0.1", 0}, strand,
                                          [](std::shared_ptr<Conn> c) { c->abort(); });
  ASSERT_TRUE(listener.ok());
  for (int i = 0; i < 20; ++i) {
    auto transport = std::make_unique<TcpTransport>();
    std::promise<Result<std::shared_ptr<Conn>>> answered;
    auto answer = answered.get_future();
    transport->connect((*listener)->address(), strand,
                       [&](Result<std::shared_ptr<Conn>> c) { answered.set_value(c); });
    transport.reset();
    auto result = get_or_abort(answer, "connect during shutdown");
    if (result.ok()) run_on(strand, [&] { result = Status(ErrorCode::kClosed, "dropped"); });
  }
}

TEST(TcpTransport, BytesBeforeStartAreDeliveredAtStart) {
  TcpTransport transport;
  ThreadStrand server_strand("server");
  ThreadStrand client_strand("client");
  std::promise<std::shared_ptr<Conn>> accepted;
  auto accepted_conn = accepted.get_future();
  auto listener = transport.listen({"127.0.0.1", 0}, server_strand,
                                   [&](std::shared_ptr<Conn> c) { accepted.set_value(c); });
  ASSERT_TRUE(listener.ok());
  std::promise<Result<std::shared_ptr<Conn>>> connected;
  auto client_conn = connected.get_future();
  transport.connect((*listener)->address(), client_strand,
                    [&](Result<std::shared_ptr<Conn>> c) { connected.set_value(c); });
  auto connect_result = get_or_abort(client_conn, "connect");
  ASSERT_TRUE(connect_result.ok());
  std::shared_ptr<Conn> client = std::move(connect_result).value();
  client->send("early");
  client->close();
  auto server = get_or_abort(accepted_conn, "accept");
  std::promise<std::string> got;
  auto received = got.get_future();
  std::string buffer;
  run_on(server_strand, [&] {
    server->start(
        server_strand, [&](std::string_view b) { buffer.append(b); },
        [&](const Status&) { got.set_value(buffer); });
  });
  EXPECT_EQ(get_or_abort(received, "early bytes"), "early");
  run_on(server_strand, [&] { server.reset(); });
  run_on(client_strand, [&] { client.reset(); });
}

// A transport listening on loopback, and the first connection it accepts.
struct OneAccept {
  explicit OneAccept(TcpTransport::Options options) : transport(options) {
    auto l = transport.listen({"127.0.0.1", 0}, server_strand,
                              [this](std::shared_ptr<Conn> c) { accepted.set_value(c); });
    ok = l.ok();
    if (ok) listener = std::move(l).value();
  }
  std::uint16_t port() const { return listener->address().port; }
  std::shared_ptr<Conn> take() { return get_or_abort(accepted_conn, "accept"); }

  TcpTransport transport;
  ThreadStrand server_strand{"server"};
  std::promise<std::shared_ptr<Conn>> accepted;
  std::future<std::shared_ptr<Conn>> accepted_conn = accepted.get_future();
  std::unique_ptr<runtime::Listener> listener;
  bool ok = false;
};

// A peer that never reads what it is sent (a client that pipelines requests
// and ignores the replies) must not grow the sender's memory without end:
// past max_unsent_bytes the connection is reset and its close handler says why.
TEST(TcpTransport, APeerThatNeverReadsIsResetPastTheUnsentLimit) {
  TcpTransport::Options options;
  options.conn.max_unsent_bytes = std::size_t{1} << 20;
  OneAccept rig(options);
  ASSERT_TRUE(rig.ok);
  auto& server_strand = rig.server_strand;
  // A raw client with a small receive buffer that never reads.
  const int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  ASSERT_GE(fd, 0);
  const int small = 4096;
  setsockopt(fd, SOL_SOCKET, SO_RCVBUF, &small, sizeof small);
  sockaddr_in to{};
  to.sin_family = AF_INET;
  to.sin_port = htons(rig.port());
  to.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  ASSERT_EQ(::connect(fd, reinterpret_cast<sockaddr*>(&to), sizeof to), 0);
  auto server = rig.take();
  std::promise<Status> ended;
  auto end = ended.get_future();
  run_on(server_strand, [&] {
    server->start(
        server_strand, [](std::string_view) {}, [&](const Status& why) { ended.set_value(why); });
    const std::string chunk(64 * 1024, 'x');
    for (int i = 0; i < 256; ++i) server->send(chunk);  // 16 MiB, far past 1 MiB + socket buffers
  });
  const Status why = get_or_abort(end, "reset of a peer that does not read");
  EXPECT_EQ(why.code(), ErrorCode::kClosed);
  EXPECT_NE(why.message().find("does not read"), std::string::npos) << why.ToString();
  run_on(server_strand, [&] { server.reset(); });
  ::close(fd);
}

// A raw loopback client of `port`, non-blocking, and how much of `total`
// patterned bytes it could write before the server stopped taking them (no
// progress for 300 ms).
struct RawWriter {
  explicit RawWriter(std::uint16_t port) {
    fd = ::socket(AF_INET, SOCK_STREAM, 0);
    sockaddr_in to{};
    to.sin_family = AF_INET;
    to.sin_port = htons(port);
    to.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    const int small = 64 * 1024;  // what it holds back itself stays small
    if (fd >= 0) setsockopt(fd, SOL_SOCKET, SO_SNDBUF, &small, sizeof small);
    connected = fd >= 0 && ::connect(fd, reinterpret_cast<sockaddr*>(&to), sizeof to) == 0;
    if (connected) ::fcntl(fd, F_SETFL, ::fcntl(fd, F_GETFL) | O_NONBLOCK);
  }
  ~RawWriter() {
    if (fd >= 0) ::close(fd);
  }
  static char byte_at(std::size_t i) { return static_cast<char>('a' + (i * 7 + i / 4096) % 26); }
  // Writes until `total` or until the peer stops taking bytes for `stall`.
  void write_until(std::size_t total, std::chrono::milliseconds stall) {
    std::string chunk(64 * 1024, '\0');
    auto last_progress = std::chrono::steady_clock::now();
    while (written < total && std::chrono::steady_clock::now() - last_progress < stall) {
      const std::size_t n = std::min(chunk.size(), total - written);
      for (std::size_t i = 0; i < n; ++i) chunk[i] = byte_at(written + i);
      const ssize_t sent = ::send(fd, chunk.data(), n, MSG_NOSIGNAL);
      if (sent > 0) {
        written += static_cast<std::size_t>(sent);
        last_progress = std::chrono::steady_clock::now();
      } else {
        std::this_thread::sleep_for(std::chrono::milliseconds(1));
      }
    }
  }
  int fd = -1;
  bool connected = false;
  std::size_t written = 0;
};

// A connection whose data handler is busy (its strand blocked, as the agent's
// is behind a long write_wait) stops reading past max_undelivered_bytes, so
// the peer is held back by TCP instead of the bytes piling up in memory; when
// the handler catches up everything arrives, in order.
TEST(TcpTransport, ABusyReaderHoldsThePeerBackInsteadOfQueueingWithoutEnd) {
  TcpTransport::Options options;
  options.conn.max_undelivered_bytes = std::size_t{1} << 20;
  OneAccept rig(options);
  ASSERT_TRUE(rig.ok);
  auto& server_strand = rig.server_strand;
  RawWriter writer(rig.port());
  ASSERT_TRUE(writer.connected);
  auto server = rig.take();
  std::promise<void> unblock;
  std::shared_future<void> unblocked = unblock.get_future().share();
  std::atomic<std::size_t> received{0};
  std::atomic<bool> in_order{true};
  run_on(server_strand, [&] {
    server->start(
        server_strand,
        [&, first = true](std::string_view bytes) mutable {
          if (first) unblocked.wait();  // the first delivery blocks the strand
          first = false;
          const std::size_t at = received;
          for (std::size_t i = 0; i < bytes.size(); ++i) {
            if (bytes[i] != RawWriter::byte_at(at + i)) in_order = false;
          }
          received += bytes.size();
        },
        [](const Status&) {});
  });
  // The kernel's receive buffer, what the transport may hold (1 MiB and one
  // read round of 1 MiB), the writer's small send buffer; then 32 MiB more.
  const std::size_t bound = testing::tcp_receive_buffer_max() + (std::size_t{4} << 20);
  const std::size_t total = bound + (std::size_t{32} << 20);
  writer.write_until(total, std::chrono::milliseconds(300));
  EXPECT_LT(writer.written, bound) << writer.written;
  EXPECT_GT(writer.written, std::size_t{1} << 20);  // the transport did hold bytes
  unblock.set_value();
  writer.write_until(total, std::chrono::milliseconds(5000));
  EXPECT_EQ(writer.written, total);
  ASSERT_TRUE(eventually(server_strand, [&] { return received == total; })) << received;
  EXPECT_TRUE(in_order);
  run_on(server_strand, [&] { server.reset(); });
}

// With an input-end handler a peer's half-close is not the stream's end: the
// bytes come, then the notice, and the reply sent after it still reaches the
// peer before our close -- also when the FIN was read before the handler was
// set (a client that sends and half-closes at once, as `nc -N` does). Without
// one the stream ends (PeerCloseIsSeenAsClosed).
TEST(TcpTransport, AHalfCloseWithAnInputEndHandlerLeavesTheStreamOpenForReplies) {
  TcpTransport::Options options;
  OneAccept rig(options);
  ASSERT_TRUE(rig.ok);
  RawWriter client(rig.port());
  ASSERT_TRUE(client.connected);
  ASSERT_EQ(::send(client.fd, "request", 7, MSG_NOSIGNAL), 7);
  ::shutdown(client.fd, SHUT_WR);
  auto server = rig.take();
  std::this_thread::sleep_for(std::chrono::milliseconds(100));  // the FIN is read before start
  std::string got;
  std::promise<void> input_end;
  std::promise<Status> closed;
  run_on(rig.server_strand, [&] {
    server->set_input_end_handler([&] {
      EXPECT_EQ(got, "request");
      server->send("reply");
      server->close();
      input_end.set_value();
    });
    server->start(
        rig.server_strand, [&](std::string_view b) { got.append(b); },
        [&](const Status& why) { closed.set_value(why); });
  });
  auto ended = input_end.get_future();
  get_or_abort(ended, "input end");
  std::string reply;
  char buf[64];
  for (int i = 0; i < 2000; ++i) {
    const ssize_t n = ::recv(client.fd, buf, sizeof buf, 0);
    if (n == 0) break;  // the server's FIN, after the reply
    if (n > 0) reply.append(buf, static_cast<std::size_t>(n));
    if (n < 0) std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  EXPECT_EQ(reply, "reply");
  auto why = closed.get_future();
  EXPECT_EQ(get_or_abort(why, "close").code(), ErrorCode::kClosed);
  run_on(rig.server_strand, [&] { server.reset(); });
}

// set_reading(false) stops deliveries (the peer's end too) until
// set_reading(true), which delivers what waited, in order, then the end.
TEST(TcpTransport, SetReadingOffHoldsDeliveriesAndThePeersEndUntilOn) {
  TcpTransport transport;
  Pair pair(transport);
  ASSERT_TRUE(pair.ok());
  run_on(pair.server_strand, [&] { pair.server.conn->set_reading(false); });
  run_on(pair.client_strand, [&] {
    pair.client.conn->send("held ");
    pair.client.conn->send("back");
    pair.client.conn->close();
  });
  std::this_thread::sleep_for(std::chrono::milliseconds(200));
  run_on(pair.server_strand, [&] {
    EXPECT_EQ(pair.server.received, "");
    EXPECT_FALSE(pair.server.closed.has_value());
    pair.server.conn->set_reading(true);
    EXPECT_EQ(pair.server.received, "");  // never inside the call
  });
  ASSERT_TRUE(eventually(pair.server_strand, [&] { return pair.server.closed.has_value(); }));
  run_on(pair.server_strand, [&] {
    EXPECT_EQ(pair.server.received, "held back");
    EXPECT_EQ(pair.server.closed->code(), ErrorCode::kClosed);
    EXPECT_FALSE(pair.server.delivered_off_strand);
  });
}

}  // namespace
}  // namespace rcxl::verbs
