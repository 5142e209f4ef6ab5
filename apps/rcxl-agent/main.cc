// rcxl-agent: the memory-node agent (SPEC R1–R7) on the thread runtime.
#include <CLI/CLI.hpp>
#include <csignal>
#include <cstdio>
#include <fstream>
#include <iostream>
#include <map>
#include <sstream>
#include <thread>

#include "apps/cli_checks.h"
#include "apps/rcxl-agent/none_nic.h"
#include "backends/verbs/open_memory_pool.h"
#include "backends/verbs/plugin_loader.h"
#include "backends/verbs/posix_file_system.h"
#include "backends/verbs/thread_runtime.h"
#include "backends/verbs/verbs_nic.h"
#include "core/agent/agent.h"
#include "core/extension/extension_registry.h"
#include "core/protocol/auth.h"

namespace {

using rcxl::ErrorCode;
using rcxl::Result;
using rcxl::Status;

struct Flags {
  std::vector<std::string> listen;
  std::string auth_secret_file;
  std::string auth;
  std::string memory;
  std::string nic = "none";
  std::string region_extension = "none";
  std::string region_extension_config;
  std::vector<std::string> extension_path;
  std::uint32_t max_hint_requests = 4096;
  double generation_poll_s = 0.1;
  double generation_grace_s = 2;
  double sweep_interval_s = 1;
  std::uint32_t max_frame_bytes = 1u << 20;
  std::uint32_t max_connections = 0;
  std::string log_level = "info";
  std::string boot_id;
  std::string state_file;
};

// Exit codes (--help, docs/agent.md): bad flags and setup errors 1.
constexpr int kExitError = 1;

int fail(const std::string& message) {
  std::cerr << "rcxl-agent: " << message << std::endl;
  return kExitError;
}

// The ground's own file reader (kNotFound / kIoError with the path).
Result<std::string> read_text(const std::string& path) {
  return rcxl::verbs::PosixFileSystem().read_file(path);
}

Result<std::unique_ptr<rcxl::runtime::Nic>> open_nic(const std::string& spec) {
  if (spec == "none") return std::unique_ptr<rcxl::runtime::Nic>(new rcxl::apps::NoneNic());
  if (spec.rfind("verbs:", 0) == 0) {
    rcxl::verbs::VerbsNicOptions options;
    options.device = spec.substr(6);
    auto nic = rcxl::verbs::VerbsNic::open(options);
    if (!nic.ok()) return nic.status();
    return std::unique_ptr<rcxl::runtime::Nic>(std::move(nic).value());
  }
  return rcxl::Error(ErrorCode::kBadRequest, "--nic must be none or verbs:DEVICE, not " + spec);
}

void add_flags(CLI::App& app, Flags& f) {
  app.add_option("--listen", f.listen, "HOST:PORT to listen on (repeatable)")->required();
  app.add_option("--auth-secret-file", f.auth_secret_file,
                 "file holding the shared secret (this or --auth none is required)");
  app.add_option("--auth", f.auth,
                 "'none': no authentication, loopback listeners only (this or "
                 "--auth-secret-file is required)");
  app.add_option("--memory", f.memory, "anon:BYTES | file:PATH:BYTES | dax:PATH")->required();
  app.add_option("--nic", f.nic, "none | verbs:DEVICE")->capture_default_str();
  app.add_option("--region-extension", f.region_extension, "region extension name")
      ->envname("RCXL_AGENT_REGION_EXTENSION")
      ->capture_default_str();
  app.add_option("--region-extension-config", f.region_extension_config,
                 "region extension config (JSON)")
      ->envname("RCXL_AGENT_REGION_EXTENSION_CONFIG");
  app.add_option("--extension-path", f.extension_path,
                 "directories with librcxl_ext_<name>.so plugins (also RCXL_EXTENSION_PATH)");
  app.add_option("--max-hint-requests", f.max_hint_requests, "open hint requests per connection")
      ->capture_default_str()
      ->transform(rcxl::apps::WholeNumberAtLeast<std::uint32_t>(1));
  app.add_option("--memory-generation-poll-s", f.generation_poll_s,
                 "seconds between generation reads")
      ->capture_default_str()
      ->check(rcxl::apps::Seconds(/*zero_ok=*/false));
  app.add_option("--memory-generation-grace-s", f.generation_grace_s,
                 "seconds of failing generation reads before the generation is unknown")
      ->capture_default_str()
      ->check(rcxl::apps::Seconds(/*zero_ok=*/true));
  app.add_option("--sweep-interval-s", f.sweep_interval_s,
                 "seconds between sweeps (retire retries, generation reads)")
      ->capture_default_str()
      ->check(rcxl::apps::Seconds(/*zero_ok=*/false));
  app.add_option("--max-frame-bytes", f.max_frame_bytes, "largest control frame")
      ->capture_default_str()
      ->transform(rcxl::apps::WholeNumberAtLeast<std::uint32_t>(1));
  app.add_option("--max-connections", f.max_connections, "0 = no limit")
      ->capture_default_str()
      ->transform(rcxl::apps::WholeNumberAtLeast<std::uint32_t>(0));
  app.add_option("--log-level", f.log_level, "trace|debug|info|warn|error")->capture_default_str();
  app.add_option("--state-file", f.state_file,
                 "keep the region table in PATH so regions survive an agent restart "
                 "(e.g. /var/lib/rcxl-agent/regions.json; default: none)");
  app.add_option("--boot-id", f.boot_id,
                 "override the node boot id (default /proc/sys/kernel/random/boot_id)");
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"rcxl-agent: the memory-node agent (owns node memory, maps regions, takes hints)"};
  app.footer(
      "Needs --listen, --memory and one of --auth-secret-file PATH or --auth none.\n"
      "Exit codes: 0 after SIGTERM/SIGINT, 1 bad flags or a setup error (message on stderr).");
  Flags f;
  add_flags(app, f);
  if (auto code = rcxl::apps::parse_command_line(app, argc, argv, "rcxl-agent", kExitError)) {
    return *code;
  }

  auto level = rcxl::runtime::parse_log_level(f.log_level);
  if (!level.ok()) return fail(level.status().message());
  rcxl::agent::AgentConfig config;
  for (const auto& text : f.listen) {
    auto address = rcxl::runtime::Address::Parse(text);
    if (!address.ok()) return fail("--listen: " + address.status().message());
    config.listen.push_back(*address);
  }
  if (f.auth == "none") {
    if (!f.auth_secret_file.empty())
      return fail("give --auth none or --auth-secret-file, not both");
  } else if (!f.auth.empty()) {
    return fail("--auth takes only 'none'");
  } else if (f.auth_secret_file.empty()) {
    return fail("--auth-secret-file PATH or --auth none is required");
  } else {
    auto secret = read_text(f.auth_secret_file);
    if (!secret.ok()) return fail("--auth-secret-file: " + secret.status().message());
    config.auth_secret = rcxl::protocol::secret_from_file_contents(*secret);
    if (config.auth_secret->empty()) {
      return fail("--auth-secret-file: " + f.auth_secret_file + " holds an empty secret");
    }
  }
  if (f.boot_id.empty()) {
    auto boot_id = read_text("/proc/sys/kernel/random/boot_id");
    if (!boot_id.ok()) return fail("cannot read the boot id: " + boot_id.status().message());
    f.boot_id = rcxl::protocol::secret_from_file_contents(*boot_id);  // trailing newline off
  }
  config.boot_id = f.boot_id;
  config.max_hint_requests = f.max_hint_requests;
  config.generation_poll = rcxl::runtime::from_seconds(f.generation_poll_s);
  config.generation_grace = rcxl::runtime::from_seconds(f.generation_grace_s);
  config.sweep_interval = rcxl::runtime::from_seconds(f.sweep_interval_s);
  config.max_frame_bytes = f.max_frame_bytes;
  config.max_connections = f.max_connections;
  config.state_file = f.state_file;

  auto spec = rcxl::verbs::parse_memory_spec(f.memory);
  if (!spec.ok()) return fail("--memory: " + spec.status().message());
  if (!f.state_file.empty() && spec->kind == rcxl::verbs::MemorySpec::Kind::kAnon) {
    // Anonymous memory dies with the process: a kept table would promise lost bytes.
    return fail("--state-file needs memory that outlives the process (file: or dax:), not " +
                f.memory);
  }

  // Signals are taken by sigwait below: block them before any thread starts.
  sigset_t signals;
  sigemptyset(&signals);
  sigaddset(&signals, SIGTERM);
  sigaddset(&signals, SIGINT);
  sigaddset(&signals, SIGUSR1);
  pthread_sigmask(SIG_BLOCK, &signals, nullptr);

  rcxl::verbs::ThreadRuntime rt(rcxl::verbs::ThreadRuntime::Options{*level});
  auto pool = rcxl::verbs::open_memory_pool(*spec);
  if (!pool.ok()) return fail("--memory " + f.memory + ": " + pool.status().message());
  auto nic = open_nic(f.nic);
  if (!nic.ok()) return fail("--nic " + f.nic + ": " + nic.status().message());

  auto extension_config = rcxl::ext::parse_extension_config(f.region_extension_config);
  if (!extension_config.ok()) {
    // The value may come from the environment (a systemd drop-in): name both and quote it.
    return fail("--region-extension-config (or RCXL_AGENT_REGION_EXTENSION_CONFIG): " +
                extension_config.status().message() + ": '" + f.region_extension_config + "'");
  }
  auto registry = rcxl::ext::ExtensionRegistry::WithBuiltins();
  registry.set_fallback(
      rcxl::verbs::plugin_fallback(rcxl::verbs::extension_search_path(f.extension_path)));
  auto extension = registry.create(f.region_extension, {&rt, nullptr}, *extension_config);
  if (!extension.ok()) {
    return fail("cannot load region extension '" + f.region_extension +
                "': " + extension.status().message());
  }

  auto agent =
      std::make_unique<rcxl::agent::Agent>(rt, **pool, **nic, std::move(extension).value(), config);
  if (Status st = agent->start(); !st.ok()) return fail(st.message());
  for (const auto& address : agent->listen_addresses()) {
    std::cout << "rcxl-agent listening on " << address.ToString() << " boot " << agent->boot()
              << std::endl;
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
  agent->stop();
  // Let the connection strands deliver their closes before the threads go.
  std::this_thread::sleep_for(std::chrono::milliseconds(50));
  std::cerr << agent->metrics_text() << std::flush;
  agent.reset();
  return 0;
}
