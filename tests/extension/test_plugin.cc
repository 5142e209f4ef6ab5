// A tiny region-extension plugin speaking the C ABI (core/extension/c_abi.h):
// config {"refuse":[ids], "generation":"g", "close_sleep_s":N (close() hangs N s)};
// a hint named "fail" fails, one named "fill" fails with an error filling the
// whole buffer without a NUL; write_wait
// answers {"ranges":N} at once. Built twice: as is, and with a wrong ABI version.
#include <chrono>
#include <cstdio>
#include <cstring>
#include <nlohmann/json.hpp>
#include <string>
#include <thread>
#include <vector>

#include "core/extension/c_abi.h"

namespace {

struct Plugin {
  std::vector<unsigned long long> refuse;
  std::string generation;
  int close_sleep_s = 0;
};

void put(char* out, size_t size, const std::string& text) {
  if (size == 0) return;
  std::snprintf(out, size, "%s", text.c_str());
}

void* create(const char* config_text, char* error, size_t error_size) {
  const auto config = nlohmann::json::parse(config_text, nullptr, false);
  if (!config.is_object() || config.contains("explode")) {
    put(error, error_size, "told to explode");
    return nullptr;
  }
  auto* p = new Plugin();
  p->generation = config.value("generation", "");
  p->close_sleep_s = config.value("close_sleep_s", 0);
  for (const auto& id : config.value("refuse", nlohmann::json::array())) {
    p->refuse.push_back(id.get<unsigned long long>());
  }
  return p;
}

void destroy(void* self) {
  delete static_cast<Plugin*>(self);
}

int validate_access(void* self, const rcxl_region_info* region, char* error, size_t size) {
  for (auto id : static_cast<Plugin*>(self)->refuse) {
    if (id == region->region) {
      put(error, size, "refused by test plugin");
      return 1;
    }
  }
  return 0;
}

int mapped(void*, const rcxl_region_info*, int, char*, size_t) {
  return 0;
}
int retire(void*, const rcxl_region_info*) {
  return 1;
}

int hint(void*, const rcxl_hint* hint, char* error, size_t size) {
  if (std::strcmp(hint->request, "fail") == 0) {
    put(error, size, "hint failed on purpose");
    return 1;
  }
  if (std::strcmp(hint->request, "fill") == 0) {
    std::memset(error, 'x', size);  // a whole buffer, no NUL (as strncpy can leave it)
    return 1;
  }
  return 0;
}

void close_plugin(void* self) {
  // A device driver call that hangs: the agent's stop must not hang with it.
  std::this_thread::sleep_for(std::chrono::seconds(static_cast<Plugin*>(self)->close_sleep_s));
}

int memory_generation(void* self, char* out, size_t size) {
  auto* p = static_cast<Plugin*>(self);
  if (p->generation.empty()) return 0;
  put(out, size, p->generation);
  return 1;
}

const char* hint_actions(void*) {
  return R"(["read_hint","read_hint_end","write_wait"])";
}

void write_wait(void*, const rcxl_write_wait* wait, rcxl_write_wait_done done, void* context) {
  const std::string answer = "{\"ranges\":" + std::to_string(wait->range_count) + "}";
  done(context, 0, answer.c_str());
}

#ifndef TEST_PLUGIN_ABI
#define TEST_PLUGIN_ABI RCXL_REGION_EXTENSION_ABI_VERSION
#endif

const rcxl_region_extension_api_v1 kTable = {
    TEST_PLUGIN_ABI,
    sizeof(rcxl_region_extension_api_v1),
    "testplug",
    create,
    destroy,
    validate_access,
    mapped,
    retire,
    hint,
    close_plugin,
    memory_generation,
    nullptr,
    hint_actions,
    write_wait,
};

}  // namespace

extern "C" const rcxl_region_extension_api_v1* rcxl_region_extension_v1() {
  return &kTable;
}
