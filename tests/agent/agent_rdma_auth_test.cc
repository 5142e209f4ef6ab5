// docs/agent.md, *RDMA connect proofs*: with --rdma-auth proof the NIC takes a
// queue pair only with the proof of a live control connection that said hello.
#include "tests/agent/agent_rig.h"

namespace rcxl::agent::testing {
namespace {

// Connects a queue pair from the GPU node with `proof`; the connect's status.
Status connect_with(AgentRig& rig, const std::string& proof) {
  std::optional<Status> status;
  auto strand = rig.gpu.make_strand("rdma");
  rig.gpu_nic.connect_with_proof(
      "mem", *strand, proof,
      [&](Result<std::shared_ptr<runtime::QueuePair>> qp) { status = qp.status(); });
  rig.run_for(1ms);
  return status.value_or(Error(ErrorCode::kUnavailable, "the connect never ended"));
}

std::string proof_of(const TestClient& c, const std::string& secret = kSecret) {
  return protocol::connect_proof(secret, c.greeting["challenge"].get<std::string>());
}

AgentConfig with_proofs(const AgentRig& rig) {
  AgentConfig config = rig.config();
  config.rdma_connect_proofs = true;
  return config;
}

TEST(AgentRdmaAuth, R1_3_AQueuePairNeedsTheProofOfALiveControlConnection) {
  AgentRig rig;
  ASSERT_TRUE(rig.start(rig.recording(), with_proofs(rig)).ok());
  auto c = rig.client();
  EXPECT_EQ(connect_with(rig, proof_of(*c)).code(), ErrorCode::kUnauthenticated);  // no hello yet
  Json hello = c->hello();
  EXPECT_EQ(hello["rdma_connect_proof"], true) << hello.dump();
  EXPECT_EQ(connect_with(rig, "").code(), ErrorCode::kUnauthenticated);
  EXPECT_EQ(connect_with(rig, proof_of(*c, "another secret")).code(), ErrorCode::kUnauthenticated);
  std::string tampered = proof_of(*c);
  tampered.back() = tampered.back() == '0' ? '1' : '0';
  EXPECT_EQ(connect_with(rig, tampered).code(), ErrorCode::kUnauthenticated);
  EXPECT_TRUE(connect_with(rig, proof_of(*c)).ok());
  // The proof names its control connection: it ends with it.
  const std::string proof = proof_of(*c);
  c->close();
  rig.run_for(10ms);
  EXPECT_EQ(connect_with(rig, proof).code(), ErrorCode::kUnauthenticated);
  auto d = rig.hello_client();
  EXPECT_TRUE(connect_with(rig, proof_of(*d)).ok());
  rig.agent->stop();
  EXPECT_EQ(connect_with(rig, proof_of(*d)).code(), ErrorCode::kUnauthenticated);
}

TEST(AgentRdmaAuth, R1_3_WithoutTheFlagAnyQueuePairConnectsAndTheHelloSaysNothing) {
  AgentRig rig;
  ASSERT_TRUE(rig.start(rig.recording()).ok());
  auto c = rig.client();
  Json hello = c->hello();
  EXPECT_FALSE(hello.contains("rdma_connect_proof")) << hello.dump();
  EXPECT_TRUE(connect_with(rig, "").ok());
}

// An agent that checked connects and stopped leaves no check behind for the
// next one on the same NIC (a restart in-process) that does not ask for one.
TEST(AgentRdmaAuth, R1_3_ANextAgentWithoutTheFlagDropsTheCheck) {
  AgentRig rig;
  ASSERT_TRUE(rig.start(rig.recording(), with_proofs(rig)).ok());
  rig.agent.reset();
  ASSERT_TRUE(rig.start(rig.recording()).ok());
  EXPECT_TRUE(connect_with(rig, "").ok());
}

TEST(AgentRdmaAuth, R7_ProofsNeedASecret) {
  AgentRig rig;
  AgentConfig config = with_proofs(rig);
  config.auth_secret.reset();
  config.listen = {{"127.0.0.1", 7000}};
  Status st = rig.start(rig.recording(), config);
  EXPECT_EQ(st.code(), ErrorCode::kBadRequest) << st.ToString();
  EXPECT_NE(st.message().find("--auth-secret-file"), std::string::npos) << st.ToString();
}

}  // namespace
}  // namespace rcxl::agent::testing
