// `--nic none`: control plane only. Maps succeed with rkey 0 and no data moves.
#pragma once

#include "core/runtime/nic.h"

namespace rcxl::apps {

class NoneNic final : public runtime::Nic {
 public:
  Result<runtime::Registration> register_memory(runtime::MemoryPool& /*pool*/, std::uint64_t offset,
                                                std::uint64_t length,
                                                unsigned /*access*/) override {
    return runtime::Registration{offset, 0, length};
  }
  Status deregister(const runtime::Registration& /*registration*/) override { return {}; }
  std::string endpoint() const override { return "none"; }
  bool moves_data() const override { return false; }
  // It takes no queue pairs at all, so every check holds.
  bool check_connects(ConnectCheck /*check*/) override { return true; }
  void connect(const std::string& /*endpoint*/, runtime::Strand& strand,
               ConnectHandler done) override {
    strand.post([done = std::move(done)] {
      done(Error(ErrorCode::kUnavailable, "--nic none moves no data"));
    });
  }
};

}  // namespace rcxl::apps
