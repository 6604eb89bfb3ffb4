// Every rank's groups over NCCL, for code that does not know about NCCL (the runtime asks for them
// when several `cuda` ranks are wanted). Builds without CUDA or NCCL link the same functions: they
// say so and refuse.
#pragma once

#include <vector>

#include "parallel/parallel_config.h"
#include "parallel/rank_plan.h"

namespace dsinfer::backend {
class Backend;
}

namespace dsinfer::parallel {

// Whether this build has the NCCL communicator (not whether the machine has several GPUs).
bool nccl_available();

// backends[r]: rank r's CUDA backend, each on a GPU of its own (rank r on GPU r as make_backend
// ("cuda:r") gives it). Creates the world, attention and across-DP communicators (rank_plan.h's
// groups; groups of one rank too) with ncclCommInitAll, each queuing on its rank's backend stream.
// Index r of the result is rank r's. The backends must outlive the result; rank r's communicators
// are then used from one thread, with GPU r current. Throws a dsinfer::Error when this build has no
// NCCL, when the backends do not fit the config, or when NCCL fails.
std::vector<RankGroups> make_nccl_rank_groups(const ParallelConfig& config, std::vector<backend::Backend*> backends);

}  // namespace dsinfer::parallel
