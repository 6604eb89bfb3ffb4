// What the engine runs each step: a model with its KV cache behind one call, so the engine's
// scheduling and bookkeeping can be tested and timed with a stand-in model.
#pragma once

#include <algorithm>
#include <cstdint>
#include <deque>
#include <functional>
#include <memory>
#include <vector>

#include "backend/backend.h"
#include "model/deepseek_model.h"
#include "runtime/request.h"
#include "runtime/speculative.h"

namespace dsinfer::runtime {

// The context a run serves, stated once: the requested --max-model-len when one is given (> 0),
// never past what the model supports.
inline int64_t served_context(int64_t requested, int64_t model_limit) {
  return requested > 0 ? std::min(requested, model_limit) : model_limit;
}

// Steps launched and not collected at most (StepExecutor::launch): the one the device runs and the
// one queued behind it.
inline constexpr size_t kMaxLaunchedSteps = 2;

// Speculative decoding (speculative.h): what the engine tells the executor about a step's sampled
// sequences, and what it gets back.
struct SpeculativeStep {
  // The token after each token row of the batch, or kFollowsSample where it is the token the step
  // emits at that row (a sampled piece's last row, every row of a piece with drafts): what the MTP
  // module takes with the row's hidden state.
  static constexpr int32_t kFollowsSample = -1;
  std::vector<int32_t> follow;  // [T]
  struct Sequence {
    int32_t first_row = 0;        // its first sampling row: it has 1 + drafts.size() rows from there
    std::vector<int32_t> drafts;  // verified by this step (they follow its last token in the batch)
    std::vector<uint8_t> relaxed; // per draft: relaxed acceptance applies there (a reasoning section)
    // Tokens it may still gain, this step's included (max_length - its tokens); 0: draft nothing
    // for the next step (the request's rows cannot take drafts: penalties, grammars, min_tokens).
    int64_t room = 0;
  };
  std::vector<Sequence> sequences;  // in sampling-row order
};

struct SpeculativeResult {
  backend::SampledTokens sampled;            // every sampling row's token (and logprobs)
  std::vector<Acceptance> accepted;          // per sequence: what it keeps of its drafts and gains
  std::vector<std::vector<int32_t>> drafts;  // per sequence: the next step's drafts
};

// The latent cache an executor runs on and the backend that holds it.
struct CacheAccess {
  backend::Backend* backend = nullptr;
  model::LatentCache* cache = nullptr;
};

class StepExecutor {
 public:
  virtual ~StepExecutor() = default;
  // Runs one step and samples a token for each of batch.logit_rows as `sampling` says (one row
  // each, in order): penalties, banned tokens, temperature/top-k/top-p/min-p, seeded draws and
  // logprobs all happen where the logits are, and only tokens (and logprobs when asked) come back
  // (DESIGN.md, "The device step", item 4).
  virtual backend::SampledTokens run(const model::ForwardBatch& batch, const backend::SamplingBatch& sampling) = 0;

  // The overlap scheduler's form (DESIGN.md, "The device step", item 5): launch queues a step and
  // returns without waiting for it; collect waits for the oldest launched step and returns its
  // tokens. At most two steps are launched and not collected. In a launched batch, a token id
  // -(r + 1) is a placeholder for row r of the tokens that the step launched just before sampled;
  // the executor resolves it where those tokens are. overlaps() is false when launch cannot return
  // before its step is done: the engine then collects each step before planning the next and sends
  // no placeholders. The defaults are that: launch runs the step, collect hands its tokens back.
  virtual bool overlaps() const { return false; }
  virtual void launch(const model::ForwardBatch& batch, const backend::SamplingBatch& sampling);
  virtual backend::SampledTokens collect();
  // vLLM's prompt_logprobs: the scores of batch.scored_rows of the step that collect() (or run())
  // returned last, one per row in their order (prompt_scores.h). An executor that cannot score
  // (the tests' stand-in models) returns none, and the engine fails the step that asked.
  virtual std::vector<PromptLogprob> take_scores() { return {}; }
  // Speculative decoding: whether run_speculative works (the model with its MTP modules, and
  // ExecutorOptions::speculative on).
  virtual bool can_draft() const { return false; }
  // One speculative step, run to its end (never overlapped): the batch, every sampling row sampled,
  // each sequence's drafts accepted or not, and the next drafts made by the MTP module from the
  // tokens the step emits. The default throws: this executor cannot draft.
  virtual SpeculativeResult run_speculative(const model::ForwardBatch& batch, const backend::SamplingBatch& sampling,
                                            const SpeculativeStep& step);
  // Steps that replayed a decode graph so far (on a sharded model: on the rank that replayed most).
  virtual int64_t graph_steps() const { return 0; }
  // Captures the decode graphs anew, with no step running on the device: the weights they read
  // have moved (EPLB's rebalancing). Nothing to do without graphs.
  virtual void recapture_graphs() {}

  // Prefill/decode disaggregation (kv_handoff.h): the latent cache whose pages the pool's ids name,
  // for the transfer agent to register; null where there is none to register (a stand-in model; a
  // sharded model, whose every rank holds a cache of its own).
  virtual model::LatentCache* kv_cache() { return nullptr; }
  // How many cache layers ForwardBatch::after_layer reports, layer 0 first, each once the step's
  // rows of it are queued (on the CPU: written, ops run as they are called); 0 where it reports none
  // (a sharded model, whose ranks each write a cache of their own).
  virtual int64_t reported_layers() const { return 0; }
  // A mark after the device work queued so far (Backend::mark_work), for the host to poll: from
  // after_layer, it is reached once the layer's rows are written. Null where that work has run (the
  // CPU) or where there is no one backend.
  virtual std::unique_ptr<backend::WorkMark> mark_work() { return nullptr; }
  // Backend::set_wait_poll of its backend: `poll` runs while the executor waits for a step's tokens,
  // as long as it returns true.
  virtual void set_wait_poll(std::function<bool()> poll) {}

  virtual int64_t vocab_size() const = 0;
  virtual int64_t max_model_len() const = 0;
  virtual int64_t num_pages() const = 0;
  // The pages fall into this many groups of num_pages() / page_groups() consecutive ids, and a
  // sequence's pages all lie in one (DP attention: a group's pages are its ranks' caches).
  virtual int64_t page_groups() const { return 1; }
  virtual std::vector<int32_t> eos_token_ids() const = 0;
  // Its one latent cache, for copies of whole pages in and out between steps (the host KV tier,
  // host_kv_tier.h: copies queued on the backend run in order with the steps); empty where there is
  // none (the tests' stand-in models; a sharded model, whose ranks hold a cache each).
  virtual CacheAccess cache_access() { return {}; }

 private:
  std::deque<backend::SampledTokens> ran_;  // the default launch's results, oldest first
};

struct ExecutorOptions {
  // Decode steps of up to this many sequences replay CUDA graphs (model/decode_graphs.h) on a
  // backend that has them; 0: every step runs eagerly.
  int cuda_graph_max_batch = 0;
  // Speculative decoding with the model's MTP modules (on when num_tokens > 0).
  SpeculativeConfig speculative;
};

// Cache pages beyond the pool that the executor keeps: with graphs, one scratch page that no
// sequence owns, for the padding rows of graph buckets (the memory plan leaves room for it).
inline int64_t executor_scratch_pages(int64_t cuda_graph_max_batch) { return cuda_graph_max_batch > 0 ? 1 : 0; }

// The real thing: a DeepseekModel and a latent cache of `pages` pages, plus executor_scratch_pages.
std::unique_ptr<StepExecutor> make_model_executor(const model::DeepseekModel& model, int64_t pages,
                                                  const ExecutorOptions& options = {});

// Pages for a KV cache: enough for `sequences` contexts of `context` tokens, within `bytes`.
int64_t pages_for(const model::DeepseekModel& model, int64_t sequences, int64_t context, int64_t bytes);

}  // namespace dsinfer::runtime
