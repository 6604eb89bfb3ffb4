// The pseudo-random values of Backend::fill_uniform, shared by every backend's implementation
// (host and device), so that a dummy model is the same model on each.
#pragma once

#include <cstdint>

#include "core/host_device.h"

namespace dsinfer::backend {

// splitmix64 of (seed, index) -> uniform in [low, high).
DSINFER_HOST_DEVICE inline float uniform_at(uint64_t seed, uint64_t index, float low, float high) {
  uint64_t z = seed * 0x9e3779b97f4a7c15ull + index + 0x632be59bd9b4e019ull;
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  z ^= z >> 31;
  float unit = static_cast<float>(z >> 40) * (1.0f / 16777216.0f);  // 24 bits: [0, 1)
  return low + (high - low) * unit;
}

}  // namespace dsinfer::backend
