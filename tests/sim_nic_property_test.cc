// The sim RNIC against a plain byte array: seeded batches of READs and WRITEs
// (right and wrong rkeys, ranges past a registration, missing access rights,
// payload-sampled and too-short ops) over registrations that come and go. Every
// op succeeds exactly when its rkey covers its bytes with the right access,
// moves exactly the bytes a reference moves, in posting order (RC: the
// responder executes a QP's requests in order), and a refused op moves nothing
// (SPEC R1.2). A READ sees the WRITEs posted before it; a WRITE posted after
// it may or may not show in it.
#include <gtest/gtest.h>

#include <cstdint>
#include <map>
#include <optional>
#include <random>
#include <vector>

#include "backends/sim/sim_memory_pool.h"
#include "backends/sim/sim_nic.h"
#include "backends/sim/sim_world.h"

namespace rcxl::sim {
namespace {

using runtime::RdmaOp;
constexpr std::uint64_t kPoolBytes = 1 << 16;

struct Registered {
  runtime::Registration reg;
  std::uint64_t offset = 0;  // in the pool
  unsigned access = 0;
};

void run_against_reference(std::uint32_t seed) {
  SimWorld world(seed);
  SimFabric fabric(world);
  SimNode& gpu = world.add_node("gpu");
  (void)world.add_node("mem");
  SimNic& gpu_nic = fabric.add_nic("gpu");
  SimNic& mem_nic = fabric.add_nic("mem");
  auto strand = gpu.make_strand("data");
  std::shared_ptr<runtime::QueuePair> qp;
  gpu_nic.connect("mem", *strand, [&](Result<std::shared_ptr<runtime::QueuePair>> r) {
    ASSERT_TRUE(r.ok());
    qp = r.value();
  });
  ASSERT_TRUE(world.run_until([&] { return qp != nullptr; }).ok());

  SimMemoryPool pool(kPoolBytes);
  std::vector<std::byte> reference(kPoolBytes, std::byte{0});
  std::mt19937_64 rng(seed);
  auto pick = [&](std::uint64_t n) {
    return std::uniform_int_distribution<std::uint64_t>(0, n - 1)(rng);
  };
  std::map<std::uint32_t, Registered> live;  // by rkey
  std::vector<std::uint32_t> gone;           // rkeys deregistered

  for (int round = 0; round < 60; ++round) {
    // Registrations come and go between batches (none in flight).
    while (live.size() < 3) {
      const std::uint64_t offset = pick(kPoolBytes / 2);
      const std::uint64_t length = 1 + pick(kPoolBytes / 4);
      const unsigned access = pick(3) == 0 ? runtime::kAccessRemoteRead
                              : pick(2) == 0
                                  ? runtime::kAccessRemoteWrite
                                  : runtime::kAccessRemoteRead | runtime::kAccessRemoteWrite;
      auto reg = mem_nic.register_memory(pool, offset, length, access);
      ASSERT_TRUE(reg.ok()) << reg.status().ToString();
      live[reg->rkey] = {*reg, offset, access};
    }
    if (pick(3) == 0) {
      auto it = std::next(live.begin(), static_cast<std::ptrdiff_t>(pick(live.size())));
      ASSERT_TRUE(mem_nic.deregister(it->second.reg).ok());
      gone.push_back(it->first);
      live.erase(it);
    }

    // One batch: buffers stay alive until its completion.
    const std::size_t n = 1 + pick(8);
    std::vector<std::vector<std::byte>> buffers(n);
    std::vector<RdmaOp> ops(n);
    std::vector<std::optional<std::uint64_t>> pool_at(n);  // where a valid op lands
    std::vector<bool> refused(n, false);                   // too short: refused at posting
    std::optional<std::size_t> first_failure;              // fails at the responder
    for (std::size_t i = 0; i < n; ++i) {
      const bool write = pick(2) == 0;
      const auto& target =
          std::next(live.begin(), static_cast<std::ptrdiff_t>(pick(live.size())))->second;
      std::uint32_t rkey = target.reg.rkey;
      if (pick(10) == 0 && !gone.empty()) rkey = gone[pick(gone.size())];  // a stale rkey
      if (pick(20) == 0) rkey = 0xdead;                                    // never issued
      const std::uint64_t within = pick(target.reg.length);
      std::uint64_t size = 1 + pick(std::min<std::uint64_t>(4096, target.reg.length));
      if (pick(8) == 0) size += target.reg.length;  // runs past the registration
      buffers[i].resize(size);
      for (auto& b : buffers[i]) b = static_cast<std::byte>(pick(256));
      ops[i] = {write ? RdmaOp::Kind::kWrite : RdmaOp::Kind::kRead, buffers[i],
                target.reg.addr + within, rkey};
      const std::uint64_t shape = pick(10);
      if (shape == 0) ops[i].length = size + pick(4096);                      // payload-sampled
      if (shape == 1 && size > 1) ops[i].length = size - 1 - pick(size - 1);  // too short
      const std::uint64_t wire = ops[i].wire_length();
      const bool length_ok = ops[i].length == 0 || ops[i].length >= size;
      const bool rkey_ok = rkey == target.reg.rkey;
      const bool access_ok =
          (target.access & (write ? runtime::kAccessRemoteWrite : runtime::kAccessRemoteRead)) != 0;
      const bool range_ok = within + wire <= target.reg.length;
      refused[i] = !length_ok;
      if (length_ok && rkey_ok && access_ok && range_ok) {
        pool_at[i] = target.offset + within;
      } else if (length_ok && !first_failure) {
        first_failure = i;
      }
    }
    // RC: a failure at the responder puts the QP in the error state; the ops
    // posted behind it never run (flushed: `unavailable`).
    std::vector<bool> flushed(n, false);
    for (std::size_t i = first_failure.value_or(n) + 1; i < n; ++i) {
      if (refused[i]) continue;
      flushed[i] = true;
      pool_at[i].reset();
    }
    // The reference: ops in posting order; a READ sees the WRITEs before it.
    std::vector<std::vector<std::byte>> expected_buffers = buffers;
    for (std::size_t i = 0; i < n; ++i) {
      if (!pool_at[i]) continue;
      auto at = reference.begin() + static_cast<std::ptrdiff_t>(*pool_at[i]);
      if (ops[i].kind == RdmaOp::Kind::kWrite) {
        std::copy(buffers[i].begin(), buffers[i].end(), at);
      } else {
        std::copy(at, at + static_cast<std::ptrdiff_t>(buffers[i].size()),
                  expected_buffers[i].begin());
      }
    }
    std::optional<std::vector<Status>> statuses;
    // A WRITE posted after a READ may land before the READ has read those bytes
    // (an RC responder may start the next request while a READ's response is
    // still going out; the fence flag exists for that): either is right there.
    auto overlapped_by_later_write = [&](std::size_t i, std::uint64_t byte) {
      for (std::size_t j = i + 1; j < n; ++j) {
        if (pool_at[j] && ops[j].kind == RdmaOp::Kind::kWrite && byte >= *pool_at[j] &&
            byte < *pool_at[j] + buffers[j].size()) {
          return true;
        }
      }
      return false;
    };
    qp->post(ops, [&](std::vector<Status> s) { statuses = std::move(s); });
    ASSERT_TRUE(world.run_until([&] { return statuses.has_value(); }).ok());
    ASSERT_EQ(statuses->size(), n);
    for (std::size_t i = 0; i < n; ++i) {
      EXPECT_EQ((*statuses)[i].ok(), pool_at[i].has_value())
          << "seed " << seed << " round " << round << " op " << i << ": "
          << (*statuses)[i].ToString();
      if (!(*statuses)[i].ok()) {
        const auto code = (*statuses)[i].code();
        if (flushed[i]) {
          EXPECT_EQ(code, ErrorCode::kUnavailable) << (*statuses)[i].ToString();
        } else {
          EXPECT_TRUE(code == ErrorCode::kRemoteAccess || code == ErrorCode::kBadRequest)
              << (*statuses)[i].ToString();
        }
      }
      if (pool_at[i] && ops[i].kind == RdmaOp::Kind::kRead) {
        for (std::size_t b = 0; b < buffers[i].size(); ++b) {
          if (overlapped_by_later_write(i, *pool_at[i] + b)) expected_buffers[i][b] = buffers[i][b];
        }
      }
      EXPECT_EQ(buffers[i], expected_buffers[i])
          << "seed " << seed << " round " << round << " op " << i << " (local bytes)";
    }
    std::vector<std::byte> all(kPoolBytes);
    ASSERT_TRUE(pool.read(0, all).ok());
    ASSERT_EQ(all, reference) << "seed " << seed << " round " << round << " (pool bytes)";
    if (::testing::Test::HasFailure()) return;
  }
}

TEST(SimNicProperty, R1_2_OpsMoveExactlyTheBytesTheirRkeyCoversInPostingOrder) {
  for (std::uint32_t seed = 1; seed <= 60; ++seed) {
    run_against_reference(seed);
    if (HasFailure()) return;
  }
}

}  // namespace
}  // namespace rcxl::sim
