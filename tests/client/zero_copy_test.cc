// Config::zero_copy: the Handler registers each op's local buffer with the NIC
// (Nic::register_local) just before posting and deregisters it once the op
// completed; bytes move as before. On the simulator, through a NIC decorator
// that counts what is registered.
#include <set>

#include "tests/client/client_rig.h"
#include "tests/forwarding_nic.h"

namespace rcxl::client::testing {
namespace {

// Forwards to the sim RNIC; records local registrations.
class CountingNic final : public rcxl::testing::ForwardingNic {
 public:
  using ForwardingNic::ForwardingNic;
  bool needs_local_registration() const override { return true; }
  Status register_local(std::span<std::byte> buffer) override {
    ++registered;
    live.insert(buffer.data());
    return {};
  }
  Status deregister_local(std::span<std::byte> buffer) override {
    if (live.erase(buffer.data()) == 0) ++unknown_deregistrations;
    return {};
  }

  int registered = 0;
  int unknown_deregistrations = 0;
  std::set<const std::byte*> live;
};

// One memory node; handlers reach it through a CountingNic, zero copy on.
struct ZeroCopyRig {
  ClientRig rig;
  MemoryNode& mem = rig.add_memory("mem");
  CountingNic nic{rig.gpu_nic};
  Config config = [this] {
    Config c = rig.config();
    c.zero_copy = true;
    return c;
  }();
};

// SPEC R1.6: the data path is the same with zero copy; only local registration differs.
TEST(Handler, R1_6_ZeroCopyRegistersEachBufferOnlyWhileItsRdmaRuns) {
  ZeroCopyRig z;
  auto& rig = z.rig;
  auto& nic = z.nic;
  Handler h(rig.gpu, z.config, nic);
  ASSERT_EQ(rig.store(h, {item("a", "alpha"), item("b", "beta")})->stored, 2u);
  EXPECT_EQ(nic.registered, 2);  // one per WRITE
  EXPECT_TRUE(nic.live.empty());
  auto loaded = rig.load(h, {"a", "b"});
  ASSERT_EQ(loaded->values.size(), 2u);
  EXPECT_EQ(text_of(loaded->values[0]), "alpha");
  EXPECT_EQ(text_of(loaded->values[1]), "beta");
  EXPECT_EQ(nic.registered, 4);  // and one per READ
  EXPECT_TRUE(nic.live.empty());
  EXPECT_EQ(nic.unknown_deregistrations, 0);
}

// A handler destroyed while its RDMA runs drops the completions: each
// deregisters its buffers as it goes, once the NIC is done with them (a buffer
// left registered is one the NIC would later post another buffer at its
// address through; one deregistered under a running op faults it).
TEST(Handler, R1_6_AHandlerDestroyedWhileItsRdmaRunsLeavesNoLocalRegistration) {
  ZeroCopyRig z;
  auto& rig = z.rig;
  auto& nic = z.nic;
  const Config& config = z.config;
  {
    Handler writer(rig.gpu, config, nic);
    ASSERT_EQ(rig.store(writer, {item("a", "alpha")})->stored, 1u);
  }
  ASSERT_TRUE(nic.live.empty());
  for (bool loading : {false, true}) {
    SCOPED_TRACE(loading ? "a load's READ" : "a store's WRITE");
    auto h = std::make_unique<Handler>(rig.gpu, config, nic);
    const int before = nic.registered;
    bool finished = false;
    if (loading) {
      h->load({"a"}, [&](Result<LoadResult>) { finished = true; });
    } else {
      h->store({item("b", std::string(4096, 'b'))}, [&](Result<StoreResult>) { finished = true; });
    }
    ASSERT_TRUE(rig.world.run_until([&] { return nic.registered > before; }).ok());
    ASSERT_FALSE(nic.live.empty());  // posted, not completed
    h.reset();
    EXPECT_EQ(nic.live.size(), 1u);                    // the NIC still has the op
    rig.world.run_for(std::chrono::milliseconds(50));  // the RDMA ends; nobody hears of it
    EXPECT_FALSE(finished);
    EXPECT_TRUE(nic.live.empty());
    EXPECT_EQ(nic.unknown_deregistrations, 0);
  }
}

TEST(Handler, R1_6_WithoutZeroCopyNoLocalRegistration) {
  ClientRig rig;
  rig.add_memory("mem");
  CountingNic nic(rig.gpu_nic);
  Handler h(rig.gpu, rig.config(), nic);
  ASSERT_EQ(rig.store(h, {item("a", "alpha")})->stored, 1u);
  ASSERT_EQ(rig.load(h, {"a"})->values.size(), 1u);
  EXPECT_EQ(nic.registered, 0);
}

}  // namespace
}  // namespace rcxl::client::testing
