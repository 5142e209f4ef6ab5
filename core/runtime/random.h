// Random port: named streams. Sim streams are forked from the scenario seed so a
// run is a seed; the thread runtime draws from the OS's CSPRNG.
#pragma once

#include <array>
#include <cstdint>
#include <string>
#include <string_view>

namespace rcxl::runtime {

class RandomSource {
 public:
  virtual ~RandomSource() = default;
  virtual std::uint64_t next_u64() = 0;

  // Uniform in [0, 1).
  double next_double() { return static_cast<double>(next_u64() >> 11) * 0x1.0p-53; }
  // Uniform in [0, bound); bound > 0.
  std::uint64_t next_below(std::uint64_t bound);
  // `bits` random bits as lowercase hex (bits a multiple of 64): handles, challenges.
  std::string next_hex(unsigned bits);
};

// xoshiro256** seeded through splitmix64: the deterministic generator of sim streams.
class DeterministicRandom final : public RandomSource {
 public:
  explicit DeterministicRandom(std::uint64_t seed);
  std::uint64_t next_u64() override;
  // A child seed for stream `name`: independent of the order streams are forked in.
  static std::uint64_t fork_seed(std::uint64_t seed, std::string_view name);

 private:
  std::array<std::uint64_t, 4> s_{};
};

}  // namespace rcxl::runtime
