// `--memory anon:BYTES`: private anonymous memory (tests, hosts without CXL).
#pragma once

#include <memory>

#include "backends/verbs/mapped_memory_pool.h"

namespace rcxl::verbs {

class AnonMemoryPool final : public MappedMemoryPool {
 public:
  // `populate` faults every page in now (MAP_POPULATE) so the first RDMA is not slow.
  static Result<std::unique_ptr<AnonMemoryPool>> create(std::uint64_t bytes, bool populate);
  ~AnonMemoryPool() override;
  AnonMemoryPool(const AnonMemoryPool&) = delete;
  AnonMemoryPool& operator=(const AnonMemoryPool&) = delete;

  std::string describe() const override;

 private:
  AnonMemoryPool(std::byte* base, std::uint64_t bytes, std::uint64_t mapped_bytes)
      : MappedMemoryPool(base, bytes), mapped_bytes_(mapped_bytes) {}
  std::uint64_t mapped_bytes_;
};

}  // namespace rcxl::verbs
