#include "parallel/nccl_rank_groups.h"

#include "core/error.h"

#if DSINFER_HAS_NCCL
#include <memory>

#include "backend/cuda/cuda_backend.h"
#include "backend/cuda/cuda_check.h"
#include "parallel/nccl_communicator.h"
#include "parallel/peer_device_cuda.h"
#endif

namespace dsinfer::parallel {

#if DSINFER_HAS_NCCL

namespace {

// One clique per list of ranks (on those ranks' GPUs); each member's communicator goes to its rank's slot.
void assign(const std::vector<std::vector<int>>& groups, const std::vector<int>& devices,
            const std::vector<backend::Backend*>& backends, std::vector<RankGroups>& ranks,
            std::unique_ptr<Communicator> RankGroups::*slot) {
  for (const std::vector<int>& members : groups) {
    std::vector<int> member_devices;
    for (int rank : members) member_devices.push_back(devices[rank]);
    auto clique = std::make_shared<NcclClique>(member_devices);
    for (size_t i = 0; i < members.size(); ++i)
      ranks[members[i]].*slot = std::make_unique<NcclCommunicator>(clique, static_cast<int>(i), *backends[members[i]]);
  }
}

}  // namespace

bool nccl_available() { return true; }

std::vector<RankGroups> make_nccl_rank_groups(const ParallelConfig& config, std::vector<backend::Backend*> backends) {
  const int world = config.world_size();
  DSINFER_CHECK(static_cast<int>(backends.size()) == world, "make_nccl_rank_groups: ", config.describe(),
                " needs ", world, " CUDA backends, got ", backends.size());
  // Each rank's GPU, read from its backend's stream, so a communicator never lands on another GPU.
  std::vector<int> devices(world, -1);
  for (int rank = 0; rank < world; ++rank) {
    DSINFER_CHECK(backends[rank] != nullptr, "make_nccl_rank_groups: rank ", rank, " has no backend");
    DSINFER_CUDA_CHECK(cudaStreamGetDevice(backend::cuda::stream_of(*backends[rank]), &devices[rank]));
    for (int other = 0; other < rank; ++other)
      DSINFER_CHECK(devices[other] != devices[rank], "make_nccl_rank_groups: ranks ", other, " and ", rank,
                    " are both on GPU ", devices[rank], "; NCCL needs a GPU for each rank");
  }

  std::vector<RankGroups> ranks(world);
  std::vector<int> everyone;
  for (int rank = 0; rank < world; ++rank) everyone.push_back(rank);
  assign({everyone}, devices, backends, ranks, &RankGroups::world);
  assign(attention_groups(config), devices, backends, ranks, &RankGroups::attention);
  assign(across_dp_groups(config), devices, backends, ranks, &RankGroups::across_dp);
  add_peer_exchanges(config, ranks, make_cuda_peer_device);
  return ranks;
}

#else

bool nccl_available() { return false; }

std::vector<RankGroups> make_nccl_rank_groups(const ParallelConfig& config, std::vector<backend::Backend*>) {
  throw Error(str_cat("this build has no NCCL, so ", config.describe(),
                      " cannot run on several GPUs: install NCCL (pip install nvidia-nccl-cu13, or set "
                      "DSINFER_NCCL_ROOT) and configure again with CUDA"));
}

#endif

}  // namespace dsinfer::parallel
