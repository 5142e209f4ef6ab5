// A writer reuses the pages of keys the directory let go (evicted or deleted)
// before it allocates another region, and a reader never takes bytes whose
// READs outlasted the lookup's lease (the page may have been reused by then).
// docs/client.md, Pages of keys the directory let go.
#include <gtest/gtest.h>

#include "tests/client/client_rig.h"

namespace rcxl::client::testing {
namespace {

std::string value_of(int i) {
  return std::string(4096, static_cast<char>('a' + i % 26));
}

TEST(Reclaim, R1_1_AWriterReusesThePagesOfKeysTheDirectoryEvicted) {
  ClientRig rig(11, {.max_keys = 4});
  rig.add_memory("mem1");
  Config c = rig.config();
  c.region_size_bytes = 4 * 4096;  // four pages a region
  Handler& h = rig.handler(c);
  for (int i = 0; i < 20; ++i) {
    auto r = rig.store(h, {item("k" + std::to_string(i), value_of(i))});
    ASSERT_TRUE(r.ok()) << r.status().ToString();
    ASSERT_EQ(r->stored, 1u) << i;
  }
  // Four keys fit the directory: the fifth store finds no page given back yet
  // (k0 goes only when k4 registers) and allocates; from then on every
  // page comes back. Without reclaim it would be five regions.
  EXPECT_EQ(h.stats().regions_allocated, 2u);
  EXPECT_EQ(h.stats().pages_reclaimed, 12u);
  // The keys the directory kept read their own bytes from reused pages.
  auto loaded = rig.load(h, {"k16", "k17", "k18", "k19"});
  ASSERT_TRUE(loaded.ok());
  ASSERT_EQ(loaded->values.size(), 4u);
  for (int i = 0; i < 4; ++i) EXPECT_EQ(text_of(loaded->values[i]), value_of(16 + i)) << i;
  auto evicted = rig.load(h, {"k0"});
  ASSERT_TRUE(evicted.ok());
  EXPECT_TRUE(evicted->values.empty());
}

TEST(Reclaim, R1_1_ADeletedKeysPageIsReusedAndItsNewKeyReadsItsOwnBytes) {
  ClientRig rig;
  rig.add_memory("mem1");
  Config c = rig.config();
  c.region_size_bytes = 2 * 4096;
  Handler& h = rig.handler(c);
  ASSERT_TRUE(rig.store(h, {item("a", value_of(0)), item("b", value_of(1))}).ok());
  std::optional<Result<std::size_t>> erased;
  h.directory().erase({"a"}, [&](Result<std::size_t> n) { erased = std::move(n); });
  ASSERT_EQ(rig.wait(erased).value(), 1u);
  auto r = rig.store(h, {item("c", value_of(2))});
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r->stored, 1u);
  EXPECT_EQ(h.stats().regions_allocated, 1u);  // a's page, not a new region
  EXPECT_EQ(h.stats().pages_reclaimed, 1u);
  auto loaded = rig.load(h, {"b", "c"});
  ASSERT_TRUE(loaded.ok());
  ASSERT_EQ(loaded->values.size(), 2u);
  EXPECT_EQ(text_of(loaded->values[0]), value_of(1));
  EXPECT_EQ(text_of(loaded->values[1]), value_of(2));
}

// A 32 MiB READ at 11.75 GB/s takes ~2.9 ms; a 1 ms lease ends before it does.
struct BigLoad {
  Result<LoadResult> loaded;
  std::uint64_t lease_outlasted = 0;
};
BigLoad load_big_value(runtime::Duration lease_ttl) {
  ClientRig rig(11, {.lease_ttl = lease_ttl});
  rig.add_memory("mem1", Json::object(), 256ull << 20);
  Config c = rig.config();
  c.chunk_size_bytes = 32ull << 20;
  c.region_size_bytes = 32ull << 20;
  c.payload_sample_bytes = 4096;
  Handler& h = rig.handler(c);
  StoreItem big = item("big", value_of(3));
  big.wire_bytes = 32ull << 20;
  auto stored = rig.store(h, {big});
  EXPECT_TRUE(stored.ok() && stored->stored == 1u);
  (void)rig.load(h, {"big"});  // maps the region for reading: the next load only READs
  auto loaded = rig.load(h, {"big"});
  return {std::move(loaded), h.stats().lease_outlasted};
}

TEST(Reclaim, R1_1_AReadThatOutlastsItsLeaseIsAMissNeverTheBytes) {
  auto within = load_big_value(std::chrono::seconds(10));
  ASSERT_TRUE(within.loaded.ok());
  ASSERT_EQ(within.loaded->values.size(), 1u);
  EXPECT_EQ(text_of(within.loaded->values[0]), value_of(3));
  EXPECT_EQ(within.lease_outlasted, 0u);

  auto outlasted = load_big_value(std::chrono::milliseconds(1));
  ASSERT_TRUE(outlasted.loaded.ok());
  EXPECT_TRUE(outlasted.loaded->values.empty());
  EXPECT_EQ(outlasted.loaded->stopped_by.code(), ErrorCode::kTimeout);
  EXPECT_EQ(outlasted.lease_outlasted, 2u);  // both loads: each READ took ~2.9 ms
}

}  // namespace
}  // namespace rcxl::client::testing
