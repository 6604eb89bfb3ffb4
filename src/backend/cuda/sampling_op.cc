#include "backend/cuda/sampling_op.h"

#include <algorithm>
#include <cstring>

#include "backend/cuda/cuda_check.h"
#include "backend/cuda/greedy_argmax.h"
#include "backend/cuda/sampling.h"

namespace dsinfer::backend::cuda {
namespace {

constexpr size_t kAlign = 16;
size_t aligned(size_t bytes) { return (bytes + kAlign - 1) / kAlign * kAlign; }

// Byte offsets of the pieces of one upload or download buffer.
class Layout {
 public:
  size_t add(size_t bytes) {
    size_t offset = size_;
    size_ += aligned(bytes);
    return offset;
  }
  size_t size() const { return size_; }

 private:
  size_t size_ = 0;
};

// Every row greedy with nothing to apply first: the first maximum is the whole pipeline.
bool plain_greedy(const SamplingBatch& batch) {
  if (!batch.history_tokens.empty() || !batch.banned_tokens.empty() || !batch.bias_tokens.empty() ||
      batch.any_bitmask() || batch.any_logprobs())
    return false;
  for (const SamplingRow& row : batch.rows)
    if (row.params.temperature > 0.0f && row.params.top_k != 1) return false;
  return true;
}

// Where the results sit in the download buffer (and in the device buffer it copies).
struct DownloadLayout {
  int64_t rows = 0;
  int top_n = 0;
  bool logprobs = false;
  size_t tokens_at = 0, logprobs_at = 0, top_ids_at = 0, top_logprobs_at = 0, bytes = 0;

  DownloadLayout(int64_t rows_in, int top_n_in, bool logprobs_in) : rows(rows_in), top_n(top_n_in), logprobs(logprobs_in) {
    Layout down;
    tokens_at = down.add(rows * sizeof(int32_t));
    logprobs_at = down.add(logprobs ? rows * sizeof(float) : 0);
    top_ids_at = down.add(static_cast<size_t>(rows) * top_n * sizeof(int32_t));
    top_logprobs_at = down.add(static_cast<size_t>(rows) * top_n * sizeof(float));
    bytes = down.size();
  }
};

// One queued sampling: its device results and its slot's host copy.
class QueuedTokens final : public PendingTokens {
 public:
  QueuedTokens(CudaContext& context, SamplingOp::Slot& slot, DownloadLayout layout, std::shared_ptr<void> device_out)
      : context_(context), slot_(slot), generation_(slot.generation), layout_(layout) {
    auto* tokens = static_cast<int32_t*>(device_out.get()) + layout.tokens_at / sizeof(int32_t);
    device_tokens_ = Tensor::wrap(tokens, DType::kI32, {layout.rows}, Device::kCuda, std::move(device_out));
  }

  const Tensor& device_tokens() const override { return device_tokens_; }

  SampledTokens wait() override {
    DSINFER_CHECK(slot_.generation == generation_,
                  "sample_tokens: a third sampling was queued before this one was waited for");
    context_.wait_for(slot_.done);
    const int64_t B = layout_.rows;
    const int top_n = layout_.top_n;
    const char* back = static_cast<const char*>(slot_.download.data());
    SampledTokens out;
    out.tokens = Tensor::empty(DType::kI32, {B});
    if (B > 0) std::memcpy(out.tokens.raw(), back + layout_.tokens_at, B * sizeof(int32_t));
    if (layout_.logprobs) {
      out.logprobs = Tensor::empty(DType::kF32, {B});
      std::memcpy(out.logprobs.raw(), back + layout_.logprobs_at, B * sizeof(float));
      out.top_ids = Tensor::empty(DType::kI32, {B, top_n});
      out.top_logprobs = Tensor::empty(DType::kF32, {B, top_n});
      if (top_n > 0) {
        std::memcpy(out.top_ids.raw(), back + layout_.top_ids_at, static_cast<size_t>(B) * top_n * sizeof(int32_t));
        std::memcpy(out.top_logprobs.raw(), back + layout_.top_logprobs_at, static_cast<size_t>(B) * top_n * sizeof(float));
      }
    }
    return out;
  }

 private:
  CudaContext& context_;
  SamplingOp::Slot& slot_;
  uint64_t generation_;
  DownloadLayout layout_;
  Tensor device_tokens_;
};

}  // namespace

SamplingOp::SamplingOp(CudaContext& context) : context_(context) {
  for (Slot& slot : slots_) DSINFER_CUDA_CHECK(cudaEventCreateWithFlags(&slot.done, cudaEventDisableTiming));
}

SamplingOp::~SamplingOp() {
  for (Slot& slot : slots_)
    if (slot.done) cudaEventDestroy(slot.done);
}

std::unique_ptr<PendingTokens> SamplingOp::queue(Tensor& logits, const SamplingBatch& batch) {
  DSINFER_CHECK(logits.device() == Device::kCuda && logits.dtype() == DType::kF32 && logits.rank() == 2,
                "sample_tokens: logits must be a [B, V] float32 CUDA tensor");
  const int64_t B = logits.dim(0), V = logits.dim(1);
  batch.check_rows(B, V);
  const bool greedy = plain_greedy(batch);
  const bool logprobs = batch.any_logprobs();
  const DownloadLayout down(B, batch.max_top_logprobs(), logprobs);

  // The oldest slot: free once the copies that last used it have run (its handle was waited for).
  Slot& slot = slots_[next_];
  next_ ^= 1;
  DSINFER_CUDA_CHECK(cudaEventSynchronize(slot.done));
  ++slot.generation;

  cudaStream_t stream = context_.stream();
  std::shared_ptr<void> device_out = context_.allocate_bytes(std::max<size_t>(down.bytes, 16));
  char* result = static_cast<char*>(device_out.get());
  auto* tokens = reinterpret_cast<int32_t*>(result + down.tokens_at);
  if (B == 0) {
    // nothing to sample
  } else if (greedy) {
    // Rows all greedy with nothing applied first: the first maximum, spread over the SMs.
    size_t scratch_bytes = greedy_argmax_scratch_bytes(B);
    std::shared_ptr<void> scratch = context_.allocate_bytes(scratch_bytes);
    greedy_argmax(logits.data<float>(), B, V, tokens, scratch.get(), scratch_bytes, stream);
  } else {
    // Upload: row parameters, then the CSR arrays and the bitmasks as they are.
    Layout up;
    size_t params_at = up.add(B * sizeof(SamplingRowParams));
    size_t history_start_at = up.add(batch.history_start.size() * sizeof(int32_t));
    size_t history_tokens_at = up.add(batch.history_tokens.size() * sizeof(int32_t));
    size_t history_counts_at = up.add(batch.history_output_counts.size() * sizeof(int32_t));
    size_t banned_start_at = up.add(batch.banned_start.size() * sizeof(int32_t));
    size_t banned_tokens_at = up.add(batch.banned_tokens.size() * sizeof(int32_t));
    const bool bias = !batch.bias_tokens.empty();
    const bool masks = batch.any_bitmask();
    size_t bias_start_at = up.add(bias ? batch.bias_start.size() * sizeof(int32_t) : 0);
    size_t bias_tokens_at = up.add(batch.bias_tokens.size() * sizeof(int32_t));
    size_t bias_values_at = up.add(batch.bias_values.size() * sizeof(float));
    size_t bitmask_row_at = up.add(masks ? batch.bitmask_row.size() * sizeof(int32_t) : 0);
    size_t bitmask_at = up.add(masks ? batch.bitmask.size() * sizeof(int32_t) : 0);
    slot.upload.reserve(up.size());
    char* host = static_cast<char*>(slot.upload.data());
    auto* params = reinterpret_cast<SamplingRowParams*>(host + params_at);
    for (int64_t b = 0; b < B; ++b) params[b] = to_row_params(batch.rows[b]);
    auto put = [&](size_t at, const std::vector<int32_t>& values) {
      if (!values.empty()) std::memcpy(host + at, values.data(), values.size() * sizeof(int32_t));
    };
    put(history_start_at, batch.history_start);
    put(history_tokens_at, batch.history_tokens);
    put(history_counts_at, batch.history_output_counts);
    put(banned_start_at, batch.banned_start);
    put(banned_tokens_at, batch.banned_tokens);
    if (bias) {
      put(bias_start_at, batch.bias_start);
      put(bias_tokens_at, batch.bias_tokens);
      std::memcpy(host + bias_values_at, batch.bias_values.data(), batch.bias_values.size() * sizeof(float));
    }
    if (masks) {
      put(bitmask_row_at, batch.bitmask_row);
      put(bitmask_at, batch.bitmask);
    }

    size_t scratch_bytes = logprobs ? sampling_scratch_bytes(B, V) : 0;
    std::shared_ptr<void> device_in = context_.allocate_bytes(up.size());
    std::shared_ptr<void> scratch = scratch_bytes ? context_.allocate_bytes(scratch_bytes) : nullptr;
    DSINFER_CUDA_CHECK(cudaMemcpyAsync(device_in.get(), host, up.size(), cudaMemcpyHostToDevice, stream));

    const char* in = static_cast<const char*>(device_in.get());
    SamplingInputs inputs;
    inputs.logits = logits.data<float>();
    inputs.rows = static_cast<int32_t>(B);
    inputs.vocab = static_cast<int32_t>(V);
    inputs.params = reinterpret_cast<const SamplingRowParams*>(in + params_at);
    if (!batch.history_tokens.empty()) {
      inputs.history_start = reinterpret_cast<const int32_t*>(in + history_start_at);
      inputs.history_tokens = reinterpret_cast<const int32_t*>(in + history_tokens_at);
      inputs.history_output_counts = reinterpret_cast<const int32_t*>(in + history_counts_at);
    }
    if (!batch.banned_tokens.empty()) {
      inputs.banned_start = reinterpret_cast<const int32_t*>(in + banned_start_at);
      inputs.banned_tokens = reinterpret_cast<const int32_t*>(in + banned_tokens_at);
    }
    if (bias) {
      inputs.bias_start = reinterpret_cast<const int32_t*>(in + bias_start_at);
      inputs.bias_tokens = reinterpret_cast<const int32_t*>(in + bias_tokens_at);
      inputs.bias_values = reinterpret_cast<const float*>(in + bias_values_at);
    }
    if (masks) {
      inputs.bitmask_row = reinterpret_cast<const int32_t*>(in + bitmask_row_at);
      inputs.bitmask = reinterpret_cast<const int32_t*>(in + bitmask_at);
    }
    SamplingOutputs outputs;
    outputs.tokens = tokens;
    if (logprobs) {
      outputs.logprobs = reinterpret_cast<float*>(result + down.logprobs_at);
      outputs.top_n = down.top_n;
      if (down.top_n > 0) {
        outputs.top_ids = reinterpret_cast<int32_t*>(result + down.top_ids_at);
        outputs.top_logprobs = reinterpret_cast<float*>(result + down.top_logprobs_at);
      }
    }
    cuda::sample_tokens(inputs, outputs, scratch.get(), scratch_bytes, stream);
  }

  slot.download.reserve(std::max<size_t>(down.bytes, 16));
  if (down.bytes > 0)
    DSINFER_CUDA_CHECK(cudaMemcpyAsync(slot.download.data(), result, down.bytes, cudaMemcpyDeviceToHost, stream));
  DSINFER_CUDA_CHECK(cudaEventRecord(slot.done, stream));
  return std::make_unique<QueuedTokens>(context_, slot, down, std::move(device_out));
}

}  // namespace dsinfer::backend::cuda
