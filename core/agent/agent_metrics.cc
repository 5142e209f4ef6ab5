#include "core/agent/agent_metrics.h"

#include <sstream>

namespace rcxl::agent {
namespace {

void scalar(std::ostringstream& out, const char* name, const char* type, const char* help,
            std::uint64_t value) {
  out << "# HELP rcxl_agent_" << name << ' ' << help << '\n'
      << "# TYPE rcxl_agent_" << name << ' ' << type << '\n'
      << "rcxl_agent_" << name << ' ' << value << '\n';
}

void labelled(std::ostringstream& out, const char* name, const char* label, const char* help,
              const std::map<std::string, std::uint64_t>& values) {
  out << "# HELP rcxl_agent_" << name << ' ' << help << '\n'
      << "# TYPE rcxl_agent_" << name << " counter\n";
  for (const auto& [key, value] : values) {
    out << "rcxl_agent_" << name << '{' << label << "=\"" << key << "\"} " << value << '\n';
  }
}

}  // namespace

std::string metrics_text(const AgentMetrics& m) {
  std::ostringstream out;
  labelled(out, "hints_accepted_total", "action", "Extension messages accepted.", m.hints_accepted);
  labelled(out, "hints_refused_total", "code", "Extension messages refused.", m.hints_refused);
  scalar(out, "open_hint_requests", "gauge", "Open read_hint requests, all connections.",
         m.open_hint_requests);
  scalar(out, "write_waits_total", "counter", "write_wait calls handed to the extension.",
         m.write_waits);
  scalar(out, "maps_total", "counter", "Successful map replies.", m.maps);
  scalar(out, "maps_refused_total", "counter",
         "Refused maps (with those whose connection closed first, which get no reply).",
         m.maps_refused);
  scalar(out, "allocs_answered_again_total", "counter",
         "Allocs whose token named a region already made for it (a retry).",
         m.allocs_answered_again);
  scalar(out, "registrations", "gauge",
         "NIC registrations held (a region mapped under both handles has two).", m.registrations);
  scalar(out, "registrations_total", "counter", "NIC registrations made.", m.registrations_total);
  scalar(out, "lingering_registrations", "gauge",
         "NIC registrations a deregister failed to drop, still live: tried again at each sweep, "
         "their regions' memory not given out again meanwhile.",
         m.lingering_registrations);
  scalar(out, "boot_changes_total", "counter", "Boot changes (generation or unknown).",
         m.boot_changes);
  scalar(out, "unknown_periods_total", "counter", "Periods the generation was unknown.",
         m.unknown_periods);
  scalar(out, "connections", "gauge", "Open control connections.", m.connections);
  scalar(out, "connections_closed_total", "counter",
         "Control connections that closed (each told to the extension's connection_closed, "
         "but those a stop closes: the extension is closed then).",
         m.connections_closed);
  scalar(out, "hint_requests_closed_by_disconnect_total", "counter",
         "Open hint requests closed because their connection closed (a stop closes them all).",
         m.hint_requests_closed_by_disconnect);
  scalar(out, "hint_requests_closed_by_boot_change_total", "counter",
         "Open hint requests closed because the boot changed (each ended at an extension that "
         "takes read_hint_end, unless its connection closes or opens it again first).",
         m.hint_requests_closed_by_boot_change);
  scalar(out, "regions", "gauge", "Allocated regions.", m.regions);
  scalar(out, "retiring_regions", "gauge", "Freed regions retire() kept.", m.retiring_regions);
  scalar(out, "extension_errors_total", "counter", "Extension hooks that failed.",
         m.extension_errors);
  scalar(out, "requests_fast_decoded_total", "counter",
         "Requests decoded by the simdjson path (the rest by nlohmann).", m.fast_decoded);
  scalar(out, "queued_requests", "gauge",
         "Requests waiting behind the one being served, all connections.", m.queued_requests);
  scalar(out, "queued_request_bytes", "gauge",
         "Memory bound of the queued requests as parsed (reading pauses at 8 MiB a connection).",
         m.queued_request_bytes);
  return out.str();
}

}  // namespace rcxl::agent
