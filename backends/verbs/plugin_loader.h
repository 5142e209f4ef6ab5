// Region-extension plugins as shared objects (SPEC R2.1): `librcxl_ext_<name>.so`
// found in `--extension-path` directories, then RCXL_EXTENSION_PATH, exporting
// the C ABI of core/extension/c_abi.h. dlopen lives here, outside core.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "core/extension/extension_registry.h"

namespace rcxl::verbs {

// `flag_dirs` (each may itself be colon-separated), then RCXL_EXTENSION_PATH's entries.
std::vector<std::string> extension_search_path(const std::vector<std::string>& flag_dirs);

// The file a plugin named `name` lives in ("librcxl_ext_<name>.so").
std::string plugin_file_name(const std::string& name);

// Opens the first `dirs/librcxl_ext_<name>.so`, checks its ABI and creates the
// extension. The library stays loaded for the life of the process.
Result<std::unique_ptr<ext::RegionExtension>> load_plugin_extension(
    const std::string& name, const std::vector<std::string>& dirs, const ext::Json& config);

// A registry fallback that loads plugins from `dirs`.
ext::ExtensionRegistry::Fallback plugin_fallback(std::vector<std::string> dirs);

}  // namespace rcxl::verbs
