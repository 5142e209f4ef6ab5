// rcxl-agent's checks of flag values that a CLI11 validator cannot make alone
// (they look at another flag or at the file system). Each answers the refusal
// (naming the flag, the value and what would be right) or nothing.
#pragma once

#include <sys/stat.h>
#include <sys/sysmacros.h>

#include <cstdint>
#include <filesystem>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "core/agent/region_allocator.h"
#include "core/runtime/transport.h"

namespace rcxl::apps::agent {

// The shortest poll or sweep interval: shorter ones only spin a core.
inline constexpr double kMinIntervalSeconds = 0.001;

// The smallest --max-frame-bytes. PROTOCOL.md caps a hint at 4096 ranges; at
// worst each names its own region with 20-digit numbers ("[r,o,l]" = 64 bytes)
// and a handles entry ("r":"<32 hex>" = 57 bytes): 503,810 bytes. 512 KiB
// holds that plus ~20 KB of op, epoch, token and request names, so no message
// a client may send is a bad_frame; hello and map replies are far smaller.
inline constexpr std::uint32_t kMinMaxFrameBytes = 512 * 1024;

// A boot id is the `<id>` of `<id>:<generation>`: a ':' would make that ambiguous.
inline constexpr std::size_t kMaxBootIdChars = 128;

// The smallest pool: one region (the allocator's 4096-byte alignment).
inline constexpr std::uint64_t kMinPoolBytes = rcxl::agent::RegionAllocator::kAlignment;

// nullopt, or what is wrong with `id` ("has a ':' at 3").
inline std::optional<std::string> boot_id_problem(std::string_view id) {
  if (id.empty()) return "is empty";
  if (id.size() > kMaxBootIdChars) {
    return "is " + std::to_string(id.size()) + " characters long";
  }
  for (std::size_t i = 0; i < id.size(); ++i) {
    const unsigned char c = static_cast<unsigned char>(id[i]);
    if (c == ':') return "has a ':' at " + std::to_string(i);
    if (c <= ' ' || c >= 0x7f) return "has a space or an unprintable byte at " + std::to_string(i);
  }
  return std::nullopt;
}

inline std::string boot_id_wanted() {
  return "1 to " + std::to_string(kMaxBootIdChars) +
         " printable ASCII characters without spaces or ':' (e.g. a UUID)";
}

// nullopt, or why `path` cannot be a dax: pool. pmem2 maps a Device DAX (a
// character device of the "dax" sysfs subsystem) or a regular file (fs-dax) of
// at least one region; on anything else it fails without a reason.
inline std::optional<std::string> dax_path_problem(const std::string& path) {
  struct stat st {};
  if (stat(path.c_str(), &st) != 0) return std::nullopt;  // the open names the error
  if (S_ISREG(st.st_mode)) {
    if (static_cast<std::uint64_t>(st.st_size) >= kMinPoolBytes) return std::nullopt;
    return path + " holds " + std::to_string(st.st_size) + " bytes, no region; a pool needs " +
           std::to_string(kMinPoolBytes) + " (use file:PATH:BYTES to size it)";
  }
  const std::string use_instead = "; use dax:/dev/daxN.M, file:PATH:BYTES or anon:BYTES";
  if (!S_ISCHR(st.st_mode)) {
    const char* kind = S_ISDIR(st.st_mode)    ? "a directory"
                       : S_ISBLK(st.st_mode)  ? "a block device"
                       : S_ISFIFO(st.st_mode) ? "a FIFO"
                                              : "a socket";
    return path + " is " + kind + ", not a Device DAX" + use_instead;
  }
  const std::string subsystem = "/sys/dev/char/" + std::to_string(major(st.st_rdev)) + ":" +
                                std::to_string(minor(st.st_rdev)) + "/subsystem";
  std::error_code ec;
  const auto target = std::filesystem::read_symlink(subsystem, ec);
  if (!ec && target.filename() == "dax") return std::nullopt;
  return path + " is a character device but not a Device DAX" + use_instead;
}

}  // namespace rcxl::apps::agent
