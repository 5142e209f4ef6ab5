// Wraps a C-ABI plugin table (c_abi.h) into a RegionExtension. Finding and
// opening the shared object is the binary's business (backends/verbs/plugin_loader).
#pragma once

#include <memory>

#include "core/extension/c_abi.h"
#include "core/extension/region_extension.h"

namespace rcxl::ext {

// Checks the table's version and required hooks, then creates the instance.
Result<std::unique_ptr<RegionExtension>> wrap_c_extension(const rcxl_region_extension_api_v1* api,
                                                          const Json& config);

}  // namespace rcxl::ext
