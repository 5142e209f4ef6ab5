// Scenario and profile documents: what a user can get wrong in JSON itself is
// refused with where and why, never a crash (SPEC R8; issue #6 item 1).
#include "scenarios/json_document.h"

#include <gtest/gtest.h>

#include <string>

namespace rcxl::scenarios {
namespace {

TEST(JsonDocument, R8_ValidDocumentsParse) {
  auto j = parse_json_document(R"({"a": [1, {"b": 2}], "c": {"a": 3}})", "x.json");
  ASSERT_TRUE(j.ok()) << j.status().ToString();
  EXPECT_EQ((*j)["a"][1]["b"], 2);
  EXPECT_EQ((*j)["c"]["a"], 3);  // the same key in another object is fine
}

TEST(JsonDocument, R8_InvalidJsonNamesTheLineAndColumn) {
  auto j = parse_json_document("{\n  \"a\": 1,\n}", "x.json");
  ASSERT_FALSE(j.ok());
  EXPECT_EQ(j.status().code(), ErrorCode::kBadRequest);
  EXPECT_NE(j.status().message().find("x.json: not valid JSON"), std::string::npos);
  EXPECT_NE(j.status().message().find("line 3, column 1"), std::string::npos)
      << j.status().message();
}

TEST(JsonDocument, R8_DeepNestingIsRefusedNotCopiedOffTheStack) {
  const std::string ok = std::string(kMaxJsonDepth, '[') + std::string(kMaxJsonDepth, ']');
  EXPECT_TRUE(parse_json_document(ok, "x.json").ok());
  const std::string deep =
      std::string(kMaxJsonDepth + 1, '[') + std::string(kMaxJsonDepth + 1, ']');
  EXPECT_FALSE(parse_json_document(deep, "x.json").ok());
  // Far deeper, inside an object, and unclosed: refused alike.
  std::string very = "{\"extension\": {\"config\": {\"x\": " + std::string(200000, '[') +
                     std::string(200000, ']') + "}}}";
  auto j = parse_json_document(very, "x.json");
  ASSERT_FALSE(j.ok());
  EXPECT_NE(j.status().message().find("nested deeper"), std::string::npos);
  EXPECT_FALSE(parse_json_document(std::string(200000, '{'), "x.json").ok());
}

TEST(JsonDocument, R8_ADuplicateKeyIsRefused) {
  auto j =
      parse_json_document(R"({"workload": {}, "seed": 1, "workload": {"turns": 2}})", "x.json");
  ASSERT_FALSE(j.ok());
  EXPECT_NE(j.status().message().find("\"workload\" appears twice"), std::string::npos);
  EXPECT_FALSE(parse_json_document(R"({"a": {"b": 1, "b": 1}})", "x.json").ok());
}

}  // namespace
}  // namespace rcxl::scenarios
