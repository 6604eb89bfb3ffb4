// The op interface every backend implements. The model calls these and nothing else.
//
// The CPU backend (backend/cpu) is the definition: plain, threaded loops in float32. The CUDA
// backend must compute the same functions; tests compare the two at real DeepSeek shapes.
// Ops return new tensors allocated by the backend; inputs are never modified unless the name
// says so (`_inplace`). Shapes use T = tokens in the step, H = heads, E = routed experts.
#pragma once

#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "core/tensor.h"

namespace dsinfer::backend {

// Where the per-sequence pieces of a step's tokens sit and which cache pages they read.
// Host-side vectors: a device backend uploads them once per step.
struct AttentionBatch {
  std::vector<int32_t> query_start;   // [B + 1] first token row of each sequence in the step
  std::vector<int32_t> context_lens;  // [B] cached tokens of each sequence after this step's writes
  std::vector<int32_t> positions;     // [T] position of each token (= its index in the cache)
  std::vector<int32_t> page_table_start = {0};  // [B + 1] where each sequence's pages begin in page_ids
  std::vector<int32_t> page_ids;                // every sequence's page table, concatenated
  std::vector<int64_t> slot_mapping;  // [T] cache slot (page * page_size + offset) written by each token
  int page_size = 64;

  int num_sequences() const { return static_cast<int>(context_lens.size()); }
  std::span<const int32_t> pages(int b) const {
    return std::span<const int32_t>(page_ids).subspan(page_table_start[b], page_table_start[b + 1] - page_table_start[b]);
  }
  void add_pages(std::span<const int32_t> pages) {
    page_ids.insert(page_ids.end(), pages.begin(), pages.end());
    page_table_start.push_back(static_cast<int32_t>(page_ids.size()));
  }
};

// The rotary table: cos and sin for every position, [max_positions, rope_dim / 2] float32.
struct RopeTable {
  Tensor cos;
  Tensor sin;
  bool interleaved = true;  // pairs (2i, 2i+1) as DeepSeek stores them; else (i, i + d/2)
};

enum class Scoring : uint8_t { kSoftmax, kSigmoid };
enum class ExpertSelection : uint8_t { kGreedy, kGroupLimitedGreedy, kNoauxTc };

struct RouterParams {
  Scoring scoring = Scoring::kSigmoid;
  ExpertSelection selection = ExpertSelection::kNoauxTc;
  int top_k = 8;
  int n_group = 1;
  int topk_group = 1;
  bool normalize = true;        // divide the chosen weights by their sum
  float scaling_factor = 1.0f;  // routed_scaling_factor
};

struct Routing {
  Tensor expert_ids;  // [T, top_k] int32
  Tensor weights;     // [T, top_k] float32
};

// One expert's SiLU-gated MLP: down(silu(gate(x)) * up(x)).
struct ExpertWeights {
  Tensor gate;  // [I, hidden]
  Tensor up;    // [I, hidden]
  Tensor down;  // [hidden, I]
};

struct SamplingParams {
  float temperature = 0.0f;  // 0: greedy
  int top_k = 0;             // 0: off
  float top_p = 1.0f;        // 1: off
  float min_p = 0.0f;        // 0: off
};

class Backend {
 public:
  virtual ~Backend() = default;
  virtual std::string name() const = 0;
  virtual Device device() const = 0;

  // Memory.
  virtual Tensor empty(DType dtype, Shape shape) = 0;
  virtual Tensor to_device(const Tensor& host) = 0;  // may share memory on the CPU
  virtual Tensor to_host(const Tensor& tensor) = 0;

  // Elementwise and normalisation.
  // [V, D] table (f32 or bf16), ids [T] int32 -> [T, D] f32. Throws on an id outside [0, V).
  virtual Tensor embedding(const Tensor& table, const Tensor& ids) = 0;
  // x [T, D], weight [D] -> [T, D]: x / sqrt(mean(x^2) + eps) * weight
  virtual Tensor rms_norm(const Tensor& x, const Tensor& weight, float eps) = 0;
  // residual += x; returns rms_norm(residual). residual [T, D] is updated in place.
  virtual Tensor add_rms_norm_inplace(Tensor& residual, const Tensor& x, const Tensor& weight, float eps) = 0;
  virtual void add_inplace(Tensor& x, const Tensor& y) = 0;  // x += y, same shapes
  // x [T, 2I] -> [T, I]: silu(x[:, :I]) * x[:, I:]
  virtual Tensor silu_mul(const Tensor& x) = 0;
  // Concatenates along the last dimension: [T, A] + [T, B] -> [T, A + B].
  virtual Tensor concat_last(const Tensor& a, const Tensor& b) = 0;
  // Columns [begin, end) of x [T, D] -> [T, end - begin].
  virtual Tensor slice_last(const Tensor& x, int64_t begin, int64_t end) = 0;
  // Rows of x [T, D] -> [rows, D].
  virtual Tensor gather_rows(const Tensor& x, const std::vector<int32_t>& rows) = 0;
  // Stacks along the first dimension: [A, D] + [B, D] -> [A + B, D].
  virtual Tensor concat_rows(const Tensor& a, const Tensor& b) = 0;

  // Matrix products, float32 accumulation.
  // x [T, K] f32, weight [N, K] (f32 or bf16) -> [T, N]
  virtual Tensor linear(const Tensor& x, const Tensor& weight) = 0;
  // x [T, G, K], weight [G, N, K] -> [T, G, N]: one product per group (per attention head).
  virtual Tensor grouped_linear(const Tensor& x, const Tensor& weight) = 0;

  // Rotary embedding in place on dims [begin, begin + rope_dim) of the last axis of x [T, G, D],
  // at positions [T] (rope_dim = 2 * table width).
  virtual void rope_inplace(Tensor& x, int64_t begin, const std::vector<int32_t>& positions,
                            const RopeTable& table) = 0;

  // MLA. The latent cache of a layer is [pages, page_size, kv_lora_rank + rope_dim]: per token the
  // normalised latent then the rotated shared key.
  // Writes latent [T, kv_lora_rank + rope_dim] rows to their slots.
  virtual void write_cache(Tensor& cache, const Tensor& latent, const AttentionBatch& batch) = 0;
  // The cached rows of every sequence, concatenated in order: [sum(context_lens), width].
  virtual Tensor gather_cache(const Tensor& cache, const AttentionBatch& batch) = 0;
  // Expanded form (prefill). q [T, H, dn + dr]; kv [S, H, dn + dv] (kv_b_proj of the gathered
  // latents: per head k_nope then v); k_rope [S, dr]; S = sum(context_lens). Causal by position.
  // -> [T, H, dv]
  virtual Tensor attention_expanded(const Tensor& q, const Tensor& kv, const Tensor& k_rope,
                                    const AttentionBatch& batch, float scale) = 0;
  // Absorbed form (decode). q [T, H, kv_lora_rank + dr] (q_nope absorbed into the latent space,
  // then q_rope) against the cache directly; the output is the attention-weighted sum of the
  // first latent_width (kv_lora_rank) values of each cached row. -> [T, H, latent_width]
  virtual Tensor attention_absorbed(const Tensor& q, const Tensor& cache, const AttentionBatch& batch,
                                    float scale, int64_t latent_width) = 0;

  // MoE. logits [T, E] f32, bias [E] (e_score_correction_bias; may be undefined).
  virtual Routing route(const Tensor& logits, const Tensor& bias, const RouterParams& params) = 0;
  // x [T, hidden] -> [T, hidden]: sum over chosen experts of weight * expert(x).
  virtual Tensor moe_experts(const Tensor& x, const Routing& routing,
                             const std::vector<ExpertWeights>& experts) = 0;

  // Sampling. logits [B, V] f32 -> [B] int32. One uniform draw per row in `uniforms` [B] (from the
  // caller's seeded generators) makes the op deterministic. Greedy rows ignore their draw.
  virtual Tensor sample(const Tensor& logits, const std::vector<SamplingParams>& params,
                        const std::vector<float>& uniforms) = 0;
};

std::unique_ptr<Backend> make_cpu_backend();

}  // namespace dsinfer::backend
