// Seeded mutations of a JSON request for the wire-robustness tests (agent,
// directory): bit flips, significant bytes, truncation, values of another
// type, missing fields, raw tokens no JSON library writes, duplicate keys,
// deep nesting, trailing bytes. Deterministic for a seed. And the error codes
// a refusal may carry.
#pragma once

#include <cstdint>
#include <nlohmann/json.hpp>
#include <random>
#include <set>
#include <string>
#include <string_view>
#include <vector>

namespace rcxl::testing {

using Json = nlohmann::json;

// PROTOCOL.md's error table, written out here rather than taken from
// core/runtime/status.h, so a local-only code on the wire fails the tests.
inline const std::set<std::string>& wire_error_codes() {
  static const std::set<std::string> kCodes = {"bad_request",
                                               "unauthenticated",
                                               "auth_failed",
                                               "stale_epoch",
                                               "not_advertised",
                                               "bad_range",
                                               "too_many_hint_requests",
                                               "refused",
                                               "generation_unknown",
                                               "boot_changed",
                                               "extension_failed",
                                               "not_found",
                                               "no_space",
                                               "bad_frame"};
  return kCodes;
}

// Raw tokens that a JSON library would never write.
const std::vector<std::string>& raw_tokens() {
  static const std::vector<std::string> kTokens = {"-0",
                                                   "1e400",
                                                   "-1e400",
                                                   "18446744073709551616",
                                                   "99999999999999999999999",
                                                   "1.0",
                                                   "1e3",
                                                   "NaN",
                                                   "Infinity",
                                                   "-Infinity",
                                                   "0x10",
                                                   "01",
                                                   "+1",
                                                   ".5",
                                                   "1.",
                                                   "-",
                                                   "tru",
                                                   "nul",
                                                   "\"\\ud800\"",
                                                   "\"\\u12\"",
                                                   "\"\xff\"",
                                                   "\"a\x01\"",
                                                   "[",
                                                   "{",
                                                   "}",
                                                   "]",
                                                   ",",
                                                   "[1,]",
                                                   "{\"a\":1,}",
                                                   "/*c*/1",
                                                   "'a'"};
  return kTokens;
}

// Every value in `j` by JSON pointer (the root excluded).
void collect_pointers(const Json& j, const Json::json_pointer& at,
                      std::vector<Json::json_pointer>& out) {
  if (j.is_object()) {
    for (const auto& [key, value] : j.items()) {
      out.push_back(at / key);
      collect_pointers(value, at / key, out);
    }
  } else if (j.is_array() && j.size() <= 16) {
    for (std::size_t i = 0; i < j.size(); ++i) {
      out.push_back(at / i);
      collect_pointers(j[i], at / i, out);
    }
  }
}

class JsonMutator {
 public:
  explicit JsonMutator(std::uint64_t seed) : random_(seed) {}

  // `odd_values`: values of the wrong type or at an edge, for this protocol.
  std::string mutate(const Json& request, const std::vector<Json>& odd_values) {
    std::string text = request.dump();
    switch (pick(12)) {
      case 0:  // a flipped bit
        flip_bits(text, 1 + pick(3));
        break;
      case 1:  // a byte replaced by a JSON-significant one
        if (!text.empty()) text[pick(text.size())] = significant();
        break;
      case 2:
        text.insert(text.begin() + static_cast<std::ptrdiff_t>(pick(text.size() + 1)),
                    significant());
        break;
      case 3:
        if (!text.empty()) text.erase(pick(text.size()), 1 + pick(8));
        break;
      case 4:  // truncated
        text.resize(pick(text.size() + 1));
        break;
      case 5:
      case 6:  // a value of another type or an edge value
        text = with_value(request, odd_values).dump();
        break;
      case 7:  // a field missing
        text = without_field(request).dump();
        break;
      case 8:  // a number or string token replaced by raw text
        text = with_raw_token(text);
        break;
      case 9:  // a duplicate key, first or last
        text = with_duplicate_key(request, odd_values);
        break;
      case 10:  // deep nesting in an unknown field, closed or not
        text = with_deep_nesting(text);
        break;
      default:  // trailing bytes, or two objects
        text += pick(2) ? text : std::string(1, significant());
        break;
    }
    return text;
  }

 private:
  std::size_t pick(std::size_t n) { return n == 0 ? 0 : random_() % n; }
  char significant() {
    static const std::string kAlphabet = "{}[]\",:0123456789-+.eE \\u\xff\xc3\x80\x00tfnrl";
    return kAlphabet[pick(kAlphabet.size())];
  }
  void flip_bits(std::string& text, std::size_t n) {
    for (std::size_t i = 0; i < n && !text.empty(); ++i) {
      text[pick(text.size())] ^= static_cast<char>(1u << pick(8));
    }
  }
  Json with_value(Json request, const std::vector<Json>& values) {
    std::vector<Json::json_pointer> pointers;
    collect_pointers(request, Json::json_pointer(), pointers);
    request[pointers[pick(pointers.size())]] = values[pick(values.size())];
    return request;
  }
  Json without_field(Json request) {
    std::vector<Json::json_pointer> pointers;
    collect_pointers(request, Json::json_pointer(), pointers);
    const auto& at = pointers[pick(pointers.size())];
    Json& parent = request[at.parent_pointer()];
    if (parent.is_object()) {
      parent.erase(at.back());
    } else {
      parent.erase(static_cast<std::size_t>(std::stoul(at.back())));
    }
    return request;
  }
  std::string with_raw_token(std::string text) {
    // Replace the value after a random ':' or ',' or '[' with a raw token.
    std::vector<std::size_t> starts;
    for (std::size_t i = 0; i < text.size(); ++i) {
      if (text[i] == ':' || text[i] == ',' || text[i] == '[') starts.push_back(i + 1);
    }
    if (starts.empty()) return text;
    const std::size_t at = starts[pick(starts.size())];
    std::size_t end = at;
    if (end < text.size() && text[end] == '"') {
      end = text.find('"', end + 1);
      end = end == std::string::npos ? text.size() : end + 1;
    } else {
      while (end < text.size() && std::string_view(",]}").find(text[end]) == std::string::npos)
        ++end;
    }
    return text.substr(0, at) + raw_tokens()[pick(raw_tokens().size())] + text.substr(end);
  }
  std::string with_duplicate_key(const Json& request, const std::vector<Json>& values) {
    std::vector<std::string> keys;
    for (const auto& [key, value] : request.items()) keys.push_back(key);
    const std::string key = keys[pick(keys.size())];
    // Either an odd value, or the same value again (a duplicate that agrees).
    const Json value = pick(3) == 0 ? request[key] : values[pick(values.size())];
    const std::string member = Json(key).dump() + ":" + value.dump();
    std::string text = request.dump();
    if (pick(2)) return "{" + member + "," + text.substr(1);
    text.pop_back();
    return text + "," + member + "}";
  }
  std::string with_deep_nesting(std::string text) {
    static const std::size_t kDepths[] = {63, 64, 65, 1025, 5000, 20000};
    const std::size_t depth = kDepths[pick(std::size(kDepths))];
    const bool closed = pick(4) != 0;
    const char open = pick(2) ? '[' : '{';
    std::string deep;
    if (open == '[') {
      deep = std::string(depth, '[') + (closed ? std::string(depth, ']') : "");
    } else {
      for (std::size_t i = 0; i < depth; ++i) deep += "{\"a\":";
      deep += "1";
      if (closed) deep += std::string(depth, '}');
    }
    text.pop_back();
    return text + ",\"deep\":" + deep + "}";
  }

  std::mt19937_64 random_;
};

}  // namespace rcxl::testing
