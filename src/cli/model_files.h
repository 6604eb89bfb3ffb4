// Loading the pieces of a model directory that several verbs need.
#pragma once

#include <string>

#include "cli/flags.h"
#include "model/deepseek_model.h"
#include "tokenizer/chat/chat_template.h"

namespace dsinfer::cli {

// DIR/tokenizer_config.json's chat template. Throws dsinfer::Error naming the file.
chat::ChatTemplate load_chat_template(const std::string& dir);

// --load-format (auto | dummy), --num-layers, the CUDA graph flags and --kv-cache-dtype, shared by
// the verbs that load a model.
void add_model_flags(Flags& flags);
// --kv-cache-dtype alone (model::parse_cache_format's values), for verbs without the others (eval),
// and its value. Throws dsinfer::Error for a dtype that is not known.
void add_kv_cache_dtype_flag(Flags& flags);
model::CacheFormat kv_cache_format(const Flags& flags);
model::ModelOptions model_options(const Flags& flags);
// The largest decode batch that replays a CUDA graph, from --cuda-graph-max-bs, --enforce-eager and
// --disable-cuda-graph (0: none).
int64_t cuda_graph_max_batch(const Flags& flags);

}  // namespace dsinfer::cli
