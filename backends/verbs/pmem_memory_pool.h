// `--memory file:PATH:BYTES` and `dax:PATH`: a file or a DAX device mapped
// through libpmem2, which picks the right flush for persist() (CPU cache flush
// on pmem/CXL, msync on a page-cache file).
#pragma once

#include <memory>
#include <string>

#include "backends/verbs/mapped_memory_pool.h"
#include "backends/verbs/pool_file_undo.h"

struct pmem2_map;

namespace rcxl::verbs {

class PmemMemoryPool final : public MappedMemoryPool {
 public:
  // Creates the file if missing and grows it (allocating blocks) to `bytes`.
  // A failed open takes that back itself; after a good one, `undo` (if given)
  // can still take it back, e.g. when the program then fails to start.
  static Result<std::unique_ptr<PmemMemoryPool>> open_file(const std::string& path,
                                                           std::uint64_t bytes,
                                                           PoolFileUndo* undo = nullptr);
  // A device DAX character device (/dev/daxN.M): the whole device.
  static Result<std::unique_ptr<PmemMemoryPool>> open_dax(const std::string& path);
  ~PmemMemoryPool() override;
  PmemMemoryPool(const PmemMemoryPool&) = delete;
  PmemMemoryPool& operator=(const PmemMemoryPool&) = delete;

  std::string describe() const override;
  Status persist(std::uint64_t offset, std::uint64_t length) override;

 private:
  PmemMemoryPool(pmem2_map* map, std::uint64_t bytes, std::string what);
  // Maps `length` bytes of `fd` (0 = the whole source).
  static Result<std::unique_ptr<PmemMemoryPool>> map_fd(int fd, std::uint64_t length,
                                                        std::string what);

  pmem2_map* map_;
  std::string what_;
  int lock_fd_ = -1;  // holds the exclusive flock on the file or device
};

}  // namespace rcxl::verbs
