// An empty directory of a test's own under the temp directory: `prefix` names
// the test file, `tag` the case, the process id keeps parallel runs apart.
#pragma once

#include <unistd.h>

#include <filesystem>
#include <string>

namespace rcxl::testing {

inline std::filesystem::path fresh_dir(const std::string& prefix, const std::string& tag) {
  const std::filesystem::path dir = std::filesystem::temp_directory_path() /
                                    (prefix + "_" + tag + "_" + std::to_string(::getpid()));
  std::filesystem::remove_all(dir);
  std::filesystem::create_directories(dir);
  return dir;
}

}  // namespace rcxl::testing
