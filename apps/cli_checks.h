// Command-line checks shared by rcxl-sim, rcxl-agent, rcxl-directory and
// rcxl-kv: number validators whose refusal says what is wanted, and one parse
// step that turns CLI11's errors into the binary's documented usage exit code.
#pragma once

#include <CLI/CLI.hpp>
#include <algorithm>
#include <charconv>
#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <functional>
#include <iostream>
#include <limits>
#include <optional>
#include <regex>
#include <sstream>
#include <string>
#include <vector>

#include "core/runtime/printable.h"
#include "core/runtime/transport.h"

namespace rcxl::apps {

// The longest error line a binary prints: a message echoing more is cut.
inline constexpr std::size_t kMaxMessageChars = 2000;

// A CLI11 parse error as one line: its own line breaks become spaces, and what
// it echoes of the command line is shown printable.
inline std::string parse_problem_line(std::string problem) {
  std::replace(problem.begin(), problem.end(), '\n', ' ');
  // CLI11 says "--seed: At Most 1 required but received 2" for a flag given twice.
  static const std::regex kRepeated("^(-[-\\w]+): At Most 1 required but received (\\d+)$");
  std::smatch m;
  if (std::regex_match(problem, m, kRepeated)) {
    problem = m[1].str() + " is given " + m[2].str() + " times; give it once";
  }
  return runtime::printable(problem, kMaxMessageChars);
}

namespace detail {

inline std::string number_text(double value) {
  std::ostringstream out;
  out.precision(15);
  out << value;
  return out.str();
}

// Digits only, in [min, max]. A refusal reads "must be <wanted>, not 'TEXT'",
// or "must be <too_big>, not 'TEXT'" for a number above max; --help shows
// the type as "UINT:<help>".
inline CLI::Validator whole_number(std::uint64_t min, std::uint64_t max, const std::string& wanted,
                                   const std::string& too_big, const std::string& help) {
  return CLI::Validator(
      [=](std::string& text) -> std::string {
        std::uint64_t value = 0;
        const char* end = text.data() + text.size();
        const auto [last, ec] = std::from_chars(text.data(), end, value);
        const bool digits = !text.empty() && last == end &&
                            (ec == std::errc() || ec == std::errc::result_out_of_range);
        if (!digits || (ec == std::errc() && value < min)) {
          return "must be " + wanted + ", not '" + text + "'";
        }
        if (ec != std::errc() || value > max) return "must be " + too_big + ", not '" + text + "'";
        // CLI11 reads a leading 0 as octal: hand it the decimal value checked here
        // (so add these with ->transform(), which keeps the rewrite; ->check() drops it).
        text = std::to_string(value);
        return {};
      },
      help);
}

}  // namespace detail

// An unsigned whole number >= min that fits T: "--flag: must be a whole number >= 1, not '0'".
template <typename T>
CLI::Validator WholeNumberAtLeast(std::uint64_t min) {
  const std::uint64_t max = std::numeric_limits<T>::max();
  const std::string help = min == 0   ? "NONNEGATIVE"
                           : min == 1 ? "POSITIVE"
                                      : ">= " + std::to_string(min);
  return detail::whole_number(min, max, "a whole number >= " + std::to_string(min),
                              "at most " + std::to_string(max), help);
}

// An unsigned whole number in [min, max]: "must be a whole number from 1 to 4096, not '0'".
inline CLI::Validator WholeNumberIn(std::uint64_t min, std::uint64_t max) {
  const std::string wanted =
      "a whole number from " + std::to_string(min) + " to " + std::to_string(max);
  return detail::whole_number(min, max, wanted, wanted,
                              "in [" + std::to_string(min) + " - " + std::to_string(max) + "]");
}

namespace detail {

// Seconds, a finite number at most a year (the nanosecond count cannot
// overflow) that `fits` accepts: "must be <wanted>, not 'abc'".
inline CLI::Validator seconds_where(std::function<bool(double)> fits, const std::string& wanted,
                                    const std::string& help) {
  constexpr double kYear = 365.0 * 24 * 3600;
  return CLI::Validator(
      [=](std::string& text) -> std::string {
        char* end = nullptr;
        // Decimal only: strtod would also take a hex float ("0x10", "0x1p3").
        const bool hex = text.find_first_of("xX") != std::string::npos;
        const double value = text.empty() || hex ? NAN : std::strtod(text.c_str(), &end);
        const bool whole = end == text.c_str() + text.size();
        // 1e400 overflows to inf: too large, not "must be >= 0.001".
        if (whole && std::isinf(value) && value > 0) {
          return "must be at most " + number_text(kYear) + " (a year), not '" + text + "'";
        }
        if (!std::isfinite(value) || !whole || !fits(value)) {
          return "must be " + wanted + ", not '" + text + "'";
        }
        if (value > kYear) {
          return "must be at most " + number_text(kYear) + " (a year), not '" + text + "'";
        }
        return {};
      },
      help);
}

}  // namespace detail

// Seconds of a duration: a number > 0 (or >= 0 with `zero_ok`), at most a year.
inline CLI::Validator Seconds(bool zero_ok) {
  if (zero_ok) {
    return detail::seconds_where([](double v) { return v >= 0; }, "a number >= 0", "NONNEGATIVE");
  }
  return detail::seconds_where([](double v) { return v > 0; }, "a number > 0", "POSITIVE");
}

// Seconds of an interval that a timer repeats: a number >= `min` (> 0), at
// most a year. A floor keeps a tiny interval from spinning a core:
// "must be a number >= 0.001, not '1e-12'"; --help shows "FLOAT:>= 0.001".
inline CLI::Validator SecondsAtLeast(double min) {
  return detail::seconds_where([min](double v) { return v >= min; },
                               "a number >= " + detail::number_text(min),
                               ">= " + detail::number_text(min));
}

// Seconds of a timeout where 0 means "never": 0, or a number >= `min` (> 0),
// at most a year. A tiny positive value would round to 0 ns and turn the
// timeout off: "must be 0 (never) or a number >= 0.001, not '1e-10'".
inline CLI::Validator SecondsOffOrAtLeast(double min) {
  return detail::seconds_where([min](double v) { return v == 0 || v >= min; },
                               "0 (never) or a number >= " + detail::number_text(min),
                               "0 or >= " + detail::number_text(min));
}

// A path flag given as '' (an unset variable in a unit's ExecStart): "must
// name a file, not ''" instead of being taken for the flag not given.
inline CLI::Validator NonEmptyPath() {
  return CLI::Validator(
      [](std::string& text) -> std::string {
        return text.empty() ? "must name a file, not '' (an unset variable?)" : std::string();
      },
      "PATH");
}

// A program that needs a subcommand and got none: CLI11 says only "A
// subcommand is required", even when the word given was a misspelt one.
// "a, b, c": every subcommand the program has.
inline std::string subcommand_names(CLI::App& app) {
  std::string names;
  for (const auto* sub : app.get_subcommands([](CLI::App*) { return true; })) {
    names += (names.empty() ? "" : ", ") + sub->get_name();
  }
  return names;
}

inline std::optional<std::string> subcommand_problem(CLI::App& app) {
  if (app.get_require_subcommand_min() == 0 || !app.get_subcommands().empty()) return std::nullopt;
  const std::string names = subcommand_names(app);
  for (const std::string& word : app.remaining()) {
    if (!word.empty() && word[0] != '-') return "no subcommand '" + word + "'; one of: " + names;
  }
  return "name a subcommand, one of: " + names;
}

namespace detail {

// Edits (insert, delete, replace) between two short flag names.
inline std::size_t edit_distance(const std::string& a, const std::string& b) {
  std::vector<std::size_t> row(b.size() + 1);
  for (std::size_t j = 0; j <= b.size(); ++j) row[j] = j;
  for (std::size_t i = 1; i <= a.size(); ++i) {
    std::size_t diagonal = row[0];
    row[0] = i;
    for (std::size_t j = 1; j <= b.size(); ++j) {
      const std::size_t above = row[j];
      row[j] = std::min({row[j] + 1, row[j - 1] + 1, diagonal + (a[i - 1] == b[j - 1] ? 0 : 1)});
      diagonal = above;
    }
  }
  return row[b.size()];
}

// "--name" for every long option of `app` and of the subcommands it parsed.
inline void long_option_names(const CLI::App& app, std::vector<std::string>& out) {
  for (const CLI::Option* opt : app.get_options()) {
    for (const std::string& name : opt->get_lnames()) out.push_back("--" + name);
  }
  for (const CLI::App* sub : app.get_subcommands()) long_option_names(*sub, out);
}

}  // namespace detail

// A word that looks like an option but is none: CLI11 reports a missing
// required option first ("--listen is required" for a misspelt --listne), or
// "arguments were not expected" without a hint. Names it, and the closest
// option when one is near (within two edits, or a prefix of one).
inline std::optional<std::string> unknown_option_problem(CLI::App& app) {
  std::vector<std::string> names;
  detail::long_option_names(app, names);
  for (const std::string& word : app.remaining(true)) {
    if (word.size() < 3 || word.rfind("--", 0) != 0) continue;
    const std::string flag = word.substr(0, word.find('='));
    if (std::find(names.begin(), names.end(), flag) != names.end()) continue;
    std::string closest;
    std::size_t best = 3;
    for (const std::string& name : names) {
      const std::size_t d = name.rfind(flag, 0) == 0 ? 1 : detail::edit_distance(flag, name);
      if (d < best) {
        best = d;
        closest = name;
      }
    }
    return "unknown option '" + flag + "'" +
           (closest.empty() ? std::string() : " (did you mean " + closest + "?)");
  }
  return std::nullopt;
}

// An option of a subcommand given before the subcommand's name ("rcxl-sim
// --json reproduce"): CLI11 says only "argument was not expected: --json".
// Names the subcommand it goes after.
inline std::optional<std::string> misplaced_option_problem(CLI::App& app, int argc, char** argv) {
  for (CLI::App* sub : app.get_subcommands()) {
    int named_at = 1;
    while (named_at < argc && sub->get_name() != argv[named_at]) ++named_at;
    for (int i = 1; i < named_at; ++i) {
      const std::string word = argv[i];
      if (word.size() < 3 || word.rfind("--", 0) != 0) continue;
      const std::string flag = word.substr(0, word.find('='));
      if (app.get_option_no_throw(flag) != nullptr) continue;
      if (sub->get_option_no_throw(flag) == nullptr) continue;
      return "'" + flag + "' is an option of '" + sub->get_name() + "': put it after '" +
             sub->get_name() + "'";
    }
  }
  return std::nullopt;
}

// `PROGRAM --version` prints "PROGRAM VERSION" and exits 0.
inline void add_version_flag(CLI::App& app, const std::string& program, const char* version) {
  app.set_version_flag("--version", program + " " + version, "print the version and exit");
}

// Parses the command line. --help prints and answers 0; any other parse
// error prints one line, "PROGRAM: <the problem>; run with --help ...", on
// stderr and answers `usage_exit_code`. nullopt: parsed, go on.
inline std::optional<int> parse_command_line(CLI::App& app, int argc, char** argv,
                                             const std::string& program, int usage_exit_code) {
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    if (e.get_exit_code() == static_cast<int>(CLI::ExitCodes::Success)) return app.exit(e);
    std::optional<std::string> problem = misplaced_option_problem(app, argc, argv);
    if (!problem) problem = unknown_option_problem(app);
    if (!problem) problem = subcommand_problem(app);
    std::cerr << program << ": " << parse_problem_line(problem.value_or(e.what()))
              << "; run with --help for more information" << std::endl;
    return usage_exit_code;
  }
  return std::nullopt;
}

// An RDMA endpoint: "IP", "IP:PORT" or "[IPV6]:PORT" (a bare IPv6 carries no
// port), its port 1..65535, or 0 (any free port) for a listener, which prints
// the port it got. Empty when fine, else why not.
enum class RdmaEndpointUse { kConnect, kListen };
inline std::string rdma_endpoint_problem(const std::string& text,
                                         RdmaEndpointUse use = RdmaEndpointUse::kConnect) {
  if (text.empty()) return "is empty; give IP or IP:PORT";
  const bool has_port = text.front() == '[' || std::count(text.begin(), text.end(), ':') == 1;
  if (!has_port) return "";
  auto address = rcxl::runtime::Address::Parse(text);
  if (!address.ok()) return address.status().message();
  if (address->port == 0 && use == RdmaEndpointUse::kConnect) {
    return "port 0 is no port to connect to; give 1..65535";
  }
  return "";
}

}  // namespace rcxl::apps
