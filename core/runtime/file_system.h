// FileSystem port: the few file operations core needs (secrets, the recording
// extension's log and generation file). Real files in the thread runtime; an
// in-memory, scriptable file system per node in sim.
#pragma once

#include <string>
#include <string_view>

#include "core/runtime/status.h"

namespace rcxl::runtime {

class FileSystem {
 public:
  virtual ~FileSystem() = default;
  // Whole file; kNotFound when missing, kIoError when unreadable or not a
  // regular file (a FIFO or device is refused, never waited on or read).
  virtual Result<std::string> read_file(const std::string& path) = 0;
  // Appends and flushes at once (a crash keeps every line written).
  virtual Status append_file(const std::string& path, std::string_view data) = 0;
  // Replaces the contents (created when missing).
  virtual Status write_file(const std::string& path, std::string_view data) = 0;
};

}  // namespace rcxl::runtime
