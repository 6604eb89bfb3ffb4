// The ceilings of the GPU, measured by our own code in the benchmark's process: what every GPU figure
// is compared with (the same three /work/shared/ANCHORS.md lists for the H100 and H200).
//
// Each is timed with CUDA events around one call, the L2 cache (50-60 MB on Hopper) flushed before
// each call by a 256 MiB cudaMemsetAsync outside the timed region, calls queued back to back so that
// launch latency hides behind the previous call; the median of kCeilingRuns runs after 3 warm-ups.
//   copy_tb_s   cudaMemcpyAsync device-to-device of 2 GiB; (bytes read + bytes written) / time, 1e12 B/s.
//   bf16_tflops GemmRunner::linear, x bf16 [8192, 8192] . W bf16 [8192, 8192]^T -> y bf16; 2 * 8192^3 / time.
//   fp8_tflops  GemmRunner::linear with W f8e4m3 [8192, 8192] and 128x128 block scales, x bf16 (so the
//               call includes quantizing x per token and 128 columns, ~5% of the product's time), y bf16.
// Data is random (fill_uniform), never zeros: tensor cores draw less power, and clock higher, on zeros.
#pragma once

#include <string>

namespace dsinfer::bench {

struct Ceilings {
  double copy_tb_s = 0;    // 1e12 bytes (read + written) per second
  double bf16_tflops = 0;  // 1e12 FLOP/s
  double fp8_tflops = 0;   // 1e12 FLOP/s
};

inline constexpr int kCeilingRuns = 15;

// Measures on GPU `device` (made current). Needs ~4.5 GiB of free device memory; throws dsinfer::Error
// on any CUDA or cuBLASLt failure. Warns on stderr when a GEMM ran our fallback kernel instead of
// cuBLASLt (the figure is then not the chip's ceiling).
Ceilings measure_ceilings(int device = 0);

// "cuda: NVIDIA H100 80GB HBM3 (132 SMs, 79.1 GiB, 50 MiB L2, driver 13.0)", from cudaGetDeviceProperties.
std::string gpu_device_name(int device = 0);

}  // namespace dsinfer::bench
