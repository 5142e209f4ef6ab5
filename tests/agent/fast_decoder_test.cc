// The simdjson hot decode path against the nlohmann reference (differential):
// for every input the fast decoder either declines or gives exactly what the
// reference gives; bad inputs always reach the reference's errors (PROTOCOL.md
// "Requests and replies", SPEC R3.1 checks start with the fields).
#include <gtest/gtest.h>

#include <random>
#include <string>
#include <vector>

#include "core/protocol/fast_request_decoder.h"

namespace rcxl::protocol {
namespace {

constexpr char kHandle[] = "\"00112233445566778899aabbccddeeff\"";

std::string ranges_text(std::size_t n, std::uint64_t region = 7) {
  std::string out = "[";
  for (std::size_t i = 0; i < n; ++i) {
    if (i) out += ",";
    out += "[" + std::to_string(region) + "," + std::to_string(i * 4096) + ",4096]";
  }
  return out + "]";
}

std::string read_hint(const std::string& ranges, const std::string& extra = "") {
  return std::string(R"({"op":"extension","id":9,"action":"read_hint","epoch":"b:1",)") +
         R"("request":"r1","ranges":)" + ranges + R"(,"handles":{"7":)" + kHandle + "}" + extra +
         "}";
}

// What the agent would answer: the decoded request, or the first error.
std::string outcome(const Result<DecodedRequest>& r) {
  if (!r.ok()) return r.status().ToString();
  return "ok id=" + r->id.dump();
}

// The fast path declines or agrees with the reference; returns whether it took the frame.
bool check_agrees(const std::string& frame) {
  static FastRequestDecoder decoder;
  std::string copy = frame;
  auto fast = decoder.try_decode(copy);
  auto reference = reference_decode(frame);
  if (!fast) return false;
  EXPECT_TRUE(reference.ok()) << "fast accepted what the reference refuses (" << outcome(reference)
                              << "): " << frame.substr(0, 300);
  if (!reference.ok()) return true;
  EXPECT_EQ(fast->id, reference->id) << frame.substr(0, 300);
  EXPECT_TRUE(fast->request == reference->request) << frame.substr(0, 300);
  return true;
}

TEST(FastDecoder, R3_1_ValidExtensionRequestsTakeTheFastPathAndMatch) {
  const std::vector<std::string> valid = {
      read_hint(ranges_text(1)),
      read_hint(ranges_text(4096)),
      read_hint(ranges_text(3), R"(,"extra":{"a":[1,2.5,-3,true,false,null,"x"]})"),
      read_hint("[[7,18446744073709551615,18446744073709551615]]"),  // overflow is the agent's
      R"({"op":"extension","action":"read_hint_end","request":"r1"})",
      R"({"op":"extension","id":null,"action":"read_hint_end","epoch":null,"request":"r1"})",
      R"({"op":"extension","id":3,"action":"read_promote","epoch":"b","request":"r"})",
      R"({"op":"extension","id":4,"action":"write_hint","epoch":"b","token":"t","ranges":[[7,0,1]],"handles":{"7":"h","8":"g"}})",
      R"({"op":"extension","id":5,"action":"write_wait","epoch":"b","token":"t","ranges":[[7,0,1]],"handles":{"7":"h"},"timeout_ms":10000})",
      R"({"op":"extension","id":5,"action":"read_hint","epoch":"b","request":"r","ranges":[],"handles":{}})",
      "  \n{\"op\" : \"extension\" , \"action\":\"read_hint_end\",\"request\":\"\\u00e9\\n\"}\t ",
      R"({"id":18446744073709551615,"op":"extension","action":"read_hint_end","request":"\ud83d\ude00"})",
  };
  for (const auto& frame : valid) {
    EXPECT_TRUE(reference_decode(frame).ok()) << frame.substr(0, 200);
    EXPECT_TRUE(check_agrees(frame)) << "declined a valid request: " << frame.substr(0, 200);
  }
}

// A decoded request holds about what it carries: a one-range hint does not
// reserve room for 4096 ranges (98 KB per request queued behind a slow one),
// and held_bytes, the agent's queue bound, counts what is held.
TEST(FastDecoder, R1_2_ADecodedRequestHoldsAboutWhatItCarries) {
  FastRequestDecoder decoder;
  for (const std::size_t n : {std::size_t{1}, std::size_t{100}, std::size_t{4096}}) {
    std::string frame = read_hint(ranges_text(n));
    auto decoded = decoder.try_decode(frame);
    ASSERT_TRUE(decoded.has_value()) << n;
    const auto& ranges = std::get<ExtensionRequest>(decoded->request).ranges;
    ASSERT_EQ(ranges.size(), n);
    EXPECT_LE(ranges.capacity(), frame.size() / 8 + 1) << n;
    EXPECT_GE(held_bytes(*decoded), ranges.capacity() * sizeof(WireRange) + 32) << n;
    EXPECT_LE(held_bytes(*decoded), 4 * frame.size() + 1024) << n;
  }
}

TEST(FastDecoder, R3_1_MalformedInputsGiveTheReferenceErrors) {
  const std::string r1 = ranges_text(1);
  const std::vector<std::string> bad = {
      // invalid UTF-8: in a value, a key, an unknown field, a truncated sequence
      read_hint(r1, ",\"x\":\"\xff\""),
      read_hint(r1, ",\"\xc3\x28\":1"),
      "{\"op\":\"extension\",\"action\":\"read_hint_end\",\"request\":\"\xe2\x82\"}",
      "{\"op\":\"extension\",\"action\":\"read_hint_end\",\"request\":\"\xed\xa0\x80\"}",
      // a NUL in a name (a C extension would read "q" for it)
      R"({"op":"extension","action":"read_hint_end","request":"q\u0000A"})",
      R"({"op":"extension","action":"write_hint","epoch":"b","token":"\u0000","ranges":[[7,0,1]],"handles":{"7":"h"}})",
      // duplicate keys (nlohmann keeps the last)
      R"({"op":"extension","op":"alloc","size":4096,"action":"read_hint_end","request":"r"})",
      R"({"op":"alloc","op":"extension","action":"read_hint_end","request":"r"})",
      read_hint(r1, R"(,"ranges":[[7,0,0]])"),
      read_hint(r1, R"(,"handles":{"7":"a","7":"b"})"),
      R"({"op":"extension","id":1,"id":"x","action":"read_hint_end","request":"r"})",
      // huge, negative and float numbers
      read_hint("[[18446744073709551616,0,1]]"),
      read_hint("[[7,0,99999999999999999999999]]"),
      read_hint("[[7,0,1e400]]"),
      read_hint("[[7,-1,1]]"),
      read_hint("[[7,-0,1]]"),
      read_hint("[[7,0,1.0]]"),
      read_hint("[[7,0,1e3]]"),
      read_hint("[[7,0.5,1]]"),
      R"({"op":"extension","id":-1,"action":"read_hint_end","request":"r"})",
      R"({"op":"extension","id":1.0,"action":"read_hint_end","request":"r"})",
      R"({"op":"extension","id":1e2,"action":"read_hint_end","request":"r"})",
      R"({"op":"extension","id":"1","action":"read_hint_end","request":"r"})",
      R"({"op":"extension","action":"write_wait","epoch":"b","token":"t","ranges":[[7,0,1]],"handles":{"7":"h"},"timeout_ms":10001})",
      R"({"op":"extension","action":"write_wait","epoch":"b","token":"t","ranges":[[7,0,1]],"handles":{"7":"h"},"timeout_ms":0})",
      R"({"op":"extension","action":"write_wait","epoch":"b","token":"t","ranges":[[7,0,1]],"handles":{"7":"h"},"timeout_ms":5.5})",
      R"({"op":"extension","action":"write_wait","epoch":"b","token":"t","ranges":[[7,0,1]],"handles":{"7":"h"}})",
      // more than 4096 ranges; bad range shapes
      read_hint(ranges_text(4097)),
      read_hint("[[7,0,0]]"),
      read_hint("[[7,0]]"),
      read_hint("[[7,0,1,2]]"),
      read_hint("[7,0,1]"),
      read_hint("{}"),
      read_hint("[[7,0,true]]"),
      read_hint("[[7,0,null]]"),
      read_hint("[[7,0,\"1\"]]"),
      read_hint("[[8,0,1]]"),  // no handle for region 8
      // handles
      R"({"op":"extension","action":"read_hint","epoch":"b","request":"r","ranges":[[7,0,1]],"handles":{"07":"h","7":"h"}})",
      R"({"op":"extension","action":"read_hint","epoch":"b","request":"r","ranges":[[7,0,1]],"handles":{"7":1}})",
      R"({"op":"extension","action":"read_hint","epoch":"b","request":"r","ranges":[[7,0,1]],"handles":{"x":"h","7":"h"}})",
      R"({"op":"extension","action":"read_hint","epoch":"b","request":"r","ranges":[[7,0,1]],"handles":[]})",
      R"({"op":"extension","action":"read_hint","epoch":"b","request":"r","ranges":[[7,0,1]]})",
      R"({"op":"extension","action":"read_hint","epoch":"b","request":"r","handles":{}})",
      // fields
      R"({"op":"extension","action":"read_hint","request":"r","ranges":[],"handles":{}})",
      R"({"op":"extension","action":"read_hint","epoch":null,"request":"r","ranges":[],"handles":{}})",
      R"({"op":"extension","action":"read_hint_end","epoch":5,"request":"r"})",
      R"({"op":"extension","action":"read_hint_end","token":"r"})",
      R"({"op":"extension","action":"write_hint","epoch":"b","request":"t","ranges":[],"handles":{}})",
      R"({"op":"extension","action":"frobnicate","request":"r"})",
      // valid, but ignored fields of an odd shape are left to the reference
      R"({"op":"extension","action":"read_hint_end","request":"r","ranges":"ignored","token":5})",
      R"({"op":"extension","action":7,"request":"r"})",
      R"({"op":"extension","request":"r"})",
      R"({"action":"read_hint_end","request":"r","x":"extension"})",
      R"({"op":"Extension","action":"read_hint_end","request":"r","x":"extension"})",
      // JSON syntax: trailing garbage, truncation, literals, commas, comments, scalars
      read_hint(r1) + "x",
      read_hint(r1) + "{}",
      read_hint(r1).substr(0, 60),
      read_hint(r1, ",\"x\":tru"),
      read_hint(r1, ",\"x\":nul"),
      read_hint(r1, ",\"x\":nullx"),
      read_hint(r1, ",\"x\":01"),
      read_hint(r1, ",\"x\":1."),
      read_hint(r1, ",\"x\":-"),
      read_hint(r1, ",\"x\":+1"),
      read_hint(r1, ",\"x\":.5"),
      read_hint(r1, ",\"x\":NaN"),
      read_hint(r1, ",\"x\":Infinity"),
      read_hint(r1, ",\"x\":1e400"),
      read_hint(r1, ",\"x\":[1,2,]"),
      read_hint(r1, ",\"x\":{\"a\":1,}"),
      read_hint(r1, ",\"x\":[1 2]"),
      read_hint(r1, ",\"x\":{\"a\" 1}"),
      read_hint(r1, ",\"x\":{\"a\":1 \"b\":2}"),
      read_hint(r1, ",\"x\":/*c*/1"),
      read_hint(r1, ",\"x\":'a'"),
      read_hint(r1, ",\"x\":[}"),
      read_hint(r1, ",\"x\":{]"),
      read_hint(r1, ",\"x\":\"a\tb\""),  // raw control character
      read_hint(r1, ",\"x\":\"a\x01\""),
      read_hint(r1, ",\"x\":\"\\x\""),
      read_hint(r1, ",\"x\":\"\\u12\""),
      read_hint(r1, ",\"x\":\"\\ud800\""),  // lone surrogates
      read_hint(r1, ",\"x\":\"\\udc00\""),
      read_hint(r1, ",\"x\":\"\\ud800\\u0041\""),
      read_hint(r1, ",,\"x\":1"),
      read_hint(r1, ",\"x\""),
      read_hint(r1, ",1:1"),
      "\xef\xbb\xbf" + read_hint(r1),  // BOM
      "[" + read_hint(r1) + "]",
      "\"extension\"",
      "",
      "   ",
      read_hint(r1, ",\"x\":" + std::string(100, '[') + std::string(100, ']')),
      read_hint(r1, ",\"x\":" + std::string(2000, '[') + std::string(2000, ']')),
      read_hint(r1, ",\"x\":" + std::string(3000, '[')),
      std::string("{\"op\":\"extension\",\"action\":\"read_hint_end\",\"request\":\"a\0b\"}", 58),
      R"({"o\u0070":"extension","action":"read_hint_end","request":"r"})",
      R"({"op":"ext\u0065nsion","action":"read_hint_end","request":"r"})",
  };
  int declined = 0;
  for (const auto& frame : bad) {
    if (!check_agrees(frame)) ++declined;
  }
  EXPECT_GT(declined, 80);  // nearly all are errors: they reach the reference's messages
}

// Random byte edits of valid requests: the fast path never disagrees.
TEST(FastDecoder, R3_1_MutatedRequestsNeverDisagree) {
  const std::vector<std::string> seeds = {
      read_hint(ranges_text(3)),
      R"({"op":"extension","id":5,"action":"write_wait","epoch":"b","token":"t","ranges":[[7,0,1]],"handles":{"7":"h"},"timeout_ms":100,"z":[null,{"q":-1.5e3}]})",
      R"({"op":"extension","action":"read_hint_end","epoch":null,"request":"\u00e9"})",
  };
  const std::string alphabet = "{}[]\",:0123456789-+.eE \\u\xff\xc3\x80tfnrl7x";
  std::mt19937_64 random(42);
  int taken = 0;
  for (const auto& seed : seeds) {
    for (int i = 0; i < 3000; ++i) {
      std::string frame = seed;
      const int edits = 1 + static_cast<int>(random() % 3);
      for (int e = 0; e < edits && !frame.empty(); ++e) {
        const std::size_t at = random() % frame.size();
        const char c = alphabet[random() % alphabet.size()];
        switch (random() % 3) {
          case 0:
            frame[at] = c;
            break;
          case 1:
            frame.insert(frame.begin() + static_cast<std::ptrdiff_t>(at), c);
            break;
          default:
            frame.erase(at, 1);
            break;
        }
      }
      if (check_agrees(frame)) ++taken;
    }
  }
  EXPECT_GT(taken, 0);
}

}  // namespace
}  // namespace rcxl::protocol
