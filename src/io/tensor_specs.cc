// The checkpoint layout of a ModelConfig, tensor by tensor (see tensor_specs.h for the table).
#include "io/tensor_specs.h"

#include <string>
#include <utility>

#include "core/error.h"
#include "core/strings.h"

namespace dsinfer::io {
namespace {

int64_t ceil_div(int64_t a, int64_t b) { return (a + b - 1) / b; }

// Appends the tensors of one checkpoint in order, choosing each one's stored dtype.
class LayoutBuilder {
 public:
  LayoutBuilder(const ModelConfig& config, StoredFormat format) : config_(config), format_(format) {}

  std::vector<TensorSpec> take() { return std::move(tensors_); }

  // Norm weights, router gates, embeddings, heads: BF16 in both formats.
  void bf16(std::string name, Shape shape) { tensors_.push_back({std::move(name), DType::kBF16, shape}); }
  void f32(std::string name, Shape shape) { tensors_.push_back({std::move(name), DType::kF32, shape}); }

  // A projection [N, K]: F8_E4M3 plus its F32 block scales [ceil(N/block_n), ceil(K/block_k)] in the
  // FP8 format, else BF16.
  void projection(const std::string& name, int64_t rows, int64_t cols) {
    if (format_ != StoredFormat::kFp8Block) {
      bf16(name, {rows, cols});
      return;
    }
    tensors_.push_back({name, DType::kF8E4M3, {rows, cols}});
    const QuantizationConfig& q = config_.quantization;
    f32(name + "_scale_inv", {ceil_div(rows, q.block_n), ceil_div(cols, q.block_k)});
  }

  // gate_proj and up_proj [inner, hidden], down_proj [hidden, inner] under `prefix`.
  void mlp(const std::string& prefix, int64_t inner) {
    int64_t hidden = config_.hidden_size;
    projection(prefix + "gate_proj.weight", inner, hidden);
    projection(prefix + "up_proj.weight", inner, hidden);
    projection(prefix + "down_proj.weight", hidden, inner);
  }

  void decoder_layer(int64_t layer) {
    const ModelConfig& c = config_;
    std::string prefix = str_cat("model.layers.", layer, ".");
    int64_t hidden = c.hidden_size, heads = c.num_attention_heads;
    bf16(prefix + "input_layernorm.weight", {hidden});
    bf16(prefix + "post_attention_layernorm.weight", {hidden});

    std::string attn = prefix + "self_attn.";
    if (c.q_lora_rank > 0) {
      projection(attn + "q_a_proj.weight", c.q_lora_rank, hidden);
      bf16(attn + "q_a_layernorm.weight", {c.q_lora_rank});
      projection(attn + "q_b_proj.weight", heads * c.qk_head_dim(), c.q_lora_rank);
    } else {
      projection(attn + "q_proj.weight", heads * c.qk_head_dim(), hidden);
    }
    projection(attn + "kv_a_proj_with_mqa.weight", c.kv_lora_rank + c.qk_rope_head_dim, hidden);
    bf16(attn + "kv_a_layernorm.weight", {c.kv_lora_rank});
    projection(attn + "kv_b_proj.weight", heads * (c.qk_nope_head_dim + c.v_head_dim), c.kv_lora_rank);
    projection(attn + "o_proj.weight", hidden, heads * c.v_head_dim);

    std::string mlp_prefix = prefix + "mlp.";
    if (!c.is_moe_layer(layer)) {
      mlp(mlp_prefix, c.intermediate_size);
      return;
    }
    bf16(mlp_prefix + "gate.weight", {c.n_routed_experts, hidden});
    // noaux_tc routing adds a learned per-expert bias to the scores; DeepSeek stores it in F32.
    if (c.topk_method == TopkMethod::kNoauxTc) f32(mlp_prefix + "gate.e_score_correction_bias", {c.n_routed_experts});
    for (int64_t e = 0; e < c.n_routed_experts; ++e)
      mlp(str_cat(mlp_prefix, "experts.", e, "."), c.moe_intermediate_size);
    if (c.n_shared_experts > 0)
      mlp(mlp_prefix + "shared_experts.", c.moe_intermediate_size * c.n_shared_experts);
  }

  // MTP module k: a decoder layer at index num_hidden_layers + k plus its own input norms, the
  // [h, 2h] projection of [enorm(embedding), hnorm(hidden)], and copies of the embedding and head.
  void mtp_module(int64_t layer) {
    const ModelConfig& c = config_;
    std::string prefix = str_cat("model.layers.", layer, ".");
    int64_t hidden = c.hidden_size;
    decoder_layer(layer);
    bf16(prefix + "enorm.weight", {hidden});
    bf16(prefix + "hnorm.weight", {hidden});
    // DeepSeek keeps eh_proj in BF16 in its FP8 checkpoints (no eh_proj.weight_scale_inv).
    bf16(prefix + "eh_proj.weight", {hidden, 2 * hidden});
    bf16(prefix + "shared_head.norm.weight", {hidden});
    bf16(prefix + "embed_tokens.weight", {c.vocab_size, hidden});
    bf16(prefix + "shared_head.head.weight", {c.vocab_size, hidden});
  }

 private:
  const ModelConfig& config_;
  StoredFormat format_;
  std::vector<TensorSpec> tensors_;
};

}  // namespace

StoredFormat stored_format(const ModelConfig& config) {
  return config.quantization.fp8_block ? StoredFormat::kFp8Block : StoredFormat::kBF16;
}

std::vector<TensorSpec> checkpoint_tensors(const ModelConfig& config, StoredFormat format) {
  DSINFER_CHECK(!config.attention_bias, "checkpoint_tensors: attention_bias is not supported (no DeepSeek V2/V3 "
                "checkpoint uses it)");
  LayoutBuilder layout(config, format);
  layout.bf16("model.embed_tokens.weight", {config.vocab_size, config.hidden_size});
  layout.bf16("model.norm.weight", {config.hidden_size});
  if (!config.tie_word_embeddings) layout.bf16("lm_head.weight", {config.vocab_size, config.hidden_size});
  for (int64_t i = 0; i < config.num_hidden_layers; ++i) layout.decoder_layer(i);
  for (int64_t k = 0; k < config.num_nextn_predict_layers; ++k) layout.mtp_module(config.num_hidden_layers + k);
  return layout.take();
}

std::optional<int64_t> layer_index(std::string_view tensor_name) {
  constexpr std::string_view kPrefix = "model.layers.";
  if (!tensor_name.starts_with(kPrefix)) return std::nullopt;
  std::string_view rest = tensor_name.substr(kPrefix.size());
  size_t dot = rest.find('.');
  int64_t layer = 0;
  if (dot == std::string_view::npos || !parse_int64(rest.substr(0, dot), &layer) || layer < 0) return std::nullopt;
  return layer;
}

}  // namespace dsinfer::io
