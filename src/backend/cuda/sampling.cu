// The sampling kernel: penalties, logit_bias, banned tokens and allowed-token bitmasks, greedy or
// filtered sampling, and raw logprobs.
// logits [rows, vocab] f32 -> tokens [rows], logprobs [rows], top ids / logprobs [rows, top_n]
// (contract and roofline in sampling.h). Launch: grid = rows, 1024 threads, sizeof(SharedStorage)
// = 168,200 bytes of dynamic shared memory (opted into per launch), 64 registers.
//
// Order. Each element is a 50-bit composite key, (order key of its logit) << 18 | (2^18 - 1 - id):
// larger key = earlier in the CPU's order (logit descending, id ascending), and keys are distinct.
// -0 counts as +0 (the CPU compares them equal) and NaN ranks below -inf with weight 0. Every
// filter keeps a prefix of this order, so survivors are {key >= threshold} for one threshold.
//
// Selection (top_k's k-th key, top_p's cut, the draw): a radix descent over the key, 8 bits per
// level. A level makes a 256-bin histogram of count and integer weight of the candidates that
// share the prefix found so far (a private copy per lane, so a warp's atomics never collide), a
// block scan finds the bin where the running count or weight (from the top) reaches the need, and
// the next level refines that bin; it stops as soon as the cut falls on a bin edge or a bin holds
// one candidate. Levels start below the bits every candidate shares.
//
// Region. A pass over the row histograms count and weight by distance from the max logit (bins
// of 1/8 temperature); the first bins holding everything the active filters (or, unfiltered, the
// draw) can reach are copied to shared memory when they hold <= 8,192 tokens, and the descents
// then run there instead of re-reading the row. Bins are monotone in the logit, so the copy is a
// prefix of the order and every descent answers as it would over the whole row.
#include "backend/cuda/sampling.h"

#include <cooperative_groups.h>

#include <cmath>
#include <cstdint>

#include "backend/cuda/cuda_check.h"

namespace dsinfer::backend::cuda {
namespace {

namespace cg = cooperative_groups;
using u64 = unsigned long long;

constexpr int kThreads = 1024;
constexpr int kWarps = kThreads / 32;
constexpr unsigned kFullMask = 0xffffffffu;
constexpr int kIndexBits = 18;
constexpr int kMaxVocab = 1 << kIndexBits;
constexpr uint32_t kIndexMask = kMaxVocab - 1;
constexpr int kDigitBits = 8;
constexpr int kBins = 1 << kDigitBits;
constexpr int kCandidateCapacity = 8192;
constexpr int kMaxTopLogprobs = 20;
// Weight units: 2^45 per unit weight, so that vocab (<= 2^18) weights of at most 1 sum below 2^63.
constexpr float kWeightScale = 35184372088832.0f;
constexpr float kDistanceBinsPerTemperature = 8.0f;
constexpr uint32_t kNegativeInfinityKey = ~0xff800000u;
static_assert(kThreads / 4 == kBins, "the per-bin reduction gives each bin four threads");
static_assert(static_cast<u64>(kMaxVocab) * (1ull << 45) <= (1ull << 63));

// ---- keys ----

// Order-preserving: a > b as floats (NaN aside) iff key(a) > key(b). NaN -> 0, below -inf.
__device__ __forceinline__ uint32_t order_key(float v) {
  if (isnan(v)) return 0u;
  uint32_t bits = __float_as_uint(v);
  if (bits == 0x80000000u) bits = 0u;  // -0 -> +0
  return (bits & 0x80000000u) ? ~bits : (bits | 0x80000000u);
}

__device__ __forceinline__ float key_value(uint32_t key) {
  if (key < kNegativeInfinityKey) return -INFINITY;  // NaN weighs nothing
  return __uint_as_float((key & 0x80000000u) ? (key & 0x7fffffffu) : ~key);
}

__device__ __forceinline__ u64 composite(int index, float value) {
  return (static_cast<u64>(order_key(value)) << kIndexBits) | (kIndexMask - static_cast<uint32_t>(index));
}
__device__ __forceinline__ int composite_index(u64 key) {
  return static_cast<int>(kIndexMask - static_cast<uint32_t>(key & kIndexMask));
}
__device__ __forceinline__ float composite_value(u64 key) {
  return key_value(static_cast<uint32_t>(key >> kIndexBits));
}

// exp((logit - max) / temperature) in [0, 1], and as an integer in units of 2^-45.
struct Weight {
  float max_logit = 0.0f;
  float temperature = 1.0f;
  __device__ __forceinline__ float relative(u64 key) const {
    const float w = expf((composite_value(key) - max_logit) / temperature);
    return w >= 0.0f ? w : 0.0f;  // NaN (-inf / inf) weighs nothing
  }
  __device__ __forceinline__ u64 operator()(u64 key) const {
    return __float2ull_rz(relative(key) * kWeightScale);
  }
};

// Distance from the max in 1/8 temperature steps, clamped to the last bin; non-decreasing as the
// logit decreases, so a run of bins from 0 is a prefix of the order.
__device__ __forceinline__ int distance_bin(float value, float max_logit, float temperature) {
  const float steps = (max_logit - value) / temperature * kDistanceBinsPerTemperature;
  return static_cast<int>(fminf(steps, kBins - 1.0f));  // NaN -> the last bin
}

// ---- shared state ----

struct Crossing {
  int bin = 0;
  int found = 0;
  u64 before_count = 0, before_mass = 0;  // in the bins before it
  u64 bin_count = 0, bin_mass = 0;
  u64 total_count = 0, total_mass = 0;    // all bins
};

struct SharedStorage {
  u64 lane_mass[kBins * 32];    // [bin][lane] private histogram copies
  uint32_t lane_count[kBins * 32];
  u64 candidates[kCandidateCapacity];  // the region's keys
  u64 bin_mass[kBins];
  uint32_t bin_count[kBins];
  u64 slots_a[kWarps + 1];
  u64 slots_b[kWarps + 1];
  double slots_d[kWarps + 1];
  float slots_f[kWarps + 1];
  uint32_t slots_u[kWarps + 1];
  u64 top_keys[kMaxTopLogprobs];
  Crossing crossing;
  int num_collected;
  int element;
  int flag;
};
static_assert(sizeof(SharedStorage) <= 227 * 1024, "more shared memory than one H100/H200 block may have");

__device__ __forceinline__ int lane_id() { return static_cast<int>(threadIdx.x & 31); }
__device__ __forceinline__ int warp_id() { return static_cast<int>(threadIdx.x >> 5); }

struct MaxOp {
  template <class T> __device__ T operator()(T a, T b) const { return a > b ? a : b; }
};
struct MinOp {
  template <class T> __device__ T operator()(T a, T b) const { return a < b ? a : b; }
};
struct SumOp {
  template <class T> __device__ T operator()(T a, T b) const { return a + b; }
};
struct FloatMaxOp {
  __device__ float operator()(float a, float b) const { return fmaxf(a, b); }
};

// Block-wide reduction in a fixed order (deterministic for floats too); every thread gets the result.
template <class T, class Op>
__device__ T block_reduce(T value, T* slots, Op op) {
#pragma unroll
  for (int offset = 16; offset > 0; offset /= 2) value = op(value, __shfl_xor_sync(kFullMask, value, offset));
  if (lane_id() == 0) slots[warp_id()] = value;
  __syncthreads();
  if (warp_id() == 0) {
    T v = slots[lane_id()];
#pragma unroll
    for (int offset = 16; offset > 0; offset /= 2) v = op(v, __shfl_xor_sync(kFullMask, v, offset));
    if (lane_id() == 0) slots[kWarps] = v;
  }
  __syncthreads();
  const T result = slots[kWarps];
  __syncthreads();  // the slots are free again
  return result;
}

// Exclusive scan of (a, b) over threads in thread order, and the totals.
__device__ void block_scan_pairs(SharedStorage& sh, u64 a, u64 b, u64& before_a, u64& before_b, u64& total_a,
                                 u64& total_b) {
  const int lane = lane_id(), warp = warp_id();
  u64 ia = a, ib = b;
#pragma unroll
  for (int offset = 1; offset < 32; offset *= 2) {
    const u64 ua = __shfl_up_sync(kFullMask, ia, offset), ub = __shfl_up_sync(kFullMask, ib, offset);
    if (lane >= offset) {
      ia += ua;
      ib += ub;
    }
  }
  if (lane == 31) {
    sh.slots_a[warp] = ia;
    sh.slots_b[warp] = ib;
  }
  __syncthreads();
  if (warp == 0) {
    const u64 own_a = sh.slots_a[lane], own_b = sh.slots_b[lane];
    u64 wa = own_a, wb = own_b;
#pragma unroll
    for (int offset = 1; offset < 32; offset *= 2) {
      const u64 ua = __shfl_up_sync(kFullMask, wa, offset), ub = __shfl_up_sync(kFullMask, wb, offset);
      if (lane >= offset) {
        wa += ua;
        wb += ub;
      }
    }
    sh.slots_a[lane] = wa - own_a;
    sh.slots_b[lane] = wb - own_b;
    if (lane == 31) {
      sh.slots_a[kWarps] = wa;
      sh.slots_b[kWarps] = wb;
    }
  }
  __syncthreads();
  before_a = sh.slots_a[warp] + ia - a;
  before_b = sh.slots_b[warp] + ib - b;
  total_a = sh.slots_a[kWarps];
  total_b = sh.slots_b[kWarps];
  __syncthreads();
}

// ---- where the elements come from ----

// f(index, value) for every element of a row in global memory. Threads own elements i = tid + m * 1024
// (or 4-element groups of them when vectorized), two 16-byte loads in flight per thread.
template <class F>
__device__ __forceinline__ void for_each_value(const float* row, int vocab, bool vectorized, F&& f) {
  if (vectorized) {
    const float4* row4 = reinterpret_cast<const float4*>(row);
    const int groups = vocab / 4;
    int j = static_cast<int>(threadIdx.x);
    for (; j + kThreads < groups; j += 2 * kThreads) {
      const float4 x = row4[j], y = row4[j + kThreads];
      const int i = 4 * j, k = 4 * (j + kThreads);
      f(i, x.x);
      f(i + 1, x.y);
      f(i + 2, x.z);
      f(i + 3, x.w);
      f(k, y.x);
      f(k + 1, y.y);
      f(k + 2, y.z);
      f(k + 3, y.w);
    }
    if (j < groups) {
      const float4 x = row4[j];
      const int i = 4 * j;
      f(i, x.x);
      f(i + 1, x.y);
      f(i + 2, x.z);
      f(i + 3, x.w);
    }
  } else {
    for (int i = static_cast<int>(threadIdx.x); i < vocab; i += kThreads) f(i, row[i]);
  }
}

// The elements a selection looks at: the whole row in global memory, or the region's keys in
// shared memory. Every key lies in [min_key, max_key] (max_key: the row's first element).
struct Source {
  const float* row = nullptr;
  int vocab = 0;
  bool vectorized = false;
  const u64* keys = nullptr;  // the region; null: the row
  int count = 0;
  u64 min_key = 0;
  u64 max_key = 0;

  template <class F>
  __device__ __forceinline__ void for_each(F&& f) const {
    if (keys != nullptr) {
      for (int j = static_cast<int>(threadIdx.x); j < count; j += kThreads) f(keys[j]);
    } else {
      for_each_value(row, vocab, vectorized, [&](int i, float v) { f(composite(i, v)); });
    }
  }
};

// ---- building blocks (called by every thread of the block) ----

// Count and (kWithMass) weight per bin of bin_of(key) in [0, kBins) (-1: skip) -> sh.bin_count,
// sh.bin_mass.
template <bool kWithMass, class BinOf>
__device__ void histogram(SharedStorage& sh, const Source& source, BinOf bin_of, const Weight& weight) {
  const int lane = lane_id();
  for (int i = static_cast<int>(threadIdx.x); i < kBins * 32; i += kThreads) {
    sh.lane_count[i] = 0;
    if constexpr (kWithMass) sh.lane_mass[i] = 0;
  }
  __syncthreads();
  source.for_each([&](u64 key) {
    const int bin = bin_of(key);
    if (bin < 0) return;
    atomicAdd(&sh.lane_count[bin * 32 + lane], 1u);
    if constexpr (kWithMass) atomicAdd(&sh.lane_mass[bin * 32 + lane], weight(key));
  });
  __syncthreads();
  // Four threads per bin, eight lane copies each.
  const int bin = static_cast<int>(threadIdx.x >> 2), part = static_cast<int>(threadIdx.x & 3);
  uint32_t count = 0;
  u64 mass = 0;
#pragma unroll
  for (int k = 0; k < 8; ++k) {
    count += sh.lane_count[bin * 32 + part * 8 + k];
    if constexpr (kWithMass) mass += sh.lane_mass[bin * 32 + part * 8 + k];
  }
  count += __shfl_xor_sync(kFullMask, count, 1);
  count += __shfl_xor_sync(kFullMask, count, 2);
  mass += __shfl_xor_sync(kFullMask, mass, 1);
  mass += __shfl_xor_sync(kFullMask, mass, 2);
  if (part == 0) {
    sh.bin_count[bin] = count;
    sh.bin_mass[bin] = mass;
  }
  __syncthreads();
}

// The first bin b at which pred(b, count through b, mass through b, total count, total mass) holds,
// for a pred that is false up to some bin and true from it on.
template <class Pred>
__device__ Crossing find_crossing(SharedStorage& sh, Pred pred) {
  const int t = static_cast<int>(threadIdx.x);
  const u64 count = t < kBins ? sh.bin_count[t] : 0, mass = t < kBins ? sh.bin_mass[t] : 0;
  if (t == 0) sh.crossing.found = 0;
  u64 before_count, before_mass, total_count, total_mass;
  block_scan_pairs(sh, count, mass, before_count, before_mass, total_count, total_mass);
  if (t < kBins && pred(t, before_count + count, before_mass + mass, total_count, total_mass) &&
      !(t > 0 && pred(t - 1, before_count, before_mass, total_count, total_mass))) {
    Crossing& c = sh.crossing;
    c.bin = t;
    c.before_count = before_count;
    c.before_mass = before_mass;
    c.bin_count = count;
    c.bin_mass = mass;
    c.found = 1;
  }
  __syncthreads();
  Crossing result = sh.crossing;
  __syncthreads();
  result.total_count = total_count;
  result.total_mass = total_mass;
  return result;
}

enum class Select { kCount, kCountWithMass, kMass };

// A cut: the candidates with key >= threshold, their count and weight; the final bin is
// {key >> shift == prefix}.
struct Cut {
  u64 threshold = 0, count = 0, mass = 0, prefix = 0;
  int shift = 0;
  bool ok = false;
};

// Radix descent over the candidates (key >= lo): the shortest prefix of the order whose count
// (kCount*) or weight (kMass) reaches need (>= 1 and <= the candidates' total).
template <Select kSelect>
__device__ Cut descend(SharedStorage& sh, const Source& source, u64 lo, u64 need, const Weight& weight) {
  constexpr bool kWithMass = kSelect != Select::kCount;
  constexpr bool kByMass = kSelect == Select::kMass;
  const u64 low = lo > source.min_key ? lo : source.min_key;
  if (low > source.max_key || need == 0) return Cut{};
  // Every candidate lies in [low, max_key], so shares the bits above their highest difference.
  const u64 spread = low ^ source.max_key;
  int high = spread == 0 ? 0 : 64 - __clzll(static_cast<long long>(spread));
  u64 prefix = source.max_key >> high;
  u64 above_count = 0, above_mass = 0;
  for (;;) {
    const int width = high < kDigitBits ? high : kDigitBits;
    const int shift = high - width;
    const u64 digit_mask = (1ull << width) - 1;
    histogram<kWithMass>(
        sh, source,
        [&](u64 key) -> int {
          if (key < lo || (key >> high) != prefix) return -1;
          return kBins - 1 - static_cast<int>((key >> shift) & digit_mask);  // bin 0: the largest digit
        },
        weight);
    const Crossing x = find_crossing(sh, [&](int, u64 count, u64 mass, u64, u64) { return (kByMass ? mass : count) >= need; });
    if (!x.found) return Cut{};
    prefix = (prefix << width) | static_cast<u64>(kBins - 1 - x.bin);
    above_count += x.before_count;
    above_mass += x.before_mass;
    const bool done = kByMass ? x.bin_count == 1 : x.before_count + x.bin_count == need;
    if (done || shift == 0)
      return Cut{prefix << shift, above_count + x.bin_count, above_mass + x.bin_mass, prefix, shift, true};
    need -= kByMass ? x.before_mass : x.before_count;
    high = shift;
  }
}

// Copies the keys keep() accepts to out (in no particular order; everything downstream is
// order-independent) -> how many (<= capacity); *min_kept gets the smallest when asked.
template <class Keep>
__device__ int collect(SharedStorage& sh, const Source& source, Keep keep, u64* out, int capacity, u64* min_kept) {
  if (threadIdx.x == 0) sh.num_collected = 0;
  __syncthreads();
  u64 local_min = ~0ull;
  source.for_each([&](u64 key) {
    if (!keep(key)) return;
    local_min = key < local_min ? key : local_min;
    const cg::coalesced_group group = cg::coalesced_threads();
    int base = 0;
    if (group.thread_rank() == 0) base = atomicAdd(&sh.num_collected, static_cast<int>(group.size()));
    const int slot = group.shfl(base, 0) + static_cast<int>(group.thread_rank());
    if (slot < capacity) out[slot] = key;
  });
  __syncthreads();
  const int collected = sh.num_collected;
  if (min_kept != nullptr) *min_kept = block_reduce(local_min, sh.slots_a, MinOp{});
  __syncthreads();
  return collected < capacity ? collected : capacity;
}

__device__ u64 surviving_mass(SharedStorage& sh, const Source& source, u64 lo, const Weight& weight) {
  u64 local = 0;
  source.for_each([&](u64 key) {
    if (key >= lo) local += weight(key);
  });
  return block_reduce(local, sh.slots_a, SumOp{});
}

// The id of the one candidate (key >= lo) with key >> shift == prefix; -1 if none.
__device__ int find_element(SharedStorage& sh, const Source& source, u64 lo, u64 prefix, int shift) {
  if (threadIdx.x == 0) sh.element = -1;
  __syncthreads();
  source.for_each([&](u64 key) {
    if (key >= lo && (key >> shift) == prefix) sh.element = composite_index(key);
  });
  __syncthreads();
  const int element = sh.element;
  __syncthreads();
  return element;
}

// The weight top_p's prefix must reach: ceil(top_p * total), at least 1 (top_p <= 0 keeps one).
__device__ u64 top_p_need(float top_p, u64 total) {
  const double need = ceil(static_cast<double>(top_p) * static_cast<double>(total));
  if (!(need >= 1.0)) return 1;
  if (need >= static_cast<double>(total)) return total;
  const u64 result = static_cast<u64>(need);
  return result < total ? result : total;
}

// floor(u * total) in [0, total - 1] (total >= 1): the draw falls in the token whose cumulative
// weight first exceeds it.
__device__ u64 draw_target(float u, u64 total) {
  const double target = floor(static_cast<double>(u) * static_cast<double>(total));
  const u64 result = target > 0.0 ? static_cast<u64>(target) : 0;
  return result < total ? result : total - 1;
}

// ---- the row's stages ----

// The CPU's log normaliser of the raw row (max + log(sum(exp(v - max))), the sum in double) by an
// online pass; also the largest value (NaN ignored) and the first element's key.
__device__ float raw_log_normalizer(SharedStorage& sh, const float* row, int vocab, bool vectorized, float* row_max,
                                    u64* top_key) {
  float local_max = -INFINITY;
  double local_sum = 0.0;
  u64 local_top = 0;
  for_each_value(row, vocab, vectorized, [&](int i, float v) {
    const u64 key = composite(i, v);
    local_top = key > local_top ? key : local_top;
    if (!(v > -INFINITY)) return;  // -inf and NaN add nothing
    if (v > local_max) {
      local_sum = local_sum * static_cast<double>(expf(local_max - v)) + 1.0;
      local_max = v;
    } else if (v == local_max) {
      local_sum += 1.0;
    } else {
      local_sum += static_cast<double>(expf(v - local_max));
    }
  });
  const float block_max = block_reduce(local_max, sh.slots_f, FloatMaxOp{});
  const double scale = local_max == block_max ? 1.0 : static_cast<double>(expf(local_max - block_max));
  const double total = block_reduce(local_sum * scale, sh.slots_d, SumOp{});
  *top_key = block_reduce(local_top, sh.slots_a, MaxOp{});
  *row_max = block_max;
  return static_cast<float>(static_cast<double>(block_max) + log(total));
}

// The top n (1..20) of the raw row, most likely first, ties to the lower id, and their
// log_softmax values -> ids[0, top_n), values[0, top_n) (-1 / -inf past min(n, vocab)).
__device__ void raw_top_logprobs(SharedStorage& sh, const Source& row_source, const float* row, int n, float row_max,
                                 float log_normalizer, bool allow_region, int32_t* ids, float* values, int top_n) {
  const u64 want = static_cast<u64>(n < row_source.vocab ? n : row_source.vocab);
  Source source = row_source;
  if (allow_region && isfinite(row_max)) {
    histogram<false>(
        sh, row_source, [&](u64 key) { return distance_bin(composite_value(key), row_max, 1.0f); }, Weight{});
    const Crossing x = find_crossing(sh, [&](int, u64 count, u64, u64, u64) { return count >= want; });
    if (x.found && x.before_count + x.bin_count <= kCandidateCapacity) {
      const int last = x.bin;
      u64 min_key = 0;
      const int count = collect(
          sh, row_source, [&](u64 key) { return distance_bin(composite_value(key), row_max, 1.0f) <= last; },
          sh.candidates, kCandidateCapacity, &min_key);
      source.keys = sh.candidates;
      source.count = count;
      source.min_key = min_key;
    }
  }
  const Cut cut = descend<Select::kCount>(sh, source, 0, want, Weight{});
  int got = 0;
  if (cut.ok)
    got = collect(sh, source, [&](u64 key) { return key >= cut.threshold; }, sh.top_keys, kMaxTopLogprobs, nullptr);
  if (threadIdx.x == 0) {
    u64* keys = sh.top_keys;
    for (int i = 1; i < got; ++i) {  // insertion sort, largest key first
      const u64 key = keys[i];
      int j = i;
      for (; j > 0 && keys[j - 1] < key; --j) keys[j] = keys[j - 1];
      keys[j] = key;
    }
    for (int j = 0; j < top_n; ++j) {
      if (j < got) {
        const int id = composite_index(keys[j]);
        ids[j] = id;
        values[j] = row[id] - log_normalizer;
      } else {
        ids[j] = -1;
        values[j] = -INFINITY;
      }
    }
  }
  __syncthreads();
}

// Temperature / top_k / top_p / min_p sampling of a penalised row whose first element is top_key,
// with a finite max_logit. Returns the token.
__device__ int sample_filtered(SharedStorage& sh, const Source& row_source, const SamplingRowParams& p,
                               float max_logit, bool allow_region) {
  const u64 top_key = row_source.max_key;
  const int fallback = composite_index(top_key);
  const Weight weight{max_logit, p.temperature};
  const bool top_k_on = p.top_k > 0 && p.top_k < row_source.vocab;
  const bool top_p_on = p.top_p < 1.0f;
  const bool min_p_on = p.min_p > 0.0f;
  const bool filtered = top_k_on || top_p_on || min_p_on;
  const float u = p.uniform > 0.0f ? fminf(p.uniform, 1.0f) : 0.0f;

  // Weight by distance from the max, and min_p's cut: the smallest logit whose weight >= min_p
  // (all ids of it), or the first element alone when none.
  uint32_t local_min_p_key = 0xffffffffu;
  histogram<true>(
      sh, row_source,
      [&](u64 key) {
        if (min_p_on && weight.relative(key) >= p.min_p) {
          const uint32_t value_key = static_cast<uint32_t>(key >> kIndexBits);
          local_min_p_key = value_key < local_min_p_key ? value_key : local_min_p_key;
        }
        return distance_bin(composite_value(key), max_logit, p.temperature);
      },
      weight);
  u64 min_p_cut = top_key;
  if (min_p_on) {
    const uint32_t key = block_reduce(local_min_p_key, sh.slots_u, MinOp{});
    if (key != 0xffffffffu) min_p_cut = static_cast<u64>(key) << kIndexBits;
  }

  // The bins holding everything the result depends on: the top-k set (top_p and min_p keep less);
  // else top_p's prefix; else min_p's; else, unfiltered, the tokens up to the draw.
  Crossing x;
  if (top_k_on) {
    const u64 k = static_cast<u64>(p.top_k);
    x = find_crossing(sh, [&](int, u64 count, u64, u64, u64) { return count >= k; });
  } else if (top_p_on) {
    x = find_crossing(sh, [&](int, u64, u64 mass, u64, u64 total) { return mass >= top_p_need(p.top_p, total); });
  } else if (min_p_on) {
    const int last = distance_bin(composite_value(min_p_cut), max_logit, p.temperature);
    x = find_crossing(sh, [&](int bin, u64, u64, u64, u64) { return bin >= last; });
  } else {
    x = find_crossing(sh, [&](int, u64, u64 mass, u64, u64 total) { return mass > draw_target(u, total); });
  }
  const u64 total_mass = x.total_mass;
  Source source = row_source;
  if (allow_region && x.found && x.before_count + x.bin_count <= kCandidateCapacity) {
    const int last = x.bin;
    u64 min_key = 0;
    const int count = collect(
        sh, row_source, [&](u64 key) { return distance_bin(composite_value(key), max_logit, p.temperature) <= last; },
        sh.candidates, kCandidateCapacity, &min_key);
    source.keys = sh.candidates;
    source.count = count;
    source.min_key = min_key;
  }

  // Survivors: key >= threshold.
  u64 threshold = 0, normalizer = total_mass;
  if (top_k_on) {
    const Cut cut = descend<Select::kCountWithMass>(sh, source, 0, static_cast<u64>(p.top_k), weight);
    if (!cut.ok) return fallback;
    threshold = cut.threshold;
    normalizer = cut.mass;  // top_p's probabilities are normalised over the top-k set
  }
  if (top_p_on) {
    const Cut cut = descend<Select::kMass>(sh, source, threshold, top_p_need(p.top_p, normalizer), weight);
    if (!cut.ok) return fallback;
    threshold = cut.threshold > threshold ? cut.threshold : threshold;
  }
  if (min_p_on) threshold = min_p_cut > threshold ? min_p_cut : threshold;
  const u64 mass = filtered ? surviving_mass(sh, source, threshold, weight) : total_mass;
  const Cut draw = descend<Select::kMass>(sh, source, threshold, draw_target(u, mass) + 1, weight);
  if (!draw.ok) return fallback;
  const int token = find_element(sh, source, threshold, draw.prefix, draw.shift);
  return token >= 0 ? token : fallback;
}

__global__ void __launch_bounds__(kThreads, 1)
    sample_tokens_kernel(SamplingInputs in, SamplingOutputs out, float* saved_raw) {
  extern __shared__ __align__(16) unsigned char shared_bytes[];
  SharedStorage& sh = *reinterpret_cast<SharedStorage*>(shared_bytes);
  const int b = static_cast<int>(blockIdx.x);
  const int vocab = in.vocab;
  const int tid = static_cast<int>(threadIdx.x);
  float* row = in.logits + static_cast<int64_t>(b) * vocab;  // plain loads: this block writes it
  const SamplingRowParams p = in.params[b];
  const bool vectorized = vocab % 4 == 0 && (reinterpret_cast<uintptr_t>(row) & 15) == 0;
  const int history_begin = in.history_start != nullptr ? in.history_start[b] : 0;
  const int history_end = in.history_start != nullptr ? in.history_start[b + 1] : 0;
  const int banned_begin = in.banned_start != nullptr ? in.banned_start[b] : 0;
  const int banned_end = in.banned_start != nullptr ? in.banned_start[b + 1] : 0;
  const int bias_begin = in.bias_start != nullptr ? in.bias_start[b] : 0;
  const int bias_end = in.bias_start != nullptr ? in.bias_start[b + 1] : 0;
  // This row's allowed-token bitmask ([(vocab + 31) / 32] words), or null.
  const int mask_index = in.bitmask_row != nullptr ? in.bitmask_row[b] : -1;
  const int32_t* mask = mask_index >= 0 ? in.bitmask + static_cast<int64_t>(mask_index) * ((vocab + 31) / 32) : nullptr;
  const bool want_logprobs = out.logprobs != nullptr && p.top_logprobs >= 0;
  int32_t* top_ids = out.top_ids + static_cast<int64_t>(b) * out.top_n;
  float* top_values = out.top_logprobs + static_cast<int64_t>(b) * out.top_n;

  // 1. Raw logprobs, before the penalties change the row; keep the raw values they overwrite.
  float log_normalizer = 0.0f;
  float* saved = nullptr;
  if (want_logprobs) {
    float row_max;
    u64 raw_top;
    log_normalizer = raw_log_normalizer(sh, row, vocab, vectorized, &row_max, &raw_top);
    const int n = p.top_logprobs < out.top_n ? p.top_logprobs : out.top_n;
    if (n > 0) {
      const Source raw{row, vocab, vectorized, nullptr, 0, 0, raw_top};
      raw_top_logprobs(sh, raw, row, n, row_max, log_normalizer, in.allow_shared_region, top_ids, top_values,
                       out.top_n);
    } else if (tid == 0) {
      for (int j = 0; j < out.top_n; ++j) {
        top_ids[j] = -1;
        top_values[j] = -INFINITY;
      }
    }
    saved = saved_raw + static_cast<int64_t>(b) * vocab;
    if (mask != nullptr) {
      // The mask may overwrite any token: keep the whole raw row (one more pass, masked rows only).
      for (int i = tid; i < vocab; i += kThreads) saved[i] = row[i];
    } else {
      for (int i = history_begin + tid; i < history_end; i += kThreads) {
        const int token = in.history_tokens[i];
        if (token >= 0 && token < vocab) saved[token] = row[token];
      }
      for (int i = banned_begin + tid; i < banned_end; i += kThreads) {
        const int token = in.banned_tokens[i];
        if (token >= 0 && token < vocab) saved[token] = row[token];
      }
      for (int i = bias_begin + tid; i < bias_end; i += kThreads) {
        const int token = in.bias_tokens[i];
        if (token >= 0 && token < vocab) saved[token] = row[token];
      }
    }
  } else if (tid == 0) {
    if (out.logprobs != nullptr) out.logprobs[b] = NAN;
    for (int j = 0; j < out.top_n; ++j) {
      top_ids[j] = -1;
      top_values[j] = -INFINITY;
    }
  }
  __syncthreads();

  // 2. Penalties (a row's history tokens are distinct, so no two threads touch one logit), with
  //    the CPU's float operations: IEEE division and product, then logit - fma(frequency, count,
  //    presence) as GCC contracts it for x86-64-v3.
  for (int i = history_begin + tid; i < history_end; i += kThreads) {
    const int token = in.history_tokens[i];
    if (token < 0 || token >= vocab) continue;
    float logit = row[token];
    if (p.repetition_penalty != 1.0f)
      logit = logit > 0.0f ? __fdiv_rn(logit, p.repetition_penalty) : __fmul_rn(logit, p.repetition_penalty);
    if (const int count = in.history_output_counts[i]; count > 0)
      logit = __fsub_rn(logit, __fmaf_rn(p.frequency_penalty, static_cast<float>(count), p.presence_penalty));
    row[token] = logit;
  }
  __syncthreads();
  // 3. logit_bias (a row's bias tokens are distinct), one IEEE add as the CPU's +=.
  for (int i = bias_begin + tid; i < bias_end; i += kThreads) {
    const int token = in.bias_tokens[i];
    if (token >= 0 && token < vocab) row[token] = __fadd_rn(row[token], in.bias_values[i]);
  }
  __syncthreads();
  // 4. Banned tokens, then the tokens the row's bitmask leaves out. Thread i reads word i / 32: a
  //    warp's 32 consecutive tokens share one word (a broadcast load) and write coalesced.
  for (int i = banned_begin + tid; i < banned_end; i += kThreads) {
    const int token = in.banned_tokens[i];
    if (token >= 0 && token < vocab) row[token] = -INFINITY;
  }
  __syncthreads();
  if (mask != nullptr) {
    for (int i = tid; i < vocab; i += kThreads) {
      const uint32_t word = static_cast<uint32_t>(mask[i >> 5]);
      if (!((word >> (i & 31)) & 1u)) row[i] = -INFINITY;
    }
    __syncthreads();
  }

  // 5. The first maximum: std::max_element's answer (NaN never wins, unless it is element 0).
  u64 local_top = 0;
  for_each_value(row, vocab, vectorized, [&](int i, float v) {
    const u64 key = composite(i, v);
    local_top = key > local_top ? key : local_top;
  });
  const u64 top_key = block_reduce(local_top, sh.slots_a, MaxOp{});
  int token = isnan(row[0]) ? 0 : composite_index(top_key);
  if (p.temperature > 0.0f && p.top_k != 1) {
    const float max_logit = composite_value(top_key);
    // A row with no finite maximum (all -inf, or +inf) has no distribution: it takes the first maximum.
    if (isfinite(max_logit)) {
      const Source source{row, vocab, vectorized, nullptr, 0, 0, top_key};
      token = sample_filtered(sh, source, p, max_logit, in.allow_shared_region);
    }
  }
  if (tid == 0) out.tokens[b] = token;

  // The chosen token's raw logprob: its raw value was saved if steps 2-4 touched it (a masked row
  // saved all of them).
  if (want_logprobs) {
    if (tid == 0) sh.flag = mask != nullptr ? 1 : 0;
    __syncthreads();
    if (mask == nullptr) {
      for (int i = history_begin + tid; i < history_end; i += kThreads)
        if (in.history_tokens[i] == token) sh.flag = 1;
      for (int i = banned_begin + tid; i < banned_end; i += kThreads)
        if (in.banned_tokens[i] == token) sh.flag = 1;
      for (int i = bias_begin + tid; i < bias_end; i += kThreads)
        if (in.bias_tokens[i] == token) sh.flag = 1;
    }
    __syncthreads();
    if (tid == 0) out.logprobs[b] = (sh.flag ? saved[token] : row[token]) - log_normalizer;
  }
}

}  // namespace

size_t sampling_scratch_bytes(int64_t rows, int64_t vocab) {
  return static_cast<size_t>(rows) * static_cast<size_t>(vocab) * sizeof(float);
}

void sample_tokens(const SamplingInputs& inputs, const SamplingOutputs& outputs, void* scratch, size_t scratch_bytes,
                   cudaStream_t stream) {
  DSINFER_CHECK(inputs.rows >= 0, "sample_tokens: ", inputs.rows, " rows");
  DSINFER_CHECK(inputs.vocab >= 1 && inputs.vocab <= kMaxVocab, "sample_tokens: a vocabulary of ", inputs.vocab,
                " tokens; the CUDA sampler supports 1 to ", kMaxVocab);
  DSINFER_CHECK(outputs.top_n >= 0 && outputs.top_n <= kMaxTopLogprobs, "sample_tokens: top_logprobs ", outputs.top_n,
                " is outside 0 to ", kMaxTopLogprobs);
  if (inputs.rows == 0) return;
  DSINFER_CHECK(inputs.logits != nullptr && inputs.params != nullptr && outputs.tokens != nullptr,
                "sample_tokens: logits, params and tokens must be device buffers");
  DSINFER_CHECK(inputs.bias_start == nullptr || (inputs.bias_tokens != nullptr && inputs.bias_values != nullptr),
                "sample_tokens: bias_start needs bias_tokens and bias_values");
  DSINFER_CHECK(inputs.bitmask_row == nullptr || inputs.bitmask != nullptr,
                "sample_tokens: bitmask_row needs the bitmask");
  DSINFER_CHECK(outputs.top_n == 0 || (outputs.logprobs != nullptr && outputs.top_ids != nullptr &&
                                       outputs.top_logprobs != nullptr),
                "sample_tokens: top_n ", outputs.top_n, " needs the logprobs, top_ids and top_logprobs buffers");
  DSINFER_CHECK(outputs.logprobs == nullptr ||
                    (scratch != nullptr && scratch_bytes >= sampling_scratch_bytes(inputs.rows, inputs.vocab)),
                "sample_tokens: logprobs need ", sampling_scratch_bytes(inputs.rows, inputs.vocab),
                " bytes of scratch (sampling_scratch_bytes), got ", scratch_bytes);
  constexpr int kSharedBytes = static_cast<int>(sizeof(SharedStorage));
  DSINFER_CUDA_CHECK(
      cudaFuncSetAttribute(sample_tokens_kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, kSharedBytes));
  sample_tokens_kernel<<<static_cast<unsigned>(inputs.rows), kThreads, kSharedBytes, stream>>>(
      inputs, outputs, static_cast<float*>(scratch));
  DSINFER_CUDA_CHECK_LAUNCH();
}

}  // namespace dsinfer::backend::cuda
