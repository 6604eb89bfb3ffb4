// Private to the prefill attention kernels (prefill_attention.cu, prefill_attention_wgmma.cu): which
// query tile of which sequence a block takes. Device code only; include from .cu files.
#pragma once

#include <cstdint>

namespace dsinfer::backend::cuda {

// A tile of kTileQueries consecutive query rows [begin, end) of one sequence; sequence < 0: a spare
// block (the grid is sized ceil(T / kTileQueries) + B, an upper bound on the tiles).
struct PrefillTile {
  int sequence = -1;
  int begin = 0;
  int end = 0;
};

// Block index `index` counts the tiles sequence by sequence, and within a sequence from its last
// tile (which sees the most keys) to its first, so that the longest tiles start first.
template <int kTileQueries>
__device__ inline PrefillTile find_prefill_tile(const int32_t* query_start, int num_sequences, int index) {
  PrefillTile tile;
  for (int b = 0; b < num_sequences; ++b) {
    const int first = query_start[b], last = query_start[b + 1];
    const int tiles = (last - first + kTileQueries - 1) / kTileQueries;
    if (index < tiles) {
      tile.sequence = b;
      tile.begin = first + (tiles - 1 - index) * kTileQueries;
      tile.end = min(tile.begin + kTileQueries, last);
      break;
    }
    index -= tiles;
  }
  return tile;
}

}  // namespace dsinfer::backend::cuda
