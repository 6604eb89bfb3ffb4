// Backend::resolve_placeholders on the GPU: the overlap scheduler's next-step inputs, taken from the
// tokens the previous step sampled without the host waiting for them.
//
//   ids[t] = ids[t] < 0 ? previous[-ids[t] - 1] : ids[t],   t < tokens
//
// Launch: one thread per id, 256 a block. Bytes: 8 per id (~2 KB at a 256-row decode step); its cost
// is the launch (~2 us), paid once per step between the metadata upload and the graph replay.
#pragma once

#include <cuda_runtime.h>

#include <cstdint>

namespace dsinfer::backend::cuda {

// In place on the device. The host has checked that each placeholder names a row of `previous`.
// No allocation or synchronisation.
void resolve_placeholders(int32_t* ids, int64_t tokens, const int32_t* previous, cudaStream_t stream);

}  // namespace dsinfer::backend::cuda
