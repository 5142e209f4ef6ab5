#include "core/extension/recording_extension.h"

#include <algorithm>
#include <cctype>

#include "core/protocol/messages.h"
#include "core/runtime/printable.h"

namespace rcxl::ext {
namespace {

Status bad(std::string message) {
  return Error(ErrorCode::kBadRequest, "recording config: " + std::move(message));
}

// Config may be built in code, where 5 is a signed integer: accept any >= 0.
bool is_count(const Json& v) {
  return v.is_number_unsigned() || (v.is_number_integer() && v.get<std::int64_t>() >= 0);
}

Result<std::set<std::uint64_t>> region_set(const Json& value, const char* key) {
  std::set<std::uint64_t> out;
  if (!value.is_array()) return bad(std::string(key) + " must be an array of region ids");
  for (const Json& v : value) {
    if (!is_count(v)) return bad(std::string(key) + " must hold unsigned integers");
    out.insert(v.get<std::uint64_t>());
  }
  return out;
}

std::string trim(std::string_view text) {
  std::size_t begin = 0;
  std::size_t end = text.size();
  while (begin < end && std::isspace(static_cast<unsigned char>(text[begin]))) ++begin;
  while (end > begin && std::isspace(static_cast<unsigned char>(text[end - 1]))) --end;
  return std::string(text.substr(begin, end - begin));
}

// Lines keep "hook" first and the arguments in R2.2's order.
using Line = nlohmann::ordered_json;

Line ranges_line(const std::vector<Range>& ranges) {
  Line out = Line::array();
  for (const auto& r : ranges) out.push_back({r.region, r.offset, r.length});
  return out;
}

Line region_line(const char* hook, const RegionInfo& region) {
  return {{"hook", hook}, {"region", region.region}};
}

}  // namespace

Json ranges_to_json(const std::vector<Range>& ranges) {
  Json out = Json::array();
  for (const auto& r : ranges) out.push_back({r.region, r.offset, r.length});
  return out;
}

Result<RecordingConfig> RecordingConfig::FromJson(const Json& config) {
  RecordingConfig out;
  if (config.is_null()) return out;
  if (!config.is_object()) return bad("must be a JSON object");
  for (const auto& [key, value] : config.items()) {
    if (key == "actions") {
      if (!value.is_array()) return bad("actions must be an array of strings");
      out.actions.clear();
      for (const Json& a : value) {
        if (!a.is_string()) return bad("actions must be an array of strings");
        // The agent would only warn and not advertise it: here it is a typo.
        if (!protocol::action_from_name(a.get<std::string>())) {
          return bad("actions/" + std::to_string(out.actions.size()) + " '" +
                     runtime::printable(a.get<std::string>()) +
                     "' is no action; use read_hint, read_hint_end, read_promote, write_hint or "
                     "write_wait");
        }
        out.actions.push_back(a.get<std::string>());
      }
    } else if (key == "generation_file" || key == "log") {
      if (!value.is_string()) return bad(key + " must be a path string");
      (key == "log" ? out.log : out.generation_file) = value.get<std::string>();
    } else if (key == "refuse_regions" || key == "fail_mapped_regions") {
      auto set = region_set(value, key.c_str());
      if (!set.ok()) return set.status();
      (key == "refuse_regions" ? out.refuse_regions : out.fail_mapped_regions) = *set;
    } else if (key == "retire_refusals" || key == "write_wait_delay_ms") {
      if (!is_count(value)) return bad(key + " must be an unsigned integer");
      (key == "retire_refusals" ? out.retire_refusals : out.write_wait_delay_ms) =
          value.get<std::uint64_t>();
    } else if (key == "fail_first_read_hint_of") {
      if (!value.is_array()) return bad(key + " must be an array of request names");
      for (const Json& name : value) {
        if (!name.is_string()) return bad(key + " must be an array of request names");
        out.fail_first_read_hint_of.insert(name.get<std::string>());
      }
    } else if (key == "write_wait_result") {
      if (!value.is_object() && !value.is_null()) return bad("write_wait_result must be an object");
      out.write_wait_result = value;
    } else {
      return bad("unknown key '" + runtime::printable(key) +
                 "'; it takes actions, generation_file, log, refuse_regions, "
                 "fail_mapped_regions, fail_first_read_hint_of, retire_refusals, "
                 "write_wait_delay_ms, write_wait_result");
    }
  }
  return out;
}

RecordingExtension::RecordingExtension(runtime::Runtime& runtime, RecordingConfig config)
    : runtime_(runtime),
      log_(runtime.log_sink(), "recording"),
      config_(std::move(config)),
      timer_strand_(runtime.make_strand("recording-ext")) {}

RecordingExtension::~RecordingExtension() = default;

void RecordingExtension::record(const nlohmann::ordered_json& line) {
  if (!config_.log) return;
  // One line per call, appended and flushed at once (the port's contract).
  const Status st = runtime_.file_system().append_file(*config_.log, line.dump() + "\n");
  if (!st.ok()) {
    if (!log_failing_.exchange(true)) {
      log_.warn("its log lost a line, and loses every line until it can append again: ",
                st.message());
    }
  } else if (log_failing_.exchange(false)) {
    log_.warn("its log ", *config_.log, " takes lines again (the ones in between are lost)");
  }
}

Status RecordingExtension::validate_access(const RegionInfo& region) {
  record(region_line("validate_access", region));
  if (config_.refuse_regions.count(region.region)) {
    return Error(ErrorCode::kRefused,
                 "recording: region " + std::to_string(region.region) + " is in refuse_regions");
  }
  return {};
}

Status RecordingExtension::mapped(const RegionInfo& region, bool fresh) {
  Line line = region_line("mapped", region);
  line["fresh"] = fresh;
  record(line);
  if (config_.fail_mapped_regions.count(region.region)) {
    return Error(ErrorCode::kExtensionFailed, "recording: region " + std::to_string(region.region) +
                                                  " is in fail_mapped_regions");
  }
  return {};
}

bool RecordingExtension::retire(const RegionInfo& region) {
  record(region_line("retire", region));
  std::lock_guard lock(mu_);
  auto& refused = retire_refused_[region.region];
  if (refused < config_.retire_refusals) {
    ++refused;
    return false;
  }
  retire_refused_.erase(region.region);
  return true;
}

Status RecordingExtension::hint(const Hint& hint) {
  Line line = {{"hook", "hint"}, {"conn", hint.conn}, {"action", hint.action}};
  line[hint.action == "write_hint" ? "token" : "request"] = hint.request;
  line["ranges"] = ranges_line(hint.ranges);
  record(line);
  if (hint.action == "read_hint" && config_.fail_first_read_hint_of.count(hint.request)) {
    std::lock_guard lock(mu_);
    if (failed_read_hints_.insert(hint.request).second) {
      return Error(ErrorCode::kInternal, "recording: the first read_hint of '" + hint.request +
                                             "' fails (fail_first_read_hint_of)");
    }
  }
  return {};
}

void RecordingExtension::close() {
  record(Line{{"hook", "close"}});
}

std::optional<std::string> RecordingExtension::memory_generation() {
  // Polled every 0.1 s: not logged, or the log would be mostly polls.
  if (!config_.generation_file) return std::nullopt;
  auto text = runtime_.file_system().read_file(*config_.generation_file);
  if (!text.ok()) return std::nullopt;
  std::string generation = trim(*text);
  if (generation.empty()) return std::nullopt;
  return generation;
}

Status RecordingExtension::connection_closed(std::uint64_t conn) {
  record(Line{{"hook", "connection_closed"}, {"conn", conn}});
  return {};
}

void RecordingExtension::write_wait(const WriteWait& wait, WriteWaitDone done) {
  record(Line{{"hook", "write_wait"},
              {"conn", wait.conn},
              {"token", wait.token},
              {"ranges", ranges_line(wait.ranges)},
              {"timeout_ms", wait.timeout_ms}});
  Json result = config_.write_wait_result;
  // The contract: answer at the latest after timeout_ms.
  const std::uint64_t delay_ms =
      std::min<std::uint64_t>(config_.write_wait_delay_ms, wait.timeout_ms);
  if (delay_ms == 0) {
    done(std::move(result));
    return;
  }
  timer_strand_->post_after(std::chrono::milliseconds(delay_ms),
                            [done = std::move(done), result = std::move(result)] { done(result); });
}

ExtensionFactory RecordingExtension::Factory() {
  return [](const ExtensionContext& context,
            const Json& config) -> Result<std::unique_ptr<RegionExtension>> {
    if (!context.runtime) return Error(ErrorCode::kInternal, "recording: no runtime");
    auto parsed = RecordingConfig::FromJson(config);
    if (!parsed.ok()) return parsed.status();
    // A log it cannot write would drop every line without a word: refuse it now.
    if (parsed->log) {
      if (Status s = context.runtime->file_system().append_file(*parsed->log, ""); !s.ok()) {
        return Error(
            ErrorCode::kBadRequest,
            "recording: log: " + s.message() + "; give a writable file in a directory that exists");
      }
    }
    return std::unique_ptr<RegionExtension>(
        std::make_unique<RecordingExtension>(*context.runtime, std::move(parsed).value()));
  };
}

}  // namespace rcxl::ext
