// The model a verb runs: whole on one backend, or held by several ranks (--tp / --dp / --ep:
// cli/parallel_flags.h), each rank a GPU (rank r on cuda:r, NCCL between them) or, with
// --device cpu, a thread (the local communicator); with the speculative decoding its flags ask for
// (cli/speculative_flags.h), checked against the model's MTP modules.
#pragma once

#include <memory>
#include <string>

#include "backend/make_backend.h"
#include "cli/flags.h"
#include "model/deepseek_model.h"
#include "runtime/engine.h"
#include "runtime/sharded_model.h"

namespace dsinfer::cli {

class ServedModel {
 public:
  // DIR's model on --device, laid out as the parallel flags of `flags` say, with its MTP modules
  // when the speculative flags ask for drafts (refused, before the weights load where config.json
  // tells, for a model without them).
  static std::unique_ptr<ServedModel> load(const std::string& dir, const Flags& flags,
                                           const model::ModelOptions& options = {},
                                           const backend::BackendOptions& backend_options = {});

  bool sharded() const { return sharded_ != nullptr; }
  // The whole model, or rank 0's shard: its config, positions and cache sizes are every rank's.
  const model::DeepseekModel& model() const { return sharded_ ? sharded_->rank(0) : *whole_; }
  const runtime::ShardedModel* shards() const { return sharded_.get(); }
  // What the speculative flags asked for, resolved against the model (num_tokens 0: off).
  const runtime::SpeculativeConfig& speculative() const { return speculative_; }
  // An engine over the model; `config.speculative` is set to speculative().
  std::unique_ptr<runtime::Engine> engine(const tokenizer::Tokenizer& tokenizer, runtime::EngineConfig config) const;

 private:
  std::unique_ptr<backend::Backend> backend_;
  std::unique_ptr<model::DeepseekModel> whole_;
  std::unique_ptr<runtime::ShardedModel> sharded_;
  runtime::SpeculativeConfig speculative_;
};

}  // namespace dsinfer::cli
