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
  const std::string fix = "; remove it or choose another --out directory";
  if (target.type() == fs::file_type::not_found) {
    std::error_code lec;
    // A link to a missing path: the write would fail (or land elsewhere) after every run.
    if (fs::is_symlink(fs::symlink_status(path, lec))) {
      return Error(ErrorCode::kBadRequest,
                   "--out " + dir + ": " + path + " is a symbolic link to a missing path" + fix);
    }
    return {};  // absent: the write makes it
  }
  if (target.type() == fs::file_type::regular) return {};
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
  // An existing non-directory is named as what it is, not as an errno.
  if (const auto type = fs::status(dir, ec).type();
      type != fs::file_type::not_found && type != fs::file_type::directory && !ec) {
    return Error(ErrorCode::kBadRequest,
                 "--out " + dir + ": it is " +
                     (type == fs::file_type::regular ? std::string("a file") : kind_of(type)) +
                     ", not a directory; choose a directory (it is made if missing)");
  }
  ec.clear();
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
  for (std::size_t i = 0; i < outputs.size(); ++i) {
    const std::string path = (fs::path(dir) / outputs[i]).string();
    if (auto s = check_out_file(dir, path); !s.ok()) return s;
    // Two outputs linked to one file: the second write would replace the first.
    for (std::size_t k = 0; k < i; ++k) {
      const std::string other = (fs::path(dir) / outputs[k]).string();
      if (fs::equivalent(path, other, ec)) {
        return Error(ErrorCode::kBadRequest, "--out " + dir + ": " + path + " and " + other +
                                                 " are one file (linked); each output needs its "
                                                 "own, so remove the links or choose another "
                                                 "--out directory");
      }
    }
  }
  return {};
}

}  // namespace rcxl::scenarios
