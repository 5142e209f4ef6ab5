#include "scenarios/out_dir.h"

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>

namespace rcxl::scenarios {
namespace {

Status refuse(const std::string& dir, const std::string& reason) {
  return Error(ErrorCode::kBadRequest, "--out " + dir + ": cannot create directory (" + reason +
                                           "); choose a writable directory");
}

}  // namespace

Status prepare_out_dir(const std::string& dir) {
  namespace fs = std::filesystem;
  if (dir.empty()) return refuse(dir, "empty path");
  std::error_code ec;
  fs::create_directories(dir, ec);
  if (ec) return refuse(dir, ec.message());
  if (!fs::is_directory(dir, ec)) return refuse(dir, "it exists and is not a directory");
  // Permissions alone do not tell (root, read-only mounts): try a file.
  const fs::path probe = fs::path(dir) / ".rcxl-write-probe";
  {
    errno = 0;
    std::ofstream out(probe, std::ios::trunc);
    if (!(out << "probe\n") || !out.flush()) {
      const std::string reason = errno ? std::strerror(errno) : "cannot write a file in it";
      return refuse(dir, reason);
    }
  }
  fs::remove(probe, ec);
  return {};
}

}  // namespace rcxl::scenarios
