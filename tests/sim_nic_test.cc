// The sim RNIC: registrations, READ/WRITE of real bytes, remote access errors
// after deregistration, and device timing through MemoryTiming.
#include "backends/sim/sim_nic.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <optional>

#include "backends/sim/memory_timing.h"
#include "backends/sim/sim_memory_pool.h"
#include "backends/sim/sim_world.h"

namespace rcxl::sim {
namespace {

using namespace std::chrono_literals;
using runtime::RdmaOp;

std::vector<std::byte> bytes_of(std::string_view s) {
  std::vector<std::byte> out(s.size());
  std::memcpy(out.data(), s.data(), s.size());
  return out;
}

struct Rig {
  SimWorld world{9};
  SimFabric fabric{world};
  SimNode& gpu = world.add_node("gpu");
  SimNode& mem = world.add_node("mem");
  SimNic& gpu_nic = fabric.add_nic("gpu");
  SimNic& mem_nic = fabric.add_nic("mem");
  std::unique_ptr<runtime::Strand> strand = gpu.make_strand("data");
  std::shared_ptr<runtime::QueuePair> qp;

  void connect() {
    gpu_nic.connect("mem", *strand, [this](Result<std::shared_ptr<runtime::QueuePair>> r) {
      ASSERT_TRUE(r.ok());
      qp = r.value();
    });
    ASSERT_TRUE(world.run_until([this] { return qp != nullptr; }).ok());
  }

  // The whole pool, readable and writable, and the QP connected.
  runtime::Registration expose_all(SimMemoryPool& pool) {
    auto reg = register_all(pool);
    connect();
    return reg;
  }
  // What a new agent process does: its registrations went with the old one.
  runtime::Registration register_all(SimMemoryPool& pool) {
    auto reg = mem_nic.register_memory(pool, 0, pool.size(),
                                       runtime::kAccessRemoteRead | runtime::kAccessRemoteWrite);
    EXPECT_TRUE(reg.ok()) << reg.status().ToString();
    return reg.ok() ? *reg : runtime::Registration{};
  }

  // A second GPU node with its own NIC and a QP to the memory node.
  struct Peer {
    std::unique_ptr<runtime::Strand> strand;
    std::shared_ptr<runtime::QueuePair> qp;
  };
  Peer second_gpu(const std::string& name) {
    Peer p;
    p.strand = world.add_node(name).make_strand("data");
    fabric.add_nic(name).connect("mem", *p.strand,
                                 [&p](Result<std::shared_ptr<runtime::QueuePair>> r) {
                                   ASSERT_TRUE(r.ok());
                                   p.qp = r.value();
                                 });
    EXPECT_TRUE(world.run_until([&p] { return p.qp != nullptr; }).ok());
    return p;
  }

  std::vector<Status> post(std::vector<RdmaOp> ops) {
    std::optional<std::vector<Status>> out;
    qp->post(std::move(ops), [&](std::vector<Status> s) { out = std::move(s); });
    EXPECT_TRUE(world.run_until([&] { return out.has_value(); }).ok());
    return out.value_or(std::vector<Status>{});
  }
};

TEST(SimNic, WriteThenReadMovesRealBytes) {
  Rig rig;
  SimMemoryPool pool(1 << 20);
  auto reg = rig.mem_nic.register_memory(pool, 8192, 65536,
                                         runtime::kAccessRemoteRead | runtime::kAccessRemoteWrite);
  ASSERT_TRUE(reg.ok());
  rig.connect();
  auto data = bytes_of("kv-bytes-of-token-0");
  auto st = rig.post({{RdmaOp::Kind::kWrite, data, reg->addr + 100, reg->rkey}});
  ASSERT_TRUE(st[0].ok()) << st[0].ToString();
  std::vector<std::byte> back(data.size());
  st = rig.post({{RdmaOp::Kind::kRead, back, reg->addr + 100, reg->rkey}});
  ASSERT_TRUE(st[0].ok());
  EXPECT_EQ(back, data);
  std::vector<std::byte> direct(data.size());
  ASSERT_TRUE(pool.read(8192 + 100, direct).ok());
  EXPECT_EQ(direct, data);
}

TEST(SimNic, R6_3_AccessAfterDeregistrationIsARemoteAccessError) {
  Rig rig;
  SimMemoryPool pool(1 << 20);
  auto reg = rig.mem_nic.register_memory(pool, 0, 4096, runtime::kAccessRemoteRead);
  ASSERT_TRUE(reg.ok());
  rig.connect();
  // An rkey alone names no registration, as on the verbs NIC (rkeys come back).
  for (auto stale : {runtime::Registration{reg->addr + 1024, reg->rkey, reg->length},
                     runtime::Registration{reg->addr, reg->rkey, reg->length - 1024}}) {
    EXPECT_EQ(rig.mem_nic.deregister(stale).code(), ErrorCode::kNotFound);
  }
  ASSERT_TRUE(rig.mem_nic.deregister(reg.value()).ok());
  std::vector<std::byte> buf(64);
  auto st = rig.post({{RdmaOp::Kind::kRead, buf, reg->addr, reg->rkey}});
  EXPECT_EQ(st[0].code(), ErrorCode::kRemoteAccess);
  EXPECT_EQ(rig.fabric.remote_access_errors(), 1u);
}

TEST(SimNic, AccessRightsAndBoundsAreChecked) {
  Rig rig;
  SimMemoryPool pool(1 << 20);
  auto reg = rig.mem_nic.register_memory(pool, 0, 4096, runtime::kAccessRemoteRead);
  rig.connect();
  std::vector<std::byte> buf(64);
  // One post each: a failed op puts an RC QP in the error state (the next
  // post reconnects), so ops behind it in one post would be flushed instead.
  EXPECT_EQ(rig.post({{RdmaOp::Kind::kWrite, buf, reg->addr, reg->rkey}})[0].code(),  // no right
            ErrorCode::kRemoteAccess);
  EXPECT_EQ(rig.post({{RdmaOp::Kind::kRead, buf, reg->addr + 4090, reg->rkey}})[0].code(),
            ErrorCode::kRemoteAccess);  // past the end
  EXPECT_TRUE(rig.post({{RdmaOp::Kind::kRead, buf, reg->addr + 4032, reg->rkey}})[0].ok());
}

// RC: a failed op puts the QP in the error state; what was posted behind it
// never runs (verbs: WR_FLUSH_ERR, reported `unavailable`) -- a WRITE behind
// it does not land -- and the next post reconnects and works.
TEST(SimNic, R6_3_OpsBehindAFailedOpAreFlushedAndTheNextPostReconnects) {
  Rig rig;
  SimMemoryPool pool(1 << 20);
  auto reg = rig.mem_nic.register_memory(pool, 0, 8192,
                                         runtime::kAccessRemoteRead | runtime::kAccessRemoteWrite);
  rig.connect();
  auto data = bytes_of("never lands");
  std::vector<std::byte> buf(64);
  auto st = rig.post({{RdmaOp::Kind::kRead, buf, reg->addr + 8190, reg->rkey},  // past the end
                      {RdmaOp::Kind::kWrite, data, reg->addr, reg->rkey},
                      {RdmaOp::Kind::kRead, buf, reg->addr, reg->rkey}});
  EXPECT_EQ(st[0].code(), ErrorCode::kRemoteAccess) << st[0].ToString();
  EXPECT_EQ(st[1].code(), ErrorCode::kUnavailable) << st[1].ToString();
  EXPECT_EQ(st[2].code(), ErrorCode::kUnavailable) << st[2].ToString();
  std::vector<std::byte> landed(data.size());
  ASSERT_TRUE(pool.read(0, landed).ok());
  EXPECT_EQ(landed, std::vector<std::byte>(data.size()));  // the flushed WRITE moved nothing
  const auto before = rig.world.loop().now();
  EXPECT_TRUE(rig.post({{RdmaOp::Kind::kWrite, data, reg->addr, reg->rkey}})[0].ok());
  // The reconnect (~2 round trips) comes first.
  EXPECT_GE(rig.world.loop().now() - before, rig.fabric.params().latency * 4);
  ASSERT_TRUE(pool.read(0, landed).ok());
  EXPECT_EQ(landed, data);
}

// A memory whose bytes are ready only at a fixed time: the READ is held, not failed.
class SlowMemory : public SimMemoryPool, public MemoryTiming {
 public:
  using SimMemoryPool::SimMemoryPool;
  runtime::Instant access_ready(std::uint64_t, std::uint64_t, bool, runtime::Instant at) override {
    return std::max(at, ready_at);
  }
  runtime::Instant ready_at{0};
};

TEST(SimNic, P6_EarlyReadIsHeldUntilTheDeviceHasTheRange) {
  Rig rig;
  SlowMemory pool(1 << 20);
  auto payload = bytes_of("prepared later");
  ASSERT_TRUE(pool.write(0, payload).ok());
  pool.ready_at = runtime::Instant(5ms);
  auto reg = rig.mem_nic.register_memory(pool, 0, 4096, runtime::kAccessRemoteRead);
  rig.connect();
  std::vector<std::byte> buf(payload.size());
  auto st = rig.post({{RdmaOp::Kind::kRead, buf, reg->addr, reg->rkey}});
  EXPECT_TRUE(st[0].ok());
  EXPECT_EQ(buf, payload);
  EXPECT_GE(rig.world.loop().now(), runtime::Instant(5ms));
  EXPECT_LT(rig.world.loop().now(), runtime::Instant(5ms + 20us));
}

TEST(SimNic, BandwidthBoundsALargeRead) {
  Rig rig;
  SimMemoryPool pool(64 << 20);
  auto reg = rig.mem_nic.register_memory(pool, 0, 64 << 20, runtime::kAccessRemoteRead);
  rig.connect();
  std::vector<std::byte> buf(16 << 20);
  const auto t0 = rig.world.loop().now();
  auto st = rig.post({{RdmaOp::Kind::kRead, buf, reg->addr, reg->rkey}});
  ASSERT_TRUE(st[0].ok());
  const double seconds = runtime::to_seconds(rig.world.loop().now() - t0);
  const double gbps = (16 << 20) / seconds / 1e9;
  EXPECT_NEAR(gbps, rig.fabric.params().bytes_per_second / 1e9, 0.2);
}

// A READ's response segments are rounded to whole nanoseconds cumulatively,
// as a WRITE's are: one streamed without gaps takes the wire time of its
// total, not the sum of each segment rounded up (session 26).
TEST(SimNic, R8_AReadStreamedWithoutGapsTakesTheWireTimeOfItsTotal) {
  Rig rig;
  const auto& p = rig.fabric.params();
  const std::uint64_t seg = p.stream_segment_bytes, bytes = 5 * seg + 7;
  SimMemoryPool pool(8 * seg);
  auto reg = rig.mem_nic.register_memory(pool, 0, 8 * seg, runtime::kAccessRemoteRead);
  rig.connect();
  auto wire = [&](std::uint64_t n) {
    return runtime::Duration(static_cast<std::int64_t>(std::ceil(n * 1e9 / p.bytes_per_second)));
  };
  // Only a meaningful check when the segments' own roundings add up to more.
  ASSERT_GT(5 * wire(seg) + wire(7), wire(bytes));
  std::vector<std::byte> buf(bytes);
  const runtime::Instant posted = rig.world.loop().now();
  auto st = rig.post({{RdmaOp::Kind::kRead, buf, reg->addr, reg->rkey}});
  ASSERT_TRUE(st[0].ok());
  EXPECT_EQ(rig.world.loop().now(), posted + p.per_op + p.latency + wire(bytes) + p.latency);
}

// An agent restart ends the process that owned the memory node's queue
// pairs. Before, they lived on in the sim, and the first op after a restart
// met a remote access error that real hardware never gives there: the peer's
// DREQ breaks the QP, its ops fail `unavailable`, the next post reconnects.
// While nothing listens, connects and ops fail (review, session 26).
TEST(SimNic, R6_3_AQueuePairEndsWithItsPeersProcess) {
  Rig rig;
  SimMemoryPool pool(1 << 20);
  auto reg = rig.expose_all(pool);
  std::vector<std::byte> buf(4096);
  RdmaOp read{RdmaOp::Kind::kRead, buf, reg.addr, reg.rkey};
  auto new_process = [&] {
    rig.mem_nic.end_process();
    reg = rig.register_all(pool);
    read.rkey = reg.rkey;
  };
  ASSERT_TRUE(rig.post({read})[0].ok());

  // Posted before the DREQ arrived: the op reaches a QP that is gone.
  new_process();
  auto st = rig.post({read});
  EXPECT_EQ(st[0].code(), ErrorCode::kUnavailable) << st[0].ToString();
  EXPECT_NE(st[0].message().find("the peer's process ended"), std::string::npos);
  EXPECT_TRUE(rig.post({read})[0].ok());  // reconnected to the new process

  // Idle when it ended: the DREQ broke it, so the next post reconnects at once.
  new_process();
  rig.world.run_for(1ms);
  EXPECT_TRUE(rig.post({read})[0].ok());

  // Down: nothing accepts a connect or runs an op until it listens again.
  new_process();
  rig.mem_nic.set_accepting(false);
  rig.world.run_for(1ms);
  EXPECT_EQ(rig.post({read})[0].code(), ErrorCode::kUnavailable);
  std::optional<Status> connected;
  rig.gpu_nic.connect("mem", *rig.strand, [&](Result<std::shared_ptr<runtime::QueuePair>> r) {
    connected = r.status();
  });
  ASSERT_TRUE(rig.world.run_until([&] { return connected.has_value(); }).ok());
  EXPECT_EQ(connected->code(), ErrorCode::kUnavailable);
  rig.mem_nic.set_accepting(true);
  EXPECT_TRUE(rig.post({read})[0].ok());
  EXPECT_EQ(rig.fabric.remote_access_errors(), 0u);
}

// A process's memory registrations end with it, as an RNIC frees a dead
// process's MRs: before, an rkey the agent never deregistered (a lingering one,
// a stop that missed it) still took RDMA from the next process's peers.
TEST(SimNic, R6_3_RegistrationsEndWithTheirProcess) {
  Rig rig;
  SimMemoryPool pool(1 << 20);
  auto old_reg = rig.expose_all(pool);
  std::vector<std::byte> buf(4096);
  rig.mem_nic.end_process();
  auto reg = rig.register_all(pool);
  rig.world.run_for(1ms);
  EXPECT_EQ(rig.post({{RdmaOp::Kind::kRead, buf, old_reg.addr, old_reg.rkey}})[0].code(),
            ErrorCode::kRemoteAccess);
  EXPECT_TRUE(rig.post({{RdmaOp::Kind::kRead, buf, reg.addr, reg.rkey}})[0].ok());
}

// A reconnect sends the connect's proof again, as verbs sends its stored
// private data: after the agent restarted with new proofs, the QP's ops fail
// unauthenticated (the client then connects anew with the live hello's proof)
// and it stays broken. Before, the sim reconnected without asking.
TEST(SimNic, R1_3_AReconnectWhosePeerNoLongerTakesItsProofIsUnauthenticated) {
  Rig rig;
  SimMemoryPool pool(1 << 20);
  auto reg = rig.register_all(pool);
  std::string wanted = "A";
  rig.mem_nic.check_connects(
      [&wanted](std::string_view proof) { return proof.substr(0, proof.find('\0')) == wanted; });
  rig.gpu_nic.connect_with_proof("mem", *rig.strand, "A",
                                 [&](Result<std::shared_ptr<runtime::QueuePair>> r) {
                                   ASSERT_TRUE(r.ok()) << r.status().ToString();
                                   rig.qp = r.value();
                                 });
  ASSERT_TRUE(rig.world.run_until([&] { return rig.qp != nullptr; }).ok());
  std::vector<std::byte> buf(64);
  RdmaOp read{RdmaOp::Kind::kRead, buf, reg.addr, reg.rkey};
  ASSERT_TRUE(rig.post({read})[0].ok());
  rig.mem_nic.end_process();
  reg = rig.register_all(pool);  // the new process's
  read.rkey = reg.rkey;
  wanted = "B";
  rig.world.run_for(1ms);  // the DREQ arrived: the next post reconnects
  for (int i = 0; i < 2; ++i) {
    const auto st = rig.post({read, read});
    EXPECT_EQ(st[0].code(), ErrorCode::kUnauthenticated) << st[0].ToString();
    EXPECT_EQ(st[1].code(), ErrorCode::kUnauthenticated) << st[1].ToString();
  }
  wanted = "A";  // taken again: the next post reconnects
  EXPECT_TRUE(rig.post({read})[0].ok());
  EXPECT_EQ(rig.fabric.remote_access_errors(), 0u);
}

// An op in flight on the old connection when the peer's process ended is
// judged by that connection, not by the one a later post reconnected: a long
// READ still streaming came back ok from a process that no longer existed
// (diff review, session 26).
TEST(SimNic, R6_3_AnOpInFlightWhenThePeersProcessEndedFailsAfterAReconnect) {
  Rig rig;
  SimMemoryPool pool(16 << 20);
  auto reg = rig.expose_all(pool);
  std::vector<std::byte> big(8 << 20), small(4096);
  std::optional<std::vector<Status>> first, second;
  rig.qp->post({{RdmaOp::Kind::kRead, big, reg.addr, reg.rkey}},
               [&](std::vector<Status> st) { first = std::move(st); });
  rig.world.run_for(10us);  // the READ streams (~0.7 ms on the wire)
  ASSERT_FALSE(first.has_value());
  rig.mem_nic.end_process();
  reg = rig.register_all(pool);  // the new process's
  rig.world.run_for(10us);       // the DREQ has arrived: the next post reconnects
  rig.qp->post({{RdmaOp::Kind::kRead, small, reg.addr, reg.rkey}},
               [&](std::vector<Status> st) { second = std::move(st); });
  ASSERT_TRUE(rig.world.run_until([&] { return first && second; }).ok());
  EXPECT_EQ((*first)[0].code(), ErrorCode::kUnavailable) << (*first)[0].ToString();
  EXPECT_TRUE((*second)[0].ok()) << (*second)[0].ToString();
  EXPECT_EQ(rig.fabric.remote_access_errors(), 0u);
}

// A device filling sequentially at `rate` from t=0.
class FillingMemory : public SimMemoryPool, public MemoryTiming {
 public:
  FillingMemory(std::uint64_t size, double rate) : SimMemoryPool(size), rate_(rate) {}
  runtime::Instant access_ready(std::uint64_t offset, std::uint64_t length, bool,
                                runtime::Instant at) override {
    const auto done = runtime::Instant(static_cast<std::int64_t>((offset + length) / rate_ * 1e9));
    return std::max(at, done);
  }

 private:
  double rate_;
};

TEST(SimNic, ReadStreamsBehindAFillingDeviceInsteadOfWaitingForAllOfIt) {
  Rig rig;
  FillingMemory pool(64 << 20, 13e9);  // fills slightly faster than the wire
  auto reg = rig.mem_nic.register_memory(pool, 0, 64 << 20, runtime::kAccessRemoteRead);
  rig.connect();
  const auto t0 = rig.world.loop().now();
  std::vector<std::byte> buf(32 << 20);
  ASSERT_TRUE(rig.post({{RdmaOp::Kind::kRead, buf, reg->addr, reg->rkey}})[0].ok());
  const double took = runtime::to_seconds(rig.world.loop().now() - t0);
  const double fill = (32 << 20) / 13e9, wire = (32 << 20) / rig.fabric.params().bytes_per_second;
  EXPECT_LT(took, fill + wire / 2);       // overlapped, not fill-then-send
  EXPECT_GT(took, std::max(fill, wire));  // bounded by the slower of the two
}

// Records when the RNIC asks for each segment; each takes 50 us to come in.
class RecordingMemory : public SimMemoryPool, public MemoryTiming {
 public:
  RecordingMemory(std::uint64_t size, EventLoop& loop) : SimMemoryPool(size), loop_(loop) {}
  runtime::Instant access_ready(std::uint64_t offset, std::uint64_t, bool,
                                runtime::Instant at) override {
    asks.push_back({offset, at, loop_.now()});
    return at + delay;
  }
  runtime::Duration delay = 50us;  // how long each access waits for the memory
  struct Ask {
    std::uint64_t offset;
    runtime::Instant at;
    runtime::Instant asked_at;
  };
  std::vector<Ask> asks;

 private:
  EventLoop& loop_;
};

// PAPER P6: the responder fetches a READ's segments in order as its DMA engine
// reaches them -- never asking the device ahead for later segments or later
// READs of the QP (a device would otherwise book flash time out of order).
TEST(SimNic, P6_DeviceIsAskedForEachReadSegmentWhenTheNicFetchesIt) {
  Rig rig;
  RecordingMemory pool(8 << 20, rig.world.loop());
  auto reg = rig.mem_nic.register_memory(pool, 0, 8 << 20, runtime::kAccessRemoteRead);
  rig.connect();
  const std::uint64_t seg = rig.fabric.params().stream_segment_bytes;
  std::vector<std::byte> a(4 * seg), b(4 * seg);
  auto st = rig.post({{RdmaOp::Kind::kRead, a, reg->addr, reg->rkey},
                      {RdmaOp::Kind::kRead, b, reg->addr + 4 * seg, reg->rkey}});
  ASSERT_TRUE(st[0].ok() && st[1].ok());
  ASSERT_EQ(pool.asks.size(), 8u);
  for (std::size_t i = 0; i < pool.asks.size(); ++i) {
    EXPECT_EQ(pool.asks[i].offset, i * seg);            // in order, READ after READ
    EXPECT_EQ(pool.asks[i].at, pool.asks[i].asked_at);  // asked when fetched, not ahead
    if (i > 0) {
      EXPECT_GE(pool.asks[i].at, pool.asks[i - 1].at + 50us);
    }
  }
}

// A WRITE's segments are asked of the device as each arrives and after the one
// before it is in -- not all at the first arrival with future times, which let
// a device book write-allocate fills on its flash ahead of other requesters.
// Exactly then: a slow device paces the asks, a fast one the wire.
TEST(SimNic, DeviceIsAskedForEachWriteSegmentWhenItHasArrived) {
  for (const runtime::Duration delay : {runtime::Duration(50us), runtime::Duration(0us)}) {
    SCOPED_TRACE(runtime::to_seconds(delay));
    Rig rig;
    RecordingMemory pool(8 << 20, rig.world.loop());
    pool.delay = delay;
    auto reg = rig.mem_nic.register_memory(pool, 0, 8 << 20, runtime::kAccessRemoteWrite);
    rig.connect();
    const auto& p = rig.fabric.params();
    const std::uint64_t seg = p.stream_segment_bytes;
    auto wire = [&](std::uint64_t bytes) {
      return runtime::Duration(
          static_cast<std::int64_t>(std::ceil(bytes * 1e9 / p.bytes_per_second)));
    };
    std::vector<std::byte> a(4 * seg), b(seg);
    const runtime::Instant posted = rig.world.loop().now();
    auto st = rig.post({{RdmaOp::Kind::kWrite, a, reg->addr, reg->rkey},
                        {RdmaOp::Kind::kWrite, b, reg->addr + 4 * seg, reg->rkey}});
    ASSERT_TRUE(st[0].ok() && st[1].ok());
    ASSERT_EQ(pool.asks.size(), 5u);
    // Each WRITE leaves per_op after the one before it left the port.
    const runtime::Instant second_leaves = posted + p.per_op + wire(4 * seg) + p.per_op;
    for (std::size_t i = 0; i < pool.asks.size(); ++i) {
      EXPECT_EQ(pool.asks[i].offset, i * seg);            // in order, WRITE after WRITE
      EXPECT_EQ(pool.asks[i].at, pool.asks[i].asked_at);  // asked when it is there, not ahead
      const runtime::Instant arrived = i < 4 ? posted + p.per_op + wire((i + 1) * seg) + p.latency
                                             : second_leaves + wire(seg) + p.latency;
      const runtime::Instant before_in = i > 0 ? pool.asks[i - 1].at + delay : arrived;
      EXPECT_EQ(pool.asks[i].at, std::max(arrived, before_in)) << i;
    }
  }
}

// Flushed WRITEs send nothing: the batch behind a failed op is reported
// about a round trip later, not after its data streamed, and another node's
// WRITE to the same port is not slowed by it.
TEST(SimNic, R6_3_FlushedWritesHoldNoPort) {
  Rig rig;
  SimMemoryPool pool(128 << 20);
  const auto reg = rig.expose_all(pool);
  auto gpu2 = rig.second_gpu("gpu2");
  const double wire = (32 << 20) / rig.fabric.params().bytes_per_second;
  std::vector<std::byte> small(64), a(32 << 20), b(32 << 20), c(32 << 20);
  std::optional<double> batch_done, other_done;
  const auto t0 = rig.world.loop().now();
  rig.qp->post({{RdmaOp::Kind::kRead, small, reg.addr + (128 << 20) - 8, reg.rkey},  // past the end
                {RdmaOp::Kind::kWrite, a, reg.addr, reg.rkey},
                {RdmaOp::Kind::kWrite, b, reg.addr + (32 << 20), reg.rkey}},
               [&](std::vector<Status> st) {
                 EXPECT_EQ(st[0].code(), ErrorCode::kRemoteAccess);
                 EXPECT_EQ(st[1].code(), ErrorCode::kUnavailable);
                 EXPECT_EQ(st[2].code(), ErrorCode::kUnavailable);
                 batch_done = runtime::to_seconds(rig.world.loop().now() - t0);
               });
  rig.world.run_for(100us);
  gpu2.qp->post({{RdmaOp::Kind::kWrite, c, reg.addr + (64 << 20), reg.rkey}},
                [&](std::vector<Status> st) {
                  EXPECT_TRUE(st[0].ok());
                  other_done = runtime::to_seconds(rig.world.loop().now() - t0);
                });
  ASSERT_TRUE(rig.world.run_until([&] { return batch_done && other_done; }).ok());
  EXPECT_LT(*batch_done, 1e-3) << *batch_done;
  EXPECT_LT(*other_done, 100e-6 + wire * 1.2) << *other_done;
}

// A WRITE refused partway through (its registration went, or the peer's
// process ended) sends nothing more: before, its remaining data stayed booked
// on both ports, so the next op on its QP waited ~2.7 ms and another GPU's
// WRITE to the node took 2.6x its wire time (session 27 review).
TEST(SimNic, R6_3_AWriteRefusedMidStreamStopsSending) {
  for (const bool process_ends : {false, true}) {
    SCOPED_TRACE(process_ends);
    Rig rig;
    SimMemoryPool pool(64 << 20);
    auto reg = rig.expose_all(pool);
    auto gpu2 = rig.second_gpu("gpu2");
    const auto wire = [&](double bytes) { return bytes / rig.fabric.params().bytes_per_second; };
    std::vector<std::byte> big(32 << 20), small(4096), other(4 << 20);
    std::optional<std::vector<Status>> first;
    rig.qp->post({{RdmaOp::Kind::kWrite, big, reg.addr, reg.rkey}},
                 [&](std::vector<Status> st) { first = std::move(st); });
    rig.world.run_for(100us);
    if (process_ends) {
      rig.mem_nic.end_process();
    } else {
      ASSERT_TRUE(rig.mem_nic.deregister(reg).ok());
    }
    ASSERT_TRUE(rig.world.run_until([&] { return first.has_value(); }).ok());
    EXPECT_FALSE((*first)[0].ok());
    reg = rig.register_all(pool);  // again, or in the new process
    // gpu2's QP went with the process too: its first post reconnects (~4 latencies).
    const double reconnect = runtime::to_seconds(rig.fabric.params().latency) * 4;
    auto t0 = rig.world.loop().now();
    std::optional<std::vector<Status>> second;
    gpu2.qp->post({{RdmaOp::Kind::kWrite, other, reg.addr + (32 << 20), reg.rkey}},
                  [&](std::vector<Status> st) { second = std::move(st); });
    ASSERT_TRUE(rig.world.run_until([&] { return second.has_value(); }).ok());
    EXPECT_TRUE((*second)[0].ok()) << (*second)[0].ToString();
    const double other_took = runtime::to_seconds(rig.world.loop().now() - t0);
    EXPECT_LT(other_took, reconnect + wire(4 << 20) + 20e-6) << other_took;
    t0 = rig.world.loop().now();
    const auto st = rig.post({{RdmaOp::Kind::kWrite, small, reg.addr, reg.rkey}});
    EXPECT_TRUE(st[0].ok()) << st[0].ToString();
    const double next_took = runtime::to_seconds(rig.world.loop().now() - t0);
    EXPECT_LT(next_took, 50e-6) << next_took;
  }
}

// A failure found late (a READ whose registration went while its response
// streamed) flushes only what went out on its own connection: ops posted
// after the QP reconnected (after an earlier op's failure) still run.
TEST(SimNic, R6_3_ALateFailureFlushesNothingPostedAfterTheReconnect) {
  for (const bool third : {false, true}) {  // with a flushed op behind the early failure too
    SCOPED_TRACE(third);
    Rig rig;
    SimMemoryPool pool(64 << 20);
    auto x = rig.mem_nic.register_memory(pool, 0, 16 << 20, runtime::kAccessRemoteRead).value();
    auto y = rig.mem_nic.register_memory(pool, 16 << 20, 4096, runtime::kAccessRemoteWrite).value();
    auto z =
        rig.mem_nic.register_memory(pool, 32 << 20, 1 << 20, runtime::kAccessRemoteRead).value();
    rig.connect();
    ASSERT_TRUE(rig.mem_nic.deregister(y).ok());
    std::vector<std::byte> big(8 << 20), w(64), r3(64), r4(64), r5(64);
    std::vector<RdmaOp> ops = {{RdmaOp::Kind::kRead, big, x.addr, x.rkey},  // ends after X goes
                               {RdmaOp::Kind::kWrite, w, y.addr, y.rkey}};  // fails: Y is gone
    if (third) ops.push_back({RdmaOp::Kind::kRead, r5, z.addr, z.rkey});    // flushed behind it
    std::optional<std::vector<Status>> first, second;
    rig.qp->post(ops, [&](std::vector<Status> st) { first = std::move(st); });
    rig.world.run_for(50us);
    ASSERT_TRUE(rig.mem_nic.deregister(x).ok());
    rig.world.run_for(10us);
    rig.qp->post(
        {{RdmaOp::Kind::kRead, r3, z.addr, z.rkey}, {RdmaOp::Kind::kRead, r4, z.addr, z.rkey}},
        [&](std::vector<Status> st) { second = std::move(st); });
    ASSERT_TRUE(rig.world.run_until([&] { return first && second; }).ok());
    EXPECT_EQ((*first)[0].code(), ErrorCode::kRemoteAccess) << (*first)[0].ToString();
    // Its own failure came first in time, but the READ ahead of it is reported
    // first: behind that failure it is flushed, as the verbs NIC reports it.
    EXPECT_EQ((*first)[1].code(), ErrorCode::kUnavailable) << (*first)[1].ToString();
    if (third) {
      EXPECT_EQ((*first)[2].code(), ErrorCode::kUnavailable) << (*first)[2].ToString();
    }
    EXPECT_TRUE((*second)[0].ok()) << (*second)[0].ToString();
    EXPECT_TRUE((*second)[1].ok()) << (*second)[1].ToString();
  }
}

TEST(SimNic, SampledPayloadIsTimedAtFullLengthButStoresOnlyItsRealBytes) {
  Rig rig;
  SimMemoryPool pool(8 << 20);
  const auto reg = rig.expose_all(pool);
  auto head = bytes_of("chunk header");
  RdmaOp op{RdmaOp::Kind::kWrite, head, reg.addr, reg.rkey};
  op.length = 4 << 20;
  const auto t0 = rig.world.loop().now();
  ASSERT_TRUE(rig.post({op})[0].ok());
  const double seconds = runtime::to_seconds(rig.world.loop().now() - t0);
  EXPECT_GT(seconds, (4 << 20) / rig.fabric.params().bytes_per_second);
  std::vector<std::byte> back(head.size());
  ASSERT_TRUE(pool.read(0, back).ok());
  EXPECT_EQ(back, head);
  std::vector<std::byte> beyond(16);
  ASSERT_TRUE(pool.read(1 << 20, beyond).ok());
  EXPECT_EQ(beyond, std::vector<std::byte>(16));
}

// Records each WRITE the RNIC lands; every range is ready at once.
class LandingMemory : public SimMemoryPool, public MemoryTiming {
 public:
  explicit LandingMemory(std::uint64_t size) : SimMemoryPool(size) {}
  runtime::Instant access_ready(std::uint64_t, std::uint64_t, bool, runtime::Instant at) override {
    return at;
  }
  bool land_write(std::uint64_t offset, std::uint64_t length, std::span<const std::byte> payload,
                  runtime::Instant) override {
    landed.push_back({offset, length, payload.size()});
    return false;  // the RNIC stores the payload
  }
  struct Landing {
    std::uint64_t offset, length, payload;
    bool operator==(const Landing&) const = default;
  };
  std::vector<Landing> landed;
};

// A WRITE lands whole, payload and all, in one call: the device takes it page
// by page (a sampled op's bytes past its payload come without values), so a
// page it covers whole needs no read of its old bytes even where the payload
// ends inside it (tests/device/cxl_ssd_device_test.cc).
TEST(SimNic, AWriteLandsWholeWithItsPayloadInOneCall) {
  Rig rig;
  LandingMemory pool(8 << 20);
  auto reg = rig.mem_nic.register_memory(pool, 0, 8 << 20, runtime::kAccessRemoteWrite);
  rig.connect();
  auto head = bytes_of("chunk header");
  RdmaOp sampled{RdmaOp::Kind::kWrite, head, reg->addr + 4096, reg->rkey};
  sampled.length = 1 << 20;
  RdmaOp whole{RdmaOp::Kind::kWrite, head, reg->addr, reg->rkey};
  const auto st = rig.post({sampled, whole});
  ASSERT_TRUE(st[0].ok() && st[1].ok());
  ASSERT_EQ(pool.landed.size(), 2u);
  EXPECT_EQ(pool.landed[0], (LandingMemory::Landing{4096, 1u << 20, head.size()}));
  EXPECT_EQ(pool.landed[1], (LandingMemory::Landing{0, head.size(), head.size()}));
  std::vector<std::byte> back(head.size());
  ASSERT_TRUE(pool.read(4096, back).ok());
  EXPECT_EQ(back, head);  // a memory that answers false has its payload stored for it
}

// An op of no bytes is refused, valid rkey or not: verbs posts no work request
// for it (so checks no rkey) while the sim checked one; now both refuse it.
TEST(SimNic, R1_2_AnOpOfNoBytesIsRefusedAsOnVerbs) {
  Rig rig;
  SimMemoryPool pool(1 << 20);
  const auto reg = rig.expose_all(pool);
  std::vector<std::byte> none, some(16);
  const auto st = rig.post({{RdmaOp::Kind::kRead, none, reg.addr, reg.rkey},
                            {RdmaOp::Kind::kWrite, none, reg.addr, reg.rkey ^ 0xff},
                            {RdmaOp::Kind::kRead, some, reg.addr, reg.rkey}});
  ASSERT_EQ(st.size(), 3u);
  EXPECT_EQ(st[0].code(), ErrorCode::kBadRequest) << st[0].ToString();
  EXPECT_EQ(st[1].code(), ErrorCode::kBadRequest) << st[1].ToString();
  EXPECT_TRUE(st[2].ok()) << st[2].ToString();  // nothing failed at the responder
}

// An op whose wire length is shorter than its local buffer would move the
// buffer's bytes past the range the rkey was checked for: refused, as verbs
// refuses it, and the bytes beyond the registration stay as they were.
TEST(SimNic, R1_2_AnOpShorterThanItsBufferIsRefusedAndMovesNothing) {
  Rig rig;
  SimMemoryPool pool(1 << 20);
  auto outside = bytes_of("not yours");
  ASSERT_TRUE(pool.write(8192, outside).ok());  // just past the registration
  auto reg = rig.mem_nic.register_memory(pool, 4096, 4096,
                                         runtime::kAccessRemoteRead | runtime::kAccessRemoteWrite);
  rig.connect();
  std::vector<std::byte> buffer(8192, std::byte{'x'});
  RdmaOp read{RdmaOp::Kind::kRead, buffer, reg->addr, reg->rkey};
  read.length = 4096;
  RdmaOp write{RdmaOp::Kind::kWrite, buffer, reg->addr, reg->rkey};
  write.length = 4096;
  const auto st = rig.post({read, write});
  ASSERT_EQ(st.size(), 2u);
  for (const auto& s : st) EXPECT_EQ(s.code(), ErrorCode::kBadRequest) << s.ToString();
  EXPECT_EQ(buffer, std::vector<std::byte>(8192, std::byte{'x'}));
  std::vector<std::byte> after(outside.size());
  ASSERT_TRUE(pool.read(8192, after).ok());
  EXPECT_EQ(after, outside);
}

// A QP sends its requests in order: a READ posted behind a large WRITE leaves
// after the WRITE's last byte, so it completes a WRITE's wire time later than
// it would alone (RC; the responder then executes it after the WRITE).
TEST(SimNic, AReadPostedBehindAWriteOnItsQueuePairWaitsForTheWriteData) {
  Rig rig;
  SimMemoryPool pool(8 << 20);
  const auto reg = rig.expose_all(pool);
  std::vector<std::byte> small(4096);
  const auto alone_start = rig.world.loop().now();
  ASSERT_TRUE(rig.post({{RdmaOp::Kind::kRead, small, reg.addr, reg.rkey}})[0].ok());
  const auto alone = rig.world.loop().now() - alone_start;

  auto head = bytes_of("chunk header");
  RdmaOp big{RdmaOp::Kind::kWrite, head, reg.addr + 4096, reg.rkey};
  big.length = 4 << 20;
  std::optional<runtime::Instant> write_done, read_done;
  const auto start = rig.world.loop().now();
  rig.qp->post({big}, [&](std::vector<Status> s) {
    EXPECT_TRUE(s[0].ok());
    write_done = rig.world.loop().now();
  });
  rig.qp->post({{RdmaOp::Kind::kRead, small, reg.addr + 4096, reg.rkey}},
               [&](std::vector<Status> s) {
                 EXPECT_TRUE(s[0].ok());
                 read_done = rig.world.loop().now();
               });
  ASSERT_TRUE(rig.world.run_until([&] { return read_done.has_value(); }).ok());
  const double wire = (4 << 20) / rig.fabric.params().bytes_per_second;
  EXPECT_GE(runtime::to_seconds(*read_done - start), wire + runtime::to_seconds(alone) * 0.9);
  EXPECT_EQ(std::memcmp(small.data(), head.data(), head.size()), 0);  // it saw the WRITE
  ASSERT_TRUE(write_done.has_value());
  EXPECT_LE(*write_done, *read_done);
}

// Two GPU nodes reading one memory node share its port's TX: both 16 MiB
// READs are done only after twice one READ's wire time, at the port's line
// rate together. Their WRITEs share its RX the same way; a READ and a WRITE
// (TX and RX) do not wait for each other.
TEST(SimNic, QueuePairsOfOnePortShareItsLineRatePerDirection) {
  Rig rig;
  SimMemoryPool pool(64 << 20);
  const auto reg = rig.expose_all(pool);
  auto gpu2 = rig.second_gpu("gpu2");
  auto& qp2 = gpu2.qp;
  const double wire = (16 << 20) / rig.fabric.params().bytes_per_second;
  auto both = [&](RdmaOp::Kind first, RdmaOp::Kind second) {
    std::vector<std::byte> a(16 << 20), b(16 << 20);
    int done = 0;
    const auto t0 = rig.world.loop().now();
    rig.qp->post({{first, a, reg.addr, reg.rkey}}, [&](std::vector<Status> s) {
      EXPECT_TRUE(s[0].ok());
      ++done;
    });
    qp2->post({{second, b, reg.addr + (32 << 20), reg.rkey}}, [&](std::vector<Status> s) {
      EXPECT_TRUE(s[0].ok());
      ++done;
    });
    EXPECT_TRUE(rig.world.run_until([&] { return done == 2; }).ok());
    return runtime::to_seconds(rig.world.loop().now() - t0);
  };
  const double reads = both(RdmaOp::Kind::kRead, RdmaOp::Kind::kRead);
  EXPECT_GE(reads, 2 * wire);
  EXPECT_LT(reads, 2 * wire * 1.05);
  const double writes = both(RdmaOp::Kind::kWrite, RdmaOp::Kind::kWrite);
  EXPECT_GE(writes, 2 * wire);
  EXPECT_LT(writes, 2 * wire * 1.05);
  const double mixed = both(RdmaOp::Kind::kRead, RdmaOp::Kind::kWrite);
  EXPECT_LT(mixed, wire * 1.1);  // full duplex: neither waits
  EXPECT_GE(mixed, wire);
}

// DESIGN.md: transfers in flight share a link fairly. A 32 MiB WRITE from one
// GPU node is 1 ms on the wire when another node's 32 MiB WRITE to the same
// memory node starts: from then on they take turns on the memory node's RX,
// a segment each, so the first is slowed (it no longer holds the port for its
// whole wire time) and both still finish after two wire times together.
TEST(SimNic, WritesInFlightToOnePortTakeTurnsSegmentBySegment) {
  Rig rig;
  SimMemoryPool pool(128 << 20);
  const auto reg = rig.expose_all(pool);
  auto gpu2 = rig.second_gpu("gpu2");
  const double rate = rig.fabric.params().bytes_per_second;
  const double wire = (32 << 20) / rate;
  std::vector<std::byte> a(32 << 20, std::byte{'a'}), b(32 << 20, std::byte{'b'});
  std::optional<double> first_done, second_done;
  const auto t0 = rig.world.loop().now();
  rig.qp->post({{RdmaOp::Kind::kWrite, a, reg.addr, reg.rkey}}, [&](std::vector<Status> st) {
    EXPECT_TRUE(st[0].ok());
    first_done = runtime::to_seconds(rig.world.loop().now() - t0);
  });
  rig.world.run_for(1ms);
  gpu2.qp->post({{RdmaOp::Kind::kWrite, b, reg.addr + (64 << 20), reg.rkey}},
                [&](std::vector<Status> st) {
                  EXPECT_TRUE(st[0].ok());
                  second_done = runtime::to_seconds(rig.world.loop().now() - t0);
                });
  ASSERT_TRUE(rig.world.run_until([&] { return first_done && second_done; }).ok());
  // Alone from 1 ms on, the first would end at ~2.86 ms; sharing half the port
  // with the second for its remaining ~1.86 ms of wire, at ~4.7 ms.
  EXPECT_GT(*first_done, 1e-3 + 2 * (wire - 1e-3) * 0.95) << *first_done;
  EXPECT_LT(*first_done, 1e-3 + 2 * (wire - 1e-3) * 1.05 + 0.5e-3) << *first_done;
  EXPECT_GE(*second_done, 2 * wire);
  EXPECT_LT(*second_done, 2 * wire * 1.05);
  std::vector<std::byte> back(32 << 20);
  ASSERT_TRUE(pool.read(0, back).ok());
  EXPECT_EQ(back, a);
  ASSERT_TRUE(pool.read(64 << 20, back).ok());
  EXPECT_EQ(back, b);
}

// Memory whose first `slow_bytes` are ready only at `slow_until`, the rest at once.
class HalfSlowMemory : public SimMemoryPool, public MemoryTiming {
 public:
  HalfSlowMemory(std::uint64_t size, std::uint64_t slow_bytes, runtime::Instant slow_until)
      : SimMemoryPool(size), slow_bytes_(slow_bytes), slow_until_(slow_until) {}
  runtime::Instant access_ready(std::uint64_t offset, std::uint64_t, bool,
                                runtime::Instant at) override {
    return offset < slow_bytes_ ? std::max(at, slow_until_) : at;
  }

 private:
  std::uint64_t slow_bytes_;
  runtime::Instant slow_until_;
};

// A READ waiting for its device does not hold the shared port idle: another
// node's READ of ready memory goes out in the meantime.
TEST(SimNic, AReadWaitingForTheDeviceDoesNotHoldThePortForOthers) {
  Rig rig;
  HalfSlowMemory pool(8 << 20, 4 << 20, runtime::Instant(std::chrono::milliseconds(20)));
  const auto reg = rig.expose_all(pool);
  auto gpu2 = rig.second_gpu("gpu2");
  auto& qp2 = gpu2.qp;
  std::vector<std::byte> slow(1 << 20), fast(1 << 20);
  std::optional<runtime::Instant> slow_done, fast_done;
  const auto t0 = rig.world.loop().now();
  rig.qp->post({{RdmaOp::Kind::kRead, slow, reg.addr, reg.rkey}}, [&](std::vector<Status> st) {
    EXPECT_TRUE(st[0].ok());
    slow_done = rig.world.loop().now();
  });
  qp2->post({{RdmaOp::Kind::kRead, fast, reg.addr + (4 << 20), reg.rkey}},
            [&](std::vector<Status> st) {
              EXPECT_TRUE(st[0].ok());
              fast_done = rig.world.loop().now();
            });
  ASSERT_TRUE(rig.world.run_until([&] { return slow_done && fast_done; }).ok());
  EXPECT_LT(*fast_done - t0, 1ms);  // ~90 us of wire, not after the slow READ's 20 ms
  EXPECT_GE(*slow_done - t0, 20ms);
}

// The responder executes a QP's requests in order: a READ posted behind a
// WRITE into memory that takes 20 ms to accept it reads only once that WRITE
// is in, and sees its bytes. If the registration goes meanwhile, the WRITE
// fails with remote_access, the READ behind it is flushed, and neither hangs.
TEST(SimNic, AReadBehindAWriteThatWaitsForTheDeviceReadsAfterItLanded) {
  for (const bool deregister : {false, true}) {
    SCOPED_TRACE(deregister);
    Rig rig;
    HalfSlowMemory pool(8 << 20, 4 << 20, runtime::Instant(std::chrono::milliseconds(20)));
    const auto reg = rig.expose_all(pool);
    auto data = bytes_of("written before the read");
    std::vector<std::byte> back(data.size());
    std::optional<std::vector<Status>> st;
    rig.qp->post({{RdmaOp::Kind::kWrite, data, reg.addr, reg.rkey},
                  {RdmaOp::Kind::kRead, back, reg.addr, reg.rkey}},
                 [&](std::vector<Status> s) { st = std::move(s); });
    if (deregister) {
      rig.world.run_for(1ms);
      ASSERT_TRUE(rig.mem_nic.deregister(reg).ok());
    }
    ASSERT_TRUE(rig.world.run_until([&] { return st.has_value(); }).ok());
    ASSERT_EQ(st->size(), 2u);
    if (deregister) {
      // The WRITE fails where it lands; the READ behind it is flushed (RC).
      EXPECT_EQ((*st)[0].code(), ErrorCode::kRemoteAccess) << (*st)[0].ToString();
      EXPECT_EQ((*st)[1].code(), ErrorCode::kUnavailable) << (*st)[1].ToString();
    } else {
      for (const auto& s : *st) EXPECT_TRUE(s.ok()) << s.ToString();
      EXPECT_EQ(back, data);
      EXPECT_GE(rig.world.loop().now(), runtime::Instant(std::chrono::milliseconds(20)));
    }
  }
}

// An op that fails late (a READ whose registration went while it waited for
// its device) puts the QP in the error state: ops behind it complete flushed,
// also a WRITE that had already landed (as verbs reports it: the sim said ok,
// so a core that counted on "every op after a failure fails" passed here only).
TEST(SimNic, R1_6_AWriteThatLandedBehindAReadThatFailsLateIsReportedFlushed) {
  Rig rig;
  HalfSlowMemory pool(8 << 20, 4 << 20, runtime::Instant(std::chrono::milliseconds(20)));
  const auto reg = rig.expose_all(pool);
  std::vector<std::byte> slow(4096), fast(4096, std::byte{'w'});
  std::optional<std::vector<Status>> st;
  rig.qp->post({{RdmaOp::Kind::kRead, slow, reg.addr, reg.rkey},
                {RdmaOp::Kind::kWrite, fast, reg.addr + (4 << 20), reg.rkey}},
               [&](std::vector<Status> s) { st = std::move(s); });
  rig.world.run_for(1ms);
  std::vector<std::byte> landed(4096);
  ASSERT_TRUE(pool.read(4 << 20, landed).ok());
  ASSERT_EQ(landed, fast);  // the WRITE ran
  ASSERT_TRUE(rig.mem_nic.deregister(reg).ok());
  ASSERT_TRUE(rig.world.run_until([&] { return st.has_value(); }).ok());
  ASSERT_EQ(st->size(), 2u);
  EXPECT_EQ((*st)[0].code(), ErrorCode::kRemoteAccess) << (*st)[0].ToString();
  EXPECT_EQ((*st)[1].code(), ErrorCode::kUnavailable) << (*st)[1].ToString();
  EXPECT_NE((*st)[1].message().find("may have run"), std::string::npos) << (*st)[1].ToString();
}

// An RC send queue reports its ops in posting order: a WRITE of ready memory
// posted after a READ that waits 20 ms for its device lands at once, but its
// completion comes after the READ's, and so do later batches' -- also one
// refused at posting and an empty one.
TEST(SimNic, CompletionsOfAQueuePairComeInPostingOrder) {
  Rig rig;
  HalfSlowMemory pool(8 << 20, 4 << 20, runtime::Instant(std::chrono::milliseconds(20)));
  const auto reg = rig.expose_all(pool);
  std::vector<std::byte> slow(4096), fast(4096, std::byte{'w'});
  std::vector<std::string> order;
  std::optional<std::vector<Status>> first, second;
  rig.qp->post({{RdmaOp::Kind::kRead, slow, reg.addr, reg.rkey},
                {RdmaOp::Kind::kWrite, fast, reg.addr + (4 << 20), reg.rkey}},
               [&](std::vector<Status> st) {
                 order.push_back("batch");
                 first = std::move(st);
               });
  rig.qp->post({{RdmaOp::Kind::kWrite, fast, reg.addr + (5 << 20), reg.rkey}},
               [&](std::vector<Status> st) {
                 order.push_back("write");
                 second = std::move(st);
               });
  // Refused at once (its wire length is shorter than its buffer), and an
  // empty batch: both are still reported in their turn.
  RdmaOp short_op{RdmaOp::Kind::kWrite, fast, reg.addr + (6 << 20), reg.rkey};
  short_op.length = 16;
  std::optional<Status> refused;
  rig.qp->post({short_op}, [&](std::vector<Status> st) {
    order.push_back("refused");
    refused = st[0];
  });
  rig.qp->post({}, [&](std::vector<Status> st) {
    EXPECT_TRUE(st.empty());
    order.push_back("empty");
  });
  // The WRITEs are in memory long before the READ's device is ready...
  rig.world.run_for(1ms);
  std::vector<std::byte> landed(4096);
  ASSERT_TRUE(pool.read(5 << 20, landed).ok());
  EXPECT_EQ(landed, fast);
  EXPECT_FALSE(first.has_value());
  EXPECT_TRUE(order.empty());  // ...but nothing is reported ahead of the READ
  ASSERT_TRUE(rig.world.run_until([&] { return order.size() == 4; }).ok());
  EXPECT_EQ(order, (std::vector<std::string>{"batch", "write", "refused", "empty"}));
  ASSERT_TRUE(refused.has_value());
  EXPECT_EQ(refused->code(), ErrorCode::kBadRequest) << refused->ToString();
  EXPECT_GE(rig.world.loop().now(), runtime::Instant(std::chrono::milliseconds(20)));
  for (const auto& s : *first) EXPECT_TRUE(s.ok()) << s.ToString();
  EXPECT_TRUE((*second)[0].ok());
}

TEST(PortTimeline, BooksTheFirstGapThatFitsAndJoinsNeighbours) {
  using runtime::Instant;
  auto at = [](int us) { return Instant(std::chrono::microseconds(us)); };
  PortTimeline port;
  port.book(at(100), 10us, at(0));  // [100, 110)
  EXPECT_EQ(port.first_fit(at(0), 50us), at(0));
  EXPECT_EQ(port.first_fit(at(80), 50us), at(110));  // does not fit before 100
  EXPECT_EQ(port.first_fit(at(105), 1us), at(110));  // inside the busy interval
  port.book(at(110), 5us, at(0));                    // joins [100, 115)
  EXPECT_EQ(port.intervals(), 1u);
  port.book(at(0), 100us, at(0));  // joins [0, 115)
  EXPECT_EQ(port.intervals(), 1u);
  EXPECT_EQ(port.first_fit(at(0), 1us), at(115));
  port.book(at(200), 10us, at(120));  // forgets what ended by 120
  EXPECT_EQ(port.intervals(), 1u);
  PortTimeline rx;
  rx.book(at(210), 30us, at(120));
  // TX is free from 210, RX from 240: both from 240.
  EXPECT_EQ(book_both(port, rx, at(205), 20us, at(120)), at(240));
  EXPECT_EQ(port.first_fit(at(205), 1us), at(210));  // TX's gap 210..240 stays free
  EXPECT_EQ(rx.first_fit(at(205), 1us), at(205));
}

// A transfer of no bytes (a zero-length op) books nothing: an empty interval
// [10, 10) kept on the port pushed a later transfer spanning 10 past it
// (review, session 25).
TEST(PortTimeline, R8_AZeroLengthBookingKeepsThePortFree) {
  using runtime::Instant;
  auto at = [](int ns) { return Instant(std::chrono::nanoseconds(ns)); };
  PortTimeline port;
  port.book(at(10), 0ns, at(0));
  EXPECT_EQ(port.intervals(), 0u);
  EXPECT_EQ(port.first_fit(at(5), 10ns), at(5));
}

// A refused WRITE's unsent segments give their time back: the middle of a
// joined interval splits, its ends shrink, and a stretch never booked as one
// interval is left alone.
TEST(PortTimeline, AReleasedStretchIsFreeAgain) {
  using runtime::Instant;
  auto at = [](int us) { return Instant(std::chrono::microseconds(us)); };
  PortTimeline port;
  port.book(at(100), 30us, at(0));  // [100, 130)
  port.release(at(110), 10us);      // [100, 110) [120, 130)
  EXPECT_EQ(port.intervals(), 2u);
  EXPECT_EQ(port.first_fit(at(100), 10us), at(110));
  EXPECT_EQ(port.first_fit(at(100), 11us), at(130));
  port.release(at(120), 10us);  // [100, 110)
  port.release(at(100), 5us);   // [105, 110)
  EXPECT_EQ(port.intervals(), 1u);
  EXPECT_EQ(port.first_fit(at(100), 5us), at(100));
  EXPECT_EQ(port.first_fit(at(101), 5us), at(110));
  port.release(at(108), 10us);  // reaches past the booking: refused, nothing freed
  EXPECT_EQ(port.first_fit(at(108), 1us), at(110));
  port.release(at(50), 10us);  // never booked
  EXPECT_EQ(port.intervals(), 1u);
}

// Every work request pays the NIC's per-op cost in posting order, READ
// requests as WRITEs do: a batch of READs paid it once (session 27 review).
TEST(SimNic, EachWorkRequestPaysPerOpInPostingOrder) {
  Rig rig;
  NicParams params;
  params.per_op = 10us;
  rig.fabric.set_params(params);
  SimMemoryPool pool(1 << 20);
  const auto reg = rig.expose_all(pool);
  std::vector<std::vector<std::byte>> bufs(8, std::vector<std::byte>(64));
  for (const auto kind : {RdmaOp::Kind::kRead, RdmaOp::Kind::kWrite}) {
    std::vector<RdmaOp> ops;
    for (std::size_t i = 0; i < bufs.size(); ++i) {
      ops.push_back({kind, bufs[i], reg.addr + i * 64, reg.rkey});
    }
    const auto t0 = rig.world.loop().now();
    for (const auto& st : rig.post(ops)) EXPECT_TRUE(st.ok()) << st.ToString();
    EXPECT_GE(rig.world.loop().now() - t0, 80us)
        << (kind == RdmaOp::Kind::kRead ? "read" : "write");
  }
}

}  // namespace
}  // namespace rcxl::sim
