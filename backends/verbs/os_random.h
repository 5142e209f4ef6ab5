// The Random port in production: OpenSSL's CSPRNG, so handles and challenges
// cannot be guessed. Buffered: one RAND_bytes call per 64 draws.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>

#include "core/runtime/random.h"

namespace rcxl::verbs {

class OsRandom final : public runtime::RandomSource {
 public:
  // Aborts the process if the CSPRNG fails: a guessable handle is worse than no agent.
  std::uint64_t next_u64() override;

 private:
  std::array<std::uint64_t, 64> buffer_{};
  std::size_t used_ = buffer_.size();
};

}  // namespace rcxl::verbs
