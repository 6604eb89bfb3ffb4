// The tiled FP8 GEMM's kernels for per-group row counts (the masked MoE layout): the walk by row
// counts of fp8_gemm_tiled_kernel.cuh, in a translation unit of their own so that the dense kernels
// (fp8_gemm_tiled.cu) keep their machine code.
#include "backend/cuda/fp8_gemm_tiled_kernel.cuh"

namespace dsinfer::backend::cuda::tiled {
namespace {

struct Instantiated {
  int bm, bn;
  KernelFunction kernel;
};

template <int kConsumers, int kWaves, int kBn>
constexpr Instantiated instantiated() {
  return {Config<kConsumers, kWaves, kBn>::kBm, kBn, fp8_tiled_kernel<kConsumers, kWaves, kBn, true>};
}

// fp8_gemm_tiled.cu's kBuilt, one for one.
constexpr Instantiated kInstantiated[] = {instantiated<1, 1, 64>(),  instantiated<1, 1, 128>(),
                                          instantiated<1, 1, 192>(), instantiated<2, 1, 64>(),
                                          instantiated<2, 1, 128>(), instantiated<2, 1, 192>(),
                                          instantiated<2, 2, 128>()};

}  // namespace

KernelFunction by_row_counts_kernel(int bm, int bn) {
  for (const Instantiated& i : kInstantiated)
    if (i.bm == bm && i.bn == bn) return i.kernel;
  return nullptr;
}

}  // namespace dsinfer::backend::cuda::tiled
