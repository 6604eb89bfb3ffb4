// The tile walk of fp8_gemm_tiled.cu's persistent blocks: which tiles of the product, and which K
// blocks of them, block b takes, in order. The producer warp and the consumer warpgroups of a block
// each run the same walk, so both see the same sequence of units without talking about it.
//
// Tiles are numbered groups outermost, then bands of kBand n tiles, then the group's m tiles, then
// the n tiles of the band, so that the blocks running together share a band of weights and the
// activations in L2. A group has ceil(m_g / bm) m tiles, m_g its row count (read on the device with
// per-group counts): tiles of rows past a group's count are not in the walk at all, so the blocks
// share out only tiles with rows to compute (the masked MoE layout pads every group to group_rows).
//
// Whole tiles: block b takes tiles b, b + grid, b + 2 grid, ... below whole_tiles.
// Stream-K (dense rows only, where the host knows the tile count): the shared_tiles tiles after the
// whole ones, their K blocks laid end to end (tile-major), are cut into grid contiguous ranges, block
// b's [b W, (b + 1) W) (W = shared_tiles * k_blocks / grid, rounded down at each end). A tile whose
// K blocks fall in one block's range is computed whole by it; otherwise each block of the tile's
// range computes a piece (its K blocks of the tile), and the pieces are added up (fp8_gemm_tiled.cu).
// Every range holds at least one K block (the host's grid is at most the shared K blocks), and only
// its first and last pieces can be shared (those between are whole tiles): two partial slots a block.
#pragma once

#include <cstdint>

namespace dsinfer::backend::cuda::tiled_walk {

constexpr int kBand = 8;  // n tiles walked together

struct Schedule {
  const int32_t* rows_per_group;  // [groups] device; nullptr: every group has group_rows rows
  int groups;
  int group_rows;
  int n_tiles;
  int k_blocks;
  int whole_tiles;   // tiles taken whole (INT32_MAX: every tile)
  int shared_tiles;  // stream-K: tiles after the whole ones shared out by K blocks (0: none)
};

// One unit of a block's work: K blocks [kb_begin, kb_end) of tile (group, m, n).
struct Unit {
  int group, m, n;
  int rows;         // the group's row count
  int kb_begin, kb_end;
  int shared_tile;  // stream-K: the tile's index among the shared ones, when other blocks have pieces of it; else -1
};

// The blocks that share a stream-K tile: piece q (q = 0 the lowest K blocks) is block first + q's.
struct Pieces {
  int first, count;
  int mine;          // this block's piece
  int my_slot;       // its partial's slot: 2 a block, its range's first piece then its last
  bool first_late;   // piece 0 is not the first piece of its block's range (its partial is in the second slot)
  __device__ int slot(int q) const { return 2 * (first + q) + (q == 0 && first_late ? 1 : 0); }
};

// The walk reads the schedule where it lies (a __grid_constant__ kernel parameter) and keeps only
// its cursors in registers: the consumers hold 192 accumulators besides.
template <int kBm>
class Walk {
 public:
  __device__ explicit Walk(const Schedule& s) : s_(s), index_(static_cast<int>(blockIdx.x)) {
    enter(0);
    if (s_.shared_tiles > 0) {
      pos_ = start(static_cast<int>(blockIdx.x));
      end_ = start(static_cast<int>(blockIdx.x) + 1);
    }
  }

  // The next unit; false when the block has none left.
  __device__ bool next(Unit& u) {
    if (index_ < s_.whole_tiles) {
      if (locate(index_, u)) {
        u.kb_begin = 0, u.kb_end = s_.k_blocks, u.shared_tile = -1;
        index_ += gridDim.x;
        return true;
      }
      index_ = s_.whole_tiles;  // past the last group
    }
    if (pos_ >= end_) return false;
    const int tile = pos_ / s_.k_blocks;
    const int tile_begin = tile * s_.k_blocks, tile_end = tile_begin + s_.k_blocks;
    locate(s_.whole_tiles + tile, u);
    u.kb_begin = pos_ - tile_begin;
    u.kb_end = min(end_, tile_end) - tile_begin;
    u.shared_tile = block_of(tile_begin) == block_of(tile_end - 1) ? -1 : tile;
    pos_ = min(end_, tile_end);
    return true;
  }

  // The pieces of a unit's shared tile.
  __device__ Pieces pieces(const Unit& u) const {
    const int tile_begin = u.shared_tile * s_.k_blocks;
    Pieces p;
    p.first = block_of(tile_begin);
    p.count = block_of(tile_begin + s_.k_blocks - 1) - p.first + 1;
    p.mine = static_cast<int>(blockIdx.x) - p.first;
    p.first_late = start(p.first) < tile_begin;
    p.my_slot = 2 * static_cast<int>(blockIdx.x) + (tile_begin + u.kb_begin == start(static_cast<int>(blockIdx.x)) ? 0 : 1);
    return p;
  }

 private:
  // Block b's stream-K range starts at start(b); block_of(x) is the block whose range holds x. In
  // 32 bits (the producer warp has 40 registers): the host keeps (grid + 1) * work below 2^31.
  __device__ int work() const { return s_.shared_tiles * s_.k_blocks; }
  __device__ int start(int b) const { return b * work() / static_cast<int>(gridDim.x); }
  __device__ int block_of(int x) const { return ((x + 1) * static_cast<int>(gridDim.x) - 1) / work(); }

  __device__ void enter(int group) {
    group_ = group;
    if (group_ >= s_.groups) return;
    rows_ = s_.rows_per_group == nullptr ? s_.group_rows : min(max(s_.rows_per_group[group_], 0), s_.group_rows);
    m_tiles_ = (rows_ + kBm - 1) / kBm;
  }

  // Tile `index` of the walk into u (false past the last group). Indices only grow, so the group
  // cursor only moves forward.
  __device__ bool locate(int index, Unit& u) {
    while (group_ < s_.groups && index >= group_first_ + m_tiles_ * s_.n_tiles) {
      group_first_ += m_tiles_ * s_.n_tiles;
      enter(group_ + 1);
    }
    if (group_ >= s_.groups) return false;
    int r = index - group_first_;
    const int band = r / (kBand * m_tiles_);
    r -= band * kBand * m_tiles_;
    const int width = min(kBand, s_.n_tiles - band * kBand);
    u.group = group_;
    u.m = r / width;
    u.n = band * kBand + (r - u.m * width);
    u.rows = rows_;
    return true;
  }

  const Schedule& s_;
  int index_;
  int group_ = 0, group_first_ = 0, rows_ = 0, m_tiles_ = 0;
  int pos_ = 0, end_ = 0;
};

}  // namespace dsinfer::backend::cuda::tiled_walk
