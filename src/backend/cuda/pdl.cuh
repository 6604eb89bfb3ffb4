// Programmatic dependent launch (Hopper): a kernel launched with programmatic stream serialization
// (gemv.h) may start while the kernel before it still runs, and waits for it only where it reads
// that kernel's output. Two halves:
//   - the kernel before lets it launch early: allow_dependent_launch() at its start (small kernels
//     whose blocks are all resident at once, so the early blocks never take an SM from them);
//   - the launched kernel calls wait_for_previous_kernel() before its first read of anything the
//     previous kernel writes and before its first write.
// Both are no-ops when the launch was not programmatic, and CUDA graphs keep the dependency.
#pragma once

#include <cuda_runtime.h>

namespace dsinfer::backend::cuda {

// cudaLaunchKernelEx's configuration for a launch with programmatic stream serialization (or an
// ordinary one when `programmatic` is false). The configuration points at the attribute it holds,
// so it is neither copied nor moved:
//   ProgrammaticLaunch launch(grid, block, smem, stream);
//   DSINFER_CUDA_CHECK(cudaLaunchKernelEx(&launch.config, kernel, args...));
struct ProgrammaticLaunch {
  cudaLaunchAttribute attribute[1] = {};
  cudaLaunchConfig_t config = {};

  ProgrammaticLaunch(dim3 grid, dim3 block, size_t smem, cudaStream_t stream, bool programmatic = true) {
    config.gridDim = grid;
    config.blockDim = block;
    config.dynamicSmemBytes = smem;
    config.stream = stream;
    attribute[0].id = cudaLaunchAttributeProgrammaticStreamSerialization;
    attribute[0].val.programmaticStreamSerializationAllowed = 1;
    config.attrs = attribute;
    config.numAttrs = programmatic ? 1 : 0;
  }
  ProgrammaticLaunch(const ProgrammaticLaunch&) = delete;
  ProgrammaticLaunch& operator=(const ProgrammaticLaunch&) = delete;
};

__device__ __forceinline__ void allow_dependent_launch() { asm volatile("griddepcontrol.launch_dependents;"); }

__device__ __forceinline__ void wait_for_previous_kernel() { asm volatile("griddepcontrol.wait;" ::: "memory"); }

}  // namespace dsinfer::backend::cuda
