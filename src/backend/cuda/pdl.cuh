// Programmatic dependent launch (Hopper): a kernel launched with programmatic stream serialization
// (gemv.h) may start while the kernel before it still runs, and waits for it only where it reads
// that kernel's output. Two halves:
//   - the kernel before lets it launch early: allow_dependent_launch() at its start (small kernels
//     whose blocks are all resident at once, so the early blocks never take an SM from them);
//   - the launched kernel calls wait_for_previous_kernel() before its first read of anything the
//     previous kernel writes and before its first write.
// Both are no-ops when the launch was not programmatic, and CUDA graphs keep the dependency.
#pragma once

namespace dsinfer::backend::cuda {

__device__ __forceinline__ void allow_dependent_launch() { asm volatile("griddepcontrol.launch_dependents;"); }

__device__ __forceinline__ void wait_for_previous_kernel() { asm volatile("griddepcontrol.wait;" ::: "memory"); }

}  // namespace dsinfer::backend::cuda
