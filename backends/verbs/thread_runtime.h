// The real (OS) Runtime behind core's ports: a steady clock, one OS thread per
// strand, TCP, OpenSSL randomness, spdlog, real files. The sim runtime's twin.
#pragma once

#include <chrono>
#include <memory>
#include <string>
#include <string_view>

#include "backends/verbs/posix_file_system.h"
#include "backends/verbs/spdlog_sink.h"
#include "backends/verbs/tcp_transport.h"
#include "core/runtime/runtime.h"

namespace rcxl::verbs {

// Time since the runtime was created, from std::chrono::steady_clock.
class SteadyClock final : public runtime::Clock {
 public:
  runtime::Instant now() const override {
    return std::chrono::duration_cast<runtime::Instant>(std::chrono::steady_clock::now() - start_);
  }

 private:
  std::chrono::steady_clock::time_point start_ = std::chrono::steady_clock::now();
};

class ThreadRuntime final : public runtime::Runtime {
 public:
  struct Options {
    runtime::LogLevel log_level = runtime::LogLevel::kInfo;
  };

  ThreadRuntime() : ThreadRuntime(Options{}) {}
  explicit ThreadRuntime(Options options);
  // Ends every TCP connection. Strands made here are independent and may outlive it.
  ~ThreadRuntime() override;

  runtime::Clock& clock() override { return clock_; }
  std::unique_ptr<runtime::Strand> make_strand(std::string name) override;
  runtime::Transport& transport() override { return *transport_; }
  // Streams are not reproducible here: every one draws from the OS's CSPRNG.
  std::unique_ptr<runtime::RandomSource> random(std::string_view stream) override;
  runtime::LogSink& log_sink() override { return log_; }
  runtime::FileSystem& file_system() override { return files_; }

  void set_log_level(runtime::LogLevel level) { log_.set_level(level); }

 private:
  SteadyClock clock_;
  SpdlogSink log_;
  PosixFileSystem files_;
  std::unique_ptr<TcpTransport> transport_;
};

}  // namespace rcxl::verbs
