// parsed_size_bound is an upper bound of what nlohmann's tree of a text holds
// (R1.2: the agent's queue of parsed requests is bounded by it). Measured
// here with a counting operator new, over the shapes that blow text up most.
#include "core/protocol/parsed_size.h"

#include <gtest/gtest.h>
#include <malloc.h>

#include <cstdlib>
#include <new>
#include <nlohmann/json.hpp>
#include <string>

namespace {

std::size_t live_bytes = 0;  // this test is single-threaded

}  // namespace

void* operator new(std::size_t n) {
  void* p = std::malloc(n == 0 ? 1 : n);
  if (p == nullptr) throw std::bad_alloc();
  live_bytes += malloc_usable_size(p);
  return p;
}
void operator delete(void* p) noexcept {
  if (p != nullptr) live_bytes -= malloc_usable_size(p);
  std::free(p);
}
void operator delete(void* p, std::size_t) noexcept {
  operator delete(p);
}

namespace rcxl::protocol {
namespace {

// `count` copies of `item`, comma-separated, between `open` and `close`.
std::string repeated(const std::string& open, const std::string& item, int count,
                     const std::string& close) {
  std::string text = open;
  for (int i = 0; i < count; ++i) text += (i ? "," : "") + item;
  return text + close;
}

std::size_t parsed_bytes(const std::string& text) {
  const std::size_t before = live_bytes;
  auto* tree = new nlohmann::json(nlohmann::json::parse(text));
  const std::size_t held = live_bytes - before;
  delete tree;
  return held;
}

TEST(ParsedSize, R1_2_BoundsTheTreeOfEveryShapeThatBlowsUpItsText) {
  std::string members = "{";
  for (int i = 0; i < 20000; ++i) members += (i ? ",\"" : "\"") + std::to_string(i) + "\":{}";
  members += "}";
  const std::string deep = std::string(5000, '[') + std::string(5000, ']');
  const std::string shapes[] = {
      repeated("[", "{}", 20000, "]"),
      repeated("[", "[]", 20000, "]"),
      repeated("[", "[{}]", 20000, "]"),
      repeated("[", "1", 20000, "]"),
      repeated("[", "\"\"", 20000, "]"),
      repeated("[", "\"" + std::string(48, 'x') + "\"", 20000, "]"),
      // 2^14 + 1 elements: the vector has just doubled to twice what it uses.
      repeated("[", "\"" + std::string(24, 'x') + "\"", 16385, "]"),
      repeated("[", "\"" + std::string(57, 'x') + "\"", 16385, "]"),
      repeated("[", "{}", 16385, "]"),
      repeated("[", "1", 16385, "]"),
      repeated("[", "{\"a\":1}", 20000, "]"),
      repeated("{\"op\":\"extension\",\"ranges\":[", "[1,4096,4096]", 4096, "]}"),
      members,
      deep,
      "\"" + std::string(100000, 's') + "\"",
      "{}",
  };
  for (const std::string& text : shapes) {
    const std::size_t held = parsed_bytes(text);
    EXPECT_GT(held, 0u);
    EXPECT_LE(held, parsed_size_bound(text)) << text.substr(0, 40);
  }
  // Padding really does outgrow the text: the reason for the bound.
  const std::string padded = repeated("[", "{}", 20000, "]");
  EXPECT_GT(parsed_bytes(padded), 10 * padded.size());
}

}  // namespace
}  // namespace rcxl::protocol
