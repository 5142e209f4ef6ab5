// ThreadRuntime's smaller ports: clock, OS randomness, spdlog sink, real files.
#include "backends/verbs/thread_runtime.h"

#include <fcntl.h>
#include <gtest/gtest.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <unistd.h>

#include <csignal>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <future>
#include <set>

#include "backends/verbs/posix_file_system.h"
#include "tests/runtime/blocking_wait.h"

namespace rcxl::verbs {
namespace {

using runtime::LogLevel;

// A fresh directory under the system temp dir, removed afterwards.
class TempDir {
 public:
  TempDir() {
    std::string pattern = (std::filesystem::temp_directory_path() / "rcxl-rt-XXXXXX").string();
    path_ = mkdtemp(pattern.data());
  }
  ~TempDir() { std::filesystem::remove_all(path_); }
  std::string file(const std::string& name) const { return (path_ / name).string(); }

 private:
  std::filesystem::path path_;
};

TEST(ThreadRuntime, ClockStartsNearZeroAndNeverGoesBack) {
  ThreadRuntime rt;
  const auto first = rt.clock().now();
  EXPECT_GE(first.count(), 0);
  EXPECT_LT(first, std::chrono::minutes(1));  // relative to the runtime, not the epoch
  auto previous = first;
  for (int i = 0; i < 1000; ++i) {
    const auto now = rt.clock().now();
    EXPECT_GE(now, previous);
    previous = now;
  }
}

TEST(ThreadRuntime, StrandsAreOsThreads) {
  ThreadRuntime rt;
  auto strand = rt.make_strand("worker");
  EXPECT_EQ(strand->name(), "worker");
  bool here = false;
  testing::run_on(*strand, [&] { here = strand->running_here(); });
  EXPECT_TRUE(here);
  EXPECT_FALSE(strand->running_here());
}

TEST(ThreadRuntime, RandomHandlesDoNotRepeatAcrossStreams) {
  ThreadRuntime rt;
  auto a = rt.random("handles");
  auto b = rt.random("handles");  // same name, still independent draws
  std::set<std::string> seen;
  for (int i = 0; i < 1000; ++i) {
    EXPECT_TRUE(seen.insert(a->next_hex(128)).second);
    EXPECT_TRUE(seen.insert(b->next_hex(128)).second);
  }
  EXPECT_EQ(a->next_hex(256).size(), 64u);
}

TEST(ThreadRuntime, LogLevelFiltersLines) {
  ThreadRuntime rt(ThreadRuntime::Options{LogLevel::kWarn});
  EXPECT_FALSE(rt.log_sink().enabled(LogLevel::kInfo));
  EXPECT_TRUE(rt.log_sink().enabled(LogLevel::kError));
  rt.set_log_level(LogLevel::kDebug);
  EXPECT_TRUE(rt.log_sink().enabled(LogLevel::kDebug));
  EXPECT_FALSE(rt.log_sink().enabled(LogLevel::kTrace));
  rt.log_sink().log(LogLevel::kDebug, "test", "a line on stderr");
}

TEST(ThreadRuntime, MissingFileIsNotFound) {
  ThreadRuntime rt;
  TempDir dir;
  auto r = rt.file_system().read_file(dir.file("absent"));
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), ErrorCode::kNotFound);
}

TEST(ThreadRuntime, UnreadableFileIsAnIoError) {
  ThreadRuntime rt;
  TempDir dir;
  const std::string directory = dir.file("a-directory");
  ASSERT_EQ(mkdir(directory.c_str(), 0700), 0);
  auto r = rt.file_system().read_file(directory);  // EISDIR: exists, cannot be read
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), ErrorCode::kIoError);
}

// A FIFO would block the reader until a writer came (the agent's start, with
// its stop signals held back): it is refused at once, never waited on.
// (/dev/zero, which never ends, is AgentProcess's case.)
TEST(ThreadRuntime, R7_AFileThatIsNotRegularIsRefusedAtOnce) {
  ThreadRuntime rt;
  TempDir dir;
  const std::string fifo = dir.file("fifo");
  ASSERT_EQ(mkfifo(fifo.c_str(), 0600), 0);
  auto reading = std::async(std::launch::async, [&] { return rt.file_system().read_file(fifo); });
  if (reading.wait_for(std::chrono::seconds(5)) != std::future_status::ready) {
    ADD_FAILURE() << "read_file waits on a FIFO for a writer";
    close(open(fifo.c_str(), O_WRONLY));  // a writer comes and goes: the read ends
  }
  auto r = reading.get();
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), ErrorCode::kIoError);
  EXPECT_NE(r.status().message().find("not a regular file"), std::string::npos)
      << r.status().message();
}

TEST(ThreadRuntime, WriteReplacesAndAppendAdds) {
  ThreadRuntime rt;
  TempDir dir;
  const std::string path = dir.file("generation");
  ASSERT_TRUE(rt.file_system().write_file(path, "first contents").ok());
  ASSERT_TRUE(rt.file_system().write_file(path, "second").ok());
  EXPECT_EQ(rt.file_system().read_file(path).value(), "second");
  ASSERT_TRUE(rt.file_system().append_file(path, "\nline 1").ok());
  ASSERT_TRUE(rt.file_system().append_file(path, "\nline 2").ok());
  EXPECT_EQ(rt.file_system().read_file(path).value(), "second\nline 1\nline 2");
  EXPECT_FALSE(std::filesystem::exists(path + ".tmp"));
}

// The agent's --state-file holds every region's handles: only its owner reads it.
TEST(ThreadRuntime, R7_AWrittenFileIsReadableByItsOwnerOnly) {
  ThreadRuntime rt;
  TempDir dir;
  const std::string path = dir.file("state.json");
  {
    std::ofstream left_behind(path + ".tmp");  // 0644, as a crash may leave one
  }
  ASSERT_TRUE(rt.file_system().write_file(path, "{}").ok());
  const auto perms = std::filesystem::status(path).permissions();
  EXPECT_EQ(perms & (std::filesystem::perms::group_all | std::filesystem::perms::others_all),
            std::filesystem::perms::none);
}

// An append that the disk cut short (here the file-size limit, as a full disk
// would) left part of a line, which the next line joined (session-33
// review): it is taken back, and the next append starts a clean line.
TEST(ThreadRuntime, R2_5_AnAppendCutShortLeavesNothingOfItself) {
  TempDir dir;
  const std::string path = dir.file("log");
  ThreadRuntime rt;
  ASSERT_TRUE(rt.file_system().append_file(path, "line 1\n").ok());
  // In a child: the limit would hold for the whole test program. The child
  // uses a file system of its own, no runtime thread's state.
  auto cut_short = [&] {
    std::signal(SIGXFSZ, SIG_IGN);
    const rlimit limit{10, 10};  // 3 bytes of the next line fit
    setrlimit(RLIMIT_FSIZE, &limit);
    PosixFileSystem files;
    const bool failed = !files.append_file(path, "line 2 is long\n").ok();
    std::_Exit(failed && files.read_file(path).value() == "line 1\n" ? 0 : 1);
  };
  EXPECT_EXIT(cut_short(), ::testing::ExitedWithCode(0), "");
  ASSERT_TRUE(rt.file_system().append_file(path, "line 3\n").ok());
  EXPECT_EQ(rt.file_system().read_file(path).value(), "line 1\nline 3\n");
}

TEST(ThreadRuntime, AppendCreatesTheFile) {
  ThreadRuntime rt;
  TempDir dir;
  const std::string path = dir.file("log");
  ASSERT_TRUE(rt.file_system().append_file(path, "x").ok());
  EXPECT_EQ(rt.file_system().read_file(path).value(), "x");
}

// A FIFO to append to blocked open() until a reader came: an agent whose
// recording log was one hung at start (session 30 review). Refused now, with
// or without a reader, and so is a device.
TEST(ThreadRuntime, R8_AppendRefusesWhatIsNotARegularFileWithoutWaiting) {
  ThreadRuntime rt;
  TempDir dir;
  const std::string fifo = dir.file("fifo");
  ASSERT_EQ(::mkfifo(fifo.c_str(), 0600), 0);
  auto appended =
      std::async(std::launch::async, [&] { return rt.file_system().append_file(fifo, "x"); });
  if (appended.wait_for(std::chrono::seconds(10)) != std::future_status::ready) {
    const int unblock = ::open(fifo.c_str(), O_RDONLY | O_NONBLOCK);  // lets that open return
    appended.wait();
    ::close(unblock);
    FAIL() << "append_file waits for a reader of the FIFO";
  }
  const Status no_reader = appended.get();
  EXPECT_EQ(no_reader.code(), ErrorCode::kIoError);
  EXPECT_NE(no_reader.message().find("not a regular file"), std::string::npos)
      << no_reader.message();
  const int reader = ::open(fifo.c_str(), O_RDONLY | O_NONBLOCK);
  ASSERT_GE(reader, 0);
  const Status with_reader = rt.file_system().append_file(fifo, "x");
  ::close(reader);
  EXPECT_EQ(with_reader.code(), ErrorCode::kIoError);
  EXPECT_NE(with_reader.message().find("not a regular file"), std::string::npos)
      << with_reader.message();
  EXPECT_EQ(rt.file_system().append_file("/dev/null", "x").code(), ErrorCode::kIoError);
}

TEST(ThreadRuntime, WritesIntoAMissingDirectoryAreIoErrors) {
  ThreadRuntime rt;
  TempDir dir;
  const std::string path = dir.file("no-such-dir/file");
  EXPECT_EQ(rt.file_system().write_file(path, "x").code(), ErrorCode::kIoError);
  EXPECT_EQ(rt.file_system().append_file(path, "x").code(), ErrorCode::kIoError);
}

}  // namespace
}  // namespace rcxl::verbs
