// The proof of the ports (DESIGN.md "the one rule"): one test body runs core's
// echo protocol on the simulator and on the thread runtime over real TCP, and
// sees the same bytes. Bad frames get the same answer on both grounds.
#include <gtest/gtest.h>

#include <future>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "backends/sim/sim_world.h"
#include "backends/verbs/thread_runtime.h"
#include "core/protocol/echo_service.h"
#include "core/protocol/frame_codec.h"
#include "tests/runtime/blocking_wait.h"

namespace rcxl {
namespace {

using protocol::EchoClient;
using protocol::EchoServer;
using runtime::Address;
using runtime::Conn;
using runtime::Strand;

// The simulator: two nodes; waiting means advancing virtual time.
class SimGround {
 public:
  runtime::Runtime& server() { return server_; }
  runtime::Runtime& client() { return client_; }
  Address listen_address() const { return {"server", 7000}; }
  template <typename T>
  T await(std::future<T>& future) {
    const Status s = world_.run_until(
        [&] { return future.wait_for(std::chrono::seconds(0)) == std::future_status::ready; });
    EXPECT_TRUE(s.ok()) << s.ToString();
    if (!s.ok()) std::abort();  // the body would wait on a dead future
    return future.get();
  }

 private:
  sim::SimWorld world_{1};
  sim::SimNode& server_ = world_.add_node("server");
  sim::SimNode& client_ = world_.add_node("client");
};

// The OS: one ThreadRuntime for both ends, TCP on loopback; waiting blocks.
class ThreadGround {
 public:
  ThreadGround() : rt_(verbs::ThreadRuntime::Options{runtime::LogLevel::kWarn}) {}
  runtime::Runtime& server() { return rt_; }
  runtime::Runtime& client() { return rt_; }
  Address listen_address() const { return {"127.0.0.1", 0}; }
  template <typename T>
  T await(std::future<T>& future) {
    return testing::get_or_abort(future, "thread runtime");
  }

 private:
  verbs::ThreadRuntime rt_;
};

template <typename Ground>
void run_on(Ground& ground, Strand& strand, const std::function<void()>& fn) {
  std::promise<void> done;
  auto future = done.get_future();
  strand.post([&] {
    fn();
    done.set_value();
  });
  ground.await(future);
}

// Waits, on `strand`, for `condition`: re-checked whenever the ground moves on.
template <typename Ground>
bool eventually(Ground& ground, Strand& strand, const std::function<bool()>& condition) {
  for (int attempt = 0; attempt < 20000; ++attempt) {
    bool holds = false;
    run_on(ground, strand, [&] { holds = condition(); });
    if (holds) return true;
    std::promise<void> tick;
    auto ticked = tick.get_future();
    strand.post_after(std::chrono::milliseconds(1), [&] { tick.set_value(); });
    ground.await(ticked);
  }
  return false;
}

// An echo server on its own strand, created and destroyed there.
template <typename Ground>
class ServerFixture {
 public:
  explicit ServerFixture(Ground& ground)
      : ground_(ground), strand_(ground.server().make_strand("echo-server")) {
    run_on(ground_, *strand_, [&] {
      server_ = std::make_unique<EchoServer>(ground_.server(), *strand_);
      auto bound = server_->start(ground_.listen_address());
      EXPECT_TRUE(bound.ok()) << bound.status().ToString();
      if (bound.ok()) address_ = *bound;
    });
  }
  ~ServerFixture() {
    run_on(ground_, *strand_, [&] { server_.reset(); });
  }
  const Address& address() const { return address_; }
  Strand& strand() { return *strand_; }
  EchoServer& server() { return *server_; }

 private:
  Ground& ground_;
  std::unique_ptr<Strand> strand_;
  std::unique_ptr<EchoServer> server_;
  Address address_;
};

// THE shared body: `pings` pings through EchoClient, the echoes as received.
template <typename Ground>
std::vector<std::string> echo_pings(Ground& ground, const Address& server, int pings) {
  auto strand = ground.client().make_strand("echo-client");
  std::unique_ptr<EchoClient> client;
  std::promise<Result<std::vector<std::string>>> finished;
  auto result = finished.get_future();
  run_on(ground, *strand, [&] {
    client = std::make_unique<EchoClient>(ground.client(), *strand);
    client->run(server, pings,
                [&](Result<std::vector<std::string>> r) { finished.set_value(std::move(r)); });
  });
  auto echoes = ground.await(result);
  run_on(ground, *strand, [&] { client.reset(); });
  EXPECT_TRUE(echoes.ok()) << echoes.status().ToString();
  return echoes.ok() ? echoes.value() : std::vector<std::string>{};
}

template <typename Ground>
std::vector<std::string> echo_pings(Ground& ground, int pings) {
  ServerFixture<Ground> fixture(ground);
  return echo_pings(ground, fixture.address(), pings);
}

// A raw client: sends `bytes`, collects what comes back until the server ends
// the stream. Returns the bytes and how the stream ended.
struct RawExchange {
  std::string reply;
  Status ended;
};

template <typename Ground>
RawExchange raw_exchange(Ground& ground, const Address& server, const std::string& bytes,
                         bool close_after_send) {
  auto strand = ground.client().make_strand("raw-client");
  std::shared_ptr<Conn> conn;
  RawExchange exchange;
  std::promise<Status> ended;
  auto end = ended.get_future();
  ground.client().transport().connect(server, *strand, [&](Result<std::shared_ptr<Conn>> c) {
    if (!c.ok()) return ended.set_value(c.status());
    conn = c.value();
    conn->start(
        *strand, [&](std::string_view d) { exchange.reply.append(d); },
        [&](const Status& why) { ended.set_value(why); });
    conn->send(bytes);
    if (close_after_send) conn->close();
  });
  exchange.ended = ground.await(end);
  run_on(ground, *strand, [&] { conn.reset(); });
  return exchange;
}

std::vector<std::string> expected_echoes(int pings) {
  std::vector<std::string> out;
  for (int i = 0; i < pings; ++i) out.push_back("ping-" + std::to_string(i));
  return out;
}

const std::vector<std::pair<std::string, std::string>>& bad_frames() {
  static const std::vector<std::pair<std::string, std::string>> kFrames = {
      {"zero length", std::string("\0\0\0\0", 4)},
      {"oversize", std::string("\x7f\0\0\0", 4)},  // > 1 MiB, the default maximum
      {"not JSON", protocol::encode_frame("{not json")},
      {"not an object", protocol::encode_frame("[1,2]")},
      {"invalid UTF-8", protocol::encode_frame("\"\xff\xfe\"")},
      // nlohmann ends its input at a NUL: the ping before it must not be answered.
      {"NUL byte", protocol::encode_frame(std::string("{\"op\":\"ping\",\"id\":1}\0", 21))},
  };
  return kFrames;
}

template <typename Ground>
class EchoOnBothRuntimes : public ::testing::Test {
 protected:
  Ground ground;
};

using Grounds = ::testing::Types<SimGround, ThreadGround>;
class GroundNames {
 public:
  template <typename T>
  static std::string GetName(int) {
    return std::is_same_v<T, SimGround> ? "Sim" : "Thread";
  }
};
TYPED_TEST_SUITE(EchoOnBothRuntimes, Grounds, GroundNames);

TYPED_TEST(EchoOnBothRuntimes, PingsAreEchoedInOrder) {
  EXPECT_EQ(echo_pings(this->ground, 20), expected_echoes(20));
}

// SPEC R1.2, PROTOCOL.md "Framing": one bad_frame reply without id, then the end.
TYPED_TEST(EchoOnBothRuntimes, R1_2_BadFrameGetsOneErrorReplyThenEof) {
  ServerFixture<TypeParam> fixture(this->ground);
  for (const auto& [name, bytes] : bad_frames()) {
    SCOPED_TRACE(name);
    const RawExchange exchange = raw_exchange(this->ground, fixture.address(), bytes, false);
    EXPECT_EQ(exchange.ended.code(), ErrorCode::kClosed) << exchange.ended.ToString();
    std::vector<std::string> frames;
    protocol::FrameDecoder decoder;
    ASSERT_TRUE(decoder.feed(exchange.reply, frames).ok());
    EXPECT_EQ(decoder.pending_bytes(), 0u);
    ASSERT_EQ(frames.size(), 1u);
    const auto reply = nlohmann::json::parse(frames[0]);
    EXPECT_EQ(reply["ok"], false);
    EXPECT_EQ(reply["error"]["code"], "bad_frame");
    EXPECT_FALSE(reply.contains("id"));
  }
  const auto expected = static_cast<std::uint64_t>(bad_frames().size());
  EXPECT_TRUE(eventually(this->ground, fixture.strand(),
                         [&] { return fixture.server().closed_with_bad_frame() == expected; }));
}

// SPEC R1.2 (bad input never crashes): a field of the wrong type is a
// bad_request for that message; the connection goes on to the next frame.
TYPED_TEST(EchoOnBothRuntimes, R1_2_AWronglyTypedOpIsABadRequest) {
  ServerFixture<TypeParam> fixture(this->ground);
  const std::string bytes = protocol::encode_frame(R"({"op":5,"id":1})") +
                            protocol::encode_frame(R"({"op":"ping","id":2,"data":"x"})") +
                            std::string("\0\0\0\0", 4);  // then a bad frame ends the stream
  const RawExchange exchange = raw_exchange(this->ground, fixture.address(), bytes, false);
  std::vector<std::string> frames;
  protocol::FrameDecoder decoder;
  ASSERT_TRUE(decoder.feed(exchange.reply, frames).ok());
  ASSERT_EQ(frames.size(), 3u) << exchange.reply;
  const auto typed = nlohmann::json::parse(frames[0]);
  EXPECT_EQ(typed["error"]["code"], "bad_request");
  EXPECT_EQ(typed["id"], 1);
  EXPECT_EQ(nlohmann::json::parse(frames[1])["data"], "x");
  EXPECT_EQ(nlohmann::json::parse(frames[2])["error"]["code"], "bad_frame");
}

// SPEC R1.2: a frame cut short by the client's close is dropped, and the server
// keeps serving.
TYPED_TEST(EchoOnBothRuntimes, R1_2_TruncatedFrameThenCloseDropsTheConnection) {
  ServerFixture<TypeParam> fixture(this->ground);
  const std::string frame = protocol::encode_frame(R"({"op":"ping","id":1})");
  const RawExchange exchange =
      raw_exchange(this->ground, fixture.address(), frame.substr(0, frame.size() - 4), true);
  EXPECT_EQ(exchange.reply, "");
  EXPECT_TRUE(eventually(this->ground, fixture.strand(),
                         [&] { return fixture.server().connections() == 0; }));
  EXPECT_EQ(echo_pings(this->ground, fixture.address(), 3), expected_echoes(3));
}

TEST(EchoOnBothRuntimes, BothGroundsGiveIdenticalEchoes) {
  SimGround sim;
  ThreadGround threads;
  const auto on_sim = echo_pings(sim, 50);
  const auto on_threads = echo_pings(threads, 50);
  EXPECT_EQ(on_sim, expected_echoes(50));
  EXPECT_EQ(on_sim, on_threads);
}

}  // namespace
}  // namespace rcxl
