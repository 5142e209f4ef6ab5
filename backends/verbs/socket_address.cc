#include "backends/verbs/socket_address.h"

#include <arpa/inet.h>
#include <netdb.h>
#include <netinet/in.h>

#include <cctype>
#include <cstring>
#include <string>

namespace rcxl::verbs {

namespace {

// A name DNS could answer later (letters, digits, '-', '.'), not a typo no
// resolver ever will: a space, or digits and dots that are no IPv4 address.
bool could_resolve_later(const std::string& host) {
  bool letter = false;
  for (const char c : host) {
    if (std::isalpha(static_cast<unsigned char>(c))) {
      letter = true;
    } else if (!std::isdigit(static_cast<unsigned char>(c)) && c != '-' && c != '.') {
      return false;
    }
  }
  return letter;
}

}  // namespace

Result<std::vector<SocketAddress>> resolve(const runtime::Address& address, bool passive) {
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  hints.ai_flags = AI_NUMERICSERV | (passive ? AI_PASSIVE : 0);
  const std::string port = std::to_string(address.port);
  const char* host = address.host.empty() ? nullptr : address.host.c_str();
  addrinfo* found = nullptr;
  const int rc = getaddrinfo(host, port.c_str(), &hints, &found);
  if (rc != 0) {
    // A peer's name that does not resolve (now: a DNS outage) is an unreachable
    // peer, as on the sim and the RDMA NIC; a listener's is the caller's mistake.
    const bool lookup_failed =
        !passive && could_resolve_later(address.host) && lookup_may_succeed_later(rc);
    return Error(lookup_failed ? ErrorCode::kUnavailable : ErrorCode::kBadRequest,
                 "cannot resolve '" + address.ToString() + "': " + gai_strerror(rc));
  }
  std::vector<SocketAddress> out;
  for (const addrinfo* ai = found; ai != nullptr; ai = ai->ai_next) {
    SocketAddress entry;
    std::memcpy(&entry.storage, ai->ai_addr, ai->ai_addrlen);
    entry.length = ai->ai_addrlen;
    out.push_back(entry);
  }
  freeaddrinfo(found);
  if (out.empty()) return Error(ErrorCode::kBadRequest, "no address for " + address.ToString());
  return out;
}

bool lookup_may_succeed_later(int gai_error) {
  return gai_error == EAI_NONAME || gai_error == EAI_AGAIN || gai_error == EAI_FAIL ||
         gai_error == EAI_NODATA;
}

bool is_loopback(const SocketAddress& address) {
  if (address.family() == AF_INET) {
    const auto* in = reinterpret_cast<const sockaddr_in*>(&address.storage);
    return (ntohl(in->sin_addr.s_addr) >> 24) == 127;
  }
  if (address.family() == AF_INET6) {
    const auto* in6 = reinterpret_cast<const sockaddr_in6*>(&address.storage);
    if (IN6_IS_ADDR_LOOPBACK(&in6->sin6_addr)) return true;
    return IN6_IS_ADDR_V4MAPPED(&in6->sin6_addr) && in6->sin6_addr.s6_addr[12] == 127;
  }
  return false;
}

bool same_address(const SocketAddress& a, const SocketAddress& b) {
  if (a.family() != b.family()) return false;
  if (a.family() == AF_INET) {
    const auto* x = reinterpret_cast<const sockaddr_in*>(&a.storage);
    const auto* y = reinterpret_cast<const sockaddr_in*>(&b.storage);
    return x->sin_port == y->sin_port && x->sin_addr.s_addr == y->sin_addr.s_addr;
  }
  if (a.family() == AF_INET6) {
    const auto* x = reinterpret_cast<const sockaddr_in6*>(&a.storage);
    const auto* y = reinterpret_cast<const sockaddr_in6*>(&b.storage);
    return x->sin6_port == y->sin6_port && x->sin6_scope_id == y->sin6_scope_id &&
           std::memcmp(&x->sin6_addr, &y->sin6_addr, sizeof x->sin6_addr) == 0;
  }
  return false;
}

runtime::Address to_address(const sockaddr* address) {
  char host[INET6_ADDRSTRLEN] = {};
  if (address->sa_family == AF_INET) {
    const auto* in = reinterpret_cast<const sockaddr_in*>(address);
    inet_ntop(AF_INET, &in->sin_addr, host, sizeof host);
    return {host, ntohs(in->sin_port)};
  }
  if (address->sa_family == AF_INET6) {
    const auto* in6 = reinterpret_cast<const sockaddr_in6*>(address);
    inet_ntop(AF_INET6, &in6->sin6_addr, host, sizeof host);
    return {host, ntohs(in6->sin6_port)};
  }
  return {};
}

runtime::Address local_address(int fd) {
  sockaddr_storage storage{};
  socklen_t length = sizeof storage;
  if (getsockname(fd, reinterpret_cast<sockaddr*>(&storage), &length) != 0) return {};
  return to_address(reinterpret_cast<const sockaddr*>(&storage));
}

runtime::Address peer_address(int fd) {
  sockaddr_storage storage{};
  socklen_t length = sizeof storage;
  if (getpeername(fd, reinterpret_cast<sockaddr*>(&storage), &length) != 0) return {};
  return to_address(reinterpret_cast<const sockaddr*>(&storage));
}

}  // namespace rcxl::verbs
