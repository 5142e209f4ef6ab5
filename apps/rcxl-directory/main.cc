// rcxl-directory: the key -> location registry of one application group
// (docs/directory.md) on the thread runtime.
#include <CLI/CLI.hpp>
#include <csignal>
#include <fstream>
#include <future>
#include <iostream>
#include <map>
#include <sstream>
#include <string>
#include <vector>

#include "apps/cli_checks.h"
#include "apps/crash_guard.h"
#include "apps/listen_address.h"
#include "apps/secret_file.h"
#include "backends/verbs/thread_runtime.h"
#include "core/directory/directory_server.h"
#include "core/protocol/auth.h"

namespace {

using rcxl::Result;

struct Flags {
  std::vector<std::string> listen;  // one; a vector so that two get a clear refusal
  std::string auth_secret_file;
  std::string auth;
  std::uint64_t max_keys = 1u << 20;
  double lease_ttl_s = 10;
  double hello_timeout_s = 10;
  std::uint32_t max_connections = 0;
  std::uint32_t max_frame_bytes = 1u << 20;
  std::string log_level = "info";
};

// Exit codes (--help, docs/directory.md): bad flags and setup errors 1.
constexpr int kExitError = 1;

int fail(const std::string& message) {
  // One line whatever the message echoes (a flag value with a newline or an
  // escape sequence, a 100 KB config).
  std::cerr << "rcxl-directory: " << rcxl::runtime::printable(message, rcxl::apps::kMaxMessageChars)
            << std::endl;
  return kExitError;
}

// The shortest lease: a lease that ends before a reader's READs can land
// would let eviction reuse the entry under them.
constexpr double kMinLeaseTtlSeconds = 0.001;

// The shortest --hello-timeout-s but 0 (never): less would round to 0 ns.
constexpr double kMinHelloTimeoutSeconds = 0.001;

// The smallest --max-frame-bytes: a hello, its challenge answer and a request
// for a few keys take well under this; below it even the hello is a bad_frame.
constexpr std::uint32_t kMinMaxFrameBytes = 4096;

}  // namespace

static int run_main(int argc, char** argv) {
  CLI::App app{"rcxl-directory: key -> location registry of one application group"};
  rcxl::apps::add_version_flag(app, "rcxl-directory", RCXL_VERSION);
  app.footer(
      "Needs --listen and one of --auth-secret-file PATH or --auth none.\n"
      "Example: rcxl-directory --listen 0.0.0.0:7100 --auth-secret-file /etc/rcxl/secret\n"
      "SIGUSR1 prints the stats op's answer (keys, leases, evictions) on stderr.\n"
      "Exit codes: 0 after SIGTERM/SIGINT/SIGHUP, 1 bad flags or a setup error (message on "
      "stderr).");
  Flags f;
  app.add_option("--listen", f.listen, "HOST:PORT to listen on (IPv6 as [::1]:PORT)")
      ->required()
      ->type_name("HOST:PORT")
      ->expected(1)
      ->multi_option_policy(CLI::MultiOptionPolicy::TakeAll);
  app.add_option("--auth-secret-file,--secret-file", f.auth_secret_file,
                 "file holding the shared secret (this or --auth none is required)")
      ->check(rcxl::apps::NonEmptyPath());
  app.add_option("--auth", f.auth,
                 "'none': no authentication, loopback listener only (this or "
                 "--auth-secret-file is required)");
  app.add_option("--max-keys", f.max_keys,
                 "keys kept before LRU eviction; also pages of keys that left kept for reclaim")
      ->capture_default_str()
      ->transform(rcxl::apps::WholeNumberAtLeast<std::uint64_t>(1));
  app.add_option("--hello-timeout-s", f.hello_timeout_s,
                 "seconds a connection may take to authenticate before it is closed (0 = never)")
      ->capture_default_str()
      ->check(rcxl::apps::SecondsOffOrAtLeast(kMinHelloTimeoutSeconds));
  app.add_option("--max-connections", f.max_connections,
                 "connections past this are closed at once (0 = no limit)")
      ->capture_default_str()
      ->transform(rcxl::apps::WholeNumberAtLeast<std::uint32_t>(0));
  app.add_option("--lease-ttl-s", f.lease_ttl_s, "seconds a lookup's lease lasts unreleased")
      ->capture_default_str()
      ->check(rcxl::apps::SecondsAtLeast(kMinLeaseTtlSeconds));
  app.add_option("--max-frame-bytes", f.max_frame_bytes, "largest control frame")
      ->capture_default_str()
      ->transform(rcxl::apps::WholeNumberAtLeast<std::uint32_t>(kMinMaxFrameBytes));
  app.add_option("--log-level", f.log_level, "trace|debug|info|warn|error")->capture_default_str();
  if (auto code = rcxl::apps::parse_command_line(app, argc, argv, "rcxl-directory", kExitError)) {
    return *code;
  }

  auto level = rcxl::runtime::parse_log_level(f.log_level);
  if (!level.ok()) return fail("--log-level: " + level.status().message());
  if (f.listen.size() != 1) {
    return fail("--listen is given " + std::to_string(f.listen.size()) +
                " times; the directory serves one address (give --listen once)");
  }
  auto address = rcxl::runtime::Address::Parse(f.listen.front());
  if (!address.ok()) return fail("--listen: " + address.status().message());
  if (rcxl::Status st = rcxl::apps::check_listen_addresses("--listen", {*address},
                                                           /*loopback_only=*/f.auth == "none");
      !st.ok()) {
    return fail(st.message());
  }

  rcxl::directory::DirectoryServerOptions options;
  options.directory.max_keys = f.max_keys;
  // Pages kept for reclaim are keys that left: as many as it may hold.
  options.directory.max_reclaimable = f.max_keys;
  options.directory.lease_ttl = rcxl::runtime::from_seconds(f.lease_ttl_s);
  options.hello_timeout = rcxl::runtime::from_seconds(f.hello_timeout_s);
  options.max_frame_bytes = f.max_frame_bytes;
  options.max_connections = f.max_connections;
  if (f.auth == "none") {
    if (!f.auth_secret_file.empty()) {
      return fail("give --auth none or --auth-secret-file, not both");
    }
    if (!address->is_loopback()) {
      return fail("--auth none needs a loopback --listen, not " + address->ToString() +
                  "; listen on 127.0.0.1 or [::1], or give --auth-secret-file PATH");
    }
  } else if (!f.auth.empty()) {
    return fail("--auth takes only 'none', not '" + f.auth + "'");
  } else if (f.auth_secret_file.empty()) {
    return fail("--auth-secret-file PATH or --auth none is required");
  } else {
    // A regular file of at most 4 KiB: a FIFO would block, /dev/zero never ends.
    auto secret = rcxl::apps::read_secret_file("--auth-secret-file", f.auth_secret_file);
    if (!secret.ok()) return fail(secret.status().message());
    if (!secret->warning.empty()) {
      std::cerr << "rcxl-directory: warning: "
                << rcxl::runtime::printable(secret->warning, rcxl::apps::kMaxMessageChars)
                << std::endl;
    }
    options.secret = rcxl::protocol::secret_from_file_contents(secret->contents);
    if (options.secret->empty()) {
      return fail("--auth-secret-file: " + f.auth_secret_file + " holds an empty secret" +
                  std::string(rcxl::apps::kWriteASecret));
    }
  }

  // Signals are taken by sigwait below: block them before any thread starts.
  sigset_t signals;
  sigemptyset(&signals);
  sigaddset(&signals, SIGTERM);
  sigaddset(&signals, SIGINT);
  // A closed terminal's hangup stops cleanly too, unless ignored (nohup).
  if (struct sigaction hup{}; sigaction(SIGHUP, nullptr, &hup) == 0 && hup.sa_handler != SIG_IGN) {
    sigaddset(&signals, SIGHUP);
  }
  // As for the agent (its metrics): the stats op's answer on stderr. Its
  // default would end the process, and every key is only in memory.
  sigaddset(&signals, SIGUSR1);
  pthread_sigmask(SIG_BLOCK, &signals, nullptr);
  // A log reader that goes away (a closed pipe) must not end the service.
  std::signal(SIGPIPE, SIG_IGN);

  rcxl::verbs::ThreadRuntime rt(rcxl::verbs::ThreadRuntime::Options{*level});
  auto strand = rt.make_strand("directory");
  rcxl::directory::DirectoryServer server(rt, *strand, options);
  // The server is confined to its strand: start and stop run there.
  std::promise<Result<rcxl::runtime::Address>> started;
  strand->post([&] { started.set_value(server.start(*address)); });
  auto bound = started.get_future().get();
  if (!bound.ok()) return fail("--listen: " + bound.status().message());
  std::cout << "rcxl-directory listening on " << bound->ToString() << std::endl;

  for (;;) {
    int signal = 0;
    if (sigwait(&signals, &signal) != 0) continue;
    if (signal != SIGUSR1) break;
    std::promise<std::string> stats;
    strand->post([&] { stats.set_value(server.stats().dump()); });
    std::cerr << "rcxl-directory stats " << stats.get_future().get() << std::endl;
  }
  std::promise<void> stopped;
  strand->post([&] {
    server.stop();
    stopped.set_value();
  });
  stopped.get_future().wait();
  return 0;
}

int main(int argc, char** argv) {
  return rcxl::apps::run_guarded("rcxl-directory", 1, [&] { return run_main(argc, argv); });
}
