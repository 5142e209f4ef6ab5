// rcxl-sim: the deterministic simulator's command line (docs/reproduce.md).
#include <CLI/CLI.hpp>
#include <algorithm>
#include <cerrno>
#include <charconv>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <optional>
#include <sstream>
#include <string>
#include <vector>

#include "apps/cli_checks.h"
#include "apps/crash_guard.h"
#include "backends/sim/sim_world.h"
#include "core/protocol/echo_service.h"
#include "scenarios/batch_runner.h"
#include "scenarios/embedded/embedded.h"
#include "scenarios/engine/workload.h"
#include "scenarios/json_document.h"
#include "scenarios/reproduce.h"
#include "scenarios/serving_rig.h"
#include "scenarios/shell_word.h"
#include "scenarios/sweep.h"

namespace {

using rcxl::scenarios::Json;

constexpr char kExitCodes[] =
    "Exit codes: 0 the run passed; 1 the run failed (deadlock, time limit) or an expectation or\n"
    "invariant was violated; 2 bad input (file, flag or value), refused before anything ran.";

constexpr char kReproduceExitCodes[] =
    "Exit codes: 0 the table was made (a figure outside the seed's interval is a result, not a\n"
    "failure); 1 a run failed or measured nothing (no reuse turn loaded); 2 bad input (flag or\n"
    "value), refused before anything ran.";
constexpr char kSweepExitCodes[] =
    "Exit codes: 0 every point ran and passed; 1 a point failed (its reproduce line is printed);\n"
    "2 bad input (file, flag or value), refused before anything ran.";

// A seed is a decimal unsigned 64-bit integer; CLI11 alone would wrap -1 to 2^64-1.
const CLI::Validator kSeed(
    [](std::string& text) -> std::string {
      std::uint64_t v = 0;
      const char* end = text.data() + text.size();
      const auto [at, ec] = std::from_chars(text.data(), end, v);
      if (text.empty() || ec != std::errc() || at != end) {
        return "'" + text + "' is not a seed; write an integer in 0.." + std::to_string(UINT64_MAX);
      }
      text = std::to_string(v);  // "010" is ten, not CLI11's octal eight
      return "";
    },
    "SEED");

// Bad input (kBadRequest, or a named file that is not there) exits 2; the rest 1.
int exit_code_of(const rcxl::Status& status) {
  const auto code = status.code();
  return code == rcxl::ErrorCode::kBadRequest || code == rcxl::ErrorCode::kNotFound ? 2 : 1;
}

// --trace must name a file we can write, checked before the run, and none of
// the run's inputs (`run x.json --trace x.json` would overwrite the scenario).
rcxl::Status check_trace_path(const std::string& path, const std::vector<std::string>& inputs) {
  std::error_code ec;
  if (path.empty()) {
    return rcxl::Error(rcxl::ErrorCode::kBadRequest, "--trace: empty; name a file to write");
  }
  if (std::filesystem::is_directory(path, ec)) {
    return rcxl::Error(rcxl::ErrorCode::kBadRequest,
                       "--trace " + path + ": is a directory; name a file to write");
  }
  // Opening a FIFO for writing blocks until someone reads it (and a socket
  // cannot be opened); a regular file or a character device (/dev/null) can.
  const auto status = std::filesystem::status(path, ec);
  if (std::filesystem::is_fifo(status) || std::filesystem::is_socket(status) ||
      std::filesystem::is_block_file(status)) {
    return rcxl::Error(rcxl::ErrorCode::kBadRequest,
                       "--trace " + path +
                           ": is a pipe, socket or block device, which could block the run; name "
                           "a regular file (or /dev/null)");
  }
  for (const auto& input : inputs) {
    // Hard links and symlinks too; a path that does not exist yet is no input.
    if (std::filesystem::equivalent(path, input, ec)) {
      return rcxl::Error(rcxl::ErrorCode::kBadRequest,
                         "--trace " + path + ": is " + input +
                             ", an input of this run, which the trace would overwrite; choose "
                             "another file");
    }
  }
  errno = 0;
  std::ofstream out(path, std::ios::trunc);
  if (!out) {
    return rcxl::Error(rcxl::ErrorCode::kBadRequest, "--trace " + path + ": cannot write it (" +
                                                         std::strerror(errno ? errno : EACCES) +
                                                         "); choose a writable file");
  }
  return {};
}

// The scenario's /profile must name a profile there is: built in, or a regular
// file <name>.json of at most 16 MiB in --profiles. Returns that file ("" if built in).
rcxl::Result<std::string> check_profile_name(const std::string& origin, const std::string& name,
                                             const std::string& dir,
                                             const std::string& pointer = "/profile") {
  namespace fs = std::filesystem;
  std::vector<std::string> names;  // as a scenario writes them: all_dram
  if (dir.empty()) {
    for (const auto& f : rcxl::scenarios::embedded_files()) {
      const fs::path path(f.path);
      if (path.parent_path() == "profiles" && path.extension() == ".json") {
        names.push_back(path.stem().string());
      }
    }
  } else {
    std::error_code ec;
    for (const auto& entry : fs::directory_iterator(dir, ec)) {
      // Only files: a directory x.json is no profile x.
      if (entry.path().extension() == ".json" && !entry.is_directory(ec)) {
        names.push_back(entry.path().stem().string());
      }
    }
  }
  std::sort(names.begin(), names.end());
  if (std::find(names.begin(), names.end(), name) != names.end()) {
    if (dir.empty()) return std::string();
    const std::string file = dir + "/" + name + ".json";
    if (auto text = rcxl::scenarios::read_document_file(file); !text.ok()) {
      return rcxl::Error(rcxl::ErrorCode::kBadRequest,
                         origin + ": " + pointer + ": " + text.status().message());
    }
    return file;
  }
  std::string list;
  for (std::size_t i = 0; i < names.size() && i < 20; ++i) list += (i ? ", " : "") + names[i];
  if (names.size() > 20) list += ", ...";
  const std::string where = dir.empty() ? "built in" : "in " + dir;
  return rcxl::Error(rcxl::ErrorCode::kBadRequest,
                     origin + ": " + pointer + ": no profile '" + rcxl::scenarios::printable(name) +
                         "' " + where + "; expected one of: " + (list.empty() ? "(none)" : list) +
                         (dir.empty() ? " (or pass --profiles DIR for your own)" : ""));
}

// --profiles must name a directory; the profiles in it are read later.
rcxl::Status check_profiles_dir(const std::string& dir) {
  std::error_code ec;
  if (dir.empty()) return {};
  if (std::filesystem::is_directory(dir, ec)) {
    for (const auto& entry : std::filesystem::directory_iterator(dir, ec)) {
      if (entry.path().extension() == ".json") return {};
    }
    return rcxl::Error(rcxl::ErrorCode::kBadRequest,
                       "--profiles " + dir +
                           ": holds no <profile>.json files; put your profiles there (start from "
                           "copies of scenarios/profiles/*.json) or drop --profiles for the "
                           "built-in ones");
  }
  const bool exists = std::filesystem::exists(dir, ec);
  return rcxl::Error(rcxl::ErrorCode::kBadRequest,
                     "--profiles " + dir + (exists ? ": not a directory" : ": no such directory") +
                         "; name a directory of <profile>.json files or drop --profiles for the "
                         "built-in ones");
}

// Two nodes ping each other through the core echo protocol on the simulated
// network; prints the trace hash (same seed => same hash).
int run_demo(std::uint64_t seed, int pings) {
  rcxl::sim::SimWorld world(seed);
  auto& server_node = world.add_node("memory-node");
  auto& client_node = world.add_node("gpu-node");
  auto server_strand = server_node.make_strand("echo");
  auto client_strand = client_node.make_strand("echo");
  rcxl::protocol::EchoServer server(server_node, *server_strand);
  if (auto addr = server.start({"memory-node", 7000}); !addr.ok()) {
    std::fprintf(stderr, "rcxl-sim: %s\n", addr.status().ToString().c_str());
    return 1;
  }
  rcxl::protocol::EchoClient client(client_node, *client_strand);
  bool ok = false;
  client.run({"memory-node", 7000}, pings, [&](rcxl::Result<std::vector<std::string>> r) {
    ok = r.ok() && static_cast<int>(r->size()) == pings;
  });
  const rcxl::Status status = world.run_until([&] { return ok; });
  if (!status.ok()) {
    std::fprintf(stderr, "rcxl-sim: demo failed: %s\n  reproduce: rcxl-sim demo --seed %llu\n",
                 status.ToString().c_str(), static_cast<unsigned long long>(seed));
    return 1;
  }
  std::printf("demo: %d pings echoed in %.3f ms of virtual time, %llu trace lines\n", pings,
              rcxl::runtime::to_millis(world.loop().now()),
              static_cast<unsigned long long>(world.trace().lines()));
  std::printf("trace hash: %s\n", world.trace().hash_hex().c_str());
  return 0;
}

// A fault timed after the workload finished (or on a load that never came)
// never happens, and a run that passes without it tests nothing the file says
// (at_s past time_limit_s is refused at load; this is the rest, known only
// after the run).
std::vector<std::string> faults_that_never_happened(const rcxl::scenarios::Scenario& sc,
                                                    const rcxl::scenarios::RunResult& run) {
  std::vector<std::string> out;
  if (!run.status.ok()) return out;  // the run failed anyway, and says why
  for (std::size_t i = 0; i < sc.faults.size(); ++i) {
    if (i < run.faults_fired.size() && run.faults_fired[i]) continue;
    const auto& f = sc.faults[i];
    const std::string kind = rcxl::scenarios::fault_kind_name(f.kind);
    char line[320];
    if (f.during_load > 0) {
      std::snprintf(line, sizeof line,
                    "/faults/%zu (%s during load %llu): the run started %llu load(s)%s; pick an "
                    "earlier load or lengthen the workload",
                    i, kind.c_str(), static_cast<unsigned long long>(f.during_load),
                    static_cast<unsigned long long>(run.loads_started),
                    run.loads_started >= f.during_load ? " and ended before after_ms passed" : "");
    } else if (f.during_store > 0) {
      std::snprintf(
          line, sizeof line,
          "/faults/%zu (%s during store %llu): the run started %llu store(s)%s; pick an "
          "earlier store or lengthen the workload",
          i, kind.c_str(), static_cast<unsigned long long>(f.during_store),
          static_cast<unsigned long long>(run.stores_started),
          run.stores_started >= f.during_store ? " and ended before after_ms passed" : "");
    } else {
      const bool stores = sc.workload.kind == rcxl::scenarios::WorkloadKind::kStore;
      std::snprintf(line, sizeof line,
                    "/faults/%zu (%s at %.9g s): the workload's last %s at %.6f s, before it; "
                    "move at_s earlier or lengthen the workload",
                    i, kind.c_str(), rcxl::runtime::to_seconds(f.at),
                    stores ? "store ended" : "turn was answered", run.workload_seconds);
    }
    out.emplace_back(line);
  }
  return out;
}

// `embedded`: the text of a shipped replay (`path` is then its name in the binary).
int run_file(const std::string& path, std::optional<std::uint64_t> seed, const std::string& trace,
             bool json, bool quiet, const std::string& profiles,
             std::optional<std::string_view> embedded = std::nullopt) {
  std::string text;
  if (embedded) {
    text = std::string(*embedded);
  } else {
    auto read = rcxl::scenarios::read_document_file(path);
    if (!read.ok()) {
      std::fprintf(stderr, "rcxl-sim: %s\n", read.status().message().c_str());
      return 2;
    }
    text = std::move(read).value();
  }
  auto j = rcxl::scenarios::parse_json_document(text, path);
  if (!j.ok()) {
    std::fprintf(stderr, "rcxl-sim: %s\n", j.status().message().c_str());
    return 2;
  }
  auto scenario = rcxl::scenarios::parse_scenario(*j, path);
  if (!scenario.ok()) {
    std::fprintf(stderr, "rcxl-sim: %s\n", scenario.status().message().c_str());
    return 2;
  }
  if (seed) scenario->seed = *seed;
  if (auto s = check_profiles_dir(profiles); !s.ok()) {
    std::fprintf(stderr, "rcxl-sim: %s\n", s.message().c_str());
    return 2;
  }
  auto profile_file = check_profile_name(path, scenario->profile, profiles);
  if (!profile_file.ok()) {
    std::fprintf(stderr, "rcxl-sim: %s\n", profile_file.status().message().c_str());
    return 2;
  }
  // A memory node's profile is named like the scenario's, and is an input too.
  std::vector<std::string> inputs;
  if (!embedded) inputs.push_back(path);
  if (!profile_file->empty()) inputs.push_back(*profile_file);
  const auto& memory_profiles = scenario->topology.memory_profiles;
  for (std::size_t i = 0; i < memory_profiles.size(); ++i) {
    auto file = check_profile_name(path, memory_profiles[i], profiles,
                                   "/topology/memory_profiles/" + std::to_string(i));
    if (!file.ok()) {
      std::fprintf(stderr, "rcxl-sim: %s\n", file.status().message().c_str());
      return 2;
    }
    if (!file->empty()) inputs.push_back(*file);
  }
  auto profile = rcxl::scenarios::load_scenario_profile(profiles, *scenario, path);
  if (!profile.ok()) {
    std::fprintf(stderr, "rcxl-sim: %s\n", profile.status().message().c_str());
    return 2;
  }
  if (!trace.empty()) {
    if (auto s = check_trace_path(trace, inputs); !s.ok()) {
      std::fprintf(stderr, "rcxl-sim: %s\n", s.message().c_str());
      return 2;
    }
  }
  rcxl::scenarios::RunOptions options;
  options.record_trace_file = !trace.empty();
  options.trace_path = trace;
  if (!quiet) {
    options.progress = [](const std::string& line) { std::fprintf(stderr, "%s\n", line.c_str()); };
  }
  auto result = rcxl::scenarios::run_scenario(*scenario, *profile, options);
  const auto unfired = faults_that_never_happened(*scenario, result);
  // The requests each mean is over, as sweep and reproduce count them.
  const rcxl::scenarios::RunSummary summary = rcxl::scenarios::summarize(result);
  // A mean over no requests is no 0 ms: "n/a" (null in JSON).
  const Json ttft_json = summary.ttfts.empty() ? Json(nullptr) : Json(summary.ttft_ms);
  const Json load_json = summary.loads.empty() ? Json(nullptr) : Json(summary.load_ms);
  if (json) {
    Json out = {
        {"scenario", scenario->name},
        {"seed", scenario->seed},
        {"ok", result.status.ok() && result.invariants.violations.empty() && unfired.empty()},
        {"status", result.status.ToString()},
        {"mean_reuse_ttft_ms", ttft_json},
        {"mean_load_ms", load_json},
        {"virtual_s", result.virtual_seconds},
        {"wall_s", result.wall_seconds},
        {"boots", result.boots_seen},
        {"violations", result.invariants.violations},
        {"faults_never_happened", unfired},
        {"counters", result.counters},
        {"trace_hash", result.trace_hash}};
    if (scenario->workload.kind == rcxl::scenarios::WorkloadKind::kStore) {
      const auto& st = result.store;
      Json samples = Json::array();
      for (const auto& x : st.samples) samples.push_back({{"t_ms", x.t_ms}, {"gbps", x.gbps}});
      out["store"] = {{"stores", st.stores}, {"failed_stores", st.failed_stores},
                      {"bytes", st.bytes},   {"seconds", st.seconds},
                      {"gbps", st.gbps},     {"samples", samples}};
    }
    std::printf("%s\n", out.dump(2).c_str());
  } else {
    // The head line is the verdict: "ok" only when nothing below failed.
    std::string verdict = result.status.ToString();
    if (result.status.ok() && !(result.invariants.violations.empty() && unfired.empty())) {
      verdict = "FAILED (" + std::to_string(result.invariants.violations.size()) +
                " violation(s), " + std::to_string(unfired.size()) + " fault(s) never happened)";
    }
    // The name is the file's text: one line, no terminal controls.
    std::printf("%s (seed %llu): %s\n", rcxl::scenarios::printable(scenario->name, 200).c_str(),
                static_cast<unsigned long long>(scenario->seed), verdict.c_str());
    if (scenario->workload.kind == rcxl::scenarios::WorkloadKind::kStore) {
      const auto& st = result.store;
      std::printf(
          "  %llu stores (%llu failed), %.3f GiB stored in %.2f ms: %.2f GB/s; %.1f s "
          "virtual in %.2f s\n",
          static_cast<unsigned long long>(st.stores),
          static_cast<unsigned long long>(st.failed_stores),
          static_cast<double>(st.bytes) / (1ull << 30), st.seconds * 1e3, st.gbps,
          result.virtual_seconds, result.wall_seconds);
    } else {
      std::printf("  reuse-turn TTFT %s, KV load %s, %zu requests, %.1f s virtual in %.2f s\n",
                  rcxl::scenarios::mean_ms_text(summary.ttfts, summary.ttft_ms).c_str(),
                  rcxl::scenarios::mean_ms_text(summary.loads, summary.load_ms).c_str(),
                  result.records.size(), result.virtual_seconds, result.wall_seconds);
    }
    std::printf("  counters: %s\n", result.counters.dump().c_str());
    if (result.counters.contains("agent_restart_failure")) {
      std::printf("  NOTE: an agent_restart failed and the agent stayed down: %s\n",
                  result.counters["agent_restart_failure"].get<std::string>().c_str());
    }
    for (const auto& v : result.invariants.violations) std::printf("  VIOLATION: %s\n", v.c_str());
    for (const auto& f : unfired) std::printf("  FAULT NEVER HAPPENED: %s\n", f.c_str());
    std::printf("trace hash: %s\n", result.trace_hash.c_str());
  }
  const bool ok = result.status.ok() && result.invariants.violations.empty() && unfired.empty();
  if (!ok) {
    // The one line that runs this again, shipped replays by name.
    std::string again = embedded ? "rcxl-sim replay " + path.substr(8, path.size() - 13)
                                 : "rcxl-sim run " + rcxl::scenarios::shell_path(path);
    // Else the built-in ones run.
    if (!profiles.empty()) again += " --profiles " + rcxl::scenarios::shell_path(profiles);
    // A run that failed writing its trace fails again only with it.
    if (!trace.empty()) again += " --trace " + rcxl::scenarios::shell_path(trace);
    std::fprintf(stderr, "reproduce: %s --seed %llu\n", again.c_str(),
                 static_cast<unsigned long long>(scenario->seed));
  }
  return ok ? 0 : 1;
}

// reproduce and sweep print alike: the JSON, or the table, pictures and results file.
void print_report(bool json, const nlohmann::json& j, const std::string& table,
                  const std::vector<std::string>& pictures, const std::string& results) {
  if (json) {
    std::printf("%s\n", j.dump(2).c_str());
    return;
  }
  std::printf("%s", table.c_str());
  std::printf("pictures: ");
  for (const auto& p : pictures) std::printf("%s ", p.c_str());
  std::printf("\nresults: %s\n", results.c_str());
}

int run_reproduce(const rcxl::scenarios::ReproduceOptions& options, bool json) {
  if (auto s = check_profiles_dir(options.profiles_dir); !s.ok()) {
    std::fprintf(stderr, "rcxl-sim reproduce: %s\n", s.message().c_str());
    return 2;
  }
  auto report = rcxl::scenarios::reproduce(options);
  if (!report.ok()) {
    std::fprintf(stderr, "rcxl-sim reproduce: %s\n", report.status().message().c_str());
    return exit_code_of(report.status());
  }
  print_report(json, report->json, report->table, report->pictures,
               (std::filesystem::path(options.out_dir) / "reproduce.json").string());
  return 0;
}

// The parameter catalogue goes in `sweep --help` only: in the top-level list it
// buried the other subcommands.
std::string sweep_parameters() {
  std::string out =
      "Built-in parameters (or any JSON pointer: /device/..., /nic/..., /engine/...,\n"
      "/control_link/... into the profile, anything else into the scenario):";
  for (const auto& [name, help] : rcxl::scenarios::sweep_param_help()) {
    out += "\n  " + name + ": " + help;
  }
  return out +
         "\nExample: rcxl-sim sweep --param dram_cache_bytes=4G,16G --configs hints,no_hints\n";
}

int run_sweep(rcxl::scenarios::SweepOptions options, const std::vector<std::string>& params,
              bool json) {
  for (const auto& spec : params) {
    auto p = rcxl::scenarios::parse_sweep_param(spec);
    if (!p.ok()) {
      std::fprintf(stderr, "rcxl-sim sweep: %s\n", p.status().message().c_str());
      return 2;
    }
    options.params.push_back(std::move(p).value());
  }
  if (auto s = check_profiles_dir(options.profiles_dir); !s.ok()) {
    std::fprintf(stderr, "rcxl-sim sweep: %s\n", s.message().c_str());
    return 2;
  }
  if (!options.scenario_path.empty()) {
    // sweep() refuses an --out that would overwrite this file.
    auto text = rcxl::scenarios::read_document_file(options.scenario_path);
    if (!text.ok()) {
      std::fprintf(stderr, "rcxl-sim sweep: --scenario %s\n", text.status().message().c_str());
      return 2;
    }
    auto j = rcxl::scenarios::parse_json_document(*text, options.scenario_path);
    if (!j.ok()) {
      std::fprintf(stderr, "rcxl-sim sweep: %s\n", j.status().message().c_str());
      return 2;
    }
    options.scenario = std::move(j).value();
  }
  auto report = rcxl::scenarios::sweep(options);
  if (!report.ok()) {
    std::fprintf(stderr, "rcxl-sim sweep: %s\n", report.status().message().c_str());
    return exit_code_of(report.status());
  }
  const std::filesystem::path out(options.out_dir);
  print_report(json, report->json, report->table, report->pictures,
               (out / "sweep.csv").string() + " " + (out / "sweep.json").string());
  for (const auto& f : report->failures) std::fprintf(stderr, "FAILED %s\n", f.c_str());
  return report->failures.empty() ? 0 : 1;
}

// Unknown or missing subcommand: name it and list the subcommands (CLI11 would
// only say "not expected").
bool refuse_subcommand(CLI::App& app, int argc, char** argv) {
  if (argc > 1 && argv[1][0] == '-') return false;  // --help, or CLI11 names the flag
  for (const auto* sub : app.get_subcommands([](CLI::App*) { return true; })) {
    if (argc > 1 && sub->get_name() == argv[1]) return false;
  }
  const std::string list = rcxl::apps::subcommand_names(app);
  if (argc > 1) {
    std::fprintf(stderr, "rcxl-sim: no subcommand '%s'; one of: %s (rcxl-sim --help)\n",
                 rcxl::runtime::printable(argv[1]).c_str(), list.c_str());
  } else {
    std::fprintf(stderr, "rcxl-sim: name a subcommand, one of: %s (rcxl-sim --help)\n",
                 list.c_str());
  }
  return true;
}

// --help prints help and exits 0; any other parse error is one line and exit 2.
int parse_error(CLI::App& app, const CLI::ParseError& e, int argc, char** argv) {
  if (e.get_exit_code() == static_cast<int>(CLI::ExitCodes::Success)) return app.exit(e);
  std::string where = "rcxl-sim";
  for (const auto* sub : app.get_subcommands()) where += " " + sub->get_name();
  std::optional<std::string> problem = rcxl::apps::misplaced_option_problem(app, argc, argv);
  if (!problem) problem = rcxl::apps::unknown_option_problem(app);
  const std::string what = rcxl::apps::parse_problem_line(problem.value_or(e.what()));
  std::fprintf(stderr, "%s: %s; run %s --help\n", where.c_str(), what.c_str(), where.c_str());
  return 2;
}

int run_cli(int argc, char** argv) {
  CLI::App app{"rcxl-sim: run rcxl on the deterministic simulator (virtual time, seeded faults)"};
  rcxl::apps::add_version_flag(app, "rcxl-sim", RCXL_VERSION);
  app.footer(
      "Examples:\n"
      "  rcxl-sim reproduce                  the seed's measurements P1-P6 (docs/reproduce.md)\n"
      "  rcxl-sim replay --list              the shipped scenarios (fault replays, seed_serving, "
      "store_bandwidth)\n"
      "  rcxl-sim replay reset_during_load   one of them, its expect block checked\n"
      "  rcxl-sim run my.json --seed 7       a scenario file of your own (docs/scenarios.md)\n"
      "rcxl-sim SUBCOMMAND --help says more, and each subcommand's exit codes.");
  app.require_subcommand(1);
  std::uint64_t seed = 1;
  int pings = 10;
  auto* demo =
      app.add_subcommand("demo", "ping between two simulated nodes; prints the trace hash");
  demo->add_option("--seed", seed, "the run's seed (same seed => same trace hash)")
      ->transform(kSeed)
      ->capture_default_str();
  demo->footer(kExitCodes);
  demo->add_option("--pings", pings, "how many pings")
      ->transform(rcxl::apps::WholeNumberIn(1, 1000000))
      ->capture_default_str();

  std::string file, trace, profiles;
  std::optional<std::uint64_t> run_seed;
  bool json = false;
  auto* run = app.add_subcommand("run", "run one scenario file; prints its results and trace hash");
  run->add_option("FILE", file, "scenario JSON (docs/scenarios.md)")->required();
  run->add_option("--seed", run_seed, "override the scenario's seed")->transform(kSeed);
  std::vector<CLI::Option*> path_options;  // an empty value is a mistake, not "none"
  path_options.push_back(run->add_option(
      "--trace", trace,
      "write the trace lines to this file (a regular file or /dev/null, not a pipe)"));
  run->add_flag("--json", json, "print the result as one JSON object");
  path_options.push_back(run->add_option(
      "--profiles", profiles, "read profiles from this directory instead of the built-in ones"));
  bool run_quiet = false;
  run->add_flag("--quiet", run_quiet,
                "no progress lines on stderr (the simulated services' warnings, e.g. a boot "
                "change, still show)");
  run->footer(kExitCodes);
  std::string replay_name;
  auto* replay = app.add_subcommand("replay",
                                    "run a shipped scenario by name: fault replays, seed_serving, "
                                    "store_bandwidth (--list shows them)");
  replay->add_option("NAME", replay_name, "e.g. reset_during_load");
  bool list = false;
  replay->add_flag("--list", list, "list the shipped scenarios");
  replay->add_option("--seed", run_seed, "override the scenario's seed")->transform(kSeed);
  path_options.push_back(replay->add_option(
      "--trace", trace,
      "write the trace lines to this file (a regular file or /dev/null, not a pipe)"));
  replay->add_flag("--json", json, "print the result as one JSON object");
  replay->add_flag("--quiet", run_quiet,
                   "no progress lines on stderr (the simulated services' warnings, e.g. a boot "
                   "change, still show)");
  replay->footer(kExitCodes);

  rcxl::scenarios::ReproduceOptions repro;
  bool repro_json = false, quiet = false;
  auto* reproduce = app.add_subcommand(
      "reproduce", "run the seed's measurements P1-P6 (PAPER.md) and print the table");
  reproduce->footer(kReproduceExitCodes);
  reproduce->add_flag("--json", repro_json, "print one JSON object keyed P1..P6");
  reproduce->add_option("--out", repro.out_dir, "where the SVG pictures and reproduce.json go")
      ->capture_default_str();
  reproduce->add_option("--pairs", repro.pairs, "paired runs for P1-P3")
      ->transform(rcxl::apps::WholeNumberIn(1, 50))
      ->capture_default_str();
  reproduce
      ->add_option("--p5-pairs", repro.p5_pairs,
                   "paired runs for P5 (the seed's 3; at most --pairs)")
      ->transform(rcxl::apps::WholeNumberIn(1, 50))
      ->capture_default_str();
  reproduce->add_flag("--beyond", repro.beyond_seed,
                      "also run CXL-SSD without hints (the no-hint TTFT ratio, beyond the seed)");
  reproduce->add_option("--seed", repro.first_seed, "seed of the first pair")
      ->transform(kSeed)
      ->capture_default_str();
  reproduce
      ->add_option("--threads", repro.threads, "runs in parallel (results do not depend on it)")
      ->transform(rcxl::apps::WholeNumberIn(1, 64))
      ->capture_default_str();
  path_options.push_back(
      reproduce->add_option("--profiles", repro.profiles_dir,
                            "read profiles from this directory instead of the built-in ones"));
  reproduce
      ->add_option("--set", repro.settings,
                   "change a profile field in every profile, e.g. --set idle_write_back=1 or "
                   "--set /nic/bytes_per_second=6.25e9 (what-if; the table says so)")
      ->type_name("NAME=VALUE");
  reproduce->add_flag("--quiet", quiet, "no progress lines on stderr");

  rcxl::scenarios::SweepOptions sweep_opts;
  std::vector<std::string> sweep_params;
  std::string sweep_configs = "hints,no_hints";
  bool sweep_json = false, sweep_quiet = false;
  int sweep_conversations = 0, sweep_turns = 0;
  auto* sweep = app.add_subcommand(
      "sweep",
      "run a what-if grid: every point of the --param grid under each configuration and seed;\n"
      "writes OUT/sweep.csv, OUT/sweep.json and OUT/sweep_<metric>.svg (docs/reproduce.md)");
  sweep->footer(sweep_parameters() + kSweepExitCodes);
  sweep->add_option("--param", sweep_params,
                    "NAME=V1,V2,... one grid axis (repeat for more; the first is the charts' x "
                    "axis); values: numbers with K/M/G/T (binary) or true/false, each once; at "
                    "most 10000 runs in all. Default: dram_cache_bytes=4G,8G,16G,32G");
  sweep
      ->add_option("--configs", sweep_configs,
                   "comma-separated: all_dram, hints, gated, waits_off, no_hints")
      ->capture_default_str();
  sweep
      ->add_option("--seeds", sweep_opts.seeds,
                   "runs per point and configuration (seeds from --seed)")
      ->transform(rcxl::apps::WholeNumberIn(1, 50))
      ->capture_default_str();
  sweep->add_option("--seed", sweep_opts.first_seed, "the first seed")
      ->transform(kSeed)
      ->capture_default_str();
  sweep
      ->add_option("--threads", sweep_opts.threads,
                   "runs in parallel (results do not depend on it)")
      ->transform(rcxl::apps::WholeNumberIn(1, 64))
      ->capture_default_str();
  sweep->add_option("--out", sweep_opts.out_dir, "where sweep.csv, sweep.json and the SVGs go")
      ->capture_default_str();
  path_options.push_back(
      sweep->add_option("--scenario", sweep_opts.scenario_path,
                        "start every point from this scenario file instead of the built-in "
                        "seed_serving (its client and profile are set by --configs)"));
  sweep
      ->add_option("--conversations", sweep_conversations,
                   "override the workload's conversations (a quicker, smaller sweep; a few "
                   "conversations' KV may fit the device DRAM, so hints and no_hints tie)")
      ->transform(rcxl::apps::WholeNumberIn(1, rcxl::scenarios::kMaxConversations));
  sweep->add_option("--turns", sweep_turns, "override the workload's turns per conversation")
      ->transform(rcxl::apps::WholeNumberIn(1, rcxl::scenarios::kMaxTurns));
  path_options.push_back(
      sweep->add_option("--profiles", sweep_opts.profiles_dir,
                        "read profiles from this directory instead of the built-in ones"));
  sweep->add_flag("--json", sweep_json, "print one JSON object (summary and every run)");
  sweep->add_flag("--quiet", sweep_quiet, "no progress lines on stderr");
  if (refuse_subcommand(app, argc, argv)) return 2;
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    return parse_error(app, e, argc, argv);
  }
  for (const CLI::Option* option : path_options) {
    if (option->count() == 0 || !option->as<std::string>().empty()) continue;
    std::fprintf(stderr, "rcxl-sim: %s: empty; name a path, or leave the flag out\n",
                 option->get_name().c_str());
    return 2;
  }
  if (sweep->parsed()) {
    sweep_opts.configs.clear();
    // Every comma separates two names: "hints," names an empty one (refused).
    for (std::size_t start = 0;;) {
      const std::size_t comma = sweep_configs.find(',', start);
      sweep_opts.configs.push_back(sweep_configs.substr(start, comma - start));
      if (comma == std::string::npos) break;
      start = comma + 1;
    }
    if (sweep_conversations > 0) sweep_opts.conversations = sweep_conversations;
    if (sweep_turns > 0) sweep_opts.turns = sweep_turns;
    if (!sweep_quiet) {
      sweep_opts.progress = [](const std::string& line) {
        std::fprintf(stderr, "%s\n", line.c_str());
      };
    }
    return run_sweep(sweep_opts, sweep_params, sweep_json);
  }
  if (replay->parsed()) {
    std::vector<std::string> names;
    for (const auto& f : rcxl::scenarios::embedded_files()) {
      if (f.path.rfind("replays/", 0) == 0) {
        names.emplace_back(f.path.substr(8, f.path.size() - 13));
      }
    }
    if (list && !replay_name.empty()) {
      std::fprintf(stderr, "rcxl-sim replay: --list takes no NAME (got '%s'); drop one\n",
                   rcxl::scenarios::printable(replay_name).c_str());
      return 2;
    }
    if (list) {
      if (json) {
        std::printf("%s\n", Json(names).dump().c_str());  // ["name", ...]
        return 0;
      }
      for (const auto& n : names) std::printf("%s\n", n.c_str());
      return 0;
    }
    std::string known;
    for (const auto& n : names) known += (known.empty() ? "" : ", ") + n;
    if (replay_name.empty()) {
      std::fprintf(stderr, "rcxl-sim replay: needs a NAME; one of: %s\n", known.c_str());
      return 2;
    }
    const std::string path = "replays/" + replay_name + ".json";
    auto text = rcxl::scenarios::embedded_file(path);
    if (!text) {
      std::fprintf(stderr, "rcxl-sim replay: no shipped scenario '%s'; one of: %s\n",
                   rcxl::scenarios::printable(replay_name).c_str(), known.c_str());
      return 2;
    }
    return run_file(path, run_seed, trace, json, run_quiet, "", text);
  }
  if (reproduce->parsed()) {
    if (!quiet) {
      repro.progress = [](const std::string& line) { std::fprintf(stderr, "%s\n", line.c_str()); };
    }
    repro.p5_pairs_given = reproduce->count("--p5-pairs") > 0;
    return run_reproduce(repro, repro_json);
  }
  if (demo->parsed()) return run_demo(seed, pings);
  if (run->parsed()) return run_file(file, run_seed, trace, json, run_quiet, profiles);
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  // A crash guard, not error handling: bad input is refused above with exit 2.
  return rcxl::apps::run_guarded("rcxl-sim", 1, [&] { return run_cli(argc, argv); });
}
