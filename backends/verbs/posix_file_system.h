// The FileSystem port in production: real files through POSIX calls (errno
// tells a missing file from an unreadable one).
#pragma once

#include "core/runtime/file_system.h"

namespace rcxl::verbs {

class PosixFileSystem final : public runtime::FileSystem {
 public:
  Result<std::string> read_file(const std::string& path) override;
  // One write(2) per call on an O_APPEND fd: the bytes reach the kernel at once.
  Status append_file(const std::string& path, std::string_view data) override;
  // Writes a temporary file next to `path`, then renames it over: readers see
  // the old or the new contents, never half of them.
  Status write_file(const std::string& path, std::string_view data) override;
};

}  // namespace rcxl::verbs
