// Seeded uniform draws for sampling, the same on every machine.
#pragma once

#include <cstddef>
#include <cstdint>

namespace dsinfer::runtime {

// The uniform draws in [0, 1) the sampler takes, one per token: the top 24 bits of xoshiro256**
// seeded through splitmix64, so a seed gives the same tokens on every machine. 32 bytes of state:
// the engine keeps one per request and touches hundreds of them a step.
class UniformSource {
 public:
  explicit UniformSource(uint64_t seed) {
    for (uint64_t& word : state_) {
      seed += 0x9e3779b97f4a7c15ull;  // splitmix64
      uint64_t z = seed;
      z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
      z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
      word = z ^ (z >> 31);
    }
  }
  float next() { return static_cast<float>(next_u64() >> 40) * 0x1p-24f; }
  void skip(size_t draws) {
    for (size_t i = 0; i < draws; ++i) next_u64();
  }

 private:
  static uint64_t rotl(uint64_t x, int k) { return (x << k) | (x >> (64 - k)); }
  uint64_t next_u64() {
    uint64_t result = rotl(state_[1] * 5, 7) * 9;
    uint64_t t = state_[1] << 17;
    state_[2] ^= state_[0];
    state_[3] ^= state_[1];
    state_[1] ^= state_[2];
    state_[0] ^= state_[3];
    state_[2] ^= t;
    state_[3] = rotl(state_[3], 45);
    return result;
  }
  uint64_t state_[4];
};

}  // namespace dsinfer::runtime
