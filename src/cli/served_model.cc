#include "cli/served_model.h"

#include "cli/parallel_flags.h"
#include "cli/speculative_flags.h"
#include "core/log.h"
#include "io/model_config.h"
#include "parallel/nccl_rank_groups.h"

namespace dsinfer::cli {

namespace {

// The speculative decoding the flags ask for, against the model as loaded: `options` cut its layers
// or not (a real checkpoint's MTP modules sit after its full layer count, so --num-layers leaves
// them out).
runtime::SpeculativeConfig loaded_speculative(const SpeculativeRequest& request, const model::DeepseekModel& model,
                                              const model::ModelOptions& options) {
  const std::string what = options.num_layers > 0
                               ? str_cat("the model cut to --num-layers ", options.num_layers, " (a checkpoint's MTP "
                                         "modules follow its full layer count, so only --load-format dummy keeps them)")
                               : std::string("the loaded model");
  runtime::SpeculativeConfig config = speculative_config(request, model.num_mtp_modules(), what);
  if (config.enabled()) log_info("speculative decoding: ", config.describe());
  return config;
}

}  // namespace

std::unique_ptr<ServedModel> ServedModel::load(const std::string& dir, const Flags& flags,
                                               const model::ModelOptions& options,
                                               const backend::BackendOptions& backend_options) {
  const std::string device = flags.get_string("device");
  DSINFER_CHECK(backend::backend_built(device), "--device ", device, " is not available in this build");
  const parallel::ParallelConfig config = parallel_config(flags);
  if (!config.sharded()) expert_balance(flags, config);  // refuses EPLB flags without expert parallelism
  const SpeculativeRequest speculative = speculative_request(flags);
  model::ModelOptions model_options = options;
  if (speculative.requested) {
    // Before the weights load: a config without MTP modules is refused at once.
    speculative_config(speculative, static_cast<int>(io::load_model_config(dir).num_nextn_predict_layers),
                       str_cat(dir, "/config.json (num_nextn_predict_layers)"));
    model_options.load_mtp = true;
  }
  auto served = std::make_unique<ServedModel>();
  if (!config.sharded()) {
    served->backend_ = backend::make_backend(device, backend_options);
    served->whole_ = model::DeepseekModel::load(dir, *served->backend_, model_options);
    served->speculative_ = loaded_speculative(speculative, *served->whole_, model_options);
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
  served->sharded_ = std::make_unique<runtime::ShardedModel>(dir, config, model_options, make_backend, make_groups,
                                                             expert_balance(flags, config));
  served->speculative_ = loaded_speculative(speculative, served->sharded_->rank(0), model_options);
  return served;
}

std::unique_ptr<runtime::Engine> ServedModel::engine(const tokenizer::Tokenizer& tokenizer,
                                                     runtime::EngineConfig config) const {
  config.speculative = speculative_;
  if (sharded_) return std::make_unique<runtime::Engine>(*sharded_, tokenizer, std::move(config));
  return std::make_unique<runtime::Engine>(*whole_, tokenizer, std::move(config));
}

}  // namespace dsinfer::cli
