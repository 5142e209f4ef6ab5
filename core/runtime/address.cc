#include <charconv>

#include "core/runtime/transport.h"

namespace rcxl::runtime {

Result<Address> Address::Parse(std::string_view text) {
  std::string_view host;
  std::string_view port;
  if (!text.empty() && text.front() == '[') {
    const auto close = text.find(']');
    if (close == std::string_view::npos || close + 1 >= text.size() || text[close + 1] != ':') {
      return Error(ErrorCode::kBadRequest, "expected [IPV6]:PORT, got '" + std::string(text) + "'");
    }
    host = text.substr(1, close - 1);
    port = text.substr(close + 2);
  } else {
    const auto colon = text.rfind(':');
    if (colon == std::string_view::npos) {
      return Error(ErrorCode::kBadRequest, "expected HOST:PORT, got '" + std::string(text) + "'");
    }
    host = text.substr(0, colon);
    port = text.substr(colon + 1);
  }
  unsigned value = 0;
  const auto [end, ec] = std::from_chars(port.data(), port.data() + port.size(), value);
  if (host.empty() || ec != std::errc() || end != port.data() + port.size() || value > 65535) {
    return Error(ErrorCode::kBadRequest, "bad HOST:PORT '" + std::string(text) + "'");
  }
  return Address{std::string(host), static_cast<std::uint16_t>(value)};
}

bool Address::is_loopback() const {
  return host == "localhost" || host == "::1" || host.rfind("127.", 0) == 0;
}

}  // namespace rcxl::runtime
