// Reads a file a binary takes as input that must be a small regular file: a
// FIFO would block, /dev/zero never ends, and a huge file would be read whole
// only to be refused. Messages say what is wrong; callers prefix the flag.
#pragma once

#include <cstdint>
#include <cstring>
#include <string>

#include "backends/verbs/regular_file.h"
#include "core/runtime/status.h"

namespace rcxl::apps {

struct SmallFile {
  std::string contents;
  unsigned mode = 0;  // st_mode, for permission warnings
};

// `wanted` ends the messages of a file of the wrong kind or size ("give a
// regular file of at most 4096 bytes").
inline Result<SmallFile> read_small_file(const std::string& path, std::uint64_t max_bytes,
                                         const std::string& wanted) {
  using Problem = verbs::RegularFileRead::Problem;
  verbs::RegularFileRead file = verbs::read_regular_file(path, max_bytes);
  auto refuse = [](const std::string& what) { return Error(ErrorCode::kBadRequest, what); };
  switch (file.problem) {
    case Problem::kNone:
      return SmallFile{std::move(file.contents), file.mode};
    case Problem::kDirectory:
    case Problem::kNotRegular:
      return refuse("not a regular file; " + wanted);
    case Problem::kTooLarge:
      if (file.grew) return refuse("changed size while being read; " + wanted);
      return refuse("holds " + std::to_string(file.size) + " bytes; " + wanted);
    case Problem::kNotFound:
    case Problem::kSystem:
      break;
  }
  return refuse(std::strerror(file.error));
}

}  // namespace rcxl::apps
