// Every tensor a checkpoint of a DeepSeek V2/V3-architecture config holds: name, stored dtype, shape.
//
// The layout is the one DeepSeek publishes (and tools/dsv3_checkpoint.py writes): one tensor per
// expert, the MTP module k at layer index num_hidden_layers + k with its own copies of the embedding
// and the head. It lets a loader generate random weights of the real widths without a checkpoint
// (`--load-format dummy`) and lets tests check a checkpoint against its config.
//
// Per decoder layer i (prefix model.layers.i.), H heads, hidden h:
//   input_layernorm, post_attention_layernorm                          [h]
//   self_attn.q_a_proj [q_lora, h], q_a_layernorm [q_lora], q_b_proj [H*192, q_lora]   (q_lora_rank > 0)
//   self_attn.q_proj [H*(nope+rope), h]                                                 (q_lora_rank == 0)
//   self_attn.kv_a_proj_with_mqa [kv_lora+rope, h], kv_a_layernorm [kv_lora],
//   self_attn.kv_b_proj [H*(nope+v), kv_lora], o_proj [h, H*v]
//   dense layers (is_moe_layer(i) false): mlp.{gate,up}_proj [I, h], mlp.down_proj [h, I]
//   MoE layers: mlp.gate.weight [E, h]; mlp.gate.e_score_correction_bias [E] F32 (noaux_tc only);
//     mlp.experts.e.{gate,up}_proj [Im, h], down_proj [h, Im] for e < E;
//     mlp.shared_experts.{gate,up}_proj [Im*S, h], down_proj [h, Im*S] (n_shared_experts S > 0)
// Model: model.embed_tokens [V, h], model.norm [h], lm_head [V, h] (absent when tie_word_embeddings).
// MTP module at j = num_hidden_layers + k: a decoder layer (MoE per is_moe_layer(j)) plus enorm,
//   hnorm, shared_head.norm [h], eh_proj [h, 2h], embed_tokens [V, h], shared_head.head [V, h].
//
// Stored dtypes. kBF16: everything BF16 except e_score_correction_bias (F32). kFp8Block, as in the
// published FP8 DeepSeek-V3/R1 and Kimi-K2 checkpoints: every *_proj.weight (attention, dense MLP,
// experts, shared experts, kv_a_proj_with_mqa included) is F8_E4M3 with a F32 NAME.weight_scale_inv
// of shape [ceil(N/block_n), ceil(K/block_k)] (block from config.quantization, 128x128 by default);
// BF16 stay the embeddings, lm_head, the MTP eh_proj and shared_head.head, the router gate and every
// norm; F32 stays e_score_correction_bias.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "core/dtype.h"
#include "core/tensor.h"
#include "io/model_config.h"

namespace dsinfer::io {

enum class StoredFormat : uint8_t {
  kBF16,      // every weight BF16 (a dequantized or BF16-trained checkpoint)
  kFp8Block,  // DeepSeek's FP8 block format (see the top of this file)
};

struct TensorSpec {
  std::string name;
  DType dtype = DType::kBF16;
  Shape shape;
};

// The format a checkpoint of `config` is published in: kFp8Block when config.json carries an fp8
// quantization_config, else kBF16.
StoredFormat stored_format(const ModelConfig& config);

// Every tensor, in checkpoint order: embed_tokens, norm, lm_head, layers 0..num_hidden_layers-1, then
// the MTP modules. Throws dsinfer::Error for configs the layout does not cover (attention_bias).
std::vector<TensorSpec> checkpoint_tensors(const ModelConfig& config, StoredFormat format);

// The decoder layer a tensor belongs to: 12 for "model.layers.12.mlp.gate.weight"; nullopt for the
// tensors outside the layers (embed_tokens, norm, lm_head).
std::optional<int64_t> layer_index(std::string_view tensor_name);

}  // namespace dsinfer::io
