// What std::system's result says about the command it ran, in words: it is a
// wait status (exit 1 reads 256), or -1 when no shell could be started.
#pragma once

#include <sys/wait.h>

#include <string>

namespace rcxl::kv {

inline std::string describe_command_status(int status) {
  if (status == -1) return "could not be started (no shell)";
  if (WIFEXITED(status)) {
    // The shell's 127: the command itself was not found.
    if (WEXITSTATUS(status) == 127) return "exited with status 127 (command not found?)";
    return "exited with status " + std::to_string(WEXITSTATUS(status));
  }
  if (WIFSIGNALED(status)) return "was killed by signal " + std::to_string(WTERMSIG(status));
  return "ended with wait status " + std::to_string(status);
}

}  // namespace rcxl::kv
