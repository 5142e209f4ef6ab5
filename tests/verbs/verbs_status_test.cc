// Host-side pieces of the verbs NIC: completion status mapping, the `--nic`
// spec and the staging ring. No RDMA device needed.
#include "backends/verbs/verbs_status.h"

#include <gtest/gtest.h>

#include "backends/verbs/bounce_ring.h"

namespace rcxl::verbs {
namespace {

// SPEC R6.3: RDMA through a registration that is gone fails, as kRemoteAccess.
TEST(VerbsStatus, R6_3_RemoteAccessFailuresAreRemoteAccess) {
  for (auto wc : {IBV_WC_REM_ACCESS_ERR, IBV_WC_REM_INV_REQ_ERR, IBV_WC_REM_OP_ERR}) {
    Status status = status_from_wc(wc, 7);
    EXPECT_EQ(status.code(), ErrorCode::kRemoteAccess) << ibv_wc_status_str(wc);
    EXPECT_NE(status.message().find(ibv_wc_status_str(wc)), std::string::npos);
  }
}

TEST(VerbsStatus, R1_6_OtherFailuresKeepTheVerbsText) {
  EXPECT_TRUE(status_from_wc(IBV_WC_SUCCESS).ok());
  EXPECT_EQ(status_from_wc(IBV_WC_RETRY_EXC_ERR).code(), ErrorCode::kUnavailable);
  // A responder that stopped answering is unreachable (the client backs off), not an I/O error.
  EXPECT_EQ(status_from_wc(IBV_WC_RESP_TIMEOUT_ERR).code(), ErrorCode::kUnavailable);
  EXPECT_EQ(status_from_wc(IBV_WC_WR_FLUSH_ERR).code(), ErrorCode::kUnavailable);
  Status local = status_from_wc(IBV_WC_LOC_PROT_ERR, 42);
  EXPECT_EQ(local.code(), ErrorCode::kIoError);
  EXPECT_NE(local.message().find(ibv_wc_status_str(IBV_WC_LOC_PROT_ERR)), std::string::npos);
  EXPECT_NE(local.message().find("vendor error 42"), std::string::npos);
}

TEST(VerbsNicSpec, R7_VerbsDeviceSpec) {
  auto device = parse_verbs_nic_spec("verbs:mlx5_0");
  ASSERT_TRUE(device.ok());
  EXPECT_EQ(*device, "mlx5_0");
  for (const char* bad : {"verbs:", "verbs", "none", "rxe0", "Verbs:rxe0", ""}) {
    auto parsed = parse_verbs_nic_spec(bad);
    ASSERT_FALSE(parsed.ok()) << bad;
    EXPECT_EQ(parsed.status().code(), ErrorCode::kBadRequest) << bad;
  }
}

TEST(BounceRing, R1_6_AllocatesInOrderAndWrapsWhenTheOldestAreReleased) {
  BounceRing ring(100);
  EXPECT_EQ(ring.allocate(40), 0u);
  EXPECT_EQ(ring.allocate(40), 40u);
  EXPECT_EQ(ring.allocate(30), std::nullopt);  // 20 left at the end, 0 at the start
  ring.release_oldest();                       // [0, 40) free
  EXPECT_EQ(ring.allocate(30), 0u);            // wraps
  EXPECT_EQ(ring.allocate(15), std::nullopt);  // gap [30, 40) is 10
  EXPECT_EQ(ring.allocate(10), 30u);
  ring.release_oldest();  // [40, 80) free; used: [0, 40)
  EXPECT_EQ(ring.allocate(60), 40u);
  EXPECT_EQ(ring.allocate(1), std::nullopt);
  ring.release_oldest();
  ring.release_oldest();
  ring.release_oldest();
  EXPECT_TRUE(ring.empty());
  EXPECT_EQ(ring.allocate(100), 0u);
}

TEST(BounceRing, R1_6_RefusesEmptyAndOversizedRequests) {
  BounceRing ring(64);
  EXPECT_EQ(ring.allocate(0), std::nullopt);
  EXPECT_EQ(ring.allocate(65), std::nullopt);
  EXPECT_TRUE(ring.empty());
}

}  // namespace
}  // namespace rcxl::verbs
