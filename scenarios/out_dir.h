// The --out directory of reproduce and sweep: made and proven writable before
// the first run, so a bad path is refused up front, not after an hour of runs.
#pragma once

#include <string>
#include <vector>

#include "core/runtime/status.h"

namespace rcxl::scenarios {

// Creates `dir` and its parents and writes (then removes) a probe file in it.
// kBadRequest "--out DIR: cannot create directory (reason); choose a writable
// directory" when either fails. Then refuses (kBadRequest, see
// check_out_file) any of `outputs`, names of files in `dir` the command will
// write, that exists and is not a regular file.
Status prepare_out_dir(const std::string& dir, const std::vector<std::string>& outputs = {});

// Refuses `path` (a file in --out `dir`) when it exists and is not a regular
// file, or a symbolic link to one: opening a FIFO for writing blocks until a
// reader comes, a directory cannot be written. kBadRequest "--out DIR: PATH is
// a FIFO (named pipe), not a regular file; remove it or choose another --out
// directory".
Status check_out_file(const std::string& dir, const std::string& path);

// Writes `text` to `path` (a file in --out `dir`) after check_out_file, so it
// never blocks on a FIFO made since the start. kIoError "--out DIR: cannot
// write PATH (reason)" when the write fails.
Status write_out_file(const std::string& dir, const std::string& path, const std::string& text);

}  // namespace rcxl::scenarios
