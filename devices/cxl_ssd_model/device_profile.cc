#include "devices/cxl_ssd_model/device_profile.h"

#include <cmath>
#include <cstdio>
#include <functional>
#include <map>

namespace rcxl::device {

namespace {

using nlohmann::json;

Status bad(const std::string& field, const std::string& why) {
  return Error(ErrorCode::kBadRequest, "profile field '" + field + "' " + why);
}

// The number of a parameter, written plainly or as {"value": .., "source": ..}.
Result<double> number_of(const json& v, const std::string& field) {
  const json* n = &v;
  if (v.is_object()) {
    if (!v.contains("value")) return bad(field, "has no \"value\"");
    for (const auto& [k, unused] : v.items()) {
      if (k != "value" && k != "source") return bad(field, "has unknown key '" + k + "'");
    }
    if (v.contains("source") && !v["source"].is_string())
      return bad(field, "source is not a string");
    n = &v["value"];
  }
  if (n->is_boolean()) return n->get<bool>() ? 1.0 : 0.0;
  if (!n->is_number()) return bad(field, "is not a number");
  const double d = n->get<double>();
  if (!std::isfinite(d)) return bad(field, "is not finite");
  return d;
}

struct Field {
  double min;
  double max;
  bool integer;
  std::function<void(double)> set;
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
  if (!s.is_object()) return bad(section, "is not an object");
  for (const auto& [key, value] : s.items()) {
    const std::string name = section + "." + key;
    auto f = fields.find(key);
    if (f == fields.end()) return bad(name, "is not a known parameter");
    auto n = number_of(value, name);
    if (!n.ok()) return n.status();
    const Field& field = f->second;
    if (*n < field.min || *n > field.max) {
      const bool bytes = key.find("bytes") != std::string::npos;
      return bad(name, "must lie in [" + shortest(field.min, bytes) + ", " +
                           shortest(field.max, bytes) + "]");
    }
    if (field.integer && std::floor(*n) != *n) return bad(name, "must be an integer");
    field.set(*n);
  }
  return {};
}

runtime::Duration ns(double v) {
  return runtime::Duration(static_cast<std::int64_t>(v));
}

}  // namespace

Result<DeviceProfile> load_device_profile(const json& profile) {
  if (!profile.is_object()) return bad("(profile)", "is not an object");
  DeviceProfile out;
  if (profile.contains("name")) {
    if (!profile["name"].is_string()) return bad("name", "is not a string");
    out.name = profile["name"].get<std::string>();
  }
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
  const std::map<std::string, Field> device_fields = {
      {"capacity_bytes", {4096, kBig, true, u64(d.capacity_bytes)}},
      {"page_bytes", {512, 65536, true, u64(d.page_bytes)}},
      {"dram_cache_bytes", {512, kBig, true, u64(d.dram_cache_bytes)}},
      {"all_resident", {0, 1, true, [&d](double v) { d.all_resident = v != 0; }}},
      {"dram_access_ns", {0, 1e7, false, dur(d.dram_access)}},
      {"flash_read_ns", {1, 1e9, false, dur(d.flash_read)}},
      {"flash_program_ns", {1, 1e10, false, dur(d.flash_program)}},
      {"program_unit_bytes", {512, 1 << 24, true, u64(d.program_unit_bytes)}},
      {"channels", {1, 1024, true, u32(d.channels)}},
      {"ways", {1, 1024, true, u32(d.ways)}},
      {"channel_bytes_per_second", {1e6, 1e12, false, real(d.channel_bytes_per_second)}},
      {"internal_bytes_per_second", {1e6, 1e13, false, real(d.internal_bytes_per_second)}},
      {"write_allocate_depth", {1, 4096, true, u32(d.write_allocate_depth)}},
      {"read_miss_depth", {1, 65536, true, u32(d.read_miss_depth)}},
      {"hinted_bytes_cap", {0, kBig, true, u64(d.hinted_bytes_cap)}},
      {"prefetch_horizon_ns", {100, 1e9, false, dur(d.prefetch_horizon)}},
      {"idle_write_back", {0, 1, true, [&d](double v) { d.idle_write_back = v != 0; }}},
  };
  if (auto s = read_section(profile, "device", device_fields); !s.ok()) return s;
  sim::NicParams& n = out.nic;
  const std::map<std::string, Field> nic_fields = {
      {"latency_ns", {0, 1e9, false, dur(n.latency)}},
      {"bytes_per_second", {1e6, 1e13, false, real(n.bytes_per_second)}},
      {"per_op_ns", {0, 1e9, false, dur(n.per_op)}},
  };
  if (auto s = read_section(profile, "nic", nic_fields); !s.ok()) return s;
  // Relations between fields.
  if ((d.page_bytes & (d.page_bytes - 1)) != 0)
    return bad("device.page_bytes", "must be a power of two");
  if (d.capacity_bytes % d.page_bytes != 0) {
    return bad("device.capacity_bytes", "must be a multiple of page_bytes");
  }
  if (d.capacity_bytes / d.page_bytes >= (1ull << 32)) {
    return bad("device.capacity_bytes", "must hold fewer than 2^32 pages");
  }
  if (d.dram_cache_bytes < d.page_bytes) {
    return bad("device.dram_cache_bytes", "must hold at least one page");
  }
  if (d.program_unit_bytes < d.page_bytes) {
    return bad("device.program_unit_bytes", "must hold at least one page");
  }
  return out;
}

}  // namespace rcxl::device
