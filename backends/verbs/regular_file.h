// Reads a file that must be a regular file of bounded size: a FIFO would
// block its reader, /dev/zero never ends, and a huge file would be read whole
// only to be refused. One implementation for every file a binary takes as
// input (state file, secrets, values, scenario documents); each caller words
// its own message from the problem.
#pragma once

#include <cstdint>
#include <string>

namespace rcxl::verbs {

struct RegularFileRead {
  enum class Problem {
    kNone,
    kNotFound,    // no such file (ENOENT, or a part of the path is a file)
    kDirectory,   // a directory
    kNotRegular,  // a FIFO, device or socket: never opened
    kTooLarge,    // more than max_bytes: `size` bytes, or it grew past while read
    kSystem,      // open, stat or read failed: `error` is the errno
  };
  Problem problem = Problem::kNone;
  int error = 0;
  std::uint64_t size = 0;  // st_size (0 for /proc files, which are read anyway)
  bool grew = false;       // kTooLarge while being read (stat said it fit)
  unsigned mode = 0;       // st_mode, for permission warnings
  std::string contents;    // the whole file when problem is kNone

  bool ok() const { return problem == Problem::kNone; }
};

// Reads until the end, at most `max_bytes`: a file that grows past it while
// being read is kTooLarge too.
RegularFileRead read_regular_file(const std::string& path, std::uint64_t max_bytes);

}  // namespace rcxl::verbs
