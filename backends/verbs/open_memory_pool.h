// Turns a `--memory` spec into the pool the agent carves regions from.
#pragma once

#include <memory>

#include "backends/verbs/memory_spec.h"
#include "backends/verbs/pool_file_undo.h"
#include "core/runtime/memory_pool.h"

namespace rcxl::verbs {

struct MemoryPoolOptions {
  bool populate_anon = false;  // MAP_POPULATE anon pools (slower start, no first-touch faults)
  // Given: what opening a file: pool did to the disk is undone unless kept.
  PoolFileUndo* file_undo = nullptr;
};

Result<std::unique_ptr<runtime::MemoryPool>> open_memory_pool(const MemorySpec& spec,
                                                              MemoryPoolOptions options = {});

}  // namespace rcxl::verbs
