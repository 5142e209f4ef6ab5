// rcxl-kv's helpers: a load's value file write is checked through its close;
// a --between-rounds command's end is said in words.
#include <fcntl.h>
#include <gtest/gtest.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <csignal>
#include <cstddef>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>
#include <thread>
#include <vector>

#include "apps/rcxl-kv/command_status.h"
#include "apps/rcxl-kv/value_file.h"
#include "tests/scratch_dir.h"

namespace rcxl::kv {
namespace {

// SPEC R1.2 (rcxl-kv load writes each hit to its file): a small value waits
// in the stream's buffer until the close, so a full disk showed only there,
// unchecked: the load printed "N bytes -> path" and exited 0.
TEST(KvValueFile, R1_2_AWriteThatFailsAtItsCloseIsAnError) {
  const std::vector<std::byte> value(100, std::byte{7});
  Status full = write_value_file("/dev/full", value);
  ASSERT_FALSE(full.ok());
  EXPECT_EQ(full.code(), ErrorCode::kIoError);
  EXPECT_NE(full.message().find("cannot write /dev/full: No space left on device"),
            std::string::npos)
      << full.message();
  EXPECT_NE(full.message().find("full or read-only"), std::string::npos) << full.message();
}

TEST(KvValueFile, R1_2_AValueIsWrittenWholeAndAMissingDirectoryIsNamed) {
  const auto dir = rcxl::testing::fresh_dir("kv_value_file", "whole");
  const std::vector<std::byte> value(5000, std::byte{0x5a});
  const std::string path = (dir / "k").string();
  ASSERT_TRUE(write_value_file(path, value).ok());
  std::ifstream in(path, std::ios::binary);
  const std::string back((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  EXPECT_EQ(back, std::string(5000, '\x5a'));
  Status missing = write_value_file((dir / "no" / "k").string(), value);
  ASSERT_FALSE(missing.ok());
  EXPECT_NE(missing.message().find("No such file or directory"), std::string::npos)
      << missing.message();
  EXPECT_EQ(missing.message().find("full or read-only"), std::string::npos) << missing.message();
  std::filesystem::remove_all(dir);
}

// A value is written aside and renamed into place: a symlink at its name was
// followed (the load wrote through it, anywhere), and a failed write left half
// a value where an older whole one had been (review, session 26).
TEST(KvValueFile, R1_2_AValueReplacesItsFileWholeAndNeverFollowsASymlink) {
  const auto dir = rcxl::testing::fresh_dir("kv_value_file", "rename");
  std::ofstream(dir / "victim") << "keep";
  std::filesystem::create_symlink(dir / "victim", dir / "k");
  const std::vector<std::byte> value(10, std::byte{'v'});
  ASSERT_TRUE(write_value_file((dir / "k").string(), value).ok());
  EXPECT_TRUE(std::filesystem::is_regular_file(std::filesystem::symlink_status(dir / "k")));
  std::ifstream victim(dir / "victim");
  std::string kept;
  std::getline(victim, kept);
  EXPECT_EQ(kept, "keep");
  EXPECT_EQ(std::filesystem::file_size(dir / "k"), 10u);
  // A miss removes an older file of the key, never a FIFO or a directory.
  EXPECT_TRUE(remove_stale_value_file((dir / "k").string()));
  EXPECT_FALSE(std::filesystem::exists(dir / "k"));
  EXPECT_FALSE(remove_stale_value_file((dir / "k").string()));
  ASSERT_EQ(mkfifo((dir / "fifo").c_str(), 0600), 0);
  EXPECT_FALSE(remove_stale_value_file((dir / "fifo").string()));
  EXPECT_TRUE(std::filesystem::exists(dir / "fifo"));
  // A key name of NAME_MAX bytes: its file is written under a short temporary name.
  const std::string longest(255, 'n');
  EXPECT_TRUE(write_value_file((dir / longest).string(), value).ok());
  EXPECT_EQ(std::filesystem::file_size(dir / longest), 10u);
  for (const auto& entry : std::filesystem::directory_iterator(dir)) {
    EXPECT_EQ(entry.path().filename().string().rfind(".rcxl-kv-", 0), std::string::npos)
        << "a temporary file is left: " << entry.path();
  }
  std::filesystem::remove_all(dir);
}

// A FIFO at --out/KEY with no reader is refused at once; before, the load
// blocked in open() forever (--timeout-s covers only the calls). With a
// reader it is written in place (session 27 review).
TEST(KvValueFile, R1_2_AFifoWithNoReaderIsRefusedNotWaitedOn) {
  const auto dir = rcxl::testing::fresh_dir("kv_value_file", "fifo");
  const std::string fifo = (dir / "k").string();
  ASSERT_EQ(mkfifo(fifo.c_str(), 0600), 0);
  const std::vector<std::byte> value(10, std::byte{'f'});
  // Should the write block, a reader comes after 10 s and the check below fails.
  std::thread rescue([&] {
    std::this_thread::sleep_for(std::chrono::seconds(10));
    const int fd = ::open(fifo.c_str(), O_RDONLY | O_NONBLOCK);
    if (fd >= 0) ::close(fd);
  });
  rescue.detach();
  Status alone = write_value_file(fifo, value);
  ASSERT_FALSE(alone.ok());
  EXPECT_NE(alone.message().find("a FIFO with no reader"), std::string::npos) << alone.message();
  const int reader = ::open(fifo.c_str(), O_RDONLY | O_NONBLOCK);
  ASSERT_GE(reader, 0);
  ASSERT_TRUE(write_value_file(fifo, value).ok());
  char back[16] = {};
  EXPECT_EQ(::read(reader, back, sizeof back), 10);
  EXPECT_EQ(std::string(back, 10), std::string(10, 'f'));
  ::close(reader);
  // A socket there also opens with ENXIO, but no reader would help it.
  const std::string socket_path = (dir / "s").string();
  const int sock = ::socket(AF_UNIX, SOCK_STREAM, 0);
  ASSERT_GE(sock, 0);
  sockaddr_un addr{};
  addr.sun_family = AF_UNIX;
  ASSERT_LT(socket_path.size(), sizeof addr.sun_path);
  std::memcpy(addr.sun_path, socket_path.c_str(), socket_path.size() + 1);
  ASSERT_EQ(::bind(sock, reinterpret_cast<sockaddr*>(&addr), sizeof addr), 0);
  Status on_socket = write_value_file(socket_path, value);
  ::close(sock);
  ASSERT_FALSE(on_socket.ok());
  EXPECT_EQ(on_socket.message().find("FIFO"), std::string::npos) << on_socket.message();
  std::filesystem::remove_all(dir);
}

// A signal while a value is written removes its temporary file and ends the
// process as the signal does: a hidden partial .rcxl-kv-* file was left.
TEST(KvValueFile, R1_2_ASignalMidWriteLeavesNoPartialFile) {
  const auto dir = rcxl::testing::fresh_dir("kv_value_file", "signal");
  const std::string temp = (dir / ".rcxl-kv-partial").string();
  const pid_t child = ::fork();
  ASSERT_GE(child, 0);
  if (child == 0) {
    std::ofstream(temp) << "half a value";
    std::memcpy(detail::interrupted_temp, temp.c_str(), temp.size() + 1);
    detail::temp_in_use = 1;
    remove_partial_values_on_signals();
    std::raise(SIGINT);
    std::_Exit(0);  // not reached: the signal ends it
  }
  int status = 0;
  ASSERT_EQ(::waitpid(child, &status, 0), child);
  EXPECT_TRUE(WIFSIGNALED(status) && WTERMSIG(status) == SIGINT) << status;
  EXPECT_FALSE(std::filesystem::exists(temp));
  std::filesystem::remove_all(dir);
}

// rcxl-kv bench --between-rounds: std::system's wait status said "exited 256"
// for a command that exited 1.
TEST(KvCommandStatus, R1_2_TheBetweenRoundsCommandsEndIsSaidInWords) {
  EXPECT_EQ(describe_command_status(std::system("exit 1")), "exited with status 1");
  EXPECT_EQ(describe_command_status(std::system("kill -9 $$")), "was killed by signal 9");
  EXPECT_EQ(describe_command_status(std::system("no-such-command-rcxl 2>/dev/null")),
            "exited with status 127 (command not found?)");
  EXPECT_EQ(describe_command_status(-1), "could not be started (no shell)");
}

}  // namespace
}  // namespace rcxl::kv
