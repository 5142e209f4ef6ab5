// Profiles and shipped scenarios compiled into the binaries (scenarios/embed.cmake).
#pragma once

#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace rcxl::scenarios {

struct EmbeddedFile {
  std::string_view path;  // relative to scenarios/: "profiles/cxl_ssd_default.json"
  std::string_view text;
};

const std::vector<EmbeddedFile>& embedded_files();

inline std::optional<std::string_view> embedded_file(std::string_view path) {
  for (const auto& f : embedded_files()) {
    if (f.path == path) return f.text;
  }
  return std::nullopt;
}

}  // namespace rcxl::scenarios
