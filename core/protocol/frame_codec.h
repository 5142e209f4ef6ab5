// Length-prefixed frames (PROTOCOL.md "Framing"): 4-byte big-endian N, then N bytes.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "core/runtime/status.h"

namespace rcxl::protocol {

inline constexpr std::uint32_t kDefaultMaxFrameBytes = 1u << 20;  // PROTOCOL.md default
// A server's limit on a connection's first frame, which must be the hello
// (well under 1 KiB): an unauthenticated peer cannot make it parse 1 MiB of
// JSON (~30 MB of objects) per connection (docs/agent.md, Limits).
inline constexpr std::uint32_t kMaxFirstFrameBytes = 64u << 10;

// Prefixes `payload` with its length.
std::string encode_frame(std::string_view payload);

// Turns a byte stream into frame payloads. Once it fails it stays failed.
class FrameDecoder {
 public:
  explicit FrameDecoder(std::uint32_t max_frame_bytes = kDefaultMaxFrameBytes)
      : max_frame_bytes_(max_frame_bytes), first_frame_max_bytes_(max_frame_bytes) {}

  // A lower limit for the first frame only (a server's, for the hello).
  void limit_first_frame(std::uint32_t max_bytes) { first_frame_max_bytes_ = max_bytes; }

  // Appends whole frames found so far to `out`; a zero or oversize length is a
  // kBadFrame status (the connection must then be closed).
  Status feed(std::string_view bytes, std::vector<std::string>& out);
  // The same one frame at a time: buffer bytes, then take the next whole frame
  // (false when none is complete yet), so a reader that pauses leaves the rest
  // as text instead of splitting all of it.
  void append(std::string_view bytes);
  Result<bool> next(std::string& frame);
  // Bytes buffered and not yet taken: whole frames not taken yet (a reader
  // paused) and an incomplete one (a close now truncates it).
  std::size_t pending_bytes() const { return buffer_.size() - consumed_; }
  // next() would give a frame or an error now.
  bool holds_a_frame() const;

 private:
  std::uint32_t next_length() const;  // the length prefix at consumed_ (4 bytes there)
  std::uint32_t max_frame_bytes_;
  std::uint32_t first_frame_max_bytes_;
  std::uint64_t frames_ = 0;  // decoded so far
  std::string buffer_;
  std::size_t consumed_ = 0;
  Status failed_;
};

}  // namespace rcxl::protocol
