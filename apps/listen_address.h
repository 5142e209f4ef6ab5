// --listen addresses checked the way the transport binds them, before any pool
// or listener is opened: a name that does not resolve is refused naming the
// flag; under --auth none every address a name resolves to must be loopback
// (the name "localhost" is only as local as /etc/hosts says); two spellings
// of one socket are refused as a repeat, not as "another process holds that port".
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

// Ok, or the coded refusal of `flag`'s addresses. `loopback_only`: --auth none.
inline Status check_listen_addresses(const std::string& flag,
                                     const std::vector<runtime::Address>& addresses,
                                     bool loopback_only) {
  // The transport binds the first address a name resolves to that it can.
  std::vector<verbs::SocketAddress> bound;
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
    const verbs::SocketAddress& first = resolved->front();
    for (std::size_t j = 0; j < bound.size(); ++j) {
      // Port 0 picks a new port at each bind: never a repeat.
      if (address.port != 0 && verbs::same_address(bound[j], first)) {
        return Error(ErrorCode::kBadRequest, flag + " " + addresses[j].ToString() + " and " +
                                                 address.ToString() + " are one address (" +
                                                 verbs::to_address(first.get()).ToString() +
                                                 "); give each address once");
      }
    }
    bound.push_back(first);
  }
  return {};
}

}  // namespace rcxl::apps
