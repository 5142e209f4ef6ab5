// Conversions between runtime::Address and socket addresses.
#pragma once

#include <sys/socket.h>

#include <vector>

#include "core/runtime/status.h"
#include "core/runtime/transport.h"

namespace rcxl::verbs {

struct SocketAddress {
  sockaddr_storage storage{};
  socklen_t length = 0;
  int family() const { return storage.ss_family; }
  const sockaddr* get() const { return reinterpret_cast<const sockaddr*>(&storage); }
};

// Every socket address `address` names, in the resolver's order. `passive`: for
// bind (an empty host is every interface). When it names none: kUnavailable
// for a peer's name a resolver may answer later, else kBadRequest.
Result<std::vector<SocketAddress>> resolve(const runtime::Address& address, bool passive);
// getaddrinfo's error says the name is not known now (a DNS outage, a host
// not registered yet), not that the request was malformed.
bool lookup_may_succeed_later(int gai_error);
// In 127.0.0.0/8, ::1, or 127.0.0.0/8 mapped into IPv6: reachable from this host only.
bool is_loopback(const SocketAddress& address);
// The same family, host and port: one socket binds both.
bool same_address(const SocketAddress& a, const SocketAddress& b);
// Numeric host and port of a socket address.
runtime::Address to_address(const sockaddr* address);
// The socket's own (local) or peer address; an empty Address on failure.
runtime::Address local_address(int fd);
runtime::Address peer_address(int fd);

}  // namespace rcxl::verbs
