// Two rewrites of int32 ids in place on the GPU.
//
// Backend::resolve_placeholders: the overlap scheduler's next-step inputs, taken from the tokens the
// previous step sampled without the host waiting for them.
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

// Backend::map_expert_ids (EPLB): ids [tokens, top_k] logical experts -> physical slots,
//   ids[t, j] = slots[start[e] + (t + j) % (start[e + 1] - start[e])],  e = ids[t, j].
// One thread per id, 256 a block: a launch's cost, once per MoE layer. The ids come from the router,
// so they are in [0, E); no allocation or synchronisation.
void map_expert_ids(int32_t* ids, int64_t tokens, int64_t top_k, const int32_t* start, const int32_t* slots,
                    cudaStream_t stream);

// Backend::count_expert_ids (EPLB's load counters): counts[e] += choices of e among ids[entries]
// (e in [0, experts)). One thread per id, an atomic add each: integer sums, so the order does not
// matter; ~2K ids at a 256-token decode step, a launch's cost.
void count_expert_ids(const int32_t* ids, int64_t entries, unsigned long long* counts, int64_t experts,
                      cudaStream_t stream);

}  // namespace dsinfer::backend::cuda
