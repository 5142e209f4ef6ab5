// A service's last line of defence: an exception that escaped its body (the
// runtime could not make a thread or a descriptor: EMFILE, EAGAIN) is one
// line on stderr and exit 1, not std::terminate's abort.
#pragma once

#include <cstdio>
#include <exception>
#include <system_error>

namespace rcxl::apps {

template <typename Body>
int run_guarded(const char* program, int exit_code, Body body) {
  try {
    return body();
  } catch (const std::system_error& e) {
    const bool out_of_fds = e.code() == std::errc::too_many_files_open ||
                            e.code() == std::errc::too_many_files_open_in_system;
    std::fprintf(stderr, "%s: %s%s\n", program, e.what(),
                 out_of_fds ? " (raise the open-file limit, e.g. ulimit -n 4096)" : "");
  } catch (const std::exception& e) {
    std::fprintf(stderr, "%s: internal error: %s\n", program, e.what());
  }
  return exit_code;
}

}  // namespace rcxl::apps
