// The low-latency expert exchange's windows and kernels on GPUs of one process (peer_exchange.h),
// in dsinfer_parallel_nccl's CUDA part: builds without CUDA have no GPU ranks to give it to.
#pragma once

#include <memory>

#include "parallel/peer_exchange.h"

namespace dsinfer::parallel {

std::shared_ptr<PeerDevice> make_cuda_peer_device();

}  // namespace dsinfer::parallel
