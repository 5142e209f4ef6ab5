#include "backends/sim/sim_file_system.h"

namespace rcxl::sim {

Result<std::string> SimFileSystem::read_file(const std::string& path) {
  if (unreadable_.count(path)) return Error(ErrorCode::kIoError, path + ": permission denied");
  auto it = files_.find(path);
  if (it == files_.end()) return Error(ErrorCode::kNotFound, path + ": no such file");
  return it->second;
}

Status SimFileSystem::append_file(const std::string& path, std::string_view data) {
  if (unwritable_.count(path))
    return Error(ErrorCode::kIoError, path + ": no space left on device");
  files_[path].append(data);
  return {};
}

Status SimFileSystem::write_file(const std::string& path, std::string_view data) {
  if (unwritable_.count(path))
    return Error(ErrorCode::kIoError, path + ": no space left on device");
  files_[path] = std::string(data);
  return {};
}

void SimFileSystem::set_unreadable(const std::string& path, bool unreadable) {
  if (unreadable) {
    unreadable_.insert(path);
  } else {
    unreadable_.erase(path);
  }
}

void SimFileSystem::set_unwritable(const std::string& path, bool unwritable) {
  if (unwritable) {
    unwritable_.insert(path);
  } else {
    unwritable_.erase(path);
  }
}

}  // namespace rcxl::sim
