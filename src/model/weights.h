// Reads a model's weights out of a checkpoint in the form the backend computes with.
//
// Linear weights keep their stored format (backend::LinearWeight): bf16 and f32 as they are (on the
// CPU straight from the mmap, no copy), FP8 with 128x128 block scales as FP8 plus its scales, so a
// published V3/R1 checkpoint goes to the device without a float32 step. f16 and FP8 with another
// block size become the backend's compute dtype. Small vectors (norm weights, router bias) are
// always float32.
//
// Without a checkpoint (--load-format dummy) it makes every tensor of the config's published layout
// (io/tensor_specs.h) with random values on the device (Backend::fill_uniform): the real shapes and
// formats, weights of magnitude ~0.02, norms ~1, made where they live, so a model too big to download
// still loads in seconds.
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include <chrono>
#include <map>
#include <optional>

#include "backend/backend.h"
#include "io/checkpoint.h"
#include "io/model_config.h"
#include "io/tensor_specs.h"
#include "model/expert_observer.h"
#include "parallel/rank_plan.h"

namespace dsinfer::model {

// The part of a [N, K] weight a rank loads (parallel/parallel_config.h says which): rows and columns
// [begin, end); an empty one is the whole dimension. Of a stack, the part of each matrix.
struct WeightShard {
  std::optional<parallel::Range> rows, columns;
  bool whole() const { return !rows && !columns; }
};

class WeightLoader {
 public:
  // plan: the rank this loads for (null: the whole model on one rank); must outlive the loader.
  WeightLoader(const io::Checkpoint& checkpoint, const io::ModelConfig& config, backend::Backend& backend,
               const parallel::RankPlan* plan = nullptr)
      : checkpoint_(&checkpoint), config_(config), backend_(backend), plan_(plan ? *plan : parallel::RankPlan{}) {}
  // Random weights of the published layout in `format`. A shard of a dummy weight is random in its
  // own right (not the matching part of the unsharded weight).
  WeightLoader(const io::ModelConfig& config, io::StoredFormat format, backend::Backend& backend,
               const parallel::RankPlan* plan = nullptr);

  // [N, K] weight of a linear layer (or the shard of it), in its stored format, on the backend's
  // device. FP8 shards that would cut a 128 x 128 scale block are widened to the compute dtype.
  backend::LinearWeight linear(const std::string& name, const WeightShard& shard = {}) const;
  // Linear weights of one format stacked along a new first axis: [count, N, K] (the routed experts).
  backend::LinearWeight stacked(const std::vector<std::string>& names, const WeightShard& shard = {}) const;
  // Each expert's gate and up projections stacked along N, then the experts stacked: [E, 2I, K]; a
  // shard's rows are taken from each of the two.
  backend::LinearWeight stacked_gate_up(const std::vector<std::string>& gates, const std::vector<std::string>& ups,
                                        const WeightShard& shard = {}) const;
  // Two linear weights stacked along N: [N_a + N_b, K] (the gate and up projections of an MLP); a
  // shard's rows are taken from each of the two.
  backend::LinearWeight concatenated_rows(const std::string& first, const std::string& second,
                                          const WeightShard& shard = {}) const;
  // Any tensor as float32 on the device.
  Tensor f32(const std::string& name) const;
  // Any tensor as float32 on the host, for load-time rearrangement.
  Tensor host_f32(const std::string& name) const;
  // A host float32 tensor in the backend's compute dtype, on the device.
  Tensor to_compute(const Tensor& host_f32) const;
  bool contains(const std::string& name) const;
  // The shape of `name` as a shard of it has it ({}: the stored shape).
  Shape shard_shape(const std::string& name, const WeightShard& shard) const;
  // Where the weights come from, for messages: the checkpoint directory or "dummy weights".
  std::string source() const;
  // Throws unless the tensor has the expected shape: "CHECKPOINT: NAME has shape [..], expected [..]".
  void expect_shape(const std::string& name, Shape expected) const;

  backend::Backend& backend() const { return backend_; }
  const io::ModelConfig& config() const { return config_; }
  // The rank being loaded: which shard of each module it holds and the groups it sums over.
  const parallel::RankPlan& plan() const { return plan_; }
  // What the MoE layers report their routed-experts' inputs to (ModelOptions::expert_observer), or null.
  ExpertObserver* expert_observer() const { return expert_observer_; }
  void set_expert_observer(ExpertObserver* observer) { expert_observer_ = observer; }
  // Bytes placed on the device so far and the seconds since loading began (the load report).
  int64_t loaded_bytes() const { return loaded_bytes_; }
  double seconds() const;

 private:
  // The stored bytes of `name` (or of its shard) on the host, in a format the backends take (see the
  // file comment).
  backend::LinearWeight host_linear(const std::string& name, const WeightShard& shard = {}) const;
  // A linear stored as compressed-tensors' int4 (NAME.weight_packed, docs/w4a8.md) in place of NAME.
  bool is_int4(const std::string& name) const;
  Shape int4_shape(const std::string& name) const;
  backend::LinearWeight host_int4_linear(const std::string& name, const WeightShard& shard) const;
  // Two stored weights (or the same shard of each) stacked along N, on the host (FP8 whose scale
  // blocks would straddle the two halves is widened to the compute dtype).
  backend::LinearWeight host_rows(const std::string& first, const std::string& second,
                                  const WeightShard& shard = {}) const;

  backend::LinearWeight stack_to_device(const std::vector<backend::LinearWeight>& host_parts) const;
  backend::LinearWeight to_device(const backend::LinearWeight& host) const;
  // A host float32 tensor converted to the backend's compute dtype, still on the host.
  Tensor compute_host(const Tensor& wide) const;

  // --load-format dummy: the spec of `name` (throws naming it when the layout has no such tensor).
  const io::TensorSpec& spec(const std::string& name) const;
  backend::LinearWeight dummy_linear(Shape shape, bool fp8, const std::string& seed_name,
                                     const WeightShard& shard = {}) const;
  // Dummy routed experts are int4 (W4A8) where config.quantization.int4_group_size is set (the layout
  // dsinfer quantize --method w4a8 writes: the routed experts alone, ModelOptions::dummy_int4_group_size).
  bool dummy_int4(const std::string& name) const;
  // Random int4 values in groups of int4_group_size columns with their scales, and with_pre_scale
  // AWQ factors on the input columns (gate_up's; --awq writes none for down).
  backend::LinearWeight dummy_int4_linear(Shape shape, bool with_pre_scale, const std::string& seed_name,
                                          const WeightShard& shard) const;
  Tensor dummy_host_f32(const std::string& name) const;
  bool is_fp8(const std::string& name) const;

  // Counts what reached the device; logs progress (GB/s) every few seconds.
  void count(const backend::LinearWeight& weight) const;
  void count(const Tensor& tensor) const;

  std::chrono::steady_clock::time_point start_ = std::chrono::steady_clock::now();
  mutable std::chrono::steady_clock::time_point last_report_ = start_;
  mutable int64_t loaded_bytes_ = 0;
  const io::Checkpoint* checkpoint_ = nullptr;        // null for dummy weights
  std::map<std::string, io::TensorSpec> dummy_specs_;  // dummy weights: every tensor of the layout
  const io::ModelConfig& config_;
  backend::Backend& backend_;
  parallel::RankPlan plan_;
  ExpertObserver* expert_observer_ = nullptr;
};

}  // namespace dsinfer::model
