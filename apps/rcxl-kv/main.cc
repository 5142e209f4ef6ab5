// rcxl-kv: a command-line client of rcxl. Runs the client Handler (SPEC R3-R6)
// on the thread runtime and the verbs NIC against a directory and agents:
// store files by key, load keys into files, or bench generated KV.
#include <CLI/CLI.hpp>
#include <algorithm>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <functional>
#include <iostream>
#include <map>
#include <optional>

#include "apps/cli_checks.h"
#include "apps/crash_guard.h"
#include "apps/rcxl-kv/bench.h"
#include "apps/rcxl-kv/kv_client.h"
#include "apps/rcxl-kv/value_file.h"
#include "apps/secret_file.h"
#include "backends/verbs/memory_spec.h"
#include "backends/verbs/thread_runtime.h"
#include "backends/verbs/verbs_nic.h"
#include "core/protocol/auth.h"

namespace {

using rcxl::ErrorCode;
using rcxl::Result;

// Exit codes (docs/hardware.md): usage and setup errors 1, a key missed 3,
// a bench that could not verify what it claims 4.
constexpr int kExitError = 1;
constexpr int kExitMiss = 3;
constexpr int kExitVerify = 4;

struct Flags {
  std::string directory;
  std::vector<std::string> agents;
  std::vector<std::string> agent_rdma;  // AGENT=IP[:PORT], an agent's --rdma-listen
  std::string nic;
  std::string secret_file;
  std::string auth;
  std::string chunk_size = "256K";
  std::string region_size = "64M";
  bool read_hints = true;
  std::optional<bool> write_hints;
  std::optional<bool> promotes;
  std::uint32_t write_wait_ms = 50;
  bool write_wait_given = false;
  bool zero_copy = false;
  bool only_pool_agents = false;
  double timeout_s = 120;
  std::string client_name = "rcxl-kv";
  std::string log_level = "warn";
  // store
  std::vector<std::string> store_pairs;
  // load
  std::vector<std::string> load_keys;
  std::string out_dir;
  // bench
  rcxl::kv::BenchOptions bench;
  bool bench_zero_copy_reader = false;
};

int fail(const std::string& message) {
  // One line whatever the message echoes (a flag value with a newline or an
  // escape sequence, a 100 KB config).
  std::cerr << "rcxl-kv: " << rcxl::runtime::printable(message, rcxl::apps::kMaxMessageChars)
            << std::endl;
  return kExitError;
}

// --NAME and --no-NAME as two flags, giving both is refused. (One negatable
// CLI11 flag prints as "--NAME,--no-NAME{false}", which reads as the default.)
void add_on_off_flags(CLI::App& app, const std::string& name, const std::string& what,
                      const std::string& default_text, std::function<void(bool)> set) {
  auto* on = app.add_flag_callback(
      "--" + name, [set] { set(true); }, what + " on (default: " + default_text + ")");
  app.add_flag_callback(
         "--no-" + name, [set] { set(false); }, what + " off")
      ->excludes(on);
}

// The device named by --nic verbs:DEV, checked before anything opens it.
Result<std::string> rdma_device(const std::string& spec) {
  if (spec.rfind("verbs:", 0) != 0 || spec.size() == 6) {
    return rcxl::Error(
        ErrorCode::kBadRequest,
        "--nic must be verbs:DEVICE (e.g. verbs:mlx5_0, verbs:rxe0), not '" + spec + "'");
  }
  const std::string device = spec.substr(6);
  const auto names = rcxl::verbs::rdma_device_names();
  if (std::find(names.begin(), names.end(), device) == names.end()) {
    std::string have;
    for (const auto& n : names) have += (have.empty() ? "" : ", ") + n;
    return rcxl::Error(ErrorCode::kNotFound,
                       "--nic " + spec + ": no RDMA device '" + device + "' on this host (" +
                           (have.empty() ? "none" : "devices: " + have) +
                           "); pick one from ibv_devices, or run in the SoftRoCE VM: "
                           "ci/rxe-vm (docs/hardware.md)");
  }
  return device;
}

// --client-name rides in every hint, token and request name: the agent's
// smallest frame leaves ~20 KB for those (agent_flag_checks.h), so keep it short.
constexpr std::size_t kMaxClientNameBytes = 128;

Result<rcxl::client::Config> make_config(const Flags& f, bool needs_agents) {
  rcxl::client::Config c;
  auto dir = rcxl::runtime::Address::Parse(f.directory);
  if (!dir.ok())
    return rcxl::Error(ErrorCode::kBadRequest, "--directory: " + dir.status().message());
  c.directory = *dir;
  for (const auto& a : f.agents) {
    auto address = rcxl::runtime::Address::Parse(a);
    if (!address.ok()) {
      return rcxl::Error(ErrorCode::kBadRequest, "--agent: " + address.status().message());
    }
    if (std::find(c.agents.begin(), c.agents.end(), *address) != c.agents.end()) {
      return rcxl::Error(ErrorCode::kBadRequest,
                         "--agent " + a + " is given twice; name each agent once");
    }
    c.agents.push_back(*address);
  }
  // Where each agent's RDMA listens when not at its host, port 7471.
  std::map<std::string, std::string> rdma_at;
  for (const auto& pair : f.agent_rdma) {
    const auto eq = pair.find('=');
    auto agent = rcxl::runtime::Address::Parse(pair.substr(0, eq));
    if (eq == std::string::npos || !agent.ok() || eq + 1 == pair.size() ||
        !rcxl::apps::rdma_endpoint_problem(pair.substr(eq + 1)).empty()) {
      return rcxl::Error(ErrorCode::kBadRequest,
                         "--agent-rdma " + rcxl::runtime::printable(pair, 200) +
                             ": give AGENT_HOST:PORT=RDMA_IP[:PORT], the agent's --listen and "
                             "its --rdma-listen, e.g. 10.0.0.5:7000=10.1.0.5:7471");
    }
    if (!rdma_at.emplace(agent->ToString(), pair.substr(eq + 1)).second) {
      return rcxl::Error(ErrorCode::kBadRequest, "--agent-rdma names " + agent->ToString() +
                                                     " twice; give each agent once");
    }
  }
  if (!rdma_at.empty()) {
    c.nic_endpoint = [rdma_at](const rcxl::runtime::Address& agent) {
      auto it = rdma_at.find(agent.ToString());
      return it != rdma_at.end() ? it->second : agent.host;
    };
  }
  if (f.client_name.empty() || f.client_name.size() > kMaxClientNameBytes) {
    return rcxl::Error(ErrorCode::kBadRequest,
                       "--client-name must be 1.." + std::to_string(kMaxClientNameBytes) +
                           " bytes, not " + std::to_string(f.client_name.size()));
  }
  if (needs_agents && c.agents.empty()) {
    return rcxl::Error(ErrorCode::kBadRequest,
                       "storing needs the pool: give --agent HOST:PORT (repeatable)");
  }
  // Without a pool every location is outside it: each key would read as a miss.
  if (f.only_pool_agents && c.agents.empty()) {
    return rcxl::Error(ErrorCode::kBadRequest,
                       "--only-pool-agents reads only from the pool: give it with --agent "
                       "HOST:PORT (repeatable)");
  }
  if (f.auth == "none") {
    if (!f.secret_file.empty()) {
      return rcxl::Error(ErrorCode::kBadRequest, "give --auth none or --secret-file, not both");
    }
  } else if (!f.auth.empty()) {
    return rcxl::Error(ErrorCode::kBadRequest, "--auth takes only 'none', not '" + f.auth + "'");
  } else if (f.secret_file.empty()) {
    return rcxl::Error(ErrorCode::kBadRequest,
                       "--secret-file PATH (the agents' and directory's secret) or --auth none "
                       "is required");
  } else {
    // A regular file of at most 4 KiB: a FIFO would block, /dev/zero never ends.
    auto file = rcxl::apps::read_secret_file("--secret-file", f.secret_file);
    if (!file.ok()) return file.status();
    if (!file->warning.empty())
      std::cerr << "rcxl-kv: warning: "
                << rcxl::runtime::printable(file->warning, rcxl::apps::kMaxMessageChars)
                << std::endl;
    c.secret = rcxl::protocol::secret_from_file_contents(file->contents);
    if (c.secret.empty()) {
      return rcxl::Error(ErrorCode::kBadRequest, "--secret-file: " + f.secret_file +
                                                     " holds an empty secret" +
                                                     std::string(rcxl::apps::kWriteASecret));
    }
  }
  // A write wait rides on a write hint (R4.3): with write hints off it would never wait.
  if (f.write_wait_given && f.write_wait_ms > 0 && !f.write_hints.value_or(f.read_hints)) {
    return rcxl::Error(ErrorCode::kBadRequest,
                       "--write-wait-ms " + std::to_string(f.write_wait_ms) +
                           " waits only with write hints on (SPEC R4.3); give --write-hints or "
                           "drop --write-wait-ms");
  }
  auto chunk = rcxl::verbs::parse_byte_size(f.chunk_size);
  if (!chunk.ok())
    return rcxl::Error(ErrorCode::kBadRequest, "--chunk-size: " + chunk.status().message());
  auto region = rcxl::verbs::parse_byte_size(f.region_size);
  if (!region.ok()) {
    return rcxl::Error(ErrorCode::kBadRequest, "--region-size: " + region.status().message());
  }
  if (*chunk > *region) {
    return rcxl::Error(ErrorCode::kBadRequest, "--chunk-size " + f.chunk_size +
                                                   " is larger than --region-size " +
                                                   f.region_size + "; a region holds whole chunks");
  }
  if (*region % 4096 != 0 || *region % *chunk != 0) {
    return rcxl::Error(ErrorCode::kBadRequest,
                       "--region-size must be a multiple of 4096 and of --chunk-size (" +
                           f.region_size + " / " + f.chunk_size + ")");
  }
  c.chunk_size_bytes = *chunk;
  c.region_size_bytes = *region;
  c.read_hints = f.read_hints;
  c.write_hints = f.write_hints;
  c.read_promotes = f.promotes;
  c.write_wait_ms = f.write_wait_ms;
  c.zero_copy = f.zero_copy;
  c.only_pool_agents = f.only_pool_agents;
  c.client_name = f.client_name;
  c.reply_timeout = std::chrono::seconds(5);  // TCG VMs and busy hosts answer slowly
  return c;
}

// NAME_MAX of Linux file systems: a longer key could be loaded but not written.
constexpr std::size_t kMaxFileNameBytes = 255;

// The file name `rcxl-kv load` writes `key` to ('/' becomes '_'), or empty
// when it names none ('', '.', '..').
std::string key_file_name(const std::string& key) {
  std::string name = key;
  std::replace(name.begin(), name.end(), '/', '_');
  if (name == "." || name == "..") return {};
  return name;
}

// The KEY FILE pairs read and checked before the NIC opens: keys non-empty,
// distinct and loadable (a file name each), each file a regular file of 1..chunk bytes.
Result<std::vector<rcxl::client::StoreItem>> read_store_items(const Flags& f, std::uint64_t chunk) {
  std::vector<rcxl::client::StoreItem> items;
  for (std::size_t i = 0; i + 1 < f.store_pairs.size(); i += 2) {
    if (f.store_pairs[i].empty()) {
      return rcxl::Error(ErrorCode::kBadRequest,
                         "store: a key is empty (pair " + std::to_string(i / 2 + 1) + ")");
    }
    // Loaded, it would name no file: stored, it could never be loaded with rcxl-kv.
    if (key_file_name(f.store_pairs[i]).empty()) {
      return rcxl::Error(ErrorCode::kBadRequest,
                         "store: key '" + f.store_pairs[i] +
                             "' names no file for rcxl-kv load; give a key other than '.' or '..'");
    }
    // First writer wins: a second FILE for one key would be dropped unseen.
    if (f.store_pairs[i].size() > kMaxFileNameBytes) {
      return rcxl::Error(ErrorCode::kBadRequest,
                         "store: key '" + f.store_pairs[i].substr(0, 32) + "...' is " +
                             std::to_string(f.store_pairs[i].size()) +
                             " bytes; rcxl-kv load writes each key to a file name of at most " +
                             std::to_string(kMaxFileNameBytes));
    }
    for (const auto& earlier : items) {
      if (earlier.key == f.store_pairs[i]) {
        return rcxl::Error(ErrorCode::kBadRequest, "store: key '" + f.store_pairs[i] +
                                                       "' is given twice; store one file per key");
      }
    }
    auto text = rcxl::kv::read_value_file(f.store_pairs[i], f.store_pairs[i + 1], chunk);
    if (!text.ok()) return text.status();
    rcxl::client::StoreItem item{f.store_pairs[i], {}};
    item.bytes.resize(text->size());
    std::memcpy(item.bytes.data(), text->data(), text->size());
    items.push_back(std::move(item));
  }
  return items;
}

// The most bytes one bench store or load call generates and compares at once
// (--batch values of --chunk-size each): the largest batch of the default chunk.
constexpr std::uint64_t kMaxBenchCallBytes = std::uint64_t{1} << 30;

// nullopt, or why the load's keys cannot each get their own file under --out:
// '', '.' or '..', a name over NAME_MAX, two keys that map to one file name,
// or an --out that is not a directory.
std::optional<std::string> load_keys_problem(const Flags& f) {
  if (f.load_keys.empty()) return "name at least one KEY: rcxl-kv load --out DIR KEY [KEY ...]";
  std::map<std::string, std::string> key_of_file;
  for (const auto& key : f.load_keys) {
    const std::string name = key_file_name(key);
    if (name.empty()) {
      return "key '" + key + "' names no file under --out; give a key other than '', '.' or '..'";
    }
    if (name.size() > kMaxFileNameBytes) {
      return "key '" + key.substr(0, 32) + "...' is " + std::to_string(key.size()) +
             " bytes; its file name under --out holds at most " + std::to_string(kMaxFileNameBytes);
    }
    auto [it, fresh] = key_of_file.emplace(name, key);
    if (!fresh) {
      if (it->second == key) return "key '" + key + "' is given twice";
      return "keys '" + it->second + "' and '" + key + "' would both be written to --out/" + name +
             " ('/' becomes '_'); load them in separate runs";
    }
  }
  if (f.out_dir.empty()) return "--out is empty; name the directory the values go to";
  // It is made after the NIC opens: whatever would stop that is named now.
  std::error_code ec;
  for (std::filesystem::path p = f.out_dir;; p = p.parent_path()) {
    if (std::filesystem::exists(std::filesystem::status(p, ec))) {
      if (std::filesystem::is_directory(p, ec)) break;
      return p == std::filesystem::path(f.out_dir)
                 ? "--out " + f.out_dir + " exists and is not a directory"
                 : "--out " + f.out_dir + ": " + p.string() +
                       " is not a directory, so no directory can be made under it";
    }
    if (!p.has_parent_path() || p.parent_path() == p) break;
  }
  return std::nullopt;
}

int run_store(rcxl::kv::KvClient& kv, std::vector<rcxl::client::StoreItem> items) {
  auto r = kv.store(std::move(items));
  if (!r.ok()) return fail("store: " + r.status().ToString());
  std::cout << "stored " << r->stored << " already_present " << r->already_present << " failed "
            << r->failed << std::endl;
  if (!r->first_failure.ok()) {
    std::cerr << "rcxl-kv: store: the first failed key failed with: " << r->first_failure.ToString()
              << std::endl;
  }
  return r->failed == 0 ? 0 : kExitError;
}

int run_load(rcxl::kv::KvClient& kv, const Flags& f) {
  std::error_code ec;
  std::filesystem::create_directories(f.out_dir, ec);
  if (ec) return fail("--out " + f.out_dir + ": " + ec.message());
  auto r = kv.load(f.load_keys, f.client_name + "-load");
  if (!r.ok()) return fail("load: " + r.status().ToString());
  // A signal while a value is written leaves no hidden partial file behind.
  rcxl::kv::remove_partial_values_on_signals();
  if (!r->stopped_by.ok()) {
    std::cerr << "rcxl-kv: load: the hits end at key " << f.load_keys[r->values.size()]
              << ", stored but not read: " << r->stopped_by.ToString() << std::endl;
  }
  int rc = r->values.size() == f.load_keys.size() ? 0 : kExitMiss;
  for (std::size_t i = 0; i < f.load_keys.size(); ++i) {
    // Keys may hold '/': the file name is the key with those made '_'.
    const std::string name = key_file_name(f.load_keys[i]);
    const auto path = std::filesystem::path(f.out_dir) / name;
    if (i >= r->values.size()) {
      // An older file of this key would read as its value: it goes.
      const bool removed = rcxl::kv::remove_stale_value_file(path.string());
      std::cout << f.load_keys[i] << ": miss" << (removed ? " (removed an older " : "")
                << (removed ? path.string() + ")" : "") << std::endl;
      continue;
    }
    if (rcxl::Status s = rcxl::kv::write_value_file(path.string(), r->values[i]); !s.ok()) {
      rc = fail(s.message());  // the other keys are still written and reported
      continue;
    }
    std::cout << f.load_keys[i] << ": " << r->values[i].size() << " bytes -> " << path.string()
              << std::endl;
  }
  return rc;
}

}  // namespace

static int run_main(int argc, char** argv) {
  CLI::App app{
      "rcxl-kv: store and load KV chunks through rcxl (directory + agents over RDMA).\n"
      "Exit codes: 0 ok, 1 usage/setup error (or a store whose WRITE failed), 3 a key missed\n"
      "(load, or a bench round), 4 a bench not verified (bytes wrong or stale, stores failed,\n"
      "keys there before the run, or --expect-reset with no boot change seen); a signal ends it\n"
      "as the signal does (130 for Ctrl-C), removing a value file a load was writing"};
  rcxl::apps::add_version_flag(app, "rcxl-kv", RCXL_VERSION);
  app.footer(
      "Needs --directory, --nic and one of --secret-file PATH or --auth none; store and bench\n"
      "also need the pool: --agent HOST:PORT (repeatable).\n"
      "Example: rcxl-kv --directory 10.0.0.1:7100 --agent 10.0.0.2:7400 --nic verbs:mlx5_0 \\\n"
      "           --secret-file /etc/rcxl/secret store prompt-1 ./kv.bin (docs/hardware.md)");
  Flags f;
  app.require_subcommand(1);
  // Global flags may follow the subcommand too (`bench --chunk-size 1M`).
  app.fallthrough();
  app.add_option("--directory", f.directory, "rcxl-directory HOST:PORT")->required();
  app.add_option("--agent", f.agents, "rcxl-agent HOST:PORT of the pool (repeatable; for stores)");
  app.add_option("--agent-rdma", f.agent_rdma,
                 "AGENT_HOST:PORT=RDMA_IP[:PORT]: where an agent started with --rdma-listen takes "
                 "RDMA (repeatable; default: the agent's host, port 7471)");
  app.add_option("--nic", f.nic, "verbs:DEVICE, e.g. verbs:mlx5_0 or verbs:rxe0")->required();
  // The services' spelling too: a user copies the flag from the agent's command line.
  app.add_option("--secret-file,--auth-secret-file", f.secret_file,
                 "file holding the shared secret")
      ->check(rcxl::apps::NonEmptyPath());
  app.add_option("--auth", f.auth, "'none': no authentication (services run with --auth none)");
  app.add_option("--chunk-size", f.chunk_size, "bytes per key's page (K/M/G/T)")
      ->capture_default_str();
  app.add_option("--region-size", f.region_size, "bytes per allocated region (K/M/G/T)")
      ->capture_default_str();
  add_on_off_flags(app, "read-hints", "read hints (SPEC R3.4)", "on",
                   [&f](bool on) { f.read_hints = on; });
  // Set only when given: unset follows read hints.
  add_on_off_flags(app, "write-hints", "write hints (SPEC R4.1)", "follows read hints",
                   [&f](bool on) { f.write_hints = on; });
  add_on_off_flags(app, "promotes", "read promotes (SPEC R4.5)", "follows read hints",
                   [&f](bool on) { f.promotes = on; });
  auto* write_wait = app.add_option("--write-wait-ms", f.write_wait_ms,
                                    "write wait per store (SPEC R4.3; 0 = none; needs write hints)")
                         ->capture_default_str()
                         ->transform(rcxl::apps::WholeNumberIn(0, 10000));
  app.add_flag("--zero-copy", f.zero_copy,
               "register buffers with the NIC instead of the staging copy");
  app.add_flag("--only-pool-agents", f.only_pool_agents,
               "treat a key stored on an agent not given with --agent as a miss (never connect "
               "to an agent only the directory names)");
  // At least 1 ms: the call's deadline is counted in whole milliseconds.
  app.add_option("--timeout-s", f.timeout_s, "seconds one store or load call may take")
      ->capture_default_str()
      ->check(rcxl::apps::SecondsAtLeast(0.001));
  app.add_option("--client-name", f.client_name, "names this client's hints and tokens")
      ->capture_default_str();
  app.add_option("--log-level", f.log_level, "trace|debug|info|warn|error")->capture_default_str();

  auto* store = app.add_subcommand("store", "store files: KEY FILE [KEY FILE ...]");
  // Checked in main: CLI11 would say "pairs is required", naming no KEY or FILE.
  store->add_option("pairs", f.store_pairs, "KEY FILE pairs");
  auto* load = app.add_subcommand("load", "load keys into files under --out (one file per key)");
  load->add_option("keys", f.load_keys, "KEY [KEY ...]: the keys, in prefix order");
  load->add_option("--out", f.out_dir, "directory for the loaded values")->required();
  auto* bench = app.add_subcommand(
      "bench", "store and load generated KV with a writer and a reader, verifying every byte");
  bench->add_option("--mib", f.bench.mib, "MiB of KV per round")
      ->capture_default_str()
      ->transform(rcxl::apps::WholeNumberIn(1, 1 << 20));
  bench->add_option("--batch", f.bench.batch, "keys per store/load call")
      ->capture_default_str()
      ->transform(rcxl::apps::WholeNumberIn(1, 4096));
  // Checked as digits: CLI11 alone took '-1' and numbers past 2^64.
  bench->add_option("--seed", f.bench.seed, "names and bytes of the keys")
      ->capture_default_str()
      ->transform(rcxl::apps::WholeNumberAtLeast<std::uint64_t>(0));
  bench->add_option("--between-rounds", f.bench.between_rounds,
                    "shell command run after round 1 (e.g. reset the node's memory generation); "
                    "round 2 follows");
  bench->add_option("--settle-s", f.bench.settle_s, "seconds to wait after that command")
      ->capture_default_str()
      ->check(rcxl::apps::Seconds(/*zero_ok=*/true));
  bench->add_flag("--expect-reset", f.bench.expect_reset,
                  "the command resets the node: round 1 keys must miss afterwards");
  bench->add_flag("--zero-copy-reader", f.bench_zero_copy_reader,
                  "zero copy for the reader only (both paths in one run)");
  for (auto* mode : {store, load, bench}) {
    mode->footer(
        "Global flags (--directory, --nic, --agent, --secret-file, ...: rcxl-kv --help) go\n"
        "before or after the mode.");
  }
  if (auto code = rcxl::apps::parse_command_line(app, argc, argv, "rcxl-kv", kExitError)) {
    return *code;
  }

  if (store->parsed() && f.store_pairs.empty()) {
    return fail("store: name at least one KEY FILE pair: rcxl-kv store KEY FILE [KEY FILE ...]");
  }
  if (store->parsed() && f.store_pairs.size() % 2 != 0) {
    return fail("store takes KEY FILE pairs; got " + std::to_string(f.store_pairs.size()) +
                " arguments");
  }
  if (bench->parsed() && f.bench.expect_reset && f.bench.between_rounds.empty()) {
    return fail("--expect-reset needs --between-rounds CMD (the command that resets the node)");
  }
  auto level = rcxl::runtime::parse_log_level(f.log_level);
  if (!level.ok()) return fail("--log-level: " + level.status().message());
  f.write_wait_given = write_wait->count() > 0;
  auto config = make_config(f, store->parsed() || bench->parsed());
  if (!config.ok()) return fail(config.status().message());
  if (bench->parsed() && config->chunk_size_bytes > kMaxBenchCallBytes / f.bench.batch) {
    return fail("bench: --batch " + std::to_string(f.bench.batch) + " values of --chunk-size " +
                f.chunk_size + " exceed " + rcxl::verbs::format_bytes(kMaxBenchCallBytes) +
                " per call; lower --batch or --chunk-size");
  }
  std::vector<rcxl::client::StoreItem> store_items;
  if (store->parsed()) {
    auto items = read_store_items(f, config->chunk_size_bytes);
    if (!items.ok()) return fail(items.status().message());
    store_items = std::move(*items);
  }
  if (load->parsed()) {
    if (auto problem = load_keys_problem(f)) return fail("load: " + *problem);
  }
  auto device = rdma_device(f.nic);
  if (!device.ok()) return fail(device.status().message());

  rcxl::verbs::ThreadRuntime rt(rcxl::verbs::ThreadRuntime::Options{*level});
  rcxl::verbs::VerbsNicOptions nic_options;
  nic_options.device = *device;
  nic_options.listen = false;  // initiator only
  auto nic = rcxl::verbs::VerbsNic::open(nic_options);
  if (!nic.ok()) return fail("--nic " + f.nic + ": " + nic.status().ToString());
  const auto timeout = std::chrono::milliseconds(static_cast<std::int64_t>(f.timeout_s * 1000));

  int rc = 0;
  if (store->parsed()) {
    rcxl::kv::KvClient kv(rt, *config, **nic, timeout);
    rc = run_store(kv, std::move(store_items));
  } else if (load->parsed()) {
    rcxl::kv::KvClient kv(rt, *config, **nic, timeout);
    rc = run_load(kv, f);
  } else {
    auto writer_config = *config;
    writer_config.client_name += "-writer";
    auto reader_config = *config;
    reader_config.client_name += "-reader";
    if (f.bench_zero_copy_reader) reader_config.zero_copy = true;
    rcxl::kv::KvClient writer(rt, writer_config, **nic, timeout);
    rcxl::kv::KvClient reader(rt, reader_config, **nic, timeout);
    auto totals = rcxl::kv::run_bench(writer, reader, config->chunk_size_bytes, f.bench, std::cout);
    if (!totals.ok()) {
      rc = fail("bench: " + totals.status().ToString());
    } else if (!totals->ok()) {
      rc = kExitVerify;
    } else if (totals->misses > 0) {
      rc = kExitMiss;
    }
  }
  return rc;
}

int main(int argc, char** argv) {
  return rcxl::apps::run_guarded("rcxl-kv", 1, [&] { return run_main(argc, argv); });
}
