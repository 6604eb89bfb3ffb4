// The memory plan of a GPU engine (DESIGN.md "KV cache and scheduling"): what the device holds
// after the weights, minus the activation peak of the largest step (measured by a dry run of it),
// minus what --gpu-memory-utilization leaves to others, becomes KV pages. Printed at start-up; the
// engine then allocates nothing that was not counted, so it never runs out of memory later.
#pragma once

#include <cstdint>
#include <string>

#include "model/deepseek_model.h"

namespace dsinfer::runtime {

struct MemoryPlan {
  int64_t total_bytes = 0;       // the device
  int64_t weights_bytes = 0;     // in use after loading (weights, rotary table, library workspaces)
  int64_t activation_bytes = 0;  // the dry run's peak, kept for the steps
  int64_t graph_bytes = 0;       // the CUDA graphs' pool: the decode dry run's peak (graphs record a decode step)
  int64_t reserved_bytes = 0;    // (1 - gpu_memory_utilization) of the device
  int64_t kv_bytes = 0;          // what is left: the KV cache
  int64_t page_bytes = 0;        // one page over every cache layer
  int64_t pages = 0;
  std::string table() const;     // the start-up report
};

struct MemoryPlanInputs {
  double gpu_memory_utilization = 0.9;  // fraction of the device dsinfer may use
  int64_t max_num_batched_tokens = 2048;
  int64_t max_num_seqs = 256;
  int64_t max_model_len = 0;  // context of the dry run's prefill chunk (its expanded attention)
  int64_t cuda_graph_max_batch = 0;  // > 0: decode graphs will be captured (their pool, one scratch page)
  int speculative_tokens = 0;  // N > 0: decode steps verify N drafts a sequence (1 + N rows each)
};

// Runs the dry run (a decode step of max_num_seqs sequences of 1 + speculative_tokens rows each, then
// a prefill chunk of max_num_batched_tokens at the end of a max_model_len context) on a scratch cache,
// then plans. With graphs, their pool is counted at the decode step's peak, and one page is kept for
// the graphs' padding rows (runtime/executor.h). Throws dsinfer::Error when the weights and
// activations leave no room for a single page.
MemoryPlan plan_memory(const model::DeepseekModel& model, const MemoryPlanInputs& inputs);

}  // namespace dsinfer::runtime
