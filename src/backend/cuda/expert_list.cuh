// The experts a grouped-expert launch serves, listed by every block of it from the device's row
// offsets (moe.cu's products, moe_w4a8_rows.cu): a block-wide prefix sum, and the list itself.
#pragma once

#include <cstdint>

namespace dsinfer::backend::cuda {

// Exclusive prefix sum over the block (kThreads threads, all calling; warp_sums holds kThreads / 32
// ints of shared memory); *total gets the block's sum. Safe to call repeatedly: it synchronizes
// before returning.
template <int kThreads>
__device__ int block_exclusive_scan(int value, int* total, int* warp_sums) {
  const int lane = static_cast<int>(threadIdx.x) % 32, warp = static_cast<int>(threadIdx.x) / 32;
  int inclusive = value;
#pragma unroll
  for (int offset = 1; offset < 32; offset *= 2) {
    const int other = __shfl_up_sync(0xffffffffu, inclusive, offset);
    if (lane >= offset) inclusive += other;
  }
  if (lane == 31) warp_sums[warp] = inclusive;
  __syncthreads();
  int before = 0, sum = 0;
  for (int w = 0; w < kThreads / 32; ++w) {
    const int s = warp_sums[w];
    before += w < warp ? s : 0;
    sum += s;
  }
  __syncthreads();
  *total = sum;
  return before + inclusive - value;
}

// The experts with min_rows..max_rows rows (min_rows >= 1), in expert order: active[a] = expert,
// first_item[a] = its first work item; an expert of r rows has ceil(r / rows_per_tile) * tiles
// items (rows_per_tile 0: tiles). offsets [num_experts + 1] are the experts' first rows. Returns the
// number of items; *listed gets the number of experts. All threads of the block call it.
template <int kThreads>
__device__ int list_experts(const int32_t* offsets, int num_experts, int min_rows, int max_rows, int rows_per_tile,
                            int tiles, int* active, int* first_item, int* warp_sums, int* listed) {
  int count = 0, items = 0;
  for (int base = 0; base < num_experts; base += kThreads) {  // uniform over the block
    const int e = base + static_cast<int>(threadIdx.x);
    const int rows = e < num_experts ? offsets[e + 1] - offsets[e] : 0;
    const bool take = rows >= min_rows && rows <= max_rows;
    const int mine = take ? (rows_per_tile > 0 ? (rows + rows_per_tile - 1) / rows_per_tile : 1) * tiles : 0;
    int taken, added;
    const int index = block_exclusive_scan<kThreads>(take ? 1 : 0, &taken, warp_sums);
    const int first = block_exclusive_scan<kThreads>(mine, &added, warp_sums);
    if (take) {
      active[count + index] = e;
      first_item[count + index] = items + first;
    }
    count += taken;
    items += added;
  }
  __syncthreads();
  *listed = count;
  return items;
}

}  // namespace dsinfer::backend::cuda
