// Model-step benchmark: one decode step of the model at batch B over a `context`-token cache against
// its roofline, and the prefill rate; dummy weights of the config's real widths and stored formats.
//
//   model_step_bench --config configs/deepseek-v3 --num-layers 4 --batches 1,64,256 --context 2048
//       --prefill 8x2048 [--device cuda] [--max-batched-tokens N] [--out bench/results/model_step_h100.json]
//   model_step_bench --config tests/fixtures/models/v3-tiny --device cpu --batches 1,4 --context 128 --prefill 2x64
//   model_step_bench --config configs/deepseek-v3 --num-layers 4 --kv-cache-dtype fp8 --w4a8-experts 128
//       (issue 9's comparison: an FP8 latent cache and int4 routed experts against the stored formats)
//
// Decode: B sequences with `context` tokens cached (random values from Backend::fill_uniform stand in
// for a prefill), one new token each at position `context`, sampled greedily on the device. A step
// as the engine runs it (its CUDA graph replayed on a GPU unless --enforce-eager, and timed eagerly
// too) is timed on the host clock with backend.synchronize() before and after, so its launches and
// the copy of B tokens to the host count; median and p10/p90 of --steps steps after --warmup steps.
// On a GPU the steps are also run back to back as the overlap scheduler runs them (each queued before
// the previous one's tokens are waited for): the mean time per step is decode_overlapped_ms. After
// all timings (recording slows launches), one more step per batch size gives the time per kernel
// from CUPTI's records (step_breakdown.h), printed and written as breakdown_b<B>.
//
// Roofline of a decode step at batch B, L kept layers (the MTP module is loaded but not run):
//   bytes = the weights the step must read, in their stored dtype (io::checkpoint_tensors; FP8 with
//           its block scales for DeepSeek-V3's projections): every layer's attention, norms, dense MLP,
//           router and shared expert; E (1 - (1 - k/E)^B) of each MoE layer's E routed experts (those
//           B tokens choosing top-k are expected to touch; with --w4a8-experts G each as the device
//           holds it: int4 values, f32 scales per G columns, gate_up's AWQ factors, none of the
//           FP8 block scales); B embedding rows; the final norm, lm_head
//         + the latent cache: L B context W read and L B W written, W = kv_lora_rank + rope_dim, in the
//           cache dtype (bf16 on the GPU; e4m3 with --kv-cache-dtype fp8)
//   FLOPs = 2 B (parameters a token multiplies: every matrix but the embedding, k/E of the routed ones)
//         + L 2 H context (W + kv_lora_rank) B                                (absorbed MLA)
//   time  = max(bytes / copy bandwidth, FLOPs / FP8 GEMM peak), both ceilings measured in this run.
// Prefill: --prefill SxL, S sequences of L tokens from position 0 in pages of their own, in steps of
// at most --max-batched-tokens tokens (0: all S L in one step); tokens/s = S L / the steps' time.
//
// Speculative decoding (--speculative N): per batch size, also the step the engine runs when every
// sequence verifies N drafts (runtime/executor.h's run_speculative, on an executor of its own with
// its own cache: the 1 + N rows of each sequence replayed as a verification graph, sampled on the
// device, the MTP module's pass over them from its graph and the chained drafts, one wait), its
// median time against the decode step's. With a mean acceptance length a (tokens a step), drafting
// gives a x decode_ms / speculative_ms the tokens/s; dummy weights draft nothing useful, so a is not
// measured here (bench/run_speculative.sh measures it on the bundled model).
//
// On the CPU (--device cpu) no CUDA call is made: the ceilings, and so the roofline times and ratios,
// are absent (null in the JSON); bytes and FLOPs are still reported.
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <deque>
#include <numeric>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "backend/make_backend.h"
#include "bench/result_file.h"
#include "cli/flags.h"
#include "core/file.h"
#include "core/parallel.h"
#include "core/strings.h"
#include "io/tensor_specs.h"
#include "model/batch_builder.h"
#include "model/decode_graphs.h"
#include "model/deepseek_model.h"
#include "runtime/executor.h"

#ifdef DSINFER_HAS_CUDA
#include "backend/cuda/cuda_backend.h"
#include "ceilings.h"        // bench/gpu/, next to this file
#include "step_breakdown.h"  // bench/gpu/, next to this file
#endif

namespace dsinfer::bench {
namespace {

using Clock = std::chrono::steady_clock;

constexpr double kGiB = 1024.0 * 1024.0 * 1024.0;

#ifndef DSINFER_HAS_CUDA
struct Ceilings {  // ceilings.h's, for a build without CUDA (never measured there)
  double copy_tb_s = 0, bf16_tflops = 0, fp8_tflops = 0;
};
#endif

int64_t ceil_div(int64_t a, int64_t b) { return (a + b - 1) / b; }

double seconds_since(Clock::time_point start) {
  return std::chrono::duration<double>(Clock::now() - start).count();
}

// Spread-out ids, never the first three (BOS/EOS-like ids in every config).
int32_t token_id(int64_t index, int64_t vocab) {
  return static_cast<int32_t>(vocab > 3 ? 3 + index * 7919 % (vocab - 3) : index % vocab);
}

struct PrefillShape {
  int64_t sequences = 0;
  int64_t length = 0;
  int64_t tokens() const { return sequences * length; }
};

PrefillShape parse_prefill(const std::string& text) {
  if (text == "0" || text.empty()) return {};
  std::vector<std::string> parts = split(text, 'x');
  PrefillShape shape;
  DSINFER_CHECK(parts.size() == 2 && parse_int64(parts[0], &shape.sequences) && parse_int64(parts[1], &shape.length) &&
                    shape.sequences > 0 && shape.length > 0,
                "--prefill ", text, ": expected SEQUENCESxTOKENS such as 8x2048 (or 0 for none)");
  return shape;
}

// Linear interpolation between the closest ranks; q in [0, 1].
double percentile(std::vector<double> values, double q) {
  std::sort(values.begin(), values.end());
  const double position = q * static_cast<double>(values.size() - 1);
  const size_t low = static_cast<size_t>(position);
  const size_t high = std::min(low + 1, values.size() - 1);
  return values[low] + (position - static_cast<double>(low)) * (values[high] - values[low]);
}

// The weights of the kept layers as the checkpoint stores them, split by how a decode step reads them.
struct WeightCensus {
  double per_step_bytes = 0;       // read in full by every step, whatever B
  double routed_bytes = 0;         // every routed expert of every kept MoE layer
  double embedding_row_bytes = 0;  // one row of embed_tokens (0 when tied: then it is the head, read in full)
  double dense_params = 0;         // matrix entries every token multiplies (the embedding lookup excluded)
  double routed_params = 0;        // matrix entries of every routed expert
};

WeightCensus count_weights(const io::ModelConfig& config) {
  WeightCensus census;
  const double int4_group = static_cast<double>(config.quantization.int4_group_size);  // 0: stored format
  for (const io::TensorSpec& spec : io::checkpoint_tensors(config, io::stored_format(config))) {
    std::optional<int64_t> layer = io::layer_index(spec.name);
    if (layer && *layer >= config.num_hidden_layers) continue;  // MTP modules: not in a decode step
    const double elements = static_cast<double>(spec.shape.numel());
    const double bytes = elements * static_cast<double>(dtype_size(spec.dtype));
    const bool matrix = spec.shape.rank() == 2 && spec.name.ends_with(".weight");  // not scales, norms
    if (spec.name == "model.embed_tokens.weight" && !config.tie_word_embeddings) {
      census.embedding_row_bytes = bytes / static_cast<double>(spec.shape[0]);
    } else if (spec.name.find(".mlp.experts.") != std::string::npos) {
      if (int4_group > 0) {
        if (!matrix) continue;  // the FP8 block scales, which int4 experts do not have
        census.routed_bytes += elements / 2 + elements / int4_group * 4;  // int4 values, f32 group scales
        // gate and up share one AWQ factor vector over the K input columns (WeightLoader::dummy_int4_linear).
        if (spec.name.ends_with(".gate_proj.weight")) census.routed_bytes += static_cast<double>(spec.shape[1]) * 4;
      } else {
        census.routed_bytes += bytes;
      }
      if (matrix) census.routed_params += elements;
    } else {
      census.per_step_bytes += bytes;
      if (matrix) census.dense_params += elements;
    }
  }
  return census;
}

struct StepRoofline {
  double weight_bytes = 0;
  double cache_bytes = 0;
  double flops = 0;
  std::optional<double> ms;  // absent without ceilings (the CPU)
  double bytes() const { return weight_bytes + cache_bytes; }
};

StepRoofline decode_roofline(const WeightCensus& census, const io::ModelConfig& config, int64_t batch,
                             int64_t context, size_t cache_element_bytes, const std::optional<Ceilings>& ceilings) {
  const double b = static_cast<double>(batch), tokens_cached = static_cast<double>(context);
  const double experts = static_cast<double>(config.n_routed_experts);
  const double top_k = static_cast<double>(config.num_experts_per_tok);
  const double active_share = experts > 0 ? top_k / experts : 0.0;         // of the routed experts, per token
  const double touched_share = experts > 0 ? 1.0 - std::pow(1.0 - active_share, b) : 0.0;  // per step
  const double layers = static_cast<double>(config.num_hidden_layers);
  const double width = static_cast<double>(config.kv_lora_rank + config.qk_rope_head_dim);
  const double heads = static_cast<double>(config.num_attention_heads);

  StepRoofline roofline;
  roofline.weight_bytes = census.per_step_bytes + census.routed_bytes * touched_share +
                          census.embedding_row_bytes * std::min(b, static_cast<double>(config.vocab_size));
  roofline.cache_bytes = layers * b * (tokens_cached + 1.0) * width * static_cast<double>(cache_element_bytes);
  roofline.flops = 2.0 * b * (census.dense_params + census.routed_params * active_share) +
                   layers * 2.0 * heads * tokens_cached * (width + static_cast<double>(config.kv_lora_rank)) * b;
  if (ceilings) {
    const double memory_s = roofline.bytes() / (ceilings->copy_tb_s * 1e12);
    const double compute_s = roofline.flops / (ceilings->fp8_tflops * 1e12);
    roofline.ms = std::max(memory_s, compute_s) * 1e3;
  }
  return roofline;
}

// B sequences; sequence b owns pages [b P, (b + 1) P), P the pages of context + 1 tokens, and adds one
// token at position `context`.
model::ForwardBatch decode_batch(int64_t batch, int64_t context, int64_t vocab) {
  const int64_t pages_per_sequence = ceil_div(context + 1, model::kPageSize);
  model::BatchBuilder builder;
  builder.reserve(batch, batch, batch * pages_per_sequence);
  std::vector<int32_t> pages(pages_per_sequence);
  for (int64_t b = 0; b < batch; ++b) {
    std::iota(pages.begin(), pages.end(), static_cast<int32_t>(b * pages_per_sequence));
    const int32_t token = token_id(b, vocab);
    builder.add(std::span<const int32_t>(&token, 1), static_cast<int32_t>(context), pages, model::LogitRows::kLast);
  }
  return builder.build();
}

// The prefill as forward steps of at most `step_tokens` tokens each; a sequence cut between two steps
// goes on at its next position in the next one (chunked prefill). Pages from `first_page` on.
std::vector<model::ForwardBatch> prefill_steps(const PrefillShape& shape, int64_t step_tokens, int64_t first_page,
                                               int64_t vocab) {
  const int64_t pages_per_sequence = ceil_div(shape.length, model::kPageSize);
  const int64_t budget = step_tokens > 0 ? step_tokens : shape.tokens();
  std::vector<model::ForwardBatch> steps;
  model::BatchBuilder builder;
  int64_t in_step = 0;
  std::vector<int32_t> pages(pages_per_sequence), tokens(shape.length);
  for (int64_t s = 0; s < shape.sequences; ++s) {
    std::iota(pages.begin(), pages.end(), static_cast<int32_t>(first_page + s * pages_per_sequence));
    for (int64_t i = 0; i < shape.length; ++i) tokens[i] = token_id(s * shape.length + i, vocab);
    for (int64_t done = 0; done < shape.length;) {
      const int64_t take = std::min(shape.length - done, budget - in_step);
      builder.add(std::span<const int32_t>(tokens).subspan(done, take), static_cast<int32_t>(done), pages,
                  model::LogitRows::kLast);
      done += take;
      in_step += take;
      if (in_step == budget) {
        steps.push_back(builder.build());
        in_step = 0;
      }
    }
  }
  if (in_step > 0) steps.push_back(builder.build());
  return steps;
}

// The host's MemAvailable, in bytes (0 when /proc/meminfo cannot be read).
int64_t host_available_bytes() {
  try {
    for (const std::string& line : split(read_file("/proc/meminfo"), '\n')) {
      if (!line.starts_with("MemAvailable:")) continue;
      std::vector<std::string> words = split(std::string(trim(line.substr(13))), ' ');
      int64_t kib = 0;
      if (!words.empty() && parse_int64(words[0], &kib)) return kib * 1024;
    }
  } catch (const Error&) {
  }
  return 0;
}

struct DecodeResult {
  int64_t batch = 0;
  double median_ms = 0, p10_ms = 0, p90_ms = 0;
  std::optional<double> eager_ms;  // the same step without graphs (when median_ms is with them)
  std::optional<double> overlapped_ms;  // per step, steps pipelined as the overlap scheduler runs them
  int64_t non_finite_logits = 0;
  StepRoofline roofline;
  Json breakdown;  // step_breakdown.h's, of one step as timed (null without CUPTI or a GPU)
};

// Greedy rows for every sequence of a decode step: what the engine asks of the device each step.
backend::SamplingBatch greedy_rows(int64_t batch) {
  backend::SamplingBatch sampling;
  for (int64_t i = 0; i < batch; ++i) {
    sampling.rows.emplace_back();
    sampling.history_start.push_back(0);
    sampling.banned_start.push_back(0);
  }
  return sampling;
}

// A decode step's forward pass as the engine runs it (runtime/executor.cc), the logits left on the
// device: the step's CUDA graph replayed when `graphs` has a bucket for it, else op by op.
// `previous`: the tokens its placeholders stand for (DeepseekModel::prepare), if any.
Tensor decode_logits(const model::DeepseekModel& model, model::LatentCache& cache, model::DecodeGraphs* graphs,
                     const model::ForwardBatch& step, const Tensor* previous = nullptr) {
  std::optional<Tensor> replayed = graphs ? graphs->logits(step, previous) : std::nullopt;
  return replayed ? *replayed : model.forward_on_device(step, cache, previous).logits;
}

// One decode step: the forward pass, then the device-side sampler; only B tokens come back.
backend::SampledTokens decode_step(const model::DeepseekModel& model, model::LatentCache& cache,
                                   model::DecodeGraphs* graphs, const model::ForwardBatch& step,
                                   const backend::SamplingBatch& sampling) {
  Tensor logits = decode_logits(model, cache, graphs, step);
  return model.backend().sample_tokens(logits, sampling);
}

// Steps back to back as the engine's overlap scheduler runs them on a GPU (runtime/executor.cc): each
// step is queued before the previous one's tokens are waited for, and takes them as its inputs
// through placeholders resolved on the device. Returns the mean time per step over `steps` steps.
double time_overlapped(const model::DeepseekModel& model, model::LatentCache& cache, model::DecodeGraphs* graphs,
                       int64_t batch, int64_t context, int64_t steps) {
  backend::Backend& backend = model.backend();
  const model::ForwardBatch first = decode_batch(batch, context, model.config().vocab_size);
  model::ForwardBatch next = first;
  for (int64_t r = 0; r < batch; ++r) next.token_ids[r] = -static_cast<int32_t>(r) - 1;
  const backend::SamplingBatch sampling = greedy_rows(batch);
  std::deque<std::unique_ptr<backend::PendingTokens>> pending;
  Tensor previous;
  backend.synchronize();
  const Clock::time_point start = Clock::now();
  for (int64_t i = 0; i < steps; ++i) {
    Tensor logits = decode_logits(model, cache, graphs, i == 0 ? first : next, i == 0 ? nullptr : &previous);
    pending.push_back(backend.queue_sample_tokens(logits, sampling));
    previous = pending.back()->device_tokens();
    if (pending.size() == 2) {
      (void)pending.front()->wait();
      pending.pop_front();
    }
  }
  while (!pending.empty()) {
    (void)pending.front()->wait();
    pending.pop_front();
  }
  return seconds_since(start) * 1e3 / static_cast<double>(steps);
}

DecodeResult time_decode(const model::DeepseekModel& model, model::LatentCache& cache, model::DecodeGraphs* graphs,
                         int64_t batch, int64_t context, int64_t warmup, int64_t steps) {
  backend::Backend& backend = model.backend();
  const model::ForwardBatch step = decode_batch(batch, context, model.config().vocab_size);
  const backend::SamplingBatch sampling = greedy_rows(batch);
  for (int64_t i = 0; i < warmup; ++i) decode_step(model, cache, graphs, step, sampling);
  std::vector<double> ms;
  backend::SampledTokens sampled;
  for (int64_t i = 0; i < steps; ++i) {
    backend.synchronize();
    const Clock::time_point start = Clock::now();
    sampled = decode_step(model, cache, graphs, step, sampling);
    backend.synchronize();
    ms.push_back(seconds_since(start) * 1e3);
  }
  DSINFER_CHECK(sampled.tokens.numel() == batch, "decode step at batch ", batch, " sampled ",
                sampled.tokens.numel(), " tokens");
  DecodeResult out;
  out.batch = batch;
  out.median_ms = percentile(ms, 0.5);
  out.p10_ms = percentile(ms, 0.1);
  out.p90_ms = percentile(ms, 0.9);
  // Random weights and cache must still give finite logits; NaN or inf means a broken kernel.
  // Checked once more, untimed, with the logits brought back.
  model::ForwardResult result = model.forward(step, cache);
  const float* logits = result.logits.data<float>();
  for (int64_t i = 0; i < result.logits.numel(); ++i) out.non_finite_logits += std::isfinite(logits[i]) ? 0 : 1;
  return out;
}

// A speculative decoding step as the engine runs it when every sequence verifies N drafts: each of
// the `batch` sequences has its last token and N drafts at positions context..context + N, every
// row sampled, the MTP module drafting the next N. Median ms of `steps` after `warmup`.
double time_speculative(runtime::StepExecutor& executor, int64_t batch, int64_t context, int drafts, int64_t vocab,
                        int64_t warmup, int64_t steps) {
  const int64_t rows = 1 + drafts;
  const int64_t pages_per_sequence = ceil_div(context + rows + drafts, model::kPageSize);  // + the chain's slots
  model::BatchBuilder builder;
  runtime::SpeculativeStep step;
  std::vector<int32_t> pages(pages_per_sequence), piece(rows);
  for (int64_t b = 0; b < batch; ++b) {
    std::iota(pages.begin(), pages.end(), static_cast<int32_t>(b * pages_per_sequence));
    for (int64_t j = 0; j < rows; ++j) piece[j] = token_id(b * rows + j, vocab);
    builder.add(piece, static_cast<int32_t>(context), pages, model::LogitRows::kAll);
    runtime::SpeculativeStep::Sequence& s = step.sequences.emplace_back();
    s.first_row = static_cast<int32_t>(b * rows);
    s.drafts.assign(piece.begin() + 1, piece.end());
    s.room = 1 << 20;
    step.follow.insert(step.follow.end(), rows, runtime::SpeculativeStep::kFollowsSample);
  }
  const model::ForwardBatch forward = builder.build();
  const backend::SamplingBatch sampling = greedy_rows(batch * rows);
  std::vector<double> ms;
  for (int64_t i = 0; i < warmup + steps; ++i) {
    const Clock::time_point start = Clock::now();
    runtime::SpeculativeResult result = executor.run_speculative(forward, sampling, step);  // waits for the step
    if (i >= warmup) ms.push_back(seconds_since(start) * 1e3);
    DSINFER_CHECK(result.drafts.size() == static_cast<size_t>(batch) &&
                      result.drafts.front().size() == static_cast<size_t>(drafts),
                  "speculative step at batch ", batch, ": ", result.drafts.size(), " sequences drafted");
  }
  return percentile(ms, 0.5);
}

#ifdef DSINFER_HAS_CUDA
// Which kernels one decode step's time goes to (the step as time_decode times it), from CUPTI's
// records; printed, and null when libcupti cannot be loaded.
Json decode_breakdown(const model::DeepseekModel& model, model::LatentCache& cache, model::DecodeGraphs* graphs,
                      int64_t batch, int64_t context) {
  KernelActivity* activity = KernelActivity::get();
  if (activity == nullptr) return Json();
  const model::ForwardBatch step = decode_batch(batch, context, model.config().vocab_size);
  model.backend().synchronize();
  activity->begin();
  decode_step(model, cache, graphs, step, greedy_rows(batch));
  model.backend().synchronize();
  const StepBreakdown breakdown = fold_kernels(activity->kernels());
  print_breakdown(breakdown, str_cat("kernels of one decode step at batch ", batch), 16);
  return breakdown_json(breakdown);
}
#endif

// Seconds of the whole prefill (every step), the median of `runs` after one untimed run.
double time_prefill(const model::DeepseekModel& model, model::LatentCache& cache,
                    const std::vector<model::ForwardBatch>& steps, int64_t runs) {
  backend::Backend& backend = model.backend();
  for (const model::ForwardBatch& step : steps) model.forward(step, cache);
  std::vector<double> seconds;
  for (int64_t run = 0; run < runs; ++run) {
    backend.synchronize();
    const Clock::time_point start = Clock::now();
    for (const model::ForwardBatch& step : steps) model.forward(step, cache);
    backend.synchronize();
    seconds.push_back(seconds_since(start));
  }
  return percentile(seconds, 0.5);
}

Json optional_number(const std::optional<double>& value) { return value ? Json(*value) : Json(); }

std::string last_path_component(std::string path) {
  while (path.size() > 1 && path.back() == '/') path.pop_back();
  return path.substr(path.find_last_of('/') + 1);
}

int run(int argc, char** argv) {
  cli::Flags flags("model_step_bench --config DIR [flags]",
                   "Decode step time against its roofline, and prefill tokens/s, with dummy weights.");
  flags.add_string("config", "DIR", "directory with config.json (weights are random: load format dummy)", true);
  flags.add_int("num-layers", "decoder layers kept (0: all of the config's)", 0);
  flags.add_string("batches", "LIST", "decode batch sizes", false, "1,64,256");
  flags.add_int("context", "tokens already cached per decoding sequence", 2048);
  flags.add_string("prefill", "SxL", "prefill S sequences of L tokens (0: none)", false, "8x2048");
  flags.add_int("max-batched-tokens", "prefill tokens per step (0: the whole prefill in one step)", 0);
  flags.add_string("device", "DEVICE", "cpu, cuda or cuda:N", false, "cuda");
  flags.add_int("warmup", "untimed decode steps before the timed ones", 3);
  flags.add_int("steps", "timed decode steps per batch size", 20);
  flags.add_int("prefill-runs", "timed prefill runs (the median is reported)", 3);
  flags.add_double("reserve-gib", "GPU memory kept free beyond the cache, for activations", 8.0);
  flags.add_int("threads", "CPU threads (0: all)", 0);
  flags.add_int("fp8-gemv-max-rows", "GPU: FP8 linears with at most this many rows use the GEMV (default: the backend's)");
  flags.add_int("fp8-wgmma-max-rows",
                "GPU: FP8 linears with more rows than the GEMV takes and at most this many use our wgmma kernel; 0: "
                "cuBLASLt (default: the backend's)");
  flags.add_int("bf16-gemv-max-rows", "GPU: bf16 linears with at most this many rows use the GEMV (default: the "
                "backend's)");
  flags.add_int("mla-min-split-pages", "GPU: fewest cache pages an MLA decode chunk covers (default: the backend's)");
  flags.add_int("moe-gemv-max-rows", "GPU: experts with at most this many rows use the GEMV (default: the backend's)");
  flags.add_int("moe-fp8-mma-max-rows", "GPU: FP8 experts with 1..this many rows use the FP8-activation kernels "
                "(0: never; default: the backend's)");
  flags.add_int("moe-fp8-mma-min-rows", "GPU: ... and from this many rows, 1 or 2 (default: the backend's)");
  flags.add_bool("mla-mma-sync", "GPU: MLA decode on the mma.sync kernel instead of the WGMMA one");
  flags.add_bool("no-programmatic-gemv", "GPU: launch one-row bf16 products without programmatic dependencies");
  flags.add_bool("enforce-eager", "GPU: no CUDA graphs (by default decode steps replay graphs, and eager steps are "
                 "timed too)");
  flags.add_int("speculative", "also time the speculative decoding step verifying N drafts a sequence (1 to 3; 0: "
                "no)", 0);
  flags.add_string("kv-cache-dtype", "NAME", "how the latent cache stores its rows: auto (the compute dtype), fp8 "
                   "(fp8_e4m3) or fp8_ds_mla (--kv-cache-dtype of serve)", false, "auto");
  flags.add_int("w4a8-experts", "routed experts as int4 (W4A8) in groups of this many columns with AWQ factors, as "
                "dsinfer quantize --method w4a8 --awq writes them (0: the config's stored format)", 0);
  flags.add_string("out", "FILE", "result JSON (default bench/results/model_step_<config>[_kv-<dtype>][_w4a8]_<device>"
                   ".json)");
  if (!flags.parse(argc - 1, argv + 1)) return 0;

  const std::string config_dir = flags.get_string("config");
  const std::string device = flags.get_string("device");
  const int64_t context = flags.get_int("context");
  const int64_t warmup = flags.get_int("warmup"), steps = flags.get_int("steps");
  const int64_t prefill_runs = flags.get_int("prefill-runs");
  const int64_t max_batched_tokens = flags.get_int("max-batched-tokens");
  const PrefillShape prefill = parse_prefill(flags.get_string("prefill"));
  std::vector<int64_t> batches;
  for (int32_t b : parse_int_list(flags.get_string("batches"), "--batches")) {
    DSINFER_CHECK(b > 0, "--batches: batch sizes must be positive, got ", b);
    batches.push_back(b);
  }
  DSINFER_CHECK(!batches.empty(), "--batches: give at least one batch size");
  DSINFER_CHECK(context > 0, "--context must be positive");
  DSINFER_CHECK(warmup >= 0 && steps > 0 && prefill_runs > 0, "--warmup must be >= 0, --steps and --prefill-runs > 0");
  DSINFER_CHECK(max_batched_tokens >= 0, "--max-batched-tokens must be >= 0");
  const int drafts = static_cast<int>(flags.get_int("speculative"));
  DSINFER_CHECK(drafts >= 0 && drafts <= 3, "--speculative must be 0 to 3 draft tokens, not ", drafts);
  if (flags.get_int("threads") > 0) set_num_threads(static_cast<int>(flags.get_int("threads")));
  const int64_t max_batch = *std::max_element(batches.begin(), batches.end());

  std::unique_ptr<backend::Backend> backend;
#ifdef DSINFER_HAS_CUDA
  if (device != "cpu") {
    backend::make_backend(device).reset();  // checks the name and the GPU
    backend::cuda::CudaOptions cuda_options;
    cuda_options.device = device.size() > 5 ? std::stoi(device.substr(5)) : 0;
    if (flags.has("fp8-gemv-max-rows")) cuda_options.fp8_gemv_max_rows = flags.get_int("fp8-gemv-max-rows");
    if (flags.has("fp8-wgmma-max-rows")) cuda_options.fp8_wgmma_max_rows = flags.get_int("fp8-wgmma-max-rows");
    if (flags.has("bf16-gemv-max-rows")) cuda_options.bf16_gemv_max_rows = flags.get_int("bf16-gemv-max-rows");
    if (flags.has("mla-min-split-pages"))
      cuda_options.mla_min_split_pages = static_cast<int>(flags.get_int("mla-min-split-pages"));
    if (flags.has("moe-gemv-max-rows"))
      cuda_options.moe_gemv_max_rows = static_cast<int>(flags.get_int("moe-gemv-max-rows"));
    cuda_options.mla_wgmma = !flags.get_bool("mla-mma-sync");
    cuda_options.programmatic_gemv = !flags.get_bool("no-programmatic-gemv");
    if (flags.has("moe-fp8-mma-max-rows"))
      cuda_options.moe_fp8_mma_max_rows = static_cast<int>(flags.get_int("moe-fp8-mma-max-rows"));
    if (flags.has("moe-fp8-mma-min-rows"))
      cuda_options.moe_fp8_mma_min_rows = static_cast<int>(flags.get_int("moe-fp8-mma-min-rows"));
    backend = backend::cuda::make_cuda_backend(cuda_options);
  }
#endif
  if (!backend) backend = backend::make_backend(device);
  const bool on_gpu = backend->device() == Device::kCuda;
  std::optional<Ceilings> ceilings;
  std::string device_name = on_gpu ? device : cpu_device();
#ifdef DSINFER_HAS_CUDA
  if (on_gpu) {
    const int index = device.size() > 5 ? std::stoi(device.substr(5)) : 0;  // "cuda:N" (make_backend checked it)
    device_name = gpu_device_name(index);
    std::printf("%s\nmeasuring the ceilings (copy 2 GiB, BF16 and FP8 GEMM 8192^3) ...\n", device_name.c_str());
    std::fflush(stdout);
    ceilings = measure_ceilings(index);
    std::printf("ceilings: copy %.2f TB/s, BF16 GEMM %.0f TFLOP/s, FP8 GEMM %.0f TFLOP/s\n", ceilings->copy_tb_s,
                ceilings->bf16_tflops, ceilings->fp8_tflops);
  }
#endif
  if (!ceilings) std::printf("ceilings: absent on %s (roofline times and ratios are not reported)\n", device.c_str());

  // The model, dummy weights made on the device.
  const int64_t free_before_load = on_gpu ? backend->memory_info().free_bytes : 0;
  model::ModelOptions options;
  options.load_format = model::LoadFormat::kDummy;
  options.num_layers = flags.get_int("num-layers");
  options.cache_format = model::parse_cache_format(flags.get_string("kv-cache-dtype"));
  options.dummy_int4_group_size = flags.get_int("w4a8-experts");
  DSINFER_CHECK(options.dummy_int4_group_size >= 0, "--w4a8-experts must be a group size (0: off), not ",
                options.dummy_int4_group_size);
  Clock::time_point load_start = Clock::now();
  std::unique_ptr<model::DeepseekModel> model = model::DeepseekModel::load(config_dir, *backend, options);
  backend->synchronize();
  const double load_seconds = seconds_since(load_start);
  const io::ModelConfig& config = model->config();
  int64_t moe_layers = 0;
  for (int64_t i = 0; i < config.num_hidden_layers; ++i) moe_layers += config.is_moe_layer(i) ? 1 : 0;
  const bool fp8 = io::stored_format(config) == io::StoredFormat::kFp8Block;
  const int64_t int4_group = config.quantization.int4_group_size;
  const std::string experts = int4_group > 0 ? str_cat("int4 (W4A8, groups of ", int4_group, ", AWQ factors)")
                                             : std::string(fp8 ? "FP8-block" : "bf16");
  std::printf("model: %s (%s), %lld layers (%lld dense + %lld MoE) + %d MTP, %s dummy weights, routed experts %s, "
              "loaded in %.1f s\n",
              config_dir.c_str(), config.model_type.c_str(), static_cast<long long>(config.num_hidden_layers),
              static_cast<long long>(config.num_hidden_layers - moe_layers), static_cast<long long>(moe_layers),
              model->num_mtp_modules(), fp8 ? "FP8-block" : "bf16", experts.c_str(), load_seconds);
  DSINFER_CHECK(context + 1 <= model->max_positions(), "--context ", context,
                ": the new token's position must be below the model's ", model->max_positions(), " positions");
  DSINFER_CHECK(prefill.length <= model->max_positions(), "--prefill ", prefill.sequences, "x", prefill.length,
                ": a prompt may have at most the model's ", model->max_positions(), " positions");

  // The latent cache: every decoding sequence's context + 1 tokens, then the prefill's, in pages of
  // their own; filled with random values so that decode reads a realistic context.
  const int64_t decode_pages = max_batch * ceil_div(context + 1, model::kPageSize);
  const int64_t prefill_pages = prefill.sequences * ceil_div(prefill.length, model::kPageSize);
  const int64_t pages = decode_pages + prefill_pages + 1;  // + the graphs' scratch page
  const int64_t cache_bytes = pages * model->page_bytes();
  std::string fits;
  if (on_gpu) {
    backend::Backend::MemoryInfo memory = backend->memory_info();
    const int64_t available = memory.free_bytes + memory.cached_bytes;
    const auto reserve = static_cast<int64_t>(flags.get_double("reserve-gib") * kGiB);
    std::printf("weights: %.2f GiB on the GPU\n", static_cast<double>(free_before_load - memory.free_bytes) / kGiB);
    DSINFER_CHECK(cache_bytes + reserve <= available, "the latent cache (", pages, " pages x ",
                  model->num_cache_layers(), " layers = ", static_cast<double>(cache_bytes) / kGiB,
                  " GiB) and --reserve-gib ", flags.get_double("reserve-gib"), " for activations do not fit the ",
                  static_cast<double>(available) / kGiB,
                  " GiB the GPU has left after the weights: lower --batches, --context, --prefill or --num-layers");
    fits = str_cat("fits: ", static_cast<double>(available) / kGiB, " GiB free after the weights");
  } else {
    const int64_t available = host_available_bytes();
    DSINFER_CHECK(available == 0 || cache_bytes <= available, "the latent cache (",
                  static_cast<double>(cache_bytes) / kGiB, " GiB) does not fit the host's ",
                  static_cast<double>(available) / kGiB, " GiB available: lower --batches, --context or --prefill");
    fits = available == 0 ? std::string("host memory not checked")
                          : str_cat("fits: ", static_cast<double>(available) / kGiB, " GiB available on the host");
  }
  model::LatentCache cache = model->make_cache(pages);
  for (int64_t layer = 0; layer < cache.num_layers(); ++layer)
    backend->fill_uniform(cache.layer(layer), 0xcac4e000 + static_cast<uint64_t>(layer), -1.0f, 1.0f);
  backend->synchronize();
  std::printf("cache: %lld pages x %lld layers, %.3f GiB %s (%s)\n", static_cast<long long>(pages),
              static_cast<long long>(cache.num_layers()), static_cast<double>(cache_bytes) / kGiB,
              std::string(dtype_name(model->cache_dtype())).c_str(), fits.c_str());

  // CUDA graphs for every decode batch size (captured here, after the cache exists).
  std::unique_ptr<model::DecodeGraphs> graphs;
  if (on_gpu && !flags.get_bool("enforce-eager")) {
    Clock::time_point capture_start = Clock::now();
    graphs = std::make_unique<model::DecodeGraphs>(
        *model, cache, model::DecodeGraphOptions{static_cast<int>(max_batch), static_cast<int32_t>(pages - 1)});
    std::printf("graphs: %zu buckets captured in %.2f s, %.1f MiB graph pool\n", graphs->buckets().size(),
                seconds_since(capture_start), static_cast<double>(backend->memory_info().graph_pool_bytes) / (1 << 20));
  }

  // Decode.
  const WeightCensus census = count_weights(config);
  const size_t cache_element_bytes = dtype_size(model->cache_dtype());
  std::vector<DecodeResult> decodes;
  std::printf("\ndecode at context %lld: median of %lld steps (p10, p90), host clock around forward + device sampling\n",
              static_cast<long long>(context), static_cast<long long>(steps));
  std::printf("%6s %10s %9s %9s %9s %9s %10s %11s %9s %8s %10s %11s %7s\n", "batch", "step ms", "p10 ms", "p90 ms",
              "eager ms", "overlap", "tokens/s", "weights GB", "cache GB", "TFLOP", "logits MB", "roofline ms", "ratio");
  for (int64_t batch : batches) {
    DecodeResult result = time_decode(*model, cache, graphs.get(), batch, context, warmup, steps);
    if (graphs) result.eager_ms = time_decode(*model, cache, nullptr, batch, context, warmup, steps).median_ms;
    if (on_gpu) result.overlapped_ms = time_overlapped(*model, cache, graphs.get(), batch, context, steps);
    result.roofline = decode_roofline(census, config, batch, context, cache_element_bytes, ceilings);
    const StepRoofline& r = result.roofline;
    char roofline_text[32] = "-", ratio_text[32] = "-";
    if (r.ms) {
      std::snprintf(roofline_text, sizeof(roofline_text), "%.3f", *r.ms);
      std::snprintf(ratio_text, sizeof(ratio_text), "%.2f", result.median_ms / *r.ms);
    }
    char eager_text[32] = "-", overlapped_text[32] = "-";
    if (result.eager_ms) std::snprintf(eager_text, sizeof(eager_text), "%.3f", *result.eager_ms);
    if (result.overlapped_ms) std::snprintf(overlapped_text, sizeof(overlapped_text), "%.3f", *result.overlapped_ms);
    std::printf("%6lld %10.3f %9.3f %9.3f %9s %9s %10.1f %11.3f %9.3f %8.3f %10.2f %11s %7s\n",
                static_cast<long long>(batch), result.median_ms, result.p10_ms, result.p90_ms, eager_text, overlapped_text,
                static_cast<double>(batch) / result.median_ms * 1e3,
                r.weight_bytes / 1e9, r.cache_bytes / 1e9, r.flops / 1e12,
                static_cast<double>(batch * config.vocab_size * 4) / 1e6, roofline_text, ratio_text);
    if (result.non_finite_logits > 0) {
      std::fprintf(stderr, "warning: batch %lld: %lld logits are NaN or inf\n", static_cast<long long>(batch),
                   static_cast<long long>(result.non_finite_logits));
    }
    decodes.push_back(result);
  }

  // The speculative step, on an executor of its own (its cache and graphs).
  std::vector<double> speculative_ms;
  if (drafts > 0) {
    DSINFER_CHECK(model->num_mtp_modules() > 0,
                  "--speculative needs the config's MTP module (num_nextn_predict_layers)");
    runtime::ExecutorOptions executor_options;
    executor_options.cuda_graph_max_batch = graphs ? static_cast<int>(max_batch) : 0;
    executor_options.speculative.num_tokens = drafts;
    const int64_t spec_pages = max_batch * ceil_div(context + 1 + 2 * drafts, model::kPageSize);
    std::unique_ptr<runtime::StepExecutor> executor =
        runtime::make_model_executor(*model, spec_pages, executor_options);
    model::LatentCache& spec_cache = *executor->cache_access().cache;
    for (int64_t layer = 0; layer < spec_cache.num_layers(); ++layer)
      backend->fill_uniform(spec_cache.layer(layer), 0x5bec0000 + static_cast<uint64_t>(layer), -1.0f, 1.0f);
    std::printf("\nspeculative decoding, %d draft(s) a sequence: median of %lld steps (verification, sampling, the MTP "
                "passes, one wait); x decode is the acceptance length at which drafting breaks even\n%6s %14s %9s\n",
                drafts, static_cast<long long>(steps), "batch", "speculative ms", "x decode");
    for (size_t i = 0; i < batches.size(); ++i) {
      speculative_ms.push_back(
          time_speculative(*executor, batches[i], context, drafts, config.vocab_size, warmup, steps));
      std::printf("%6lld %14.3f %9.2f\n", static_cast<long long>(batches[i]), speculative_ms.back(),
                  speculative_ms.back() / decodes[i].median_ms);
    }
  }

  // Prefill.
  std::optional<double> prefill_seconds;
  size_t prefill_step_count = 0;
  if (prefill.tokens() > 0) {
    const std::vector<model::ForwardBatch> prefill_batches =
        prefill_steps(prefill, max_batched_tokens, decode_pages, config.vocab_size);
    prefill_step_count = prefill_batches.size();
    prefill_seconds = time_prefill(*model, cache, prefill_batches, prefill_runs);
    std::printf("\nprefill %lld x %lld tokens in %zu step(s): %.2f ms, %.0f tokens/s (median of %lld runs)\n",
                static_cast<long long>(prefill.sequences), static_cast<long long>(prefill.length), prefill_step_count,
                *prefill_seconds * 1e3, static_cast<double>(prefill.tokens()) / *prefill_seconds,
                static_cast<long long>(prefill_runs));
  }

#ifdef DSINFER_HAS_CUDA
  // After every timed step and the prefill: recording the activity slows the launches the timings count.
  if (on_gpu)
    for (DecodeResult& result : decodes)
      result.breakdown = decode_breakdown(*model, cache, graphs.get(), result.batch, context);
#endif

  // The result file.
  Json result;
  result["benchmark"] = "model_step";
  result["device"] = device_name;
  Json run_config;
  run_config["config"] = config_dir;
  run_config["model_type"] = config.model_type;
  run_config["num_layers"] = config.num_hidden_layers;
  run_config["moe_layers"] = moe_layers;
  run_config["weights"] = fp8 ? "dummy, FP8 128x128 blocks as the checkpoint stores them" : "dummy, bf16";
  run_config["routed_experts"] = experts;
  run_config["kv_cache_dtype"] = std::string(model::cache_format_name(model->cache_format()));
  run_config["device_option"] = device;
  for (const char* knob : {"fp8-gemv-max-rows", "fp8-wgmma-max-rows", "bf16-gemv-max-rows", "moe-gemv-max-rows", "mla-min-split-pages",
                           "moe-fp8-mma-max-rows", "moe-fp8-mma-min-rows"})
    if (flags.has(knob)) run_config[knob] = flags.get_int(knob);
  if (flags.get_bool("mla-mma-sync")) run_config["mla-mma-sync"] = true;
  if (flags.get_bool("no-programmatic-gemv")) run_config["no-programmatic-gemv"] = true;
  Json batch_list = Json::array();
  for (int64_t batch : batches) batch_list.push_back(batch);
  run_config["batches"] = batch_list;
  run_config["context"] = context;
  run_config["prefill"] = str_cat(prefill.sequences, "x", prefill.length);
  run_config["max_batched_tokens"] = max_batched_tokens;
  run_config["prefill_steps"] = static_cast<int64_t>(prefill_step_count);
  run_config["warmup_steps"] = warmup;
  run_config["timed_steps"] = steps;
  run_config["cache_pages"] = pages;
  run_config["cache_bytes"] = cache_bytes;
  run_config["cache_dtype"] = std::string(dtype_name(model->cache_dtype()));
  run_config["cuda_graphs"] = graphs != nullptr;
  if (drafts > 0) run_config["speculative_drafts"] = drafts;
  run_config["timing"] =
      "host steady_clock around one decode step as the engine runs it (the CUDA graph of its bucket replayed when "
      "cuda_graphs, then device-side greedy sampling; B tokens come back), backend.synchronize() before and after; "
      "decode_eager_ms: the same step launched op by op; decode_overlapped_ms: the mean over --steps steps run back to "
      "back as the overlap scheduler runs them (each queued before the previous one's tokens are waited for, its "
      "inputs those tokens through placeholders resolved on the device)";
  if (!on_gpu) run_config["threads"] = num_threads();
  result["config"] = run_config;

  Json figures, anchor, per_batch = Json::array();
  anchor["name"] = "roofline: max(bytes / copy bandwidth, FLOPs / FP8 GEMM peak), ceilings of this run";
  for (const DecodeResult& d : decodes) {
    const std::string b = std::to_string(d.batch);
    figures["decode_ms_b" + b] = d.median_ms;
    figures["decode_p10_ms_b" + b] = d.p10_ms;
    figures["decode_p90_ms_b" + b] = d.p90_ms;
    if (d.eager_ms) figures["decode_eager_ms_b" + b] = *d.eager_ms;
    if (d.overlapped_ms) figures["decode_overlapped_ms_b" + b] = *d.overlapped_ms;
    figures["roofline_ms_b" + b] = optional_number(d.roofline.ms);
    figures["ratio_b" + b] = d.roofline.ms ? Json(d.median_ms / *d.roofline.ms) : Json();  // measured / roofline
    anchor["decode_ms_b" + b] = optional_number(d.roofline.ms);
    Json detail;
    detail["batch"] = d.batch;
    detail["weight_bytes"] = d.roofline.weight_bytes;
    detail["cache_bytes"] = d.roofline.cache_bytes;
    detail["bytes"] = d.roofline.bytes();
    detail["flops"] = d.roofline.flops;
    detail["roofline_ms"] = optional_number(d.roofline.ms);
    detail["logits_to_host_bytes"] = d.batch * config.vocab_size * 4;
    detail["non_finite_logits"] = d.non_finite_logits;
    if (!d.breakdown.is_null()) result["breakdown_b" + b] = d.breakdown;
    per_batch.push_back(detail);
  }
  anchor["decode_steps"] = per_batch;
  for (size_t i = 0; i < speculative_ms.size(); ++i) {
    const std::string b = std::to_string(batches[i]);
    figures["speculative_ms_b" + b] = speculative_ms[i];
    // The mean acceptance length at which drafting breaks even with the decode step.
    figures["speculative_vs_decode_b" + b] = speculative_ms[i] / decodes[i].median_ms;
  }
  if (prefill_seconds) {
    figures["prefill_tokens_per_s"] = static_cast<double>(prefill.tokens()) / *prefill_seconds;
    figures["prefill_ms"] = *prefill_seconds * 1e3;
  }
  Json ceiling_figures;
  if (ceilings) {
    ceiling_figures["copy_tb_s"] = ceilings->copy_tb_s;
    ceiling_figures["bf16_tflops"] = ceilings->bf16_tflops;
    ceiling_figures["fp8_tflops"] = ceilings->fp8_tflops;
  }
  figures["ceilings"] = ceiling_figures;  // null on the CPU
  anchor["ceilings"] = ceiling_figures;
  result["figures"] = figures;
  result["anchor"] = anchor;

  std::string out = flags.has("out") ? flags.get_string("out") : "";
  if (out.empty()) {
    const std::string tag = on_gpu ? gpu_tag(device_name, "cuda") : "cpu";
    const std::string kv = model->cache_format() == model::CacheFormat::kCompute
                               ? ""
                               : str_cat("_kv-", model::cache_format_name(model->cache_format()));
    out = str_cat("bench/results/model_step_", last_path_component(config_dir), kv, int4_group > 0 ? "_w4a8" : "", "_",
                  tag, ".json");
  }
  write_result(out, result);
  return 0;
}

}  // namespace
}  // namespace dsinfer::bench

int main(int argc, char** argv) {
  return dsinfer::bench::run_benchmark("model_step_bench", dsinfer::bench::run, argc, argv);
}
