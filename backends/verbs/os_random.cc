#include "backends/verbs/os_random.h"

#include <openssl/rand.h>

#include <cstdio>
#include <cstdlib>

namespace rcxl::verbs {

std::uint64_t OsRandom::next_u64() {
  if (used_ == buffer_.size()) {
    if (RAND_bytes(reinterpret_cast<unsigned char*>(buffer_.data()),
                   static_cast<int>(sizeof buffer_)) != 1) {
      std::fputs("rcxl: OpenSSL RAND_bytes failed; refusing to continue\n", stderr);
      std::abort();
    }
    used_ = 0;
  }
  return buffer_[used_++];
}

}  // namespace rcxl::verbs
