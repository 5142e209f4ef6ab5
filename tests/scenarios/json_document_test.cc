// Scenario and profile documents: what a user can get wrong in JSON itself is
// refused with where and why, never a crash (SPEC R8; issue #6 item 1).
#include "scenarios/json_document.h"

#include <gtest/gtest.h>

#include <string>

#include "scenarios/scenario.h"

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
  EXPECT_EQ(j.status().message(), "x.json: /workload: key appears twice in one object; keep one");
  auto nested = parse_json_document(R"({"a": [0, {"c": {}}, {"b/~": 1, "b/~": 1}]})", "x.json");
  ASSERT_FALSE(nested.ok());
  EXPECT_EQ(nested.status().message(),
            "x.json: /a/2/b~1~0: key appears twice in one object; keep one");
}

// Fuzzing (session 12): every refusal names the place, as a JSON pointer.
TEST(JsonDocument, R8_OverflowAndNestingNameTheirPointer) {
  auto big =
      parse_json_document(R"({"workload": {"turns": 2, "start_window_s": 1e400}})", "x.json");
  ASSERT_FALSE(big.ok());
  EXPECT_EQ(big.status().message().rfind("x.json: /workload/start_window_s: number overflow", 0),
            0u)
      << big.status().message();
  auto in_array = parse_json_document(R"({"a": [1, 2, -1e999]})", "x.json");
  ASSERT_FALSE(in_array.ok());
  EXPECT_EQ(in_array.status().message().rfind("x.json: /a/2: number overflow", 0), 0u)
      << in_array.status().message();
  const std::string deep =
      "{\"d\": " + std::string(kMaxJsonDepth + 1, '[') + std::string(kMaxJsonDepth + 1, ']') + "}";
  auto nested = parse_json_document(deep, "x.json");
  ASSERT_FALSE(nested.ok());
  EXPECT_EQ(nested.status().message().rfind("x.json: /d/0/0/", 0), 0u) << nested.status().message();
  // The first problem is the one named, even when the parser meets another later.
  auto both = parse_json_document(R"({"a": 1, "a": 2, "b": [1e400]})", "x.json");
  ASSERT_FALSE(both.ok());
  EXPECT_EQ(both.status().message(), "x.json: /a: key appears twice in one object; keep one");
  auto top = parse_json_document("1e400", "x.json");
  ASSERT_FALSE(top.ok());
  EXPECT_EQ(top.status().message().rfind("x.json: (the document): number overflow", 0), 0u)
      << top.status().message();
}

// Echoed text stays one line and drives no terminal: C0, DEL and C1 controls.
TEST(JsonDocument, R8_PrintableEscapesEveryControlCharacter) {
  EXPECT_EQ(printable("a\nb\x1b[31m\x7f"), "a\\nb\\x1b[31m\\x7f");
  EXPECT_EQ(printable("x\xc2\x85y\xc2\x9f"), "x\\u0085y\\u009f");        // NEL, APC
  EXPECT_EQ(printable("caf\xc3\xa9 \xc2\xa0"), "caf\xc3\xa9 \xc2\xa0");  // é, NBSP stay
}

// Bytes that are not UTF-8 are shown as bytes: a lone 0x9b is CSI to an 8-bit
// terminal (it was echoed raw), and overlong forms and surrogates are not text.
TEST(JsonDocument, R8_PrintableShowsBytesThatAreNotUtf8AsHex) {
  EXPECT_EQ(printable("a\x9b"
                      "31mb"),
            "a\\x9b31mb");
  EXPECT_EQ(printable("\xff\xfe"), "\\xff\\xfe");
  EXPECT_EQ(printable("\xc0\xaf"), "\\xc0\\xaf");           // overlong '/'
  EXPECT_EQ(printable("\xed\xa0\x80"), "\\xed\\xa0\\x80");  // a surrogate
  EXPECT_EQ(printable("\xe2\x82"), "\\xe2\\x82");           // cut short
  EXPECT_EQ(printable("\xf0\x9f\x98\x80 \xe2\x82\xac"), "\xf0\x9f\x98\x80 \xe2\x82\xac");  // stay
  auto doc = parse_json_document("{\"a\": \x9b}", "x.json");
  ASSERT_FALSE(doc.ok());
  EXPECT_EQ(doc.status().message().find('\x9b'), std::string::npos) << doc.status().message();
  EXPECT_NE(doc.status().message().find("\\x9b"), std::string::npos) << doc.status().message();
}

// RFC 6901: a key holding '/' or '~' is named by its escaped token, so
// "/a~1b~0c" is the key "a/b~c", not a path two levels deep.
TEST(JsonDocument, R8_PointerTokensEscapeSlashAndTilde) {
  EXPECT_EQ(pointer_token("a/b~c"), "a~1b~0c");
  EXPECT_EQ(pointer_token("~1"), "~01");
  EXPECT_EQ(pointer_token("plain"), "plain");
  auto sc = parse_scenario({{"name", "x"}, {"a/b~c", 1}}, "t.json");
  ASSERT_FALSE(sc.ok());
  EXPECT_NE(sc.status().message().find("/a~1b~0c: unknown field"), std::string::npos)
      << sc.status().message();
}

}  // namespace
}  // namespace rcxl::scenarios
