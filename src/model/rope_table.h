// The rotary table of a model: cos/sin per position and frequency, YaRN-scaled when the config
// says so, with YaRN's attention factor folded into both (as Hugging Face does).
#pragma once

#include "backend/backend.h"
#include "io/model_config.h"

namespace dsinfer::model {

// Frequencies of the qk_rope_head_dim / 2 rotary pairs, float32 as Hugging Face computes them.
std::vector<float> rope_inverse_frequencies(const io::ModelConfig& config);
// The factor YaRN multiplies cos and sin by (1 without YaRN).
float rope_attention_factor(const io::ModelConfig& config);
// Host table for positions [0, max_positions).
backend::RopeTable make_rope_table(const io::ModelConfig& config, int64_t max_positions);

}  // namespace dsinfer::model
