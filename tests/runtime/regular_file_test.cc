// read_regular_file: the one reader of every file a binary takes as input
// (SPEC R7: bad input never crashes or hangs; a FIFO must not block it).
#include "backends/verbs/regular_file.h"

#include <gtest/gtest.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <string>

#include "tests/scratch_dir.h"

namespace rcxl::verbs {
namespace {

using Problem = RegularFileRead::Problem;

class RegularFile : public ::testing::Test {
 protected:
  void SetUp() override { dir_ = rcxl::testing::fresh_dir("regular_file_test", "files"); }
  void TearDown() override { std::filesystem::remove_all(dir_); }
  std::string write(const std::string& name, const std::string& bytes) {
    const std::string path = (dir_ / name).string();
    std::ofstream(path, std::ios::binary) << bytes;
    return path;
  }
  std::filesystem::path dir_;
};

TEST_F(RegularFile, R7_ReadsAFileOfUpToTheLimitWhole) {
  const auto read = read_regular_file(write("four", "abcd"), 4);
  ASSERT_TRUE(read.ok());
  EXPECT_EQ(read.contents, "abcd");
  EXPECT_TRUE(S_ISREG(read.mode));
  const auto empty = read_regular_file(write("empty", ""), 4);
  ASSERT_TRUE(empty.ok());
  EXPECT_EQ(empty.contents, "");
}

TEST_F(RegularFile, R7_AFileOverTheLimitIsRefusedWithItsSize) {
  const auto read = read_regular_file(write("five", "abcde"), 4);
  EXPECT_EQ(read.problem, Problem::kTooLarge);
  EXPECT_EQ(read.size, 5u);
  EXPECT_EQ(read.contents, "");
}

TEST_F(RegularFile, R7_MissingDirectoryFifoAndDeviceAreToldApart) {
  EXPECT_EQ(read_regular_file((dir_ / "none").string(), 4).problem, Problem::kNotFound);
  EXPECT_EQ(read_regular_file(dir_.string(), 4).problem, Problem::kDirectory);
  const std::string fifo = (dir_ / "fifo").string();
  ASSERT_EQ(::mkfifo(fifo.c_str(), 0600), 0);
  EXPECT_EQ(read_regular_file(fifo, 4).problem, Problem::kNotRegular);  // returns: no writer needed
  EXPECT_EQ(read_regular_file("/dev/zero", 4).problem, Problem::kNotRegular);
  // A socket cannot even be opened (ENXIO): told by what it is, not by that.
  const std::string socket_path = (dir_ / "sock").string();
  const int fd = ::socket(AF_UNIX, SOCK_STREAM, 0);
  ASSERT_GE(fd, 0);
  sockaddr_un address{};
  address.sun_family = AF_UNIX;
  socket_path.copy(address.sun_path, sizeof address.sun_path - 1);
  ASSERT_EQ(::bind(fd, reinterpret_cast<sockaddr*>(&address), sizeof address), 0);
  EXPECT_EQ(read_regular_file(socket_path, 4).problem, Problem::kNotRegular);
  ::close(fd);
  // A part of the path is a file: no such file either.
  EXPECT_EQ(read_regular_file((dir_ / "fifo" / "x").string(), 4).problem, Problem::kNotFound);
}

// A /proc file says size 0 and has bytes: it is read to its end, within the limit.
TEST_F(RegularFile, R7_AFileWhoseSizeSaysZeroIsReadToItsEndWithinTheLimit) {
  const auto status = read_regular_file("/proc/self/status", 1 << 20);
  ASSERT_TRUE(status.ok());
  EXPECT_NE(status.contents.find("Name:"), std::string::npos);
  EXPECT_EQ(read_regular_file("/proc/self/status", 8).problem, Problem::kTooLarge);
}

}  // namespace
}  // namespace rcxl::verbs
