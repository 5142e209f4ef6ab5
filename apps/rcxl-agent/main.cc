// rcxl-agent: the memory-node agent (SPEC R1–R7) on the thread runtime.
#include <CLI/CLI.hpp>
#include <algorithm>
#include <atomic>
#include <chrono>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <map>
#include <optional>
#include <sstream>
#include <thread>

#include "apps/cli_checks.h"
#include "apps/crash_guard.h"
#include "apps/listen_address.h"
#include "apps/rcxl-agent/agent_flag_checks.h"
#include "apps/rcxl-agent/none_nic.h"
#include "apps/rcxl-agent/state_file_lock.h"
#include "apps/secret_file.h"
#include "backends/verbs/open_memory_pool.h"
#include "backends/verbs/plugin_loader.h"
#include "backends/verbs/posix_file_system.h"
#include "backends/verbs/thread_runtime.h"
#include "backends/verbs/verbs_nic.h"
#include "core/agent/agent.h"
#include "core/extension/extension_registry.h"
#include "core/protocol/auth.h"

namespace {

// How long a clean stop may take (packaging/rcxl-agent.service promises 5 s).
constexpr std::chrono::seconds kStopLimit{5};
constexpr std::chrono::milliseconds kSameStop{1000};  // a signal this soon after: the same stop

using rcxl::ErrorCode;
using rcxl::Result;
using rcxl::Status;

struct Flags {
  std::vector<std::string> listen;
  std::string auth_secret_file;
  std::string auth;
  std::string memory;
  std::string nic = "none";
  std::string rdma_listen;  // verbs only: IP[:PORT] of the rdma_cm listener
  std::string region_extension = "none";
  std::string region_extension_config;
  std::vector<std::string> extension_path;
  std::uint32_t max_hint_requests = 4096;
  double generation_poll_s = 0.1;
  double generation_grace_s = 2;
  double hello_timeout_s = 10;
  double sweep_interval_s = 1;
  std::uint32_t max_frame_bytes = 1u << 20;
  std::uint32_t max_connections = 0;
  std::string log_level = "info";
  std::string boot_id;
  std::string state_file;
  std::string reader_rkeys = "read-only";
  std::string rdma_auth = "none";
};

// Exit codes (--help, docs/agent.md): bad flags and setup errors 1.
constexpr int kExitError = 1;

Status bad(const std::string& message) {
  return rcxl::Error(ErrorCode::kBadRequest, message);
}

int fail(const std::string& message) {
  // One line whatever the message echoes (a flag value with a newline or an
  // escape sequence, a 100 KB config).
  std::cerr << "rcxl-agent: " << rcxl::runtime::printable(message, rcxl::apps::kMaxMessageChars)
            << std::endl;
  return kExitError;
}

// The ground's own file reader (kNotFound / kIoError with the path).
Result<std::string> read_text(const std::string& path) {
  return rcxl::verbs::PosixFileSystem().read_file(path);
}

Result<std::unique_ptr<rcxl::runtime::Nic>> open_nic(const std::string& spec,
                                                     const std::string& rdma_listen) {
  if (spec == "none") return std::unique_ptr<rcxl::runtime::Nic>(new rcxl::apps::NoneNic());
  if (spec.rfind("verbs:", 0) == 0) {
    rcxl::verbs::VerbsNicOptions options;
    options.device = spec.substr(6);
    options.listen_address = rdma_listen;
    auto nic = rcxl::verbs::VerbsNic::open(options);
    if (!nic.ok()) return nic.status();
    return std::unique_ptr<rcxl::runtime::Nic>(std::move(nic).value());
  }
  return rcxl::Error(ErrorCode::kBadRequest, "give none or verbs:DEVICE");
}

void add_flags(CLI::App& app, Flags& f) {
  namespace limits = rcxl::apps::agent;
  app.add_option("--listen", f.listen, "HOST:PORT to listen on (repeatable, each address once)")
      ->required();
  app.add_option("--auth-secret-file,--secret-file", f.auth_secret_file,
                 "file holding the shared secret: a regular file of at most " +
                     std::to_string(rcxl::apps::kMaxSecretFileBytes) +
                     " bytes, chmod 600 (this or --auth none is required)")
      ->check(rcxl::apps::NonEmptyPath());
  app.add_option("--auth", f.auth,
                 "'none': no authentication, loopback listeners only (this or "
                 "--auth-secret-file is required)");
  app.add_option("--memory", f.memory,
                 "anon:BYTES | file:PATH:BYTES | dax:PATH (a Device DAX or a file); BYTES >= " +
                     std::to_string(limits::kMinPoolBytes) + ", K/M/G/T suffixes")
      ->required();
  app.add_option("--nic", f.nic, "none | verbs:DEVICE")->capture_default_str();
  app.add_option("--rdma-listen", f.rdma_listen,
                 "IP[:PORT] where clients connect RDMA (verbs only; default: the device's IPv4 "
                 "address, port 7471; give it on InfiniBand, or for a second agent on one NIC; "
                 "PORT 0 takes a free port, printed as 'rcxl-agent rdma listening on IP:PORT')");
  app.add_option("--region-extension", f.region_extension,
                 "region extension name: built in none or recording, or a plugin's name")
      ->envname("RCXL_AGENT_REGION_EXTENSION")
      ->capture_default_str();
  app.add_option("--region-extension-config", f.region_extension_config,
                 "region extension config (JSON; the extension none takes none)")
      ->envname("RCXL_AGENT_REGION_EXTENSION_CONFIG");
  app.add_option("--extension-path", f.extension_path,
                 "directories with librcxl_ext_<name>.so plugins (also RCXL_EXTENSION_PATH)")
      ->check(CLI::ExistingDirectory);
  app.add_option("--max-hint-requests", f.max_hint_requests, "open hint requests per connection")
      ->capture_default_str()
      ->transform(rcxl::apps::WholeNumberAtLeast<std::uint32_t>(1));
  app.add_option("--memory-generation-poll-s", f.generation_poll_s,
                 "seconds between generation reads (0.001 to a year)")
      ->capture_default_str()
      ->check(rcxl::apps::SecondsAtLeast(limits::kMinIntervalSeconds));
  app.add_option("--memory-generation-grace-s", f.generation_grace_s,
                 "seconds of failing generation reads before the generation is unknown")
      ->capture_default_str()
      ->check(rcxl::apps::Seconds(/*zero_ok=*/true));
  app.add_option("--sweep-interval-s", f.sweep_interval_s,
                 "seconds between sweeps (retire retries, generation reads; 0.001 to a year)")
      ->capture_default_str()
      ->check(rcxl::apps::SecondsAtLeast(limits::kMinIntervalSeconds));
  app.add_option("--max-frame-bytes", f.max_frame_bytes,
                 "largest control frame; at least " + std::to_string(limits::kMinMaxFrameBytes) +
                     " (512 KiB), so a hint of 4096 ranges (PROTOCOL.md's most) fits")
      ->capture_default_str()
      ->transform(rcxl::apps::WholeNumberAtLeast<std::uint32_t>(limits::kMinMaxFrameBytes));
  app.add_option("--hello-timeout-s", f.hello_timeout_s,
                 "seconds a connection may take to authenticate before it is closed (0 = never)")
      ->capture_default_str()
      ->check(rcxl::apps::SecondsOffOrAtLeast(limits::kMinIntervalSeconds));
  app.add_option("--max-connections", f.max_connections, "0 = no limit")
      ->capture_default_str()
      ->transform(rcxl::apps::WholeNumberAtLeast<std::uint32_t>(0));
  app.add_option("--log-level", f.log_level, "trace|debug|info|warn|error")->capture_default_str();
  app.add_option("--state-file", f.state_file,
                 "keep the region table in PATH so regions survive an agent restart "
                 "(e.g. /var/lib/rcxl-agent/regions.json; default: none)")
      ->check(rcxl::apps::NonEmptyPath());
  app.add_option("--reader-rkeys", f.reader_rkeys,
                 "read-only: a map under a read handle gets its own READ-only rkey (a second "
                 "registration of the region); shared: the owner's read-write rkey")
      ->capture_default_str()
      ->check(CLI::IsMember({"read-only", "shared"}));
  app.add_option("--rdma-auth", f.rdma_auth,
                 "proof: take a queue pair only with the proof of a live control connection in "
                 "its rdma_cm connect (clients that read the hello send it; needs "
                 "--auth-secret-file); none: any host that reaches the RDMA port")
      ->capture_default_str()
      ->check(CLI::IsMember({"none", "proof"}));
  app.add_option("--boot-id", f.boot_id,
                 "override the node boot id (default /proc/sys/kernel/random/boot_id); " +
                     limits::boot_id_wanted())
      ->check(CLI::Validator(
          [](std::string& text) -> std::string {
            return text.empty() ? "must not be empty; leave the flag out for the node's own"
                                : std::string();
          },
          ""));
}

Result<std::vector<rcxl::runtime::Address>> listen_addresses(const Flags& f) {
  std::vector<rcxl::runtime::Address> addresses;
  for (const auto& text : f.listen) {
    auto address = rcxl::runtime::Address::Parse(text);
    if (!address.ok()) return bad("--listen: " + address.status().message());
    addresses.push_back(*address);
  }
  return addresses;
}

// The secret, or nullopt for --auth none.
Result<std::optional<std::string>> auth_secret(const Flags& f) {
  if (f.auth == "none") {
    if (!f.auth_secret_file.empty()) return bad("give --auth none or --auth-secret-file, not both");
    return std::optional<std::string>();
  }
  if (!f.auth.empty()) return bad("--auth takes only 'none', not '" + f.auth + "'");
  if (f.auth_secret_file.empty()) return bad("--auth-secret-file PATH or --auth none is required");
  auto file = rcxl::apps::read_secret_file("--auth-secret-file", f.auth_secret_file);
  if (!file.ok()) return file.status();
  if (!file->warning.empty())
    std::cerr << "rcxl-agent: warning: "
              << rcxl::runtime::printable(file->warning, rcxl::apps::kMaxMessageChars) << std::endl;
  std::string secret = rcxl::protocol::secret_from_file_contents(file->contents);
  if (secret.empty()) {
    return bad("--auth-secret-file: " + f.auth_secret_file + " holds an empty secret" +
               std::string(rcxl::apps::kWriteASecret));
  }
  return std::optional<std::string>(std::move(secret));
}

Result<std::string> boot_id(const Flags& f) {
  namespace limits = rcxl::apps::agent;
  std::string id = f.boot_id;
  std::string origin = "--boot-id";
  if (id.empty()) {
    auto text = read_text("/proc/sys/kernel/random/boot_id");
    if (!text.ok()) return bad("cannot read the boot id: " + text.status().message());
    id = rcxl::protocol::secret_from_file_contents(*text);  // trailing newline off
    origin = "the boot id in /proc/sys/kernel/random/boot_id (give --boot-id)";
  }
  if (auto problem = limits::boot_id_problem(id)) {
    // A 100 KB id is not worth echoing: quote its start.
    const std::string shown = id.size() > 64 ? id.substr(0, 64) + "..." : id;
    return bad(origin + ": '" + shown + "' " + *problem + "; must be " + limits::boot_id_wanted());
  }
  return id;
}

Result<rcxl::verbs::MemorySpec> memory_spec(const Flags& f) {
  namespace limits = rcxl::apps::agent;
  auto spec = rcxl::verbs::parse_memory_spec(f.memory);
  if (!spec.ok()) return bad("--memory: " + spec.status().message());
  using Kind = rcxl::verbs::MemorySpec::Kind;
  if (spec->kind != Kind::kDax && spec->bytes < limits::kMinPoolBytes) {
    return bad("--memory " + f.memory + ": a pool of " + std::to_string(spec->bytes) +
               " bytes holds no region; give at least " + std::to_string(limits::kMinPoolBytes) +
               " (4K)");
  }
  if (spec->kind == Kind::kDax) {
    if (auto problem = limits::dax_path_problem(spec->path)) {
      return bad("--memory " + f.memory + ": " + *problem);
    }
  }
  if (!f.state_file.empty() && spec->kind == Kind::kAnon) {
    // Anonymous memory dies with the process: a kept table would promise lost bytes.
    return bad("--state-file needs memory that outlives the process (file: or dax:), not " +
               f.memory);
  }
  std::error_code ec;
  if (!f.state_file.empty() &&
      (spec->path == f.state_file || std::filesystem::equivalent(spec->path, f.state_file, ec))) {
    return bad("--state-file " + f.state_file +
               " is the --memory pool's own file; give the "
               "region table a file of its own (e.g. /var/lib/rcxl-agent/regions.json)");
  }
  return spec;
}

Result<rcxl::ext::Json> extension_config(const Flags& f) {
  auto config = rcxl::ext::parse_extension_config(f.region_extension_config);
  if (!config.ok()) {
    // The value may come from the environment (a systemd drop-in): name both and quote it.
    return bad("--region-extension-config (or RCXL_AGENT_REGION_EXTENSION_CONFIG): " +
               config.status().message() + ": '" + f.region_extension_config + "'");
  }
  if (f.region_extension == "none" && !config->is_null() && !config->empty()) {
    // As rcxl-sim does: a config for no extension is a forgotten --region-extension.
    return bad("--region-extension-config (or RCXL_AGENT_REGION_EXTENSION_CONFIG) '" +
               f.region_extension_config +
               "' is given but --region-extension is none, which takes no config; name the "
               "extension (--region-extension or RCXL_AGENT_REGION_EXTENSION) or drop the config");
  }
  return config;
}

// The built-in recording extension reads its generation from a file: a start
// refused for want of one names that file.
std::string recording_generation_hint(const Flags& f, const rcxl::ext::Json& config,
                                      const Status& start) {
  if (start.code() != rcxl::ErrorCode::kGenerationUnknown || f.region_extension != "recording" ||
      !config.is_object()) {
    return {};
  }
  auto file = config.find("generation_file");
  if (file == config.end() || !file->is_string()) return {};
  const std::string path = file->get<std::string>();
  // Why it could not be read: missing, empty, or no regular file (a FIFO).
  auto text = rcxl::verbs::PosixFileSystem().read_file(path);
  // Read, it was empty or held no usable generation (a ':' in it, say).
  std::string why = text.ok() ? ", which holds no generation" : ": " + text.status().message();
  if (text.ok() && !rcxl::protocol::secret_from_file_contents(*text).empty()) {
    why = ", which holds '" + rcxl::runtime::printable(*text) + "', not a usable generation";
  }
  return " (recording reads it from generation_file " + path + why +
         "; write the generation into it, a regular file)";
}

// Everything the flags say, checked before any pool, NIC or listener is opened.
struct Setup {
  rcxl::agent::AgentConfig config;
  rcxl::runtime::LogLevel log_level = rcxl::runtime::LogLevel::kInfo;
  rcxl::verbs::MemorySpec memory;
  rcxl::ext::Json extension_config;
};

Result<Setup> setup_from_flags(const Flags& f) {
  Setup s;
  auto level = rcxl::runtime::parse_log_level(f.log_level);
  if (!level.ok()) return bad("--log-level: " + level.status().message());
  s.log_level = *level;
  auto listen = listen_addresses(f);
  if (!listen.ok()) return listen.status();
  s.config.listen = std::move(listen).value();
  auto secret = auth_secret(f);
  if (!secret.ok()) return secret.status();
  s.config.auth_secret = std::move(secret).value();
  if (Status st = rcxl::apps::check_listen_addresses("--listen", s.config.listen,
                                                     /*loopback_only=*/!s.config.auth_secret);
      !st.ok()) {
    return st;
  }
  if (!f.rdma_listen.empty() && f.nic.rfind("verbs:", 0) != 0) {
    return bad("--rdma-listen needs --nic verbs:DEVICE (--nic " + f.nic + " listens for no RDMA)");
  }
  if (const std::string why =
          rcxl::apps::rdma_endpoint_problem(f.rdma_listen, rcxl::apps::RdmaEndpointUse::kListen);
      !f.rdma_listen.empty() && !why.empty()) {
    return bad("--rdma-listen " + f.rdma_listen + ": " + why);
  }
  auto id = boot_id(f);
  if (!id.ok()) return id.status();
  s.config.boot_id = std::move(id).value();
  s.config.max_hint_requests = f.max_hint_requests;
  s.config.generation_poll = rcxl::runtime::from_seconds(f.generation_poll_s);
  s.config.generation_grace = rcxl::runtime::from_seconds(f.generation_grace_s);
  s.config.hello_timeout = rcxl::runtime::from_seconds(f.hello_timeout_s);
  s.config.sweep_interval = rcxl::runtime::from_seconds(f.sweep_interval_s);
  s.config.max_frame_bytes = f.max_frame_bytes;
  s.config.max_connections = f.max_connections;
  s.config.state_file = f.state_file;
  s.config.read_only_reader_rkeys = f.reader_rkeys == "read-only";
  s.config.rdma_connect_proofs = f.rdma_auth == "proof";
  auto memory = memory_spec(f);
  if (!memory.ok()) return memory.status();
  s.memory = std::move(memory).value();
  auto config = extension_config(f);
  if (!config.ok()) return config.status();
  s.extension_config = std::move(config).value();
  return s;
}

}  // namespace

static int run_main(int argc, char** argv) {
  CLI::App app{"rcxl-agent: the memory-node agent (owns node memory, maps regions, takes hints)"};
  rcxl::apps::add_version_flag(app, "rcxl-agent", RCXL_VERSION);
  app.footer(
      "Needs --listen, --memory and one of --auth-secret-file PATH or --auth none.\n"
      "Example: rcxl-agent --listen 0.0.0.0:7400 --auth-secret-file /etc/rcxl/secret \\\n"
      "           --memory file:/mnt/cxl/pool:64G --nic verbs:mlx5_0 (docs/agent.md)\n"
      "Exit codes: 0 after SIGTERM/SIGINT/SIGHUP, 1 bad flags or a setup error (message on "
      "stderr).");
  Flags f;
  add_flags(app, f);
  if (auto code = rcxl::apps::parse_command_line(app, argc, argv, "rcxl-agent", kExitError)) {
    return *code;
  }
  auto setup = setup_from_flags(f);
  if (!setup.ok()) return fail(setup.status().message());

  // Signals are taken by sigwait below: block them before any thread starts.
  sigset_t signals;
  sigemptyset(&signals);
  sigaddset(&signals, SIGTERM);
  sigaddset(&signals, SIGINT);
  // A closed terminal's hangup stops cleanly too (metrics, extension close);
  // its default killed the agent without either (session 30 review). Under
  // nohup (SIGHUP ignored) it stays ignored: a blocked signal would be kept.
  if (struct sigaction hup{}; sigaction(SIGHUP, nullptr, &hup) == 0 && hup.sa_handler != SIG_IGN) {
    sigaddset(&signals, SIGHUP);
  }
  sigaddset(&signals, SIGUSR1);
  pthread_sigmask(SIG_BLOCK, &signals, nullptr);
  // A log reader that goes away (a closed pipe) must not end the service.
  std::signal(SIGPIPE, SIG_IGN);

  // Before the pool: a second agent on this state file must not touch its pool either.
  std::optional<rcxl::apps::agent::StateFileLock> state_lock;
  if (!f.state_file.empty()) {
    auto lock = rcxl::apps::agent::StateFileLock::take(f.state_file);
    if (!lock.ok()) return fail(lock.status().message());
    state_lock.emplace(std::move(lock).value());
  }

  rcxl::verbs::ThreadRuntime rt(rcxl::verbs::ThreadRuntime::Options{setup->log_level});
  // A created or grown file: pool goes back to how it was if the start fails.
  rcxl::verbs::PoolFileUndo opened_file;
  auto pool = rcxl::verbs::open_memory_pool(setup->memory, {.file_undo = &opened_file});
  if (!pool.ok()) return fail("--memory " + f.memory + ": " + pool.status().message());
  // Declared after the pool, so it is taken back while the pool still holds its lock.
  rcxl::verbs::PoolFileUndo pool_file_undo = std::move(opened_file);
  if ((*pool)->size() < rcxl::apps::agent::kMinPoolBytes) {
    return fail("--memory " + f.memory + ": holds " + std::to_string((*pool)->size()) +
                " bytes, no region; a pool needs at least " +
                std::to_string(rcxl::apps::agent::kMinPoolBytes));
  }
  auto nic = open_nic(f.nic, f.rdma_listen);
  if (!nic.ok()) {
    // Without RDMA the control plane still runs: say so where the NIC is missing.
    return fail("--nic " + f.nic +
                (f.rdma_listen.empty() ? "" : " --rdma-listen " + f.rdma_listen) + ": " +
                nic.status().message() +
                "; --nic none serves the control plane only (maps answer rkey 0, no data moves)");
  }

  auto registry = rcxl::ext::ExtensionRegistry::WithBuiltins();
  registry.set_fallback(
      rcxl::verbs::plugin_fallback(rcxl::verbs::extension_search_path(f.extension_path)));
  auto extension = registry.create(f.region_extension, {&rt, nullptr}, setup->extension_config);
  if (!extension.ok()) {
    std::string built_in;
    for (const auto& name : registry.names()) built_in += (built_in.empty() ? "" : ", ") + name;
    const bool unknown = extension.status().code() == rcxl::ErrorCode::kNotFound;
    return fail("cannot load region extension '" + f.region_extension +
                "': " + extension.status().message() +
                (unknown ? " (built in: " + built_in + ")" : std::string()));
  }

  // A created or grown pool does not hold what a state file of this boot lists.
  setup->config.pool_is_new = pool_file_undo.changed_the_file();
  auto agent = std::make_unique<rcxl::agent::Agent>(rt, **pool, **nic, std::move(extension).value(),
                                                    setup->config);
  if (Status st = agent->start(); !st.ok()) {
    // It never came up: its teardown's info lines ("agent stopped") would mislead; warnings stay.
    rt.set_log_level(std::max(setup->log_level, rcxl::runtime::LogLevel::kWarn));
    return fail(st.message() + recording_generation_hint(f, setup->extension_config, st));
  }
  pool_file_undo.keep();
  for (const auto& address : agent->listen_addresses()) {
    std::cout << "rcxl-agent listening on " << address.ToString() << " boot " << agent->boot()
              << std::endl;
  }
  // Where queue pairs go: clients need it with --rdma-listen (a port 0 is known only now).
  if (const std::string rdma = (*nic)->endpoint(); rdma != "none") {
    std::cout << "rcxl-agent rdma listening on " << rdma << std::endl;
  }

  for (;;) {
    int signal = 0;
    if (sigwait(&signals, &signal) != 0) continue;
    if (signal == SIGUSR1) {
      std::cerr << agent->metrics_text() << std::flush;
      continue;
    }
    break;
  }
  // A stop that hangs (an extension hook that never returns) must still end:
  // a second SIGTERM/SIGINT, or kStopLimit before agent->stop() returned,
  // exits at once with 1. The teardown after stop() (NIC, pool) is not timed.
  // A second signal within kSameStop of the first is the same request sent
  // twice (timeout(1) or a terminal signals the child, then its group).
  static std::atomic<bool> stop_returned{false};
  const auto first_signal_at = std::chrono::steady_clock::now();
  std::thread([signals, first_signal_at] {
    const auto deadline = std::chrono::steady_clock::now() + kStopLimit;
    for (;;) {
      const auto left = deadline - std::chrono::steady_clock::now();
      if (left <= std::chrono::nanoseconds(0)) break;
      const auto s = std::chrono::duration_cast<std::chrono::seconds>(left);
      timespec wait{static_cast<time_t>(s.count()),
                    static_cast<long>(std::chrono::nanoseconds(left - s).count())};
      siginfo_t info{};
      const int got = sigtimedwait(&signals, &info, &wait);
      if ((got == SIGTERM || got == SIGINT || got == SIGHUP) &&
          std::chrono::steady_clock::now() - first_signal_at >= kSameStop) {
        break;
      }
    }
    if (std::chrono::steady_clock::now() >= deadline && stop_returned) return;
    std::fprintf(stderr,
                 "rcxl-agent: the stop did not finish within %lld s or was interrupted (a hung "
                 "extension hook?); exiting without it\n",
                 static_cast<long long>(kStopLimit.count()));
    std::_Exit(1);
  }).detach();
  agent->stop();
  stop_returned = true;
  // Let the connection strands deliver their closes before the threads go.
  std::this_thread::sleep_for(std::chrono::milliseconds(50));
  std::cerr << agent->metrics_text() << std::flush;
  agent.reset();
  return 0;
}

int main(int argc, char** argv) {
  return rcxl::apps::run_guarded("rcxl-agent", 1, [&] { return run_main(argc, argv); });
}
