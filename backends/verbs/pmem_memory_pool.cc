#include "backends/verbs/pmem_memory_pool.h"

#include <fcntl.h>
#include <libpmem2.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <limits>
#include <string>
#include <utility>

#include "backends/verbs/memory_spec.h"
#include "backends/verbs/pool_file_undo.h"

namespace rcxl::verbs {

namespace {

Status pmem_error(const std::string& what) {
  return Error(ErrorCode::kIoError, what + ": " + pmem2_errormsg());
}

Status os_error(const std::string& what) {
  return Error(ErrorCode::kIoError, what + ": " + std::strerror(errno));
}

// Closes the fd unless the pool took it (to hold its lock).
struct FdCloser {
  int fd;
  ~FdCloser() {
    if (fd >= 0) close(fd);
  }
  int release() { return std::exchange(fd, -1); }
};

// Two agents carving regions from one file or device would corrupt each
// other's KV: the pool holds an exclusive lock for as long as it is mapped.
Status lock_exclusively(int fd, const std::string& path) {
  if (flock(fd, LOCK_EX | LOCK_NB) == 0) return {};
  if (errno == EWOULDBLOCK) {
    return Error(ErrorCode::kUnavailable,
                 path +
                     " is in use by another process (another rcxl-agent on this pool?); "
                     "give each agent a pool of its own");
  }
  return os_error("lock " + path);
}

// Opens PATH read-write, creating it if missing; `created` says which happened.
int open_or_create(const std::string& path, bool& created) {
  int fd = open(path.c_str(), O_RDWR | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
  created = fd >= 0;
  if (fd < 0 && errno == EEXIST) fd = open(path.c_str(), O_RDWR | O_CLOEXEC);
  return fd;
}

}  // namespace

PmemMemoryPool::PmemMemoryPool(pmem2_map* map, std::uint64_t bytes, std::string what)
    : MappedMemoryPool(static_cast<std::byte*>(pmem2_map_get_address(map)), bytes),
      map_(map),
      what_(std::move(what)) {}

PmemMemoryPool::~PmemMemoryPool() {
  pmem2_map_delete(&map_);
  if (lock_fd_ >= 0) close(lock_fd_);  // the lock goes with it
}

Result<std::unique_ptr<PmemMemoryPool>> PmemMemoryPool::map_fd(int fd, std::uint64_t length,
                                                               std::string what) {
  pmem2_source* source = nullptr;
  if (pmem2_source_from_fd(&source, fd) != 0) return pmem_error("pmem2 source " + what);
  std::size_t alignment = 0;
  std::size_t source_size = 0;
  if (pmem2_source_alignment(source, &alignment) != 0 ||
      pmem2_source_size(source, &source_size) != 0) {
    auto status = pmem_error("pmem2 source info " + what);
    pmem2_source_delete(&source);
    return status;
  }
  // The mapping covers whole alignment units; size() stays what was asked.
  const std::uint64_t wanted = length ? length : source_size;
  // Rounding up must not wrap: a size near 2^64 would round to 0 and map "all".
  const bool too_big = alignment == 0 || wanted > source_size ||
                       wanted > std::numeric_limits<std::uint64_t>::max() - alignment;
  const std::uint64_t map_length =
      too_big ? wanted : (wanted + alignment - 1) / alignment * alignment;
  if (wanted == 0 || too_big || map_length > source_size) {
    pmem2_source_delete(&source);
    return Error(ErrorCode::kNoSpace, what + " holds " + std::to_string(source_size) +
                                          " bytes, need " + std::to_string(map_length));
  }
  pmem2_config* config = nullptr;
  pmem2_map* map = nullptr;
  Status status;
  if (pmem2_config_new(&config) != 0) {
    status = pmem_error("pmem2 config");
  } else if (pmem2_config_set_required_store_granularity(config, PMEM2_GRANULARITY_PAGE) != 0 ||
             pmem2_config_set_length(config, map_length) != 0) {
    status = pmem_error("pmem2 config " + what);
  } else if (pmem2_map_new(&map, config, source) != 0) {
    status = pmem_error("pmem2 map " + what);
  }
  pmem2_config_delete(&config);
  pmem2_source_delete(&source);
  if (!status.ok()) return status;
  return std::unique_ptr<PmemMemoryPool>(new PmemMemoryPool(map, wanted, std::move(what)));
}

Result<std::unique_ptr<PmemMemoryPool>> PmemMemoryPool::open_file(const std::string& path,
                                                                  std::uint64_t bytes,
                                                                  PoolFileUndo* undo_out) {
  if (bytes == 0) return Error(ErrorCode::kBadRequest, "file pool of 0 bytes");
  bool created = false;
  FdCloser fd{open_or_create(path, created)};
  if (fd.fd < 0) return os_error("open " + path);
  PoolFileUndo undo;
  struct stat st {};
  if (fstat(fd.fd, &st) != 0) return os_error("stat " + path);
  if (!S_ISREG(st.st_mode)) {
    return Error(ErrorCode::kBadRequest, path + " is not a regular file (use dax:PATH)");
  }
  // Locked before anything is undone: a file another agent holds (even one we
  // just created, if it locked it first) is never removed or shrunk.
  if (Status locked = lock_exclusively(fd.fd, path); !locked.ok()) return locked;
  if (created) undo = PoolFileUndo::created(path);
  const std::uint64_t page = static_cast<std::uint64_t>(sysconf(_SC_PAGESIZE));
  // off_t is signed: beyond its range the size would wrap (and round to 0).
  if (bytes > static_cast<std::uint64_t>(std::numeric_limits<off_t>::max()) - page) {
    return Error(ErrorCode::kNoSpace,
                 "file pool of " + std::to_string(bytes) + " bytes is larger than a file can be");
  }
  const std::uint64_t file_bytes = (bytes + page - 1) / page * page;
  const bool grows = static_cast<std::uint64_t>(st.st_size) < file_bytes;
  if (grows && !created) undo = PoolFileUndo::grown(path, st.st_size);
  // Allocate blocks now, also under the holes of a file already big enough
  // (`truncate -s`): a sparse file would SIGBUS on a full disk instead of failing here.
  // Only then: where glibc emulates fallocate it writes every block, each start.
  const bool sparse = static_cast<std::uint64_t>(st.st_blocks) * 512 < file_bytes;
  int rc = grows || sparse ? posix_fallocate(fd.fd, 0, static_cast<off_t>(file_bytes)) : 0;
  if (rc == EOPNOTSUPP || rc == EINVAL) {
    // A file system without fallocate: only sized (never shrunk), blocks as written.
    rc = !grows || ftruncate(fd.fd, static_cast<off_t>(file_bytes)) == 0 ? 0 : errno;
  }
  if (rc != 0) {
    return Error(rc == ENOSPC ? ErrorCode::kNoSpace : ErrorCode::kIoError,
                 "allocate " + format_bytes(file_bytes) + " of " + path + ": " + std::strerror(rc));
  }
  auto pool = map_fd(fd.fd, bytes, "file " + path);
  if (!pool.ok()) return pool;
  (*pool)->lock_fd_ = fd.release();
  // The caller decides whether the growth stays; without one, it does.
  if (undo_out) {
    *undo_out = std::move(undo);
  } else {
    undo.keep();
  }
  return pool;
}

Result<std::unique_ptr<PmemMemoryPool>> PmemMemoryPool::open_dax(const std::string& path) {
  FdCloser fd{open(path.c_str(), O_RDWR | O_CLOEXEC)};
  if (fd.fd < 0) return os_error("open " + path);
  if (Status locked = lock_exclusively(fd.fd, path); !locked.ok()) return locked;
  auto pool = map_fd(fd.fd, 0, "dax " + path);
  if (pool.ok()) (*pool)->lock_fd_ = fd.release();
  return pool;
}

std::string PmemMemoryPool::describe() const {
  return what_ + " " + format_bytes(size_);
}

Status PmemMemoryPool::persist(std::uint64_t offset, std::uint64_t length) {
  if (!in_bounds(offset, length)) return out_of_bounds(offset, length);
  if (length == 0) return {};
  pmem2_persist_fn persist_fn = pmem2_get_persist_fn(map_);
  persist_fn(base_ + offset, length);
  return {};
}

}  // namespace rcxl::verbs
