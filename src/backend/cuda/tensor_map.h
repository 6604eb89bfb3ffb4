// TMA tensor maps (CUtensorMap) for the Hopper kernels, built on the host through the driver's
// cuTensorMapEncodeTiled, which is looked up once through the runtime (no link against libcuda).
#pragma once

#include <cuda.h>

#include <cstdint>

namespace dsinfer::backend::cuda {

// A row-major [rows, columns] matrix of `element_bytes`-byte elements (row stride `row_bytes`, a
// multiple of 16; `data` 16-byte aligned) read in boxes of box_rows x box_columns with the 128-byte
// swizzle (box_columns * element_bytes must be 128 or less). Out-of-range boxes are zero-filled.
// `what` names the matrix in the error a failed encoding throws.
CUtensorMap make_swizzled_2d_map(const void* data, CUtensorMapDataType type, uint64_t columns, uint64_t rows,
                                 uint64_t row_bytes, uint32_t box_columns, uint32_t box_rows, const char* what);

// The same matrix read in unswizzled boxes (box_columns * element_bytes a multiple of 16), as the
// rows of small per-row values (the tiled FP8 GEMM's token scales) are.
CUtensorMap make_plain_2d_map(const void* data, CUtensorMapDataType type, uint64_t columns, uint64_t rows,
                              uint64_t row_bytes, uint32_t box_columns, uint32_t box_rows, const char* what);

// A [d2, d1, d0] array (d0 innermost; strides of dims 1 and 2 in bytes, multiples of 16) read in
// boxes of box[0] x box[1] x box[2] elements with the 128-byte swizzle (box[0] * element bytes <= 128).
// Out-of-range elements are zero-filled.
CUtensorMap make_swizzled_3d_map(const void* data, CUtensorMapDataType type, const uint64_t (&dims)[3],
                                 const uint64_t (&byte_strides)[2], const uint32_t (&box)[3], const char* what);

}  // namespace dsinfer::backend::cuda
