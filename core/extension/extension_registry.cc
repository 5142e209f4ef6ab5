#include "core/extension/extension_registry.h"

#include "core/extension/recording_extension.h"

namespace rcxl::ext {

ExtensionRegistry ExtensionRegistry::WithBuiltins() {
  ExtensionRegistry registry;
  registry.add(
      "none", [](const ExtensionContext&, const Json&) -> Result<std::unique_ptr<RegionExtension>> {
        return std::unique_ptr<RegionExtension>();
      });
  registry.add("recording", RecordingExtension::Factory());
  return registry;
}

void ExtensionRegistry::add(std::string name, ExtensionFactory factory) {
  factories_[std::move(name)] = std::move(factory);
}

bool ExtensionRegistry::contains(std::string_view name) const {
  return factories_.find(name) != factories_.end();
}

std::vector<std::string> ExtensionRegistry::names() const {
  std::vector<std::string> out;
  for (const auto& [name, factory] : factories_) out.push_back(name);
  return out;
}

Result<std::unique_ptr<RegionExtension>> ExtensionRegistry::create(const std::string& name,
                                                                   const ExtensionContext& context,
                                                                   const Json& config) const {
  if (name.empty()) return std::unique_ptr<RegionExtension>();
  try {
    auto it = factories_.find(name);
    if (it != factories_.end()) return it->second(context, config);
    if (fallback_) return fallback_(name, context, config);
  } catch (const std::exception& e) {
    return Error(ErrorCode::kExtensionFailed,
                 "region extension '" + name + "' failed to load: " + e.what());
  }
  return Error(ErrorCode::kNotFound, "no region extension named '" + name + "'");
}

Result<Json> parse_extension_config(std::string_view text) {
  if (text.find_first_not_of(" \t\r\n") == std::string_view::npos) return Json::object();
  Json config = Json::parse(text, nullptr, /*allow_exceptions=*/false);
  if (config.is_discarded()) {
    return Error(ErrorCode::kBadRequest, "region extension config is not valid JSON");
  }
  return config;
}

}  // namespace rcxl::ext
