// The op interface every backend implements. The model calls these and nothing else.
//
// The CPU backend (backend/cpu) is the definition: plain, threaded loops in float32. The CUDA
// backend computes the same functions in its compute dtype (bf16 activations, float32 accumulation);
// tests compare the two at real DeepSeek shapes (backend/conformance).
// Ops return new tensors allocated by the backend; inputs are never modified unless the name
// says so (`_inplace`). Shapes use T = tokens in the step, H = heads, E = routed experts.
//
// Activations an op returns live until the next begin_step() (a device backend takes them from a
// per-step arena with stable addresses); `empty` and `to_device` memory lives as long as its Tensor.
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <functional>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "backend/cache_layout.h"
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
  std::vector<int64_t> slot_mapping;  // [T] cache slot (cache_layout.h's cache_slot) written by each token
  int page_size = kPageSize;

  int num_sequences() const { return static_cast<int>(context_lens.size()); }
  std::span<const int32_t> pages(int b) const {
    return std::span<const int32_t>(page_ids).subspan(page_table_start[b], page_table_start[b + 1] - page_table_start[b]);
  }
  void add_pages(std::span<const int32_t> pages) {
    page_ids.insert(page_ids.end(), pages.begin(), pages.end());
    page_table_start.push_back(static_cast<int32_t>(page_ids.size()));
  }
};

// The host-side metadata of one forward pass (see Backend::begin_step).
struct StepContext {
  std::span<const int32_t> token_ids;             // [T]
  std::span<const int32_t> logit_rows;            // rows whose logits are wanted
  std::vector<const AttentionBatch*> batches;     // the whole step, and the parts ops see separately
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

// How a linear weight is stored. Each backend computes with the format as it is (FP8 stays FP8 on
// the GPU); the CPU backend dequantizes inside its op.
enum class WeightFormat : uint8_t {
  kDense,     // data f32 or bf16, no scale
  kFp8Block,  // data f8e4m3, scale f32 per kWeightBlock x kWeightBlock block (DeepSeek's weight_scale_inv)
  kW4A8,      // int4 weights in groups along K, FP8 e4m3 activations (docs/w4a8.md)
};
inline constexpr int64_t kWeightBlock = 128;

// What a weight is for (Backend::supports_weight_format): a linear layer, or a routed-expert stack of
// moe_experts.
enum class WeightUse : uint8_t { kLinear, kExperts };

// A linear layer's weight, [N, K] (y = x W^T), or a stack of E of them, [E, N, K].
//   kDense: data f32 or bf16 [N, K].
//   kFp8Block: data f8e4m3 [N, K], scale f32 [ceil(N / 128), ceil(K / 128)].
//   kW4A8 (docs/w4a8.md): data u8 [N, K / 2], the int4 values q + 8 two to a byte, the lower column
//     in the low nibble; scale f32 [N, K / G] per group of G columns (w = q * scale); input_scale f32
//     [] (a stack: [E]): the activations' static e4m3 scale, undefined for one per token row,
//     amax(|row|) / 448; pre_scale f32 [K] (a stack: [E, K]): AWQ's per-input-channel factors, the
//     input multiplied by them before its e4m3 quantization (x * pre_scale, the checkpoint's
//     P.pre_quant_scale), undefined for none.
struct LinearWeight {
  Tensor data;   // [N, K] or [E, N, K] (kW4A8: [.., K / 2] bytes)
  Tensor scale{};  // kFp8Block, kW4A8: as above, [E, ...] for a stack; else undefined
  WeightFormat format = WeightFormat::kDense;
  Tensor input_scale{};  // kW4A8 only, optional
  Tensor pre_scale{};    // kW4A8 only, optional

  int64_t out_features() const { return data.dim(-2); }
  int64_t in_features() const { return format == WeightFormat::kW4A8 ? 2 * data.dim(-1) : data.dim(-1); }
  // kW4A8: columns per scale.
  int64_t group_size() const { return in_features() / scale.dim(-1); }
  // Matrix e of a stack, sharing storage.
  LinearWeight expert(int64_t e) const {
    LinearWeight one{data.slice(e, e + 1).view({data.dim(1), data.dim(2)}), {}, format};
    if (scale.defined()) one.scale = scale.slice(e, e + 1).view({scale.dim(1), scale.dim(2)});
    if (input_scale.defined()) one.input_scale = input_scale.slice(e, e + 1).view(Shape());
    if (pre_scale.defined()) one.pre_scale = pre_scale.slice(e, e + 1).view({pre_scale.dim(1)});
    return one;
  }
};

// The routed experts of one MoE layer, stacked so that a grouped GEMM reads them as one tensor:
// expert e computes down(silu(gate(x)) * up(x)) with gate_up[e] = [gate rows; up rows].
struct ExpertStack {
  LinearWeight gate_up;  // [E, 2I, hidden]
  LinearWeight down;     // [E, hidden, I]
  // Global id of the stack's expert 0: with expert parallelism a rank holds experts
  // [first_expert, first_expert + num_experts()) of the layer; routed ids outside that range are
  // another rank's and contribute nothing here.
  int64_t first_expert = 0;
  int64_t num_experts() const { return gate_up.data.dim(0); }
};

struct SamplingParams {
  float temperature = 0.0f;  // 0: greedy
  int top_k = 0;             // 0: off
  float top_p = 1.0f;        // 1: off
  float min_p = 0.0f;        // 0: off
};

// Everything the engine does to a row of logits, done where the logits are (DESIGN: "tokens, not
// logits, come back"). Per row, in this order:
//   1. logprobs (when asked) are of the raw logits: log_softmax at the chosen token, and the top N;
//   2. repetition penalty (Hugging Face's: positive logits divided, negative multiplied) on every
//      token of the row's history; frequency and presence penalties (OpenAI's: minus
//      frequency * output count + presence) on tokens with output count > 0;
//   3. logit_bias: each of the row's biases is added to its token's logit;
//   4. banned tokens (the stop tokens while min_tokens is not reached) and, for a row with an
//      allowed-token bitmask (structured output), every token outside it get -inf;
//   5. sampling as SamplingParams says, with the row's uniform draw (greedy rows ignore it).
struct SamplingRow {
  SamplingParams params;
  float repetition_penalty = 1.0f;  // 1: off
  float frequency_penalty = 0.0f;
  float presence_penalty = 0.0f;
  float uniform = 0.0f;  // this row's draw in [0, 1) from the request's seeded generator
  int top_logprobs = -1;  // -1: no logprobs; N >= 0: the chosen token's logprob and the top N
};

struct SamplingBatch {
  std::vector<SamplingRow> rows;  // [B]
  // Each row's history for the penalties, CSR: the distinct tokens of prompt and output so far
  // (only rows with a penalty need any), and how often each appeared in the output.
  std::vector<int32_t> history_start = {0};  // [B + 1]
  std::vector<int32_t> history_tokens;
  std::vector<int32_t> history_output_counts;
  // Each row's banned tokens, CSR.
  std::vector<int32_t> banned_start = {0};   // [B + 1]
  std::vector<int32_t> banned_tokens;
  // Each row's logit_bias, CSR: a row's tokens are distinct (the GPU adds them in parallel).
  std::vector<int32_t> bias_start;           // [B + 1], or empty: no row has a bias
  std::vector<int32_t> bias_tokens;
  std::vector<float> bias_values;            // [bias_start[B]], added to the logit
  // Allowed-token bitmasks (structured output), xgrammar's layout (structured/token_bitmask.h):
  // [rows with a mask, bitmask_words(V)] int32, token t allowed when bit t % 32 of word t / 32 is
  // set; bits past V are ignored. bitmask_row[b] is row b's index into it, or -1 (no mask); an
  // empty bitmask_row means no row has one.
  std::vector<int32_t> bitmask;
  std::vector<int32_t> bitmask_row;          // [B] or empty

  static constexpr int64_t bitmask_words(int64_t vocab) { return (vocab + 31) / 32; }
  int num_rows() const { return static_cast<int>(rows.size()); }
  bool any_bitmask() const {
    return std::any_of(bitmask_row.begin(), bitmask_row.end(), [](int32_t index) { return index >= 0; });
  }
  // Throws unless the batch describes `logit_rows` rows of `vocab` logits with consistent CSR arrays
  // and bitmask indexes.
  void check_rows(int64_t logit_rows, int64_t vocab) const {
    DSINFER_CHECK(num_rows() == logit_rows && static_cast<int64_t>(history_start.size()) == logit_rows + 1 &&
                      static_cast<int64_t>(banned_start.size()) == logit_rows + 1 &&
                      (bias_start.empty() ? bias_tokens.empty()
                                          : static_cast<int64_t>(bias_start.size()) == logit_rows + 1) &&
                      history_tokens.size() == history_output_counts.size() &&
                      bias_tokens.size() == bias_values.size() &&
                      (bitmask_row.empty() || static_cast<int64_t>(bitmask_row.size()) == logit_rows),
                  "sample_tokens: ", logit_rows, " logit rows do not match the sampling batch of ", num_rows(),
                  " rows");
    const int64_t words = std::max<int64_t>(bitmask_words(vocab), 1);
    const auto mask_rows = static_cast<int64_t>(bitmask.size()) / words;
    DSINFER_CHECK(static_cast<int64_t>(bitmask.size()) == mask_rows * words,
                  "sample_tokens: the bitmask holds ", bitmask.size(), " words, not a multiple of ",
                  bitmask_words(vocab), " (a row of ", vocab, " tokens)");
    for (int32_t index : bitmask_row)
      DSINFER_CHECK(index >= -1 && index < mask_rows, "sample_tokens: bitmask row ", index, " of ", mask_rows);
  }
  // The batch of rows `rows` of this one, in that order, with their CSR entries and bitmask rows
  // (logits of `vocab` tokens).
  SamplingBatch select_rows(std::span<const int32_t> rows, int64_t vocab) const {
    SamplingBatch out;
    const auto words = static_cast<size_t>(bitmask_words(vocab));
    if (!bias_start.empty()) out.bias_start = {0};
    for (int32_t row : rows) {
      out.rows.push_back(this->rows[row]);
      for (int32_t i = history_start[row]; i < history_start[row + 1]; ++i) {
        out.history_tokens.push_back(history_tokens[i]);
        out.history_output_counts.push_back(history_output_counts[i]);
      }
      out.history_start.push_back(static_cast<int32_t>(out.history_tokens.size()));
      out.banned_tokens.insert(out.banned_tokens.end(), banned_tokens.begin() + banned_start[row],
                               banned_tokens.begin() + banned_start[row + 1]);
      out.banned_start.push_back(static_cast<int32_t>(out.banned_tokens.size()));
      if (!bias_start.empty()) {
        out.bias_tokens.insert(out.bias_tokens.end(), bias_tokens.begin() + bias_start[row],
                               bias_tokens.begin() + bias_start[row + 1]);
        out.bias_values.insert(out.bias_values.end(), bias_values.begin() + bias_start[row],
                               bias_values.begin() + bias_start[row + 1]);
        out.bias_start.push_back(static_cast<int32_t>(out.bias_tokens.size()));
      }
      if (!bitmask_row.empty()) {
        const int32_t index = bitmask_row[row];
        out.bitmask_row.push_back(index < 0 ? -1 : static_cast<int32_t>(out.bitmask.size() / words));
        if (index >= 0)
          out.bitmask.insert(out.bitmask.end(), bitmask.begin() + index * words, bitmask.begin() + (index + 1) * words);
      }
    }
    return out;
  }
  bool any_logprobs() const {
    return std::any_of(rows.begin(), rows.end(), [](const SamplingRow& row) { return row.top_logprobs >= 0; });
  }
  int max_top_logprobs() const {  // the largest N asked for (0 when none)
    int n = 0;
    for (const SamplingRow& row : rows) n = std::max(n, row.top_logprobs);
    return n;
  }
};

// Host tensors (the step's only device-to-host copy).
struct SampledTokens {
  Tensor tokens;        // [B] int32
  Tensor logprobs;      // [B] f32, log_softmax(raw)[token]; undefined when no row asked
  Tensor top_ids;       // [B, N] int32, N = max_top_logprobs(), most likely first; rows asking
  Tensor top_logprobs;  // [B, N] f32    fewer than N have their first entries valid
};

// A sampling whose work is queued but not waited for (Backend::queue_sample_tokens): the overlap
// scheduler launches the next step before this one's tokens reach the host.
class PendingTokens {
 public:
  virtual ~PendingTokens() = default;
  // The sampled tokens [B] int32 where the backend keeps them (device memory on a GPU), for the next
  // step's placeholders (Backend::resolve_placeholders). Valid while this object lives.
  virtual const Tensor& device_tokens() const = 0;
  // Waits for the sampling and its copy to the host. Call once.
  virtual SampledTokens wait() = 0;
};

// A point in the device work queued so far (Backend::mark_work): reached() once all of that work
// has run. Polled by the host, never waited on.
class WorkMark {
 public:
  virtual ~WorkMark() = default;
  virtual bool reached() = 0;
};

// Recorded device work that replays without the host launching each op (a CUDA graph).
class StepGraph {
 public:
  virtual ~StepGraph() = default;
  // Queues the recorded work. Its inputs are the step uploaded by the last begin_step, which must have
  // the captured step's shape; returns false, queueing nothing, when that step's arrays do not sit
  // where the captured step's did (then run the step eagerly).
  virtual bool replay() = 0;
};

class Backend {
 public:
  virtual ~Backend() = default;
  virtual std::string name() const = 0;
  virtual Device device() const = 0;
  // The dtype of the activations the ops return (f32 on the CPU, bf16 on the GPU). Weights the model
  // derives at load time (the absorbed MLA matrices) are stored in it.
  virtual DType compute_dtype() const = 0;
  // Whether the cache ops take a latent cache of this dtype (cache_layout.h's formats): the compute
  // dtype everywhere; the CPU, the reference, also takes both FP8 formats, the GPU the e4m3 rows
  // (kF8E4M3, --kv-cache-dtype fp8).
  virtual bool supports_cache_dtype(DType dtype) const { return dtype == compute_dtype(); }
  // Whether linear (kLinear) or moe_experts (kExperts) takes weights of this format: dense and FP8
  // blocks everywhere; W4A8 on the CPU, the reference, for both, and on the GPU for routed experts only.
  virtual bool supports_weight_format(WeightFormat format, WeightUse use) const {
    return format != WeightFormat::kW4A8;
  }

  // Starts a forward pass: the host arrays every layer reads. A device backend uploads them all with
  // one async copy from pinned staging and plans per-step work (split-KV) here, not once per layer;
  // an op later given one of these arrays (the same object or data pointer) reads the uploaded copy.
  // They must stay alive and unchanged until the next begin_step.
  virtual void begin_step(const StepContext& step) {}
  // Waits for the device work queued so far; throws on a device error (a no-op on the CPU).
  virtual void synchronize() {}
  // A mark after the work queued so far, for the host to poll (a CUDA event on the stream); null
  // where ops run as they are called (the CPU: the work has run).
  virtual std::unique_ptr<WorkMark> mark_work() { return nullptr; }
  // Work for the host while it waits for a step's sampled tokens (PendingTokens::wait): `poll` runs
  // again and again until they are there, as long as it returns true (it has work left; once it
  // returns false the wait blocks as without it). Prefill/decode disaggregation posts each layer's
  // KV pages there as its mark is reached, while later layers compute. Empty: none.
  virtual void set_wait_poll(std::function<bool()> poll) {}

  // Records the device work `body` queues (after a begin_step; nothing runs) into a graph that
  // replays it. Tensors that body allocates come from a pool of their own, which later captures
  // share and eager steps never touch; tensors body returns stay valid, and are rewritten by each
  // replay. Ops inside body must not wait on the device or upload host arrays that begin_step did
  // not register. Null when the backend has no graphs (the CPU).
  virtual std::unique_ptr<StepGraph> capture(const std::function<void()>& body) { return nullptr; }

  // Device memory, for the memory plan (zeros on the CPU, which has no plan).
  struct MemoryInfo {
    int64_t total_bytes = 0;
    int64_t free_bytes = 0;        // free on the device now
    int64_t cached_bytes = 0;      // held by this backend's allocator but not in use
    int64_t graph_pool_bytes = 0;  // held for captured graphs' tensors
  };
  virtual MemoryInfo memory_info() { return {}; }
  // Gives the allocator's unused blocks back to the driver (after a dry run sized the steps).
  virtual void release_cached_memory() {}

  // Memory.
  virtual Tensor empty(DType dtype, Shape shape) = 0;
  // A copy on the device (may share memory on the CPU). A host array registered by begin_step gives
  // its uploaded copy, valid until the next begin_step.
  virtual Tensor to_device(const Tensor& host) = 0;
  virtual Tensor to_host(const Tensor& tensor) = 0;
  // Host memory that copies to and from this backend need not wait for (page-locked on a GPU; plain
  // memory on the CPU), not zeroed: the host KV tier's store (runtime/host_kv_tier.h).
  virtual std::shared_ptr<std::byte> allocate_host(size_t bytes);
  // Bytes [offset, offset + bytes) of `tensor`'s memory to or from host memory, queued in order with
  // the ops before and after (on a GPU the host must not touch `host` until a later synchronize, or
  // a copy queued after this one, has read or written it; on the CPU a memcpy, done on return).
  virtual void queue_copy_to_host(std::byte* host, const Tensor& tensor, size_t offset, size_t bytes);
  virtual void queue_copy_from_host(Tensor& tensor, size_t offset, const std::byte* host, size_t bytes);

  // Fills t (f32, bf16 or f8e4m3) with values uniform in [low, high), a pure function of (seed,
  // element index) that every backend computes alike (splitmix64; see backend/cpu/random_fill.cc).
  // Random weights for --load-format dummy, made where they live.
  virtual void fill_uniform(Tensor& t, uint64_t seed, float low, float high) = 0;

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
  // x [T, K], weight [N, K] in any WeightFormat -> [T, N]
  virtual Tensor linear(const Tensor& x, const LinearWeight& weight) = 0;
  // The same product with a float32 result (the MoE router's logits): x [T, K] -> [T, N] f32.
  virtual Tensor linear_f32(const Tensor& x, const LinearWeight& weight) = 0;
  // x [T, G, K], weight [G, N, K] (dense, compute dtype or f32) -> [T, G, N]: one product per group
  // (per attention head).
  virtual Tensor grouped_linear(const Tensor& x, const Tensor& weight) = 0;
  // Absorbed MLA's query: q [T, H, dn + dr] (the rope dims rotated), w_uk_t [H, L, dn] (compute
  // dtype or f32) -> [T, H, L + dr]: per head q[:, h, :dn] . w_uk_t[h]^T, then q[:, h, dn:] as it is.
  // The same as concat_last(grouped_linear(q's first dn columns, w_uk_t), q's last dr columns), in
  // one op so that a device writes both parts in place (no slice or concatenation copies).
  virtual Tensor absorb_query(const Tensor& q, const Tensor& w_uk_t) = 0;

  // Rotary embedding in place on dims [begin, begin + rope_dim) of the last axis of x [T, G, D],
  // at positions [T] (rope_dim = 2 * table width).
  virtual void rope_inplace(Tensor& x, int64_t begin, const std::vector<int32_t>& positions,
                            const RopeTable& table) = 0;

  // MLA. The latent cache of a layer is [pages, page_size, kv_lora_rank + rope_dim]: per token the
  // normalised latent then the rotated shared key.
  // Writes latent [T, kv_lora_rank + rope_dim] rows to their slots.
  virtual void write_cache(Tensor& cache, const Tensor& latent, const AttentionBatch& batch) = 0;
  // The cache write of MLA from the kv_a projection in one op: kv_a [T, L + R] (L = latent width,
  // R = 2 * rope table width) -> rows [rms_norm(kv_a[:, :L], norm_weight, eps) |
  // rope(kv_a[:, L:]) at batch.positions] written to their slots. Its definition is those four
  // ops: write_cache(concat_last(rms_norm(slice_last(..)), rope_inplace(slice_last(..)))).
  virtual void write_latent_cache(Tensor& cache, const Tensor& kv_a, const Tensor& norm_weight, float eps,
                                  const RopeTable& table, const AttentionBatch& batch) = 0;
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
  // x [T, hidden] -> [T, hidden]: for each token, the sum over its chosen experts that this stack
  // holds of weight * expert(x). routing.expert_ids are global ids as route returns them; an id in
  // [experts.first_expert, experts.first_expert + E) runs stack expert id - first_expert, any other
  // (another rank's expert) is skipped, so a token with none gets zeros and the outputs of stacks
  // that partition the layer's experts sum to the whole layer's. A negative id is invalid: the CPU
  // throws; a device backend, which never reads the ids on the host, skips it.
  virtual Tensor moe_experts(const Tensor& x, const Routing& routing, const ExpertStack& experts) = 0;
  // Expert-parallel load balancing (parallel/expert_placement.h): logical expert ids [T, k] int32
  // (route's) become physical slots, in place: choice j of token t of logical expert e becomes
  // replica_slots[replica_start[e] + (t + j) % n] with n = replica_start[e + 1] - replica_start[e],
  // so a hot expert's tokens spread over its replicas alike on every rank. replica_start [E + 1] and
  // replica_slots [slots] are int32 tensors on the backend's device, made once at load.
  virtual void map_expert_ids(Tensor& expert_ids, const Tensor& replica_start, const Tensor& replica_slots) = 0;
  // EPLB's load counters: counts [E] int64 on the device += the number of choices of each expert in
  // expert_ids [T, k] int32 (route's logical ids); ids outside [0, E) are not counted. Graph-capturable.
  virtual void count_expert_ids(const Tensor& expert_ids, Tensor& counts) = 0;

  // Sampling: the whole logits pipeline of SamplingBatch on logits [B, V] f32 (which it may
  // overwrite), the results copied to the host. One uniform draw per row (from the caller's seeded
  // generators) makes the op deterministic; greedy rows ignore their draw.
  virtual SampledTokens sample_tokens(Tensor& logits, const SamplingBatch& batch) = 0;
  // The same, queued: returns once the work (and the copy of its results to pinned host memory) is
  // queued. The CPU samples at once and returns a finished handle. A device backend keeps the
  // buffers of two handles alive at once: wait for one before queueing a third.
  virtual std::unique_ptr<PendingTokens> queue_sample_tokens(Tensor& logits, const SamplingBatch& batch);
  // Placeholders in a step's token ids (the overlap scheduler's inputs whose tokens an earlier step
  // sampled and the host has not seen): every id -(r + 1) in token_ids [T] int32 becomes
  // previous[r] (previous: PendingTokens::device_tokens of that step); other ids stay. In place, on
  // the backend's device: pass the step's ids through to_device after begin_step to rewrite the
  // uploaded copy that the step's ops (and a replayed graph) read. The caller checks on the host,
  // before this is queued, that every placeholder names a row of previous (model::DeepseekModel's
  // validate does); the CPU op throws on one that does not.
  virtual void resolve_placeholders(Tensor& token_ids, const Tensor& previous) = 0;
};

// A sampling already done: the default queue_sample_tokens (the CPU samples synchronously).
class ReadyTokens final : public PendingTokens {
 public:
  explicit ReadyTokens(SampledTokens tokens) : tokens_(std::move(tokens)) {}
  const Tensor& device_tokens() const override { return tokens_.tokens; }
  SampledTokens wait() override { return tokens_; }

 private:
  SampledTokens tokens_;
};

inline std::unique_ptr<PendingTokens> Backend::queue_sample_tokens(Tensor& logits, const SamplingBatch& batch) {
  return std::make_unique<ReadyTokens>(sample_tokens(logits, batch));
}

// The CPU's host copies: its tensors are host memory, and it runs every op as it is called.
inline std::shared_ptr<std::byte> Backend::allocate_host(size_t bytes) {
  return std::shared_ptr<std::byte>(new std::byte[bytes], std::default_delete<std::byte[]>());
}

inline void Backend::queue_copy_to_host(std::byte* host, const Tensor& tensor, size_t offset, size_t bytes) {
  DSINFER_CHECK(tensor.device() == Device::kCpu && offset + bytes <= tensor.nbytes(), name(),
                ": a host copy of bytes [", offset, ", ", offset + bytes, ") of a tensor of ", tensor.nbytes());
  std::memcpy(host, static_cast<const std::byte*>(tensor.raw()) + offset, bytes);
}

inline void Backend::queue_copy_from_host(Tensor& tensor, size_t offset, const std::byte* host, size_t bytes) {
  DSINFER_CHECK(tensor.device() == Device::kCpu && offset + bytes <= tensor.nbytes(), name(),
                ": a host copy into bytes [", offset, ", ", offset + bytes, ") of a tensor of ", tensor.nbytes());
  std::memcpy(static_cast<std::byte*>(tensor.raw()) + offset, host, bytes);
}

std::unique_ptr<Backend> make_cpu_backend();

}  // namespace dsinfer::backend
