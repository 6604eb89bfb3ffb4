#include "cli/served_model.h"

#include "cli/parallel_flags.h"
#include "parallel/nccl_rank_groups.h"

namespace dsinfer::cli {

std::unique_ptr<ServedModel> ServedModel::load(const std::string& dir, const Flags& flags,
                                               const model::ModelOptions& options,
                                               const backend::BackendOptions& backend_options) {
  const std::string device = flags.get_string("device");
  DSINFER_CHECK(backend::backend_built(device), "--device ", device, " is not available in this build");
  const parallel::ParallelConfig config = parallel_config(flags);
  if (!config.sharded()) expert_balance(flags, config);  // refuses EPLB flags without expert parallelism
  auto served = std::make_unique<ServedModel>();
  if (!config.sharded()) {
    served->backend_ = backend::make_backend(device, backend_options);
    served->whole_ = model::DeepseekModel::load(dir, *served->backend_, options);
    return served;
  }
  const bool cpu = device == "cpu";
  DSINFER_CHECK(cpu || device == "cuda", "--device ", device, " names one GPU, but ", config.describe(),
                " takes GPUs 0 to ", config.world_size() - 1, ": give --device cuda");
  DSINFER_CHECK(cpu || parallel::nccl_available(), "several GPUs need NCCL, and this build has none");
  auto make_backend = [&](int rank) {
    return backend::make_backend(cpu ? "cpu" : "cuda:" + std::to_string(rank), backend_options);
  };
  auto make_groups = [&](const std::vector<backend::Backend*>& backends) {
    return cpu ? parallel::make_local_rank_groups(config) : parallel::make_nccl_rank_groups(config, backends);
  };
  served->sharded_ = std::make_unique<runtime::ShardedModel>(dir, config, options, make_backend, make_groups,
                                                             expert_balance(flags, config));
  return served;
}

std::unique_ptr<runtime::Engine> ServedModel::engine(const tokenizer::Tokenizer& tokenizer,
                                                     runtime::EngineConfig config) const {
  if (sharded_) return std::make_unique<runtime::Engine>(*sharded_, tokenizer, std::move(config));
  return std::make_unique<runtime::Engine>(*whole_, tokenizer, std::move(config));
}

}  // namespace dsinfer::cli
