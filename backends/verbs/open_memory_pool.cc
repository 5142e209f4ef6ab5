#include "backends/verbs/open_memory_pool.h"

#include "backends/verbs/anon_memory_pool.h"
#include "backends/verbs/pmem_memory_pool.h"

namespace rcxl::verbs {

namespace {

template <typename Pool>
Result<std::unique_ptr<runtime::MemoryPool>> upcast(Result<std::unique_ptr<Pool>> pool) {
  if (!pool) return pool.status();
  return std::unique_ptr<runtime::MemoryPool>(std::move(pool).value());
}

}  // namespace

Result<std::unique_ptr<runtime::MemoryPool>> open_memory_pool(const MemorySpec& spec,
                                                              MemoryPoolOptions options) {
  switch (spec.kind) {
    case MemorySpec::Kind::kAnon:
      return upcast(AnonMemoryPool::create(spec.bytes, options.populate_anon));
    case MemorySpec::Kind::kFile:
      return upcast(PmemMemoryPool::open_file(spec.path, spec.bytes, options.file_undo));
    case MemorySpec::Kind::kDax:
      return upcast(PmemMemoryPool::open_dax(spec.path));
  }
  return Error(ErrorCode::kBadRequest, "unknown memory kind");
}

}  // namespace rcxl::verbs
