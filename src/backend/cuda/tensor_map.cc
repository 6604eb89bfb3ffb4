#include "backend/cuda/tensor_map.h"

#include <cudaTypedefs.h>  // PFN_cuTensorMapEncodeTiled
#include <cuda_runtime.h>

#include "backend/cuda/cuda_check.h"
#include "core/error.h"

namespace dsinfer::backend::cuda {
namespace {

using TensorMapEncoder = PFN_cuTensorMapEncodeTiled_v12000;

TensorMapEncoder tensor_map_encoder() {
  static const TensorMapEncoder encoder = [] {
    void* function = nullptr;
    cudaDriverEntryPointQueryResult found = cudaDriverEntryPointSymbolNotFound;
    DSINFER_CUDA_CHECK(
        cudaGetDriverEntryPointByVersion("cuTensorMapEncodeTiled", &function, 12000, cudaEnableDefault, &found));
    DSINFER_CHECK(found == cudaDriverEntryPointSuccess && function != nullptr,
                  "the CUDA driver has no cuTensorMapEncodeTiled (TMA kernels need a CUDA 12+ driver)");
    return reinterpret_cast<TensorMapEncoder>(function);
  }();
  return encoder;
}

CUtensorMap make_2d_map(const void* data, CUtensorMapDataType type, uint64_t columns, uint64_t rows, uint64_t row_bytes,
                        uint32_t box_columns, uint32_t box_rows, CUtensorMapSwizzle swizzle, const char* what) {
  CUtensorMap map;
  const cuuint64_t dims[2] = {columns, rows};
  const cuuint64_t strides[1] = {row_bytes};
  const cuuint32_t box[2] = {box_columns, box_rows};
  const cuuint32_t element_strides[2] = {1u, 1u};
  const CUresult result = tensor_map_encoder()(&map, type, 2, const_cast<void*>(data), dims, strides, box,
                                               element_strides, CU_TENSOR_MAP_INTERLEAVE_NONE, swizzle,
                                               CU_TENSOR_MAP_L2_PROMOTION_L2_256B, CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE);
  DSINFER_CHECK(result == CUDA_SUCCESS, "building the TMA descriptor of ", what, " failed with CUresult ",
                static_cast<int>(result), " (the pointer must be 16-byte aligned and the row stride a multiple of 16)");
  return map;
}

}  // namespace

CUtensorMap make_swizzled_2d_map(const void* data, CUtensorMapDataType type, uint64_t columns, uint64_t rows,
                                 uint64_t row_bytes, uint32_t box_columns, uint32_t box_rows, const char* what) {
  return make_2d_map(data, type, columns, rows, row_bytes, box_columns, box_rows, CU_TENSOR_MAP_SWIZZLE_128B, what);
}

CUtensorMap make_plain_2d_map(const void* data, CUtensorMapDataType type, uint64_t columns, uint64_t rows,
                              uint64_t row_bytes, uint32_t box_columns, uint32_t box_rows, const char* what) {
  return make_2d_map(data, type, columns, rows, row_bytes, box_columns, box_rows, CU_TENSOR_MAP_SWIZZLE_NONE, what);
}

CUtensorMap make_swizzled_3d_map(const void* data, CUtensorMapDataType type, const uint64_t (&dims)[3],
                                 const uint64_t (&byte_strides)[2], const uint32_t (&box)[3], const char* what) {
  CUtensorMap map;
  const cuuint64_t sizes[3] = {dims[0], dims[1], dims[2]};
  const cuuint64_t strides[2] = {byte_strides[0], byte_strides[1]};
  const cuuint32_t boxes[3] = {box[0], box[1], box[2]};
  const cuuint32_t element_strides[3] = {1u, 1u, 1u};
  const CUresult result = tensor_map_encoder()(&map, type, 3, const_cast<void*>(data), sizes, strides, boxes,
                                               element_strides, CU_TENSOR_MAP_INTERLEAVE_NONE,
                                               CU_TENSOR_MAP_SWIZZLE_128B, CU_TENSOR_MAP_L2_PROMOTION_L2_256B,
                                               CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE);
  DSINFER_CHECK(result == CUDA_SUCCESS, "building the TMA descriptor of ", what, " failed with CUresult ",
                static_cast<int>(result), " (the pointer must be 16-byte aligned and the strides multiples of 16)");
  return map;
}

}  // namespace dsinfer::backend::cuda
