#include "backends/verbs/anon_memory_pool.h"

#include <sys/mman.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "backends/verbs/memory_spec.h"

namespace rcxl::verbs {

Result<std::unique_ptr<AnonMemoryPool>> AnonMemoryPool::create(std::uint64_t bytes, bool populate) {
  if (bytes == 0) return Error(ErrorCode::kBadRequest, "anon pool of 0 bytes");
  const std::uint64_t page = static_cast<std::uint64_t>(sysconf(_SC_PAGESIZE));
  if (bytes > UINT64_MAX - page) return Error(ErrorCode::kNoSpace, "anon pool too large");
  const std::uint64_t mapped_bytes = (bytes + page - 1) / page * page;
  int flags = MAP_PRIVATE | MAP_ANONYMOUS | (populate ? MAP_POPULATE : 0);
  void* base = mmap(nullptr, mapped_bytes, PROT_READ | PROT_WRITE, flags, -1, 0);
  if (base == MAP_FAILED) {
    // ENOMEM: more than the kernel will commit (RAM + swap under its overcommit rule).
    const int error = errno;
    std::string fix =
        error == ENOMEM ? "; give a smaller anon: size or a file:PATH:BYTES pool on a disk" : "";
    return Error(ErrorCode::kNoSpace,
                 "mmap anon " + format_bytes(bytes) + ": " + std::strerror(error) + fix);
  }
  return std::unique_ptr<AnonMemoryPool>(
      new AnonMemoryPool(static_cast<std::byte*>(base), bytes, mapped_bytes));
}

AnonMemoryPool::~AnonMemoryPool() {
  munmap(base_, mapped_bytes_);
}

std::string AnonMemoryPool::describe() const {
  return "anon " + format_bytes(size_);
}

}  // namespace rcxl::verbs
