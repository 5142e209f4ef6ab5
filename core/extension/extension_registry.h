// Finds a region extension by name (SPEC R2.1): built-ins (`none`, `recording`),
// whatever devices/apps add(), and, for names not registered, a fallback (the
// binary's shared-object plugin loader; dlopen lives outside core).
#pragma once

#include <functional>
#include <map>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "core/extension/region_extension.h"

namespace rcxl::ext {

class ExtensionRegistry {
 public:
  // Asked for names that are not registered; kNotFound when it has none either.
  using Fallback = std::function<Result<std::unique_ptr<RegionExtension>>(
      const std::string& name, const ExtensionContext& context, const Json& config)>;

  // An empty registry; see WithBuiltins().
  ExtensionRegistry() = default;
  // `none` (no extension: create() yields nullptr) and `recording`.
  static ExtensionRegistry WithBuiltins();

  // Registers `name`; replaces an earlier factory of that name.
  void add(std::string name, ExtensionFactory factory);
  bool contains(std::string_view name) const;
  // Sorted.
  std::vector<std::string> names() const;
  void set_fallback(Fallback fallback) { fallback_ = std::move(fallback); }

  // nullptr (no extension) for `none` and the empty name. kNotFound for an
  // unknown name; a factory's own error otherwise.
  Result<std::unique_ptr<RegionExtension>> create(const std::string& name,
                                                  const ExtensionContext& context,
                                                  const Json& config) const;

 private:
  std::map<std::string, ExtensionFactory, std::less<>> factories_;
  Fallback fallback_;
};

// `--region-extension-config` text: empty means {}; otherwise one JSON value.
Result<Json> parse_extension_config(std::string_view text);

}  // namespace rcxl::ext
