// --listen addresses checked the way the transport binds them, before any pool
// or listener is opened: a name that does not resolve is refused naming the
// flag; under --auth none every address a name resolves to must be loopback
// (the name "localhost" is only as local as /etc/hosts says); two spellings
// that resolve to the same addresses are refused as a repeat, not as "another
// process holds that port".
#pragma once

#include <string>
#include <vector>

#include "backends/verbs/socket_address.h"
#include "core/runtime/status.h"
#include "core/runtime/transport.h"

namespace rcxl::apps {

// The first of `resolved` that is not loopback, or nullptr.
inline const verbs::SocketAddress* first_not_loopback(
    const std::vector<verbs::SocketAddress>& resolved) {
  for (const auto& address : resolved) {
    if (!verbs::is_loopback(address)) return &address;
  }
  return nullptr;
}

// The same socket addresses in the same order.
inline bool same_addresses(const std::vector<verbs::SocketAddress>& a,
                           const std::vector<verbs::SocketAddress>& b) {
  if (a.size() != b.size()) return false;
  for (std::size_t i = 0; i < a.size(); ++i) {
    if (!verbs::same_address(a[i], b[i])) return false;
  }
  return true;
}

// Ok, or the coded refusal of `flag`'s addresses. `loopback_only`: --auth none.
inline Status check_listen_addresses(const std::string& flag,
                                     const std::vector<runtime::Address>& addresses,
                                     bool loopback_only) {
  // The transport binds the first of a name's addresses it can. Two names
  // whose lists are the same bind the same socket for sure: the second fails.
  // (Lists that only overlap may not: localhost falls back to 127.0.0.1 when
  // [::1] is taken.)
  std::vector<std::vector<verbs::SocketAddress>> bound;
  for (std::size_t i = 0; i < addresses.size(); ++i) {
    const runtime::Address& address = addresses[i];
    auto resolved = verbs::resolve(address, /*passive=*/true);
    if (!resolved.ok()) {
      return Error(ErrorCode::kBadRequest, flag + " " + address.ToString() + ": " +
                                               resolved.status().message() +
                                               "; give a name or address of this host");
    }
    if (loopback_only) {
      if (const auto* outside = first_not_loopback(*resolved)) {
        const runtime::Address numeric = verbs::to_address(outside->get());
        const std::string resolves =
            numeric.host == address.host ? "" : " (it resolves to " + numeric.host + ")";
        return Error(ErrorCode::kBadRequest,
                     "--auth none needs loopback listeners only, not " + address.ToString() +
                         resolves +
                         "; listen on 127.0.0.1 or [::1], or give --auth-secret-file PATH");
      }
    }
    for (std::size_t j = 0; j < bound.size(); ++j) {
      // Port 0 picks a new port at each bind: never a repeat.
      if (address.port == 0 || !same_addresses(bound[j], *resolved)) continue;
      // Caught here, a repeat would otherwise read as "another process holds that port".
      if (addresses[j] == address) {
        return Error(ErrorCode::kBadRequest,
                     flag + " " + address.ToString() + " is given twice; give each address once");
      }
      return Error(ErrorCode::kBadRequest,
                   flag + " " + addresses[j].ToString() + " and " + address.ToString() +
                       " are one address (" +
                       verbs::to_address(resolved->front().get()).ToString() +
                       "); give each address once");
    }
    bound.push_back(std::move(resolved).value());
  }
  return {};
}

}  // namespace rcxl::apps
