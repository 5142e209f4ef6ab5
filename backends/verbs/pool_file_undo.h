// What opening a `file:` pool did to the disk, taken back unless keep() is
// called: a file it created is removed, a file it grew is shrunk back. The
// agent keeps it only once it has started, so a failed start leaves nothing.
#pragma once

#include <sys/types.h>
#include <unistd.h>

#include <string>
#include <utility>

namespace rcxl::verbs {

class PoolFileUndo {
 public:
  PoolFileUndo() = default;  // nothing to undo (anon:, dax:, an already big enough file)
  static PoolFileUndo created(std::string path) { return PoolFileUndo(std::move(path), -1); }
  static PoolFileUndo grown(std::string path, off_t old_size) {
    return PoolFileUndo(std::move(path), old_size);
  }
  PoolFileUndo(PoolFileUndo&& other) noexcept { *this = std::move(other); }
  PoolFileUndo& operator=(PoolFileUndo&& other) noexcept {
    if (this != &other) {
      undo();
      path_ = std::exchange(other.path_, {});
      old_size_ = other.old_size_;
    }
    return *this;
  }
  PoolFileUndo(const PoolFileUndo&) = delete;
  PoolFileUndo& operator=(const PoolFileUndo&) = delete;
  ~PoolFileUndo() { undo(); }

  void keep() { path_.clear(); }
  // Opening created or grew the file: its bytes (some of them) are new zeros.
  bool changed_the_file() const { return !path_.empty(); }

 private:
  PoolFileUndo(std::string path, off_t old_size) : path_(std::move(path)), old_size_(old_size) {}

  void undo() {
    if (path_.empty()) return;
    // Best effort: the error to report is the one that made the start fail.
    if (old_size_ < 0) {
      (void)unlink(path_.c_str());
    } else {
      (void)truncate(path_.c_str(), old_size_);
    }
    path_.clear();
  }

  std::string path_;     // empty: nothing to undo
  off_t old_size_ = -1;  // < 0: the file was created
};

}  // namespace rcxl::verbs
