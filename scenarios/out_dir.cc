#include "scenarios/out_dir.h"

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>

namespace rcxl::scenarios {
namespace {

namespace fs = std::filesystem;

Status refuse(const std::string& dir, const std::string& reason) {
  return Error(ErrorCode::kBadRequest, "--out " + dir + ": cannot create directory (" + reason +
                                           "); choose a writable directory");
}

// What a file that is not a regular one is, for errors.
std::string kind_of(fs::file_type type) {
  switch (type) {
    case fs::file_type::directory:
      return "a directory";
    case fs::file_type::fifo:
      return "a FIFO (named pipe)";
    case fs::file_type::socket:
      return "a socket";
    case fs::file_type::block:
      return "a block device";
    case fs::file_type::character:
      return "a character device";
    default:
      return "a special file";
  }
}

}  // namespace

Status check_out_file(const std::string& dir, const std::string& path) {
  std::error_code ec;
  const fs::file_status target = fs::status(path, ec);
  // Absent (or a link to nothing): the write makes it.
  if (target.type() == fs::file_type::not_found || target.type() == fs::file_type::regular) {
    return {};
  }
  const std::string fix = "; remove it or choose another --out directory";
  if (ec) {
    return Error(ErrorCode::kBadRequest,
                 "--out " + dir + ": cannot examine " + path + " (" + ec.message() + ")" + fix);
  }
  const bool link = fs::is_symlink(fs::symlink_status(path, ec));
  return Error(ErrorCode::kBadRequest, "--out " + dir + ": " + path + " is " +
                                           (link ? "a symbolic link to " : "") +
                                           kind_of(target.type()) + ", not a regular file" + fix);
}

Status write_out_file(const std::string& dir, const std::string& path, const std::string& text) {
  if (auto s = check_out_file(dir, path); !s.ok()) return s;
  errno = 0;
  std::ofstream out(path, std::ios::trunc);
  out << text;
  out.close();
  if (out.fail()) {
    const std::string reason = errno ? std::strerror(errno) : "the write failed";
    return Error(ErrorCode::kIoError, "--out " + dir + ": cannot write " + path + " (" + reason +
                                          "); check the disk and the directory's permissions");
  }
  return {};
}

Status prepare_out_dir(const std::string& dir, const std::vector<std::string>& outputs) {
  if (dir.empty()) return refuse(dir, "empty path");
  std::error_code ec;
  fs::create_directories(dir, ec);
  if (ec) return refuse(dir, ec.message());
  if (!fs::is_directory(dir, ec)) return refuse(dir, "it exists and is not a directory");
  // Permissions alone do not tell (root, read-only mounts): try a file.
  const std::string probe = (fs::path(dir) / ".rcxl-write-probe").string();
  if (auto s = check_out_file(dir, probe); !s.ok()) return s;  // a FIFO would block the probe
  {
    errno = 0;
    std::ofstream out(probe, std::ios::trunc);
    if (!(out << "probe\n") || !out.flush()) {
      const std::string reason = errno ? std::strerror(errno) : "cannot write a file in it";
      return refuse(dir, reason);
    }
  }
  fs::remove(probe, ec);
  for (const auto& name : outputs) {
    if (auto s = check_out_file(dir, (fs::path(dir) / name).string()); !s.ok()) return s;
  }
  return {};
}

}  // namespace rcxl::scenarios
