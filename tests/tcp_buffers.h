// How many bytes the kernel may buffer on a loopback TCP connection, for
// tests that bound what a peer held back by flow control could still write.
#pragma once

#include <cstddef>
#include <fstream>

namespace rcxl::testing {

// The receive buffer's autotuning ceiling (tcp_rmem's third value); 6 MiB,
// Linux's default, when it cannot be read.
inline std::size_t tcp_receive_buffer_max() {
  std::ifstream in("/proc/sys/net/ipv4/tcp_rmem");
  std::size_t min = 0, def = 0, max = 0;
  if (in >> min >> def >> max) return max;
  return std::size_t{6} << 20;
}

}  // namespace rcxl::testing
