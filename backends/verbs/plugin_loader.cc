#include "backends/verbs/plugin_loader.h"

#include <dlfcn.h>
#include <sys/stat.h>

#include <cstdlib>
#include <filesystem>
#include <string>

#include "core/extension/c_abi_extension.h"

namespace rcxl::verbs {
namespace {

void split_into(const std::string& text, std::vector<std::string>& out) {
  std::size_t start = 0;
  while (start <= text.size()) {
    const auto end = text.find(':', start);
    const std::string part = text.substr(start, end == std::string::npos ? end : end - start);
    if (!part.empty()) out.push_back(part);
    if (end == std::string::npos) break;
    start = end + 1;
  }
}

bool valid_name(const std::string& name) {
  if (name.empty()) return false;
  for (char c : name) {
    if (!(std::isalnum(static_cast<unsigned char>(c)) || c == '_' || c == '-')) return false;
  }
  return true;
}

bool exists(const std::string& path) {
  struct stat st {};
  return ::stat(path.c_str(), &st) == 0;
}

}  // namespace

std::vector<std::string> extension_search_path(const std::vector<std::string>& flag_dirs) {
  std::vector<std::string> out;
  for (const auto& dir : flag_dirs) split_into(dir, out);
  if (const char* env = std::getenv("RCXL_EXTENSION_PATH")) split_into(env, out);
  return out;
}

std::string plugin_file_name(const std::string& name) {
  return "librcxl_ext_" + name + ".so";
}

Result<std::unique_ptr<ext::RegionExtension>> load_plugin_extension(
    const std::string& name, const std::vector<std::string>& dirs, const ext::Json& config) {
  if (!valid_name(name)) {
    return Error(ErrorCode::kBadRequest, "bad region extension name '" + name + "'");
  }
  const std::string file = plugin_file_name(name);
  for (const auto& dir : dirs) {
    const std::string path = dir + "/" + file;
    if (!exists(path)) continue;
    // Never closed: the extension's code must outlive every call into it.
    void* handle = ::dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL);
    if (!handle) {
      const char* why = ::dlerror();
      return Error(ErrorCode::kExtensionFailed,
                   "cannot load " + path + ": " + (why ? why : "dlopen failed"));
    }
    auto entry = reinterpret_cast<rcxl_region_extension_v1_entry>(
        ::dlsym(handle, RCXL_REGION_EXTENSION_ENTRY));
    // dlsym also searches the libraries the plugin links: the entry must be its own.
    Dl_info found{};
    std::error_code ec;
    const bool own = entry && ::dladdr(reinterpret_cast<void*>(entry), &found) != 0 &&
                     found.dli_fname && std::filesystem::equivalent(found.dli_fname, path, ec);
    if (!own) {
      return Error(
          ErrorCode::kExtensionFailed,
          path + " does not export " RCXL_REGION_EXTENSION_ENTRY +
              (entry && found.dli_fname ? std::string(" itself (") + found.dli_fname +
                                              ", a library it links, does; export the plugin's own)"
                                        : std::string()));
    }
    auto extension = ext::wrap_c_extension(entry(), config);
    if (!extension.ok()) {
      return Error(extension.status().code(), path + ": " + extension.status().message());
    }
    return extension;
  }
  std::string searched;
  for (const auto& dir : dirs) searched += (searched.empty() ? "" : ", ") + dir;
  return Error(ErrorCode::kNotFound,
               "no region extension named '" + name + "': it is not built in, and " +
                   (searched.empty() ? "no --extension-path (or $RCXL_EXTENSION_PATH) was given "
                                       "to look for " +
                                           file + " in"
                                     : file + " is in none of " + searched));
}

ext::ExtensionRegistry::Fallback plugin_fallback(std::vector<std::string> dirs) {
  return [dirs = std::move(dirs)](const std::string& name, const ext::ExtensionContext&,
                                  const ext::Json& config) {
    return load_plugin_extension(name, dirs, config);
  };
}

}  // namespace rcxl::verbs
