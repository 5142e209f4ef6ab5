// SPEC R7: the `--memory` pools. libpmem2 maps a regular file on any host, so
// file pools are tested here for real; dax needs a device and is exercised on
// a CXL node (docs/hardware.md).
#include <fcntl.h>
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <limits>
#include <string>
#include <vector>

#include "backends/verbs/anon_memory_pool.h"
#include "backends/verbs/open_memory_pool.h"
#include "backends/verbs/pmem_memory_pool.h"

namespace rcxl::verbs {
namespace {

class TempDir {
 public:
  TempDir() {
    std::string pattern = (std::filesystem::temp_directory_path() / "rcxl-pool-XXXXXX").string();
    path_ = mkdtemp(pattern.data());
  }
  ~TempDir() { std::filesystem::remove_all(path_); }
  std::string file(const std::string& name) const { return path_ + "/" + name; }

 private:
  std::string path_;
};

std::vector<std::byte> bytes_of(const std::string& text) {
  std::vector<std::byte> out(text.size());
  for (std::size_t i = 0; i < text.size(); ++i) out[i] = static_cast<std::byte>(text[i]);
  return out;
}

void expect_round_trip(runtime::MemoryPool& pool, std::uint64_t offset) {
  const auto data = bytes_of("remote cxl bytes");
  ASSERT_TRUE(pool.write(offset, data).ok());
  std::vector<std::byte> back(data.size());
  ASSERT_TRUE(pool.read(offset, back).ok());
  EXPECT_EQ(back, data);
  // The mapping is what verbs registers: the same bytes must be visible through it.
  ASSERT_NE(pool.mapped(), nullptr);
  EXPECT_EQ(std::memcmp(pool.mapped() + offset, data.data(), data.size()), 0);
}

void expect_bounds_checked(runtime::MemoryPool& pool) {
  std::vector<std::byte> two(2);
  EXPECT_EQ(pool.write(pool.size() - 1, two).code(), ErrorCode::kBadRange);
  EXPECT_EQ(pool.read(pool.size() + 1, std::span<std::byte>()).code(), ErrorCode::kBadRange);
  EXPECT_EQ(pool.read(UINT64_MAX, two).code(), ErrorCode::kBadRange);
  EXPECT_TRUE(pool.read(pool.size(), std::span<std::byte>()).ok());
}

TEST(MemoryPool, R7_AnonPoolRoundTripsAndChecksBounds) {
  auto spec = parse_memory_spec("anon:64K");
  ASSERT_TRUE(spec.ok());
  auto pool = open_memory_pool(*spec, {.populate_anon = true});
  ASSERT_TRUE(pool.ok()) << pool.status().ToString();
  EXPECT_EQ((*pool)->size(), 64u * 1024);
  EXPECT_EQ((*pool)->describe(), "anon 64 KiB");
  expect_round_trip(**pool, 64 * 1024 - 16);
  expect_bounds_checked(**pool);
  EXPECT_TRUE((*pool)->persist(0, 16).ok());
}

TEST(MemoryPool, R7_AnonPoolOfOddSizeKeepsThatSize) {
  auto pool = AnonMemoryPool::create(1000, false);
  ASSERT_TRUE(pool.ok());
  EXPECT_EQ((*pool)->size(), 1000u);
  expect_bounds_checked(**pool);
}

TEST(MemoryPool, R7_FilePoolCreatesTheFileThroughPmem2) {
  TempDir dir;
  auto spec = parse_memory_spec("file:" + dir.file("pool") + ":1M");
  ASSERT_TRUE(spec.ok());
  auto pool = open_memory_pool(*spec);
  ASSERT_TRUE(pool.ok()) << pool.status().ToString();
  EXPECT_EQ((*pool)->size(), 1u << 20);
  EXPECT_EQ((*pool)->describe(), "file " + dir.file("pool") + " 1 MiB");
  EXPECT_GE(std::filesystem::file_size(dir.file("pool")), 1u << 20);
  expect_round_trip(**pool, 4096);
  EXPECT_TRUE((*pool)->persist(4096, 16).ok());
  EXPECT_EQ((*pool)->persist((1u << 20) - 8, 16).code(), ErrorCode::kBadRange);
  expect_bounds_checked(**pool);
}

TEST(MemoryPool, R7_FilePoolKeepsBytesAcrossReopen) {
  TempDir dir;
  const auto data = bytes_of("persisted");
  {
    auto pool = PmemMemoryPool::open_file(dir.file("pool"), 8192);
    ASSERT_TRUE(pool.ok()) << pool.status().ToString();
    ASSERT_TRUE((*pool)->write(100, data).ok());
    ASSERT_TRUE((*pool)->persist(100, data.size()).ok());
  }
  auto pool = PmemMemoryPool::open_file(dir.file("pool"), 8192);
  ASSERT_TRUE(pool.ok()) << pool.status().ToString();
  std::vector<std::byte> back(data.size());
  ASSERT_TRUE((*pool)->read(100, back).ok());
  EXPECT_EQ(back, data);
}

TEST(MemoryPool, R7_FilePoolOfOddSizeMapsWholePages) {
  TempDir dir;
  auto pool = PmemMemoryPool::open_file(dir.file("odd"), 5000);
  ASSERT_TRUE(pool.ok()) << pool.status().ToString();
  EXPECT_EQ((*pool)->size(), 5000u);
  expect_round_trip(**pool, 5000 - 16);
}

TEST(MemoryPool, R7_FilePoolErrorsAreCoded) {
  TempDir dir;
  auto missing_dir = PmemMemoryPool::open_file(dir.file("no/such/dir"), 4096);
  ASSERT_FALSE(missing_dir.ok());
  EXPECT_EQ(missing_dir.status().code(), ErrorCode::kIoError);
  EXPECT_NE(missing_dir.status().message().find("no/such/dir"), std::string::npos);

  std::filesystem::create_directory(dir.file("a-directory"));
  auto directory = PmemMemoryPool::open_file(dir.file("a-directory"), 4096);
  ASSERT_FALSE(directory.ok());

  auto zero = PmemMemoryPool::open_file(dir.file("zero"), 0);
  ASSERT_FALSE(zero.ok());
  EXPECT_EQ(zero.status().code(), ErrorCode::kBadRequest);
}

// SPEC R7 (a refusal leaves nothing changed): 1 PiB cannot be allocated or
// mapped anywhere, and the failed open takes back what it did to the disk.
TEST(MemoryPool, R7_AFilePoolThatCannotBeGrownLeavesNoFileBehind) {
  TempDir dir;
  auto pool = PmemMemoryPool::open_file(dir.file("huge"), std::uint64_t{1} << 50);
  ASSERT_FALSE(pool.ok());
  EXPECT_NE(pool.status().message().find(dir.file("huge")), std::string::npos)
      << pool.status().ToString();
  EXPECT_FALSE(std::filesystem::exists(dir.file("huge")));
}

TEST(MemoryPool, R7_AnExistingFileThatCannotBeGrownKeepsItsSizeAndBytes) {
  TempDir dir;
  std::ofstream(dir.file("small")) << "kept";
  auto pool = PmemMemoryPool::open_file(dir.file("small"), std::uint64_t{1} << 50);
  ASSERT_FALSE(pool.ok());
  ASSERT_TRUE(std::filesystem::exists(dir.file("small")));
  EXPECT_EQ(std::filesystem::file_size(dir.file("small")), 4u);
}

// Two agents on one pool file would carve regions from the same bytes: the
// second open is refused while the first pool lives, and changes nothing.
TEST(MemoryPool, R7_APoolFileInUseIsRefusedUntilItsPoolIsGone) {
  TempDir dir;
  auto first = PmemMemoryPool::open_file(dir.file("pool"), 1 << 20);
  ASSERT_TRUE(first.ok()) << first.status().ToString();
  auto second = PmemMemoryPool::open_file(dir.file("pool"), 2 << 20);
  ASSERT_FALSE(second.ok());
  EXPECT_EQ(second.status().code(), ErrorCode::kUnavailable);
  EXPECT_NE(second.status().message().find("in use by another process"), std::string::npos)
      << second.status().ToString();
  EXPECT_EQ(std::filesystem::file_size(dir.file("pool")), 1u << 20);  // not grown
  first->reset();
  auto again = PmemMemoryPool::open_file(dir.file("pool"), 1 << 20);
  EXPECT_TRUE(again.ok()) << again.status().ToString();
}

// A size near 2^64 used to wrap to 0 when rounded up to whole pages, and the
// pool then claimed 2^64 bytes over a mapping of the existing file.
TEST(MemoryPool, R7_AFilePoolSizeThatWouldWrapIsRefused) {
  TempDir dir;
  {
    auto made = PmemMemoryPool::open_file(dir.file("pool"), 1 << 20);
    ASSERT_TRUE(made.ok()) << made.status().ToString();
  }
  for (std::uint64_t bytes :
       {std::numeric_limits<std::uint64_t>::max(), std::numeric_limits<std::uint64_t>::max() - 100,
        std::uint64_t{1} << 63}) {
    auto pool = PmemMemoryPool::open_file(dir.file("pool"), bytes);
    EXPECT_FALSE(pool.ok()) << bytes;
    EXPECT_EQ(std::filesystem::file_size(dir.file("pool")), 1u << 20);
  }
}

// An anon pool larger than the kernel will give says what to give instead.
TEST(MemoryPool, R7_AnAnonPoolTooBigForTheHostNamesTheFix) {
  auto pool = AnonMemoryPool::create(std::uint64_t{1} << 50, false);
  ASSERT_FALSE(pool.ok());
  EXPECT_EQ(pool.status().code(), ErrorCode::kNoSpace);
  EXPECT_NE(pool.status().message().find("smaller anon: size or a file:PATH:BYTES"),
            std::string::npos)
      << pool.status().ToString();
}

// The agent takes a file: pool's creation back if it then fails to start.
TEST(MemoryPool, R7_AnOpenedFilePoolsUndoRemovesOrShrinksUnlessKept) {
  TempDir dir;
  {
    PoolFileUndo undo;
    auto pool = PmemMemoryPool::open_file(dir.file("made"), 8192, &undo);
    ASSERT_TRUE(pool.ok()) << pool.status().ToString();
    pool->reset();
    EXPECT_TRUE(std::filesystem::exists(dir.file("made")));
  }
  EXPECT_FALSE(std::filesystem::exists(dir.file("made")));

  std::ofstream(dir.file("small")) << "kept";
  {
    PoolFileUndo undo;
    auto pool = PmemMemoryPool::open_file(dir.file("small"), 8192, &undo);
    ASSERT_TRUE(pool.ok()) << pool.status().ToString();
    EXPECT_GE(std::filesystem::file_size(dir.file("small")), 8192u);
  }
  EXPECT_EQ(std::filesystem::file_size(dir.file("small")), 4u);

  {
    PoolFileUndo undo;
    auto pool = PmemMemoryPool::open_file(dir.file("kept"), 8192, &undo);
    ASSERT_TRUE(pool.ok()) << pool.status().ToString();
    undo.keep();
  }
  EXPECT_GE(std::filesystem::file_size(dir.file("kept")), 8192u);
}

// A pool file sized with `truncate -s` is all holes: its blocks are allocated
// at open (docs/hardware.md), so a full disk fails the start, not a later
// touch; a file bigger than the pool keeps its size (review, session 26).
TEST(MemoryPool, R7_ASparsePoolFileGetsItsBlocksAtOpenAndIsNeverShrunk) {
  TempDir dir;
  {
    // Only where the file system allocates on request (not ZFS, not NFS).
    std::ofstream(dir.file("probe")).close();
    const int fd = ::open(dir.file("probe").c_str(), O_RDWR);
    ASSERT_GE(fd, 0);
    const int rc = posix_fallocate(fd, 0, 4096);
    ::close(fd);
    if (rc != 0) GTEST_SKIP() << "posix_fallocate is not supported under " << dir.file("");
  }
  std::ofstream(dir.file("sparse")).close();
  std::filesystem::resize_file(dir.file("sparse"), 1 << 20);
  std::ofstream(dir.file("big")).close();
  std::filesystem::resize_file(dir.file("big"), 2 << 20);
  PoolFileUndo undo;
  auto pool = PmemMemoryPool::open_file(dir.file("sparse"), 1 << 20, &undo);
  ASSERT_TRUE(pool.ok()) << pool.status().ToString();
  EXPECT_FALSE(undo.changed_the_file());  // its size was already right
  struct stat st {};
  ASSERT_EQ(stat(dir.file("sparse").c_str(), &st), 0);
  EXPECT_GE(static_cast<std::uint64_t>(st.st_blocks) * 512, 1u << 20);
  auto big = PmemMemoryPool::open_file(dir.file("big"), 1 << 20);
  ASSERT_TRUE(big.ok()) << big.status().ToString();
  EXPECT_EQ(std::filesystem::file_size(dir.file("big")), 2u << 20);
}

// The agent restores a state file's regions only into a pool file it did not
// create or grow (AgentConfig::pool_is_new).
TEST(MemoryPool, R6_1_AnOpenSaysWhetherItMadeOrGrewThePoolFile) {
  TempDir dir;
  {
    PoolFileUndo made;
    ASSERT_TRUE(PmemMemoryPool::open_file(dir.file("pool"), 8192, &made).ok());
    EXPECT_TRUE(made.changed_the_file());
    made.keep();
  }
  {
    PoolFileUndo again;
    ASSERT_TRUE(PmemMemoryPool::open_file(dir.file("pool"), 8192, &again).ok());
    EXPECT_FALSE(again.changed_the_file());
  }
  {
    PoolFileUndo grown;
    ASSERT_TRUE(PmemMemoryPool::open_file(dir.file("pool"), 16384, &grown).ok());
    EXPECT_TRUE(grown.changed_the_file());
  }
}

TEST(MemoryPool, R7_DaxPathThatIsMissingFails) {
  auto spec = parse_memory_spec("dax:/dev/rcxl-no-such-dax");
  ASSERT_TRUE(spec.ok());
  auto pool = open_memory_pool(*spec);
  ASSERT_FALSE(pool.ok());
  EXPECT_EQ(pool.status().code(), ErrorCode::kIoError);
}

}  // namespace
}  // namespace rcxl::verbs
