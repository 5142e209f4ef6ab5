#include "core/runtime/random.h"

#include <openssl/evp.h>

#include <cstring>

namespace rcxl::runtime {
namespace {

std::uint64_t splitmix64(std::uint64_t& x) {
  std::uint64_t z = (x += 0x9e3779b97f4a7c15ULL);
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
  return z ^ (z >> 31);
}

std::uint64_t rotl(std::uint64_t x, int k) {
  return (x << k) | (x >> (64 - k));
}

}  // namespace

std::uint64_t RandomSource::next_below(std::uint64_t bound) {
  // Lemire's rejection: unbiased for any bound.
  const std::uint64_t threshold = (0 - bound) % bound;
  for (;;) {
    const std::uint64_t r = next_u64();
    if (r >= threshold) return r % bound;
  }
}

std::string RandomSource::next_hex(unsigned bits) {
  static constexpr char kDigits[] = "0123456789abcdef";
  std::string out;
  for (unsigned done = 0; done < bits; done += 64) {
    std::uint64_t v = next_u64();
    for (int i = 0; i < 16; ++i) {
      out.push_back(kDigits[(v >> 60) & 0xf]);
      v <<= 4;
    }
  }
  return out;
}

DeterministicRandom::DeterministicRandom(std::uint64_t seed) {
  for (auto& word : s_) word = splitmix64(seed);
}

std::uint64_t DeterministicRandom::next_u64() {
  const std::uint64_t result = rotl(s_[1] * 5, 7) * 9;
  const std::uint64_t t = s_[1] << 17;
  s_[2] ^= s_[0];
  s_[3] ^= s_[1];
  s_[1] ^= s_[2];
  s_[0] ^= s_[3];
  s_[2] ^= t;
  s_[3] = rotl(s_[3], 45);
  return result;
}

std::uint64_t DeterministicRandom::fork_seed(std::uint64_t seed, std::string_view name) {
  // SHA-256(seed || name): stable across platforms and fork order.
  std::string input(8 + name.size(), '\0');
  for (int i = 0; i < 8; ++i) input[i] = static_cast<char>(seed >> (8 * i));
  std::memcpy(input.data() + 8, name.data(), name.size());
  unsigned char digest[EVP_MAX_MD_SIZE];
  unsigned int digest_len = 0;
  EVP_Digest(input.data(), input.size(), digest, &digest_len, EVP_sha256(), nullptr);
  // The digest's first 8 bytes, little-endian whatever the host's byte order.
  std::uint64_t out = 0;
  for (int i = 7; i >= 0; --i) out = (out << 8) | digest[i];
  return out;
}

}  // namespace rcxl::runtime
