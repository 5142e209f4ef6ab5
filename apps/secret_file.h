// Reads a shared-secret file (rcxl-agent's and rcxl-directory's
// --auth-secret-file, rcxl-kv's --secret-file): a small regular file, and a
// warning when every user may read it.
#pragma once

#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdint>
#include <cstdio>
#include <string>

#include "apps/small_file.h"
#include "core/runtime/status.h"

namespace rcxl::apps {

// The fix for a missing or empty secret, as every binary says it.
inline constexpr char kWriteASecret[] =
    "; write one: (umask 077; openssl rand -hex 32 > FILE), the same file for every service "
    "and client";

// A shared secret is a line of text; 4 KiB is far more than any key needs.
inline constexpr std::uint64_t kMaxSecretFileBytes = 4096;

struct SecretFile {
  std::string contents;
  std::string warning;  // empty, or why the file's mode is unsafe (read anyway)
};

// `flag` names the file in messages ("--auth-secret-file: PATH: ...").
inline Result<SecretFile> read_secret_file(const std::string& flag, const std::string& path) {
  auto file = read_small_file(
      path, kMaxSecretFileBytes,
      "give a regular file of at most " + std::to_string(kMaxSecretFileBytes) + " bytes");
  if (!file.ok()) {
    // A first install has none yet: say how to make one.
    const bool missing = ::access(path.c_str(), F_OK) != 0 && errno == ENOENT;
    return Error(ErrorCode::kBadRequest, flag + ": " + path + ": " + file.status().message() +
                                             (missing ? kWriteASecret : ""));
  }
  SecretFile secret{std::move(file->contents), ""};
  if (file->mode & S_IROTH) {
    char mode[8];
    std::snprintf(mode, sizeof(mode), "%04o", static_cast<unsigned>(file->mode & 07777));
    secret.warning =
        flag + ": " + path + " (mode " + mode + ") is readable by every user; chmod 600 it";
  }
  return secret;
}

}  // namespace rcxl::apps
