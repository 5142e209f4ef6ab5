#include "devices/cxl_ssd_model/device_profile.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <functional>
#include <map>

#include "core/protocol/json_pointer.h"
#include "core/runtime/printable.h"

namespace rcxl::device {

namespace {

using nlohmann::json;

// `text` shown in a message: one line, every control character (C1 too) and
// other non-ASCII escaped as \uXXXX, cut when long.
std::string shown(const std::string& text) {
  std::string s = json(text.size() > 60 ? text.substr(0, 60) + "..." : text)
                      .dump(-1, ' ', /*ensure_ascii=*/true, json::error_handler_t::replace);
  return s.substr(1, s.size() - 2);  // without the quotes
}

// `field` as a JSON pointer part: RFC 6901 escapes, one line.
std::string part(const std::string& field) {
  const std::string escaped = protocol::json_pointer_token(field);
  std::string out(1, '/');
  out.append(shown(escaped));  // not "/" + ...: GCC 12 warns falsely (-Wrestrict)
  return out;
}

// `where` is the JSON pointer of the field ("/device/page_bytes"), as every
// other refusal of a scenario or profile names it.
Status bad(const std::string& where, const std::string& why) {
  return Error(ErrorCode::kBadRequest, where + ": " + why);
}

// The number of a parameter, written plainly or as {"value": .., "source": ..}.
Result<double> number_of(const json& v, const std::string& field) {
  const json* n = &v;
  if (v.is_object()) {
    if (!v.contains("value")) return bad(field, "has no \"value\"");
    for (const auto& [k, unused] : v.items()) {
      if (k != "value" && k != "source")
        return bad(field, "has unknown key '" + runtime::printable(k) + "'");
    }
    if (v.contains("source") && !v["source"].is_string())
      return bad(field, "source is not a string");
    n = &v["value"];
  }
  if (n->is_boolean()) return n->get<bool>() ? 1.0 : 0.0;  // the caller decides if it may be
  if (!n->is_number()) return bad(field, "is not a number");
  const double d = n->get<double>();
  if (!std::isfinite(d)) return bad(field, "is not finite");
  return d;
}

enum class Kind {
  kReal,     // any number in range
  kInteger,  // a whole number: counts, bytes, nanoseconds (the simulator's clock tick)
  kSwitch,   // true/false (or 1/0, as sweeps write it)
};

struct Field {
  double min;
  double max;
  Kind kind;
  std::function<void(double)> set;
  const char* why = "";  // why the range is what it is, for the message
};

// Limits read as people write them: 1000000, not 1000000.000000; a huge
// power-of-two bound as 4 PiB (byte fields) or 2^52, not 4.5035996273705e+15.
std::string shortest(double v, bool bytes) {
  char buf[32];
  if (v >= 0x1p40 && std::exp2(std::ilogb(v)) == v) {
    if (bytes) {
      std::snprintf(buf, sizeof buf, "%g %s", v / 0x1p50 >= 1 ? v / 0x1p50 : v / 0x1p40,
                    v / 0x1p50 >= 1 ? "PiB" : "TiB");
    } else {
      std::snprintf(buf, sizeof buf, "2^%d", std::ilogb(v));
    }
    return buf;
  }
  std::snprintf(buf, sizeof buf, "%.15g", v);
  return buf;
}

Status read_section(const json& profile, const std::string& section,
                    const std::map<std::string, Field>& fields) {
  if (!profile.contains(section)) return {};
  const json& s = profile[section];
  if (!s.is_object()) return bad(part(section), "is not an object");
  for (const auto& [key, value] : s.items()) {
    const std::string name = part(section) + part(key);
    auto f = fields.find(key);
    if (f == fields.end()) {
      std::string list;
      for (const auto& [known, unused] : fields) list += (list.empty() ? "" : ", ") + known;
      return bad(name, "is not a known parameter; expected one of: " + list);
    }
    const Field& field = f->second;
    auto n = number_of(value, name);
    if (!n.ok()) {
      // A switch written "yes" or null: say what it takes, not "not a number".
      const bool has_value = !value.is_object() || value.contains("value");
      const json& w = value.is_object() && has_value ? value["value"] : value;
      if (field.kind == Kind::kSwitch && has_value && !w.is_boolean() && !w.is_number()) {
        return bad(name, "is not true/false (or 1/0)");
      }
      return n.status();
    }
    const json& written = value.is_object() ? value["value"] : value;
    if (written.is_boolean() && field.kind != Kind::kSwitch) {
      return bad(name, "is true/false, not a number");
    }
    if (*n < field.min || *n > field.max) {
      const bool bytes = key.find("bytes") != std::string::npos;
      return bad(name, "must lie in [" + shortest(field.min, bytes) + ", " +
                           shortest(field.max, bytes) + "]" + field.why);
    }
    if (field.kind != Kind::kReal && std::floor(*n) != *n) {
      return bad(name, "must be an integer (not " + written.dump() + ")");
    }
    field.set(*n);
  }
  return {};
}

runtime::Duration ns(double v) {
  return runtime::Duration(static_cast<std::int64_t>(v));
}

// A misspelled section ("enigne") would leave its defaults in place unnoticed.
Status check_sections(const json& profile) {
  static const char* const kSections[] = {"name", "description", "device",
                                          "nic",  "engine",      "control_link"};
  for (const auto& [key, value] : profile.items()) {
    if (std::find(std::begin(kSections), std::end(kSections), key) == std::end(kSections)) {
      return bad(part(key),
                 "is not a section of a profile; expected one of: name, description, device, "
                 "nic, engine, control_link");
    }
  }
  for (const char* text : {"name", "description"}) {
    if (profile.contains(text) && !profile[text].is_string())
      return bad(part(text), "is not a string");
  }
  return {};
}

}  // namespace

Result<DeviceProfile> load_device_profile(const json& profile) {
  if (!profile.is_object())
    return Error(ErrorCode::kBadRequest, "the profile is not a JSON object");
  if (auto s = check_sections(profile); !s.ok()) return s;
  DeviceProfile out;
  if (profile.contains("name")) out.name = profile["name"].get<std::string>();
  CxlSsdParams& d = out.device;
  constexpr double kBig = 1ull << 52;
  auto u64 = [](std::uint64_t& dst) {
    return [&dst](double v) { dst = static_cast<std::uint64_t>(v); };
  };
  auto u32 = [](std::uint32_t& dst) {
    return [&dst](double v) { dst = static_cast<std::uint32_t>(v); };
  };
  auto dur = [](runtime::Duration& dst) { return [&dst](double v) { dst = ns(v); }; };
  auto real = [](double& dst) { return [&dst](double v) { dst = v; }; };
  constexpr auto kReal = Kind::kReal;
  constexpr auto kInteger = Kind::kInteger;
  constexpr auto kSwitch = Kind::kSwitch;
  const std::map<std::string, Field> device_fields = {
      {"capacity_bytes", {4096, kBig, kInteger, u64(d.capacity_bytes)}},
      // Regions are aligned, trimmed and dropped by the host page (DESIGN.md): a
      // larger device page left a fresh region's old bytes, a smaller one trimmed nothing.
      {"page_bytes",
       {4096, 4096, kInteger, u64(d.page_bytes),
        " bytes: the host page regions are aligned and trimmed by"}},
      {"dram_cache_bytes", {512, kBig, kInteger, u64(d.dram_cache_bytes)}},
      {"all_resident", {0, 1, kSwitch, [&d](double v) { d.all_resident = v != 0; }}},
      {"dram_access_ns", {0, 1e7, kInteger, dur(d.dram_access)}},
      {"flash_read_ns", {1, 1e9, kInteger, dur(d.flash_read)}},
      {"flash_program_ns", {1, 1e10, kInteger, dur(d.flash_program)}},
      {"program_unit_bytes", {512, 1 << 24, kInteger, u64(d.program_unit_bytes)}},
      {"channels", {1, 1024, kInteger, u32(d.channels)}},
      {"ways", {1, 1024, kInteger, u32(d.ways)}},
      {"channel_bytes_per_second", {1e6, 1e12, kReal, real(d.channel_bytes_per_second)}},
      {"internal_bytes_per_second", {1e6, 1e13, kReal, real(d.internal_bytes_per_second)}},
      {"write_allocate_depth", {1, 4096, kInteger, u32(d.write_allocate_depth)}},
      {"read_miss_depth", {1, 65536, kInteger, u32(d.read_miss_depth)}},
      {"hinted_bytes_cap", {0, kBig, kInteger, u64(d.hinted_bytes_cap)}},
      {"prefetch_horizon_ns", {100, 1e9, kInteger, dur(d.prefetch_horizon)}},
      {"idle_write_back", {0, 1, kSwitch, [&d](double v) { d.idle_write_back = v != 0; }}},
      {"poison_lost_pages", {0, 1, kSwitch, [&d](double v) { d.poison_lost_pages = v != 0; }}},
  };
  if (auto s = read_section(profile, "device", device_fields); !s.ok()) return s;
  // Links, RDMA and TCP alike: beyond these a transfer or a delay overflows the
  // simulator's int64 nanoseconds and the link becomes free.
  constexpr char kLatencyWhy[] =
      " ns one way: from back-to-back to slower than any network path (1 s)";
  constexpr char kRateWhy[] =
      " B/s: from slower than any data-centre link (1 MB/s) to faster than any NIC (10 TB/s)";
  sim::NicParams& n = out.nic;
  const std::map<std::string, Field> nic_fields = {
      {"latency_ns", {0, 1e9, kInteger, dur(n.latency), kLatencyWhy}},
      {"bytes_per_second", {1e6, 1e13, kReal, real(n.bytes_per_second), kRateWhy}},
      {"per_op_ns", {0, 1e9, kInteger, dur(n.per_op)}},
      {"stream_segment_bytes", {4096, 1 << 30, kInteger, u64(n.stream_segment_bytes)}},
  };
  if (auto s = read_section(profile, "nic", nic_fields); !s.ok()) return s;
  sim::LinkParams& link = out.control_link;
  const std::map<std::string, Field> control_link_fields = {
      {"latency_ns", {1, 1e9, kInteger, dur(link.latency), kLatencyWhy}},
      {"bytes_per_second", {1e6, 1e13, kReal, real(link.bytes_per_second), kRateWhy}},
  };
  if (auto s = read_section(profile, "control_link", control_link_fields); !s.ok()) return s;
  // Relations between fields.
  // The pump commits a fill only if its frame is free within the horizon: one
  // shorter than a dirty victim's page transfer never starts a hinted fill.
  const double transfer_ns = std::ceil(d.page_bytes * 1e9 / d.channel_bytes_per_second);
  if (static_cast<double>(d.prefetch_horizon.count()) < transfer_ns) {
    return bad("/device/prefetch_horizon_ns",
               "must be at least one page's transfer on a channel (page_bytes / "
               "channel_bytes_per_second = " +
                   std::to_string(static_cast<std::uint64_t>(transfer_ns)) + " ns)");
  }
  if (d.capacity_bytes % d.page_bytes != 0) {
    return bad("/device/capacity_bytes", "must be a multiple of page_bytes");
  }
  if (d.capacity_bytes / d.page_bytes >= (1ull << 32)) {
    return bad("/device/capacity_bytes", "must hold fewer than 2^32 pages");
  }
  if (d.dram_cache_bytes < d.page_bytes) {
    return bad("/device/dram_cache_bytes", "must hold at least one page");
  }
  if (d.program_unit_bytes < d.page_bytes) {
    return bad("/device/program_unit_bytes", "must hold at least one page");
  }
  // The NIC asks the device per segment: one that ends inside a page makes a
  // prepared page read from flash first (a store to prepared pages as slow as unprepared).
  if (n.stream_segment_bytes % d.page_bytes != 0) {
    return bad("/nic/stream_segment_bytes",
               "must be a multiple of /device/page_bytes (" + std::to_string(d.page_bytes) + ")");
  }
  return out;
}

}  // namespace rcxl::device
