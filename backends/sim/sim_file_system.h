// In-memory files of one simulated node; scenarios write them (a generation
// file that changes at t) and tests read them (an extension's log).
#pragma once

#include <map>
#include <set>
#include <string>

#include "core/runtime/file_system.h"

namespace rcxl::sim {

class SimFileSystem final : public runtime::FileSystem {
 public:
  Result<std::string> read_file(const std::string& path) override;
  Status append_file(const std::string& path, std::string_view data) override;
  Status write_file(const std::string& path, std::string_view data) override;
  void remove(const std::string& path) { files_.erase(path); }
  // Reads of `path` fail with kIoError until cleared (an unreadable file).
  void set_unreadable(const std::string& path, bool unreadable);
  // Writes to `path` fail with kIoError until cleared (a full disk), contents kept.
  void set_unwritable(const std::string& path, bool unwritable);
  // Makes directory `path` and its parents ("/" and the working directory of
  // relative paths always exist): a file may be written only in one.
  void make_directory(const std::string& path);
  // kIoError, as the POSIX port gives, for a path no file can be written at:
  // empty, a directory, or in a directory that does not exist.
  Status check_file_path(const std::string& path) const;

 private:
  std::map<std::string, std::string> files_;
  std::set<std::string> directories_{"/"};
  std::set<std::string> unreadable_;
  std::set<std::string> unwritable_;
};

}  // namespace rcxl::sim
