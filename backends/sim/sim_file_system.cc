#include "backends/sim/sim_file_system.h"

#include <filesystem>

namespace rcxl::sim {

namespace {

// "/a/./b/" -> "/a/b": the form directories are kept in.
std::string directory_form(const std::string& path) {
  std::string out = std::filesystem::path(path).lexically_normal().string();
  while (out.size() > 1 && out.back() == '/') out.pop_back();
  return out;
}

}  // namespace

void SimFileSystem::make_directory(const std::string& path) {
  for (std::filesystem::path p = directory_form(path); !p.empty() && p != p.root_path();
       p = p.parent_path()) {
    directories_.insert(p.string());
  }
}

Status SimFileSystem::check_file_path(const std::string& path) const {
  if (path.empty()) return Error(ErrorCode::kIoError, "'': no such file or directory");
  if (path.back() == '/' || directories_.count(directory_form(path))) {
    return Error(ErrorCode::kIoError, path + ": is a directory");
  }
  const auto slash = path.rfind('/');
  if (slash == std::string::npos) return {};  // in the working directory
  const std::string dir = directory_form(slash == 0 ? "/" : path.substr(0, slash));
  if (dir == "." || dir.empty()) return {};  // "./x", "a/../x": the working directory
  if (!directories_.count(dir)) {
    return Error(ErrorCode::kIoError, path + ": no such file or directory (" + dir +
                                          " does not exist on this simulated node)");
  }
  return {};
}

Result<std::string> SimFileSystem::read_file(const std::string& path) {
  if (unreadable_.count(path)) return Error(ErrorCode::kIoError, path + ": permission denied");
  auto it = files_.find(path);
  if (it == files_.end()) return Error(ErrorCode::kNotFound, path + ": no such file");
  return it->second;
}

Status SimFileSystem::append_file(const std::string& path, std::string_view data) {
  if (Status st = check_file_path(path); !st.ok()) return st;
  if (unwritable_.count(path))
    return Error(ErrorCode::kIoError, path + ": no space left on device");
  files_[path].append(data);
  return {};
}

Status SimFileSystem::write_file(const std::string& path, std::string_view data) {
  if (Status st = check_file_path(path); !st.ok()) return st;
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
