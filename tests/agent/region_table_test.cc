// The state file's encoding (AgentConfig::state_file) and the allocator's reserve.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "core/agent/region_allocator.h"
#include "core/agent/region_table_file.h"

namespace rcxl::agent {
namespace {

TEST(RegionTable, R7_RoundTrips) {
  RegionTable table{"boot", 1 << 20, 9, {}};
  table.regions.push_back({3, 0, 8192, "owner", "reader", true, false, "token-3"});
  table.regions.push_back({7, 65536, 4096, "-", "-", true, true, ""});
  table.unknown_periods = 2;
  auto back = decode_region_table(encode_region_table(table));
  ASSERT_TRUE(back.ok()) << back.status().ToString();
  EXPECT_EQ(*back, table);
}

// Files written before the count was kept read as none seen (SPEC R6.4); a
// count of the wrong type is refused.
TEST(RegionTable, R6_4_TheUnknownPeriodCountIsOptionalAndChecked) {
  RegionTable table{"boot", 1 << 20, 9, {}};
  auto doc = nlohmann::json::parse(encode_region_table(table));
  doc.erase("unknown_periods");
  auto back = decode_region_table(doc.dump());
  ASSERT_TRUE(back.ok()) << back.status().ToString();
  EXPECT_EQ(back->unknown_periods, 0u);
  doc["unknown_periods"] = -1;
  EXPECT_FALSE(decode_region_table(doc.dump()).ok());
}

TEST(RegionTable, R7_RefusesBadTables) {
  EXPECT_FALSE(decode_region_table("").ok());
  EXPECT_FALSE(decode_region_table("{\"version\":1}").ok());
  RegionTable table{"boot", 1 << 20, 9, {}};
  table.regions.push_back({3, 0, 8192, "owner", "reader", true, false, "t"});
  table.regions.push_back({3, 8192, 4096, "o", "r", false, false, ""});
  EXPECT_FALSE(decode_region_table(encode_region_table(table)).ok());  // duplicate id
  table.regions[1].region = 4;
  table.regions[1].pool_offset = 100;
  EXPECT_FALSE(decode_region_table(encode_region_table(table)).ok());  // unaligned
  table.regions[1].pool_offset = 4096;
  EXPECT_FALSE(decode_region_table(encode_region_table(table)).ok());  // overlap
  table.regions[1].pool_offset = 8192;
  EXPECT_TRUE(decode_region_table(encode_region_table(table)).ok());
  table.regions[1].alloc_token = "t";
  EXPECT_FALSE(decode_region_table(encode_region_table(table)).ok());  // one token, two regions
  table.regions[1].alloc_token = "u";
  EXPECT_TRUE(decode_region_table(encode_region_table(table)).ok());
  table.regions[1].owner_handle = "";
  EXPECT_FALSE(decode_region_table(encode_region_table(table)).ok());
}

// Files written before alloc tokens were kept have none; one that is not a
// non-empty string is refused.
TEST(RegionTable, R7_AnAllocTokenIsOptionalAndChecked) {
  RegionTable table{"boot", 1 << 20, 9, {}};
  table.regions.push_back({3, 0, 8192, "owner", "reader", true, false, "t"});
  auto doc = nlohmann::json::parse(encode_region_table(table));
  doc["regions"][0].erase("alloc_token");
  auto back = decode_region_table(doc.dump());
  ASSERT_TRUE(back.ok()) << back.status().ToString();
  EXPECT_EQ(back->regions[0].alloc_token, "");
  for (const nlohmann::json& bad : {nlohmann::json(""), nlohmann::json(7)}) {
    doc["regions"][0]["alloc_token"] = bad;
    EXPECT_FALSE(decode_region_table(doc.dump()).ok()) << bad.dump();
  }
}

// A table cut short by a NUL (a torn write on some filesystems) is refused,
// not read as the valid JSON before the NUL.
TEST(RegionTable, R7_ATableWithANulByteIsRefused) {
  RegionTable table{"boot", 1 << 20, 9, {}};
  EXPECT_TRUE(decode_region_table(encode_region_table(table)).ok());
  EXPECT_FALSE(decode_region_table(encode_region_table(table) + std::string("\0\0", 2)).ok());
}

TEST(RegionAllocator, R7_ReserveTakesExactlyAFreeExtent) {
  RegionAllocator a(1 << 20);
  EXPECT_TRUE(a.reserve(8192, 4096));
  EXPECT_FALSE(a.reserve(8192, 4096));
  EXPECT_FALSE(a.reserve(4096, 8192));
  EXPECT_FALSE(a.reserve((1 << 20) - 4096, 8192));
  EXPECT_EQ(a.free_bytes(), (1u << 20) - 4096);
  EXPECT_EQ(a.allocate(8192), 0u);
  EXPECT_EQ(a.allocate(4096), 12288u);
  a.release(8192, 4096);
  EXPECT_EQ(a.allocate(4096), 8192u);
}

}  // namespace
}  // namespace rcxl::agent
