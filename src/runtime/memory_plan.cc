#include "runtime/memory_plan.h"

#include <algorithm>
#include <cstdio>

#include "model/batch_builder.h"
#include "runtime/executor.h"

namespace dsinfer::runtime {
namespace {

std::string gib(int64_t bytes) {
  char text[32];
  std::snprintf(text, sizeof(text), "%.2f GiB", static_cast<double>(bytes) / (1 << 30));
  return text;
}

// One forward pass of `batch` on a cache of `pages` pages, its outputs dropped.
void dry_run(const model::DeepseekModel& model, model::ForwardBatch batch, int64_t pages) {
  model::LatentCache cache = model.make_cache(pages);
  model.forward(batch, cache);
  model.backend().synchronize();
}

}  // namespace

std::string MemoryPlan::table() const {
  std::string out = "memory plan:\n";
  auto row = [&](const char* what, int64_t bytes) { out += str_cat("  ", what, std::string(22 - std::string(what).size(), ' '), gib(bytes), "\n"); };
  row("device", total_bytes);
  row("weights", weights_bytes);
  row("activations (peak)", activation_bytes);
  if (graph_bytes > 0) row("CUDA graph pool", graph_bytes);
  row("left to others", reserved_bytes);
  row("KV cache", kv_bytes);
  out += str_cat("  ", pages, " pages of 64 tokens (", page_bytes / 1024, " KiB each over every layer) = ", pages * 64,
                 " tokens\n");
  return out;
}

MemoryPlan plan_memory(const model::DeepseekModel& model, const MemoryPlanInputs& inputs) {
  backend::Backend& backend = model.backend();
  DSINFER_CHECK(inputs.gpu_memory_utilization > 0 && inputs.gpu_memory_utilization <= 1,
                "--gpu-memory-utilization must be in (0, 1]");
  backend.synchronize();
  backend.release_cached_memory();
  backend::Backend::MemoryInfo before = backend.memory_info();
  MemoryPlan plan;
  plan.total_bytes = before.total_bytes;
  plan.weights_bytes = before.total_bytes - before.free_bytes;
  plan.page_bytes = model.page_bytes();

  // The largest decode batch, then the largest prefill chunk at the end of the longest context (its
  // expanded attention reads the whole context). The allocator keeps each run's blocks, so what
  // the device lost after each is the peak so far (less the runs' scratch caches).
  int64_t context = std::max<int64_t>(1, served_context(inputs.max_model_len, model.max_positions()));
  int64_t chunk = std::min(inputs.max_num_batched_tokens, context);
  int64_t context_pages = (context + model::kPageSize - 1) / model::kPageSize;
  {
    // With speculative decoding the verification step is the largest decode step (its graphs' pool
    // holds those of plain decode steps as well: the captures share it).
    const int64_t rows = 1 + inputs.speculative_tokens;
    int64_t sequences = std::min(inputs.max_num_seqs, std::max<int64_t>(1, inputs.max_num_batched_tokens / rows));
    model::BatchBuilder builder;
    std::vector<int32_t> tokens(rows, 1), page{0};
    for (int64_t s = 0; s < sequences; ++s)
      builder.add(tokens, 0, page, rows == 1 ? model::LogitRows::kLast : model::LogitRows::kAll);
    dry_run(model, builder.build(), 1);
  }
  int64_t decode_peak = std::max<int64_t>(0, before.free_bytes - backend.memory_info().free_bytes - plan.page_bytes);
  {
    std::vector<int32_t> pages(context_pages);
    for (int64_t i = 0; i < context_pages; ++i) pages[i] = static_cast<int32_t>(i);
    model::BatchBuilder builder;
    std::vector<int32_t> tokens(chunk, 1);
    builder.add(tokens, static_cast<int32_t>(context - chunk), pages, model::LogitRows::kLast);
    dry_run(model, builder.build(), context_pages);
  }
  backend::Backend::MemoryInfo after = backend.memory_info();
  int64_t scratch_caches = (context_pages + 1) * plan.page_bytes;
  plan.activation_bytes = std::max<int64_t>(0, before.free_bytes - after.free_bytes - scratch_caches);
  plan.graph_bytes = inputs.cuda_graph_max_batch > 0 ? decode_peak : 0;
  backend.release_cached_memory();  // the steps take it again, from the room left for them
  plan.reserved_bytes = static_cast<int64_t>((1.0 - inputs.gpu_memory_utilization) * static_cast<double>(plan.total_bytes));
  plan.kv_bytes =
      plan.total_bytes - plan.weights_bytes - plan.activation_bytes - plan.graph_bytes - plan.reserved_bytes;
  plan.pages =
      plan.page_bytes > 0 ? plan.kv_bytes / plan.page_bytes - executor_scratch_pages(inputs.cuda_graph_max_batch) : 0;
  DSINFER_CHECK(plan.pages > 0, "no room for the KV cache: ", gib(plan.total_bytes), " device, ", gib(plan.weights_bytes),
                " weights, ", gib(plan.activation_bytes), " activations at the largest step, ", gib(plan.graph_bytes), " CUDA graphs, ",
                gib(plan.reserved_bytes),
                " left to others (raise --gpu-memory-utilization, or lower --max-num-batched-tokens or --max-model-len)");
  plan.kv_bytes = plan.pages * plan.page_bytes;
  return plan;
}

}  // namespace dsinfer::runtime
