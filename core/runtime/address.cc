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
  if (host.empty()) {
    return Error(ErrorCode::kBadRequest, "bad HOST:PORT '" + std::string(text) + "': no host");
  }
  if (ec != std::errc() || end != port.data() + port.size() || value > 65535) {
    return Error(ErrorCode::kBadRequest, "bad HOST:PORT '" + std::string(text) +
                                             "': the port must be a whole number 0..65535");
  }
  return Address{std::string(host), static_cast<std::uint16_t>(value)};
}

namespace {

// A dotted-quad IPv4 literal in 127.0.0.0/8. A name such as
// "127.evil.example" starts with "127." too but resolves anywhere.
bool is_ipv4_loopback_literal(std::string_view host) {
  int octets = 0;
  while (true) {
    unsigned value = 0;
    const auto [end, ec] = std::from_chars(host.data(), host.data() + host.size(), value);
    const auto digits = static_cast<std::size_t>(end - host.data());
    if (ec != std::errc() || digits == 0 || digits > 3 || value > 255) return false;
    if (octets == 0 && value != 127) return false;
    ++octets;
    host.remove_prefix(digits);
    if (host.empty()) return octets == 4;
    if (host.front() != '.' || octets == 4) return false;
    host.remove_prefix(1);
  }
}

}  // namespace

bool Address::is_loopback() const {
  return host == "localhost" || host == "::1" || is_ipv4_loopback_literal(host);
}

}  // namespace rcxl::runtime
