// SPEC R7: `--memory anon:BYTES | file:PATH:BYTES | dax:PATH`, BYTES a plain
// integer or with a K/M/G suffix (powers of 1024).
#include "backends/verbs/memory_spec.h"

#include <gtest/gtest.h>

namespace rcxl::verbs {
namespace {

TEST(MemorySpec, R7_PlainIntegerAndSuffixes) {
  EXPECT_EQ(*parse_byte_size("4096"), 4096u);
  EXPECT_EQ(*parse_byte_size("64K"), 64u * 1024);
  EXPECT_EQ(*parse_byte_size("64k"), 64u * 1024);
  EXPECT_EQ(*parse_byte_size("3M"), 3u * 1024 * 1024);
  EXPECT_EQ(*parse_byte_size("2G"), 2ull * 1024 * 1024 * 1024);
  EXPECT_EQ(*parse_byte_size("17179869184"), 16ull << 30);
  // T in either case, as rcxl-sim's sizes (new-user review, session 32).
  EXPECT_EQ(*parse_byte_size("12T"), 12ull << 40);
  EXPECT_EQ(*parse_byte_size("1t"), 1ull << 40);
}

TEST(MemorySpec, R7_BadSizesAreBadRequest) {
  for (const char* text : {"", "K", "0", "0G", "-1", "1.5G", "1P", "1KB", " 1", "1 ", "0x10",
                           "99999999999999999999", "17179869184G", "16777216T"}) {
    auto size = parse_byte_size(text);
    ASSERT_FALSE(size.ok()) << text;
    EXPECT_EQ(size.status().code(), ErrorCode::kBadRequest) << text;
    EXPECT_NE(size.status().message().find(text), std::string::npos) << text;
  }
  // A size alone (rcxl-kv --chunk-size) is not called a memory spec; in a
  // spec, the whole spec is named.
  EXPECT_EQ(parse_byte_size("1.5M").status().message(),
            "bad size '1.5M': size must be an integer with an optional K, M, G or T suffix");
  EXPECT_EQ(parse_memory_spec("anon:1.5M").status().message(),
            "bad memory spec 'anon:1.5M': bad size '1.5M': size must be an integer with an "
            "optional K, M, G or T suffix");
}

TEST(MemorySpec, R7_Anon) {
  auto spec = parse_memory_spec("anon:1G");
  ASSERT_TRUE(spec.ok()) << spec.status().ToString();
  EXPECT_EQ(spec->kind, MemorySpec::Kind::kAnon);
  EXPECT_EQ(spec->bytes, 1ull << 30);
}

TEST(MemorySpec, R7_FileSizeFollowsTheLastColon) {
  auto spec = parse_memory_spec("file:/mnt/a:b/pool:512M");
  ASSERT_TRUE(spec.ok()) << spec.status().ToString();
  EXPECT_EQ(spec->kind, MemorySpec::Kind::kFile);
  EXPECT_EQ(spec->path, "/mnt/a:b/pool");
  EXPECT_EQ(spec->bytes, 512ull << 20);
}

TEST(MemorySpec, R7_Dax) {
  auto spec = parse_memory_spec("dax:/dev/dax0.0");
  ASSERT_TRUE(spec.ok()) << spec.status().ToString();
  EXPECT_EQ(spec->kind, MemorySpec::Kind::kDax);
  EXPECT_EQ(spec->path, "/dev/dax0.0");
}

TEST(MemorySpec, R7_BadSpecsAreBadRequest) {
  for (const char* text : {"", "anon", "anon:", "anon:lots", "file:/x", "file::1G",
                           "file:/x:", "dax:", "ram:1G", "ANON:1G"}) {
    auto spec = parse_memory_spec(text);
    ASSERT_FALSE(spec.ok()) << text;
    EXPECT_EQ(spec.status().code(), ErrorCode::kBadRequest) << text;
  }
}

TEST(MemorySpec, FormatBytesPicksTheLargestExactUnit) {
  EXPECT_EQ(format_bytes(1ull << 30), "1 GiB");
  EXPECT_EQ(format_bytes(3ull << 20), "3 MiB");
  EXPECT_EQ(format_bytes(1536), "1536 B");
  EXPECT_EQ(format_bytes(1000), "1000 B");
}

}  // namespace
}  // namespace rcxl::verbs
