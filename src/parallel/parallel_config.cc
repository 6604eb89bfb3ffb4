#include "parallel/parallel_config.h"

#include "core/error.h"

namespace dsinfer::parallel {

std::string ParallelConfig::describe() const {
  std::string text = str_cat("tp ", attention_tp, ", dp ", attention_dp, ", ep ", ep_size(), " (", world_size(), " ranks)");
  if (dispatches_experts() && low_latency_tokens > 0)
    text += str_cat(", low-latency dispatch up to ", low_latency_tokens, " tokens a rank");
  if (dispatches_experts() && chunk_tokens > 0) text += str_cat(", dispatch in chunks of ", chunk_tokens);
  return text;
}

void ParallelConfig::check_fits(const io::ModelConfig& model) const {
  DSINFER_CHECK(attention_tp >= 1 && attention_dp >= 1, "the tensor- and data-parallel sizes must be at least 1, got ",
                attention_tp, " and ", attention_dp);
  const int world = world_size();
  DSINFER_CHECK(model.num_attention_heads % attention_tp == 0, "tensor parallel size ", attention_tp,
                " does not divide the model's ", model.num_attention_heads, " attention heads");
  if (attention_dp == 1) {
    DSINFER_CHECK(model.intermediate_size % world == 0, world, " ranks do not divide the dense MLP's intermediate size ",
                  model.intermediate_size);
    DSINFER_CHECK(model.n_shared_experts * model.moe_intermediate_size % world == 0, world,
                  " ranks do not divide the shared experts' intermediate size ",
                  model.n_shared_experts * model.moe_intermediate_size);
  }
  DSINFER_CHECK(low_latency_tokens >= 0 && chunk_tokens >= 0, "the peer dispatch's tokens a rank must be 0 or more, "
                "got ", low_latency_tokens, " and ", chunk_tokens);
  if (model.n_routed_experts == 0) return;
  if (expert_parallel) {
    DSINFER_CHECK(model.n_routed_experts % world == 0, "expert parallel size ", world, " does not divide the model's ",
                  model.n_routed_experts, " routed experts");
  } else {
    DSINFER_CHECK(model.moe_intermediate_size % world == 0, world,
                  " ranks do not divide the experts' intermediate size ", model.moe_intermediate_size,
                  " (expert parallelism, --enable-expert-parallel, splits them by expert instead)");
  }
}

}  // namespace dsinfer::parallel
