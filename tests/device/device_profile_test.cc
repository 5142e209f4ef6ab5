// Profiles: the shipped files load, and a bad field is named (SPEC R1.2 style).
#include "devices/cxl_ssd_model/device_profile.h"

#include <gtest/gtest.h>

#include <fstream>

namespace rcxl::device {
namespace {

nlohmann::json load_file(const std::string& name) {
  std::ifstream in(std::string(RCXL_SOURCE_DIR) + "/scenarios/profiles/" + name);
  return nlohmann::json::parse(in);
}

TEST(DeviceProfile, ShippedProfilesLoadWithEveryParameterSourced) {
  for (const char* name : {"cxl_ssd_default.json", "all_dram.json"}) {
    const auto j = load_file(name);
    auto p = load_device_profile(j);
    ASSERT_TRUE(p.ok()) << name << ": " << p.status().ToString();
    for (const char* section : {"device", "nic"}) {
      for (const auto& [key, v] : j[section].items()) {
        EXPECT_TRUE(v.is_object() && v.contains("source")) << name << " " << key;
      }
    }
  }
  auto ssd = load_device_profile(load_file("cxl_ssd_default.json"));
  auto dram = load_device_profile(load_file("all_dram.json"));
  EXPECT_FALSE(ssd->device.all_resident);
  EXPECT_TRUE(dram->device.all_resident);
  // The baseline differs only in where the bytes are: same NIC, same DRAM latency.
  EXPECT_EQ(ssd->nic.bytes_per_second, dram->nic.bytes_per_second);
  EXPECT_EQ(ssd->nic.latency, dram->nic.latency);
  EXPECT_EQ(ssd->device.dram_access, dram->device.dram_access);
  EXPECT_EQ(ssd->device.flash_read, std::chrono::nanoseconds(3000));
  // The simulator's streaming resolution is stated in the profile, like the hardware.
  EXPECT_EQ(ssd->nic.stream_segment_bytes, 256u * 1024);
  EXPECT_EQ(dram->nic.stream_segment_bytes, ssd->nic.stream_segment_bytes);
  auto fine = load_file("cxl_ssd_default.json");
  fine["nic"]["stream_segment_bytes"] = 65536;
  EXPECT_EQ(load_device_profile(fine)->nic.stream_segment_bytes, 65536u);
  auto eager = load_file("cxl_ssd_default.json");
  eager["device"]["idle_write_back"] = {{"value", true}, {"source", "test"}};
  EXPECT_TRUE(load_device_profile(eager)->device.idle_write_back);
}

// SPEC R6: whether a reset poisons the pages it lost is a device parameter,
// stated (with its source) in both shipped profiles, true in both (CXL poison).
TEST(DeviceProfile, R6_PoisonLostPagesIsReadAndOnInTheShippedProfiles) {
  for (const char* name : {"cxl_ssd_default.json", "all_dram.json"}) {
    const auto j = load_file(name);
    ASSERT_TRUE(j["device"].contains("poison_lost_pages")) << name;
    EXPECT_TRUE(j["device"]["poison_lost_pages"]["value"].get<bool>()) << name;
    auto p = load_device_profile(j);
    ASSERT_TRUE(p.ok()) << name << ": " << p.status().ToString();
    EXPECT_TRUE(p->device.poison_lost_pages) << name;
  }
  auto j = load_file("cxl_ssd_default.json");
  for (const nlohmann::json& off : {nlohmann::json(false), nlohmann::json(0),
                                    nlohmann::json{{"value", false}, {"source", "what-if"}}}) {
    j["device"]["poison_lost_pages"] = off;
    auto p = load_device_profile(j);
    ASSERT_TRUE(p.ok()) << off.dump() << ": " << p.status().ToString();
    EXPECT_FALSE(p->device.poison_lost_pages) << off.dump();
  }
  // A profile that leaves it out gets the default: poison.
  j["device"].erase("poison_lost_pages");
  EXPECT_TRUE(load_device_profile(j)->device.poison_lost_pages);
}

// SPEC R6 / R8: a value that is not true/false (or 1/0) is refused, naming the key.
TEST(DeviceProfile, R6_PoisonLostPagesRefusesANonBoolean) {
  const auto base = load_file("cxl_ssd_default.json");
  const std::vector<std::pair<nlohmann::json, std::string>> cases = {
      {"yes", "is not true/false (or 1/0)"},
      {nlohmann::json{{"value", "false"}, {"source", "x"}}, "is not true/false"},
      {2, "must lie in [0, 1]"},
      {0.5, "must be an integer"},
      {nullptr, "is not true/false"},
      {nlohmann::json{{"source", "no value"}}, "has no \"value\""},
  };
  for (const auto& [value, says] : cases) {
    auto j = base;
    j["device"]["poison_lost_pages"] = value;
    auto p = load_device_profile(j);
    ASSERT_FALSE(p.ok()) << value.dump();
    EXPECT_EQ(p.status().code(), ErrorCode::kBadRequest);
    EXPECT_NE(p.status().message().find("/device/poison_lost_pages: " + says), std::string::npos)
        << p.status().message();
  }
}

TEST(DeviceProfile, R1_2_BadFieldsAreNamed) {
  auto base = load_file("cxl_ssd_default.json");
  struct Case {
    std::string section, key;
    nlohmann::json value;
  };
  const std::vector<Case> cases = {
      {"device", "page_bytes", 3000},
      {"device", "channels", 0},
      {"device", "ways", 1.5},
      {"device", "flash_read_ns", "fast"},
      {"device", "tR", 3},
      {"device", "capacity_bytes", 4097},
      {"device", "dram_cache_bytes", {{"source", "no value"}}},
      {"nic", "bytes_per_second", -1},
      {"nic", "stream_segment_bytes", 1024},
      {"nic", "stream_segment_bytes", 2e9},
      // Not whole pages: a prepared page would be read from flash first (review, session 26).
      {"nic", "stream_segment_bytes", 6144},
      // Not the host page regions are trimmed by (review, session 29).
      {"device", "page_bytes", 8192},
      // Shorter than a page's channel transfer: no hinted fill behind a dirty victim starts.
      {"device", "prefetch_horizon_ns", 3000},
  };
  for (const auto& c : cases) {
    auto j = base;
    j[c.section][c.key] = c.value;
    auto p = load_device_profile(j);
    ASSERT_FALSE(p.ok()) << c.key;
    EXPECT_EQ(p.status().code(), ErrorCode::kBadRequest);
    EXPECT_NE(p.status().message().find("/" + c.section + "/" + c.key + ": "), std::string::npos)
        << p.status().message();
  }
  EXPECT_FALSE(load_device_profile(nlohmann::json::array()).ok());
  auto j = base;
  j["device"] = 5;
  EXPECT_FALSE(load_device_profile(j).ok());
}

// A refused value's limits read as written: 4 PiB and 2^52, not 4.5035996273705e+15.
TEST(DeviceProfile, R1_2_LimitsAreReadable) {
  auto base = load_file("cxl_ssd_default.json");
  auto message = [&](const std::string& key, double value) {
    auto j = base;
    j["device"][key] = value;
    auto p = load_device_profile(j);
    return p.ok() ? std::string("(accepted)") : p.status().message();
  };
  EXPECT_NE(message("dram_cache_bytes", 1e17).find("must lie in [512, 4 PiB]"), std::string::npos)
      << message("dram_cache_bytes", 1e17);
  EXPECT_NE(message("hinted_bytes_cap", -1).find("must lie in [0, 4 PiB]"), std::string::npos)
      << message("hinted_bytes_cap", -1);
  EXPECT_NE(message("page_bytes", 100).find("must lie in [4096, 4096] bytes: the host page"),
            std::string::npos)
      << message("page_bytes", 100);
}

// SPEC R8, hunt W7: a misspelled section ("enigne") left the engine at its
// defaults without a word; every top-level key is a known section.
TEST(DeviceProfile, R8_UnknownSectionIsRefused) {
  auto j = load_file("cxl_ssd_default.json");
  j["enigne"] = j["engine"];
  j.erase("engine");
  auto p = load_device_profile(j);
  ASSERT_FALSE(p.ok());
  EXPECT_EQ(p.status().code(), ErrorCode::kBadRequest);
  EXPECT_NE(p.status().message().find("/enigne: is not a section of a profile; "
                                      "expected one of: name, description, device, nic, engine, "
                                      "control_link"),
            std::string::npos)
      << p.status().message();
  j = load_file("cxl_ssd_default.json");
  j["description"] = 3;
  EXPECT_FALSE(load_device_profile(j).ok());
}

// SPEC R8, hunt W9: booleans are not numbers and whole quantities (counts,
// bytes, nanoseconds) take no fractions; switches take true/false or 1/0.
TEST(DeviceProfile, R8_BooleansAndFractionsAreRefused) {
  const auto base = load_file("cxl_ssd_default.json");
  struct Case {
    std::string section, key;
    nlohmann::json value;
    std::string says;
  };
  const std::vector<Case> cases = {
      {"device", "channels", true, "is true/false, not a number"},
      {"device", "capacity_bytes", {{"value", false}, {"source", "x"}}, "is true/false"},
      {"device", "channel_bytes_per_second", true, "is true/false"},
      {"device", "dram_access_ns", 200.5, "must be an integer (not 200.5)"},
      {"device", "flash_read_ns", 3000.5, "must be an integer"},
      {"nic", "latency_ns", 2500.5, "must be an integer"},
      {"device", "idle_write_back", 0.5, "must be an integer"},
      {"device", "all_resident", 2, "must lie in [0, 1]"},
      {"control_link", "latency_ns", 0.5, "must lie in [1, 1000000000] ns one way"},
      {"control_link", "latency_ns", 1500.5, "must be an integer"},
  };
  for (const auto& c : cases) {
    auto j = base;
    j[c.section][c.key] = c.value;
    auto p = load_device_profile(j);
    ASSERT_FALSE(p.ok()) << c.section << "." << c.key << " " << c.value.dump();
    EXPECT_EQ(p.status().code(), ErrorCode::kBadRequest);
    EXPECT_NE(p.status().message().find("/" + c.section + "/" + c.key + ": " + c.says),
              std::string::npos)
        << p.status().message();
  }
  for (const nlohmann::json& on : {nlohmann::json(true), nlohmann::json(1)}) {
    auto j = base;
    j["device"]["idle_write_back"] = on;
    auto p = load_device_profile(j);
    ASSERT_TRUE(p.ok()) << on.dump() << ": " << p.status().ToString();
    EXPECT_TRUE(p->device.idle_write_back);
  }
}

// SPEC R8, hunt W3: a control link of 1e30 ns or 1e-300 B/s overflowed the
// simulator's int64 nanoseconds and made the link free; it is bounded like
// the NIC, with the reason in the message, and read into the profile.
TEST(DeviceProfile, R8_ControlLinkIsBoundedAndRead) {
  const auto base = load_file("cxl_ssd_default.json");
  const std::vector<std::pair<std::string, nlohmann::json>> bad = {
      {"latency_ns", 1e30},         {"latency_ns", 0},
      {"bytes_per_second", 1e-300}, {"bytes_per_second", 1e20},
      {"bytes_per_second", "fast"}, {"latncy_ns", 5},
  };
  for (const auto& [key, value] : bad) {
    auto j = base;
    j["control_link"][key] = {{"value", value}, {"source", "test"}};
    auto p = load_device_profile(j);
    ASSERT_FALSE(p.ok()) << key << " " << value.dump();
    EXPECT_NE(p.status().message().find("/control_link/" + key + ": "), std::string::npos)
        << p.status().message();
  }
  auto j = base;
  j["control_link"]["bytes_per_second"]["value"] = 1e-300;
  EXPECT_NE(load_device_profile(j).status().message().find("faster than any NIC (10 TB/s)"),
            std::string::npos);
  auto p = load_device_profile(base);
  ASSERT_TRUE(p.ok());
  EXPECT_EQ(p->control_link.latency, std::chrono::nanoseconds(15000));
  EXPECT_EQ(p->control_link.bytes_per_second, 11.75e9);
}

}  // namespace
}  // namespace rcxl::device
