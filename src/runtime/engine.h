// The serving engine: in-flight batching of many requests over one model.
//
// One engine thread runs the loop: take new requests and aborts, ask the scheduler for the next
// step (decode tokens first, then prefill chunks, within a token budget and the free KV pages),
// build the step's batch, run the model, sample, and hand each request's new token to the output
// thread, which detokenizes, applies stop strings and calls the request's sink.
// submit() and abort() are thread-safe and return at once.
//
// A step that throws fails its own requests; a FatalDeviceError (step_error.h) fails them all and
// leaves the engine unhealthy: healthy() turns false and submit() throws EngineUnavailable.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "core/error.h"
#include "model/deepseek_model.h"
#include "runtime/disaggregation.h"
#include "runtime/executor.h"
#include "runtime/host_kv_tier.h"
#include "runtime/metrics.h"
#include "runtime/request.h"
#include "runtime/speculative.h"
#include "tokenizer/tokenizer.h"

namespace dsinfer::runtime {

class ShardedModel;

struct EngineConfig {
  int64_t max_num_seqs = 256;             // sequences in a step at most
  int64_t max_num_batched_tokens = 2048;  // tokens in a step at most (decode + prefill chunks)
  int64_t max_model_len = 0;              // context per sequence; 0: the model's
  int64_t num_pages = 0;                  // KV pages of 64 tokens; 0: from kv_cache_bytes
  int64_t kv_cache_bytes = int64_t{2} << 30;  // when num_pages is 0: this much, or max_num_seqs full contexts if less
  double watermark = 0.01;                // fraction of pages kept free when admitting new requests
  bool enable_prefix_caching = true;
  HostKvConfig host_kv_cache;             // issue 14: the host tier under the prefix cache (host_kv_tier.h); off
  double arrival_window_ms = 50.0;        // waiting prompts shortest-first within windows this long
  uint64_t seed = 0;                      // for requests without their own seed
  int64_t cuda_graph_max_batch = 256;     // decode steps up to this many sequences (and max_num_seqs)
                                          // replay CUDA graphs on a GPU; 0: eager
  // Plan and launch step N + 1 while the device runs step N, when the executor can (a GPU); its
  // decoding sequences' inputs are placeholders that the device resolves. Off: each step's tokens
  // are collected before the next is planned (SGLang's --disable-overlap-schedule).
  bool overlap_schedule = true;
  // Speculative decoding with the model's MTP modules (speculative.h); off unless num_tokens > 0.
  SpeculativeConfig speculative;
  // Prefill/decode disaggregation (disaggregation.h, kv_handoff.h); off unless mode is set. Needs the
  // model on one rank.
  DisaggregationConfig disaggregation;
};

// A request the engine refuses outright (the server answers 400 with `param`).
// The part of a request the engine refuses, in the engine's own terms; the server names the field
// of its API that carried it.
enum class RequestPart : uint8_t {
  kPrompt, kTokenBudget, kLogprobs, kPromptLogprobs, kLogitBias, kConstraint,
  kKvHandoff,  // RequestOptions::kv_handoff (SGLang's bootstrap_host/port/room)
};

class InvalidRequest : public Error {
 public:
  InvalidRequest(const std::string& message, RequestPart part) : Error(message), part_(part) {}
  RequestPart part() const { return part_; }

 private:
  RequestPart part_;
};

// submit() on an engine that failed for good (the message says why); the server answers 503.
class EngineUnavailable : public Error {
 public:
  using Error::Error;
};

struct EngineStats {
  int64_t running = 0;
  int64_t waiting = 0;
  int64_t total_pages = 0;
  int64_t page_groups = 1;      // DP attention: the pool's groups, a sequence in one (page_pool.h)
  int64_t free_pages = 0;       // not held by any sequence (cached-but-unreferenced pages count as free)
  int64_t cached_pages = 0;     // held by the prefix cache
  int64_t prefix_queries = 0;   // prompt tokens looked up in the prefix cache
  int64_t prefix_hits = 0;      // of which found
  int64_t preemptions = 0;
  int64_t steps = 0;
  int64_t graph_steps = 0;      // of which a decode graph replayed (StepExecutor::graph_steps)
  int64_t kv_pushes = 0;        // disaggregation, prefill side: prompts pushed to a decode instance
  int64_t kv_layerwise_pushes = 0;  // of which layer by layer
  HostKvStats host_kv;          // issue 14 (host_kv_tier.h); its hit tokens are in prefix_hits too
};

class Engine {
 public:
  // Serves `model` with a KV cache sized by config.
  Engine(const model::DeepseekModel& model, const tokenizer::Tokenizer& tokenizer, EngineConfig config);
  // Serves a model held by several ranks (tensor and expert parallelism); config sizes each rank's cache.
  Engine(ShardedModel& model, const tokenizer::Tokenizer& tokenizer, EngineConfig config);
  // Serves through any executor (tests and benchmarks use a stand-in model).
  Engine(std::unique_ptr<StepExecutor> executor, const tokenizer::Tokenizer& tokenizer, EngineConfig config);
  ~Engine();  // stops the loop; requests still in flight finish with FinishReason::kAbort
  Engine(const Engine&) = delete;
  Engine& operator=(const Engine&) = delete;

  // Validates and queues a request. Throws InvalidRequest (prompt empty, too long for the context,
  // ids outside the vocabulary, bad options, a logit_bias token outside the vocabulary, a grammar
  // compiled for another vocabulary, a kv_handoff this engine's mode does not take), or
  // EngineUnavailable once the engine has failed.
  // The sink receives StreamOutputs on the engine's output thread, in order.
  RequestId submit(std::vector<int32_t> prompt, RequestOptions options, StreamSink sink);
  // Ends a request early; its sink gets a last output with FinishReason::kAbort. Unknown or already
  // finished ids are ignored.
  void abort(RequestId id);

  // Prefill/decode disaggregation (disaggregation.h). A prefill engine takes the destination of a
  // room here (the server's bootstrap endpoint): thread-safe, returns at once. It may come before or
  // after the room's request; one that no request takes expires after bootstrap_timeout. Throws
  // dsinfer::Error on an engine of another mode.
  void add_kv_destination(KvDestination destination);
  // Where peers write into this engine's cache (its agent's address, its cache's description).
  // Throws dsinfer::Error on an engine that does not disaggregate.
  KvEndpoint kv_endpoint() const;

  // False once a FatalDeviceError (or an error in the engine's own bookkeeping) has failed every
  // request; it stays false. fatal_error() says why ("" while healthy).
  bool healthy() const;
  std::string fatal_error() const;

  EngineStats stats() const;
  // SGLang's /flush_cache (issue 12): on the engine thread, drops every prefix-cache page, but only
  // when no request is running or waiting. Blocks until the engine thread has looked (at most one
  // step). True when the cache is empty now (or prefix caching is off); false, flushing nothing,
  // when requests were in flight or the engine is shutting down.
  bool flush_prefix_cache();
  // The engine thread's CPU time per step outside the executor's launch and collect calls
  // (scheduling, batch building, bookkeeping, handing outputs over), averaged over the steps since
  // the last call; microseconds. The output thread's work is not in it, nor time the thread spent
  // descheduled.
  double take_overhead_us();
  Metrics& metrics();
  int64_t max_model_len() const;
  // The model's logit width, and the tokens that end a request (unless ignore_eos): what a grammar
  // for RequestOptions::constraint is compiled against.
  int64_t vocab_size() const;
  const std::vector<int32_t>& eos_token_ids() const;
  const EngineConfig& config() const;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace dsinfer::runtime
