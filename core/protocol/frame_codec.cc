#include "core/protocol/frame_codec.h"

namespace rcxl::protocol {

std::string encode_frame(std::string_view payload) {
  const auto n = static_cast<std::uint32_t>(payload.size());
  std::string out;
  out.reserve(4 + payload.size());
  out.push_back(static_cast<char>(n >> 24));
  out.push_back(static_cast<char>(n >> 16));
  out.push_back(static_cast<char>(n >> 8));
  out.push_back(static_cast<char>(n));
  out.append(payload);
  return out;
}

Status FrameDecoder::feed(std::string_view bytes, std::vector<std::string>& out) {
  append(bytes);
  std::string frame;
  for (;;) {
    auto got = next(frame);
    if (!got.ok()) return got.status();
    if (!*got) return {};
    out.push_back(std::move(frame));
  }
}

void FrameDecoder::append(std::string_view bytes) {
  if (!failed_.ok()) return;
  // Compact once the consumed prefix dominates, so a long stream stays O(n).
  if (consumed_ > 0 && consumed_ * 2 >= buffer_.size()) {
    buffer_.erase(0, consumed_);
    consumed_ = 0;
  }
  buffer_.append(bytes);
}

std::uint32_t FrameDecoder::next_length() const {
  const auto* p = reinterpret_cast<const unsigned char*>(buffer_.data() + consumed_);
  return (std::uint32_t{p[0]} << 24) | (std::uint32_t{p[1]} << 16) | (std::uint32_t{p[2]} << 8) |
         std::uint32_t{p[3]};
}

bool FrameDecoder::holds_a_frame() const {
  if (!failed_.ok()) return false;
  const std::size_t available = buffer_.size() - consumed_;
  if (available < 4) return false;
  const std::uint32_t n = next_length();
  const std::uint32_t limit = frames_ == 0 ? first_frame_max_bytes_ : max_frame_bytes_;
  return n == 0 || n > limit || available - 4 >= n;  // a frame, or next()'s error
}

Result<bool> FrameDecoder::next(std::string& frame) {
  if (!failed_.ok()) return failed_;
  const std::size_t available = buffer_.size() - consumed_;
  if (available < 4) return false;
  const std::uint32_t n = next_length();
  if (n == 0) {
    failed_ = Error(ErrorCode::kBadFrame, "zero-length frame");
    return failed_;
  }
  if (n > max_frame_bytes_) {
    failed_ = Error(ErrorCode::kBadFrame, "frame of " + std::to_string(n) +
                                              " bytes exceeds the maximum of " +
                                              std::to_string(max_frame_bytes_));
    return failed_;
  }
  if (frames_ == 0 && n > first_frame_max_bytes_) {
    failed_ = Error(ErrorCode::kBadFrame,
                    "a first frame of " + std::to_string(n) + " bytes exceeds the maximum of " +
                        std::to_string(first_frame_max_bytes_) + " for a connection's hello");
    return failed_;
  }
  if (available - 4 < n) return false;
  frame.assign(buffer_, consumed_ + 4, n);
  consumed_ += 4 + n;
  ++frames_;
  return true;
}

}  // namespace rcxl::protocol
