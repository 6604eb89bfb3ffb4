#include "backend/cuda/cuda_backend.h"

#include <cuda_bf16.h>

#include <cstring>
#include <thread>

#include "backend/cuda/cuda_check.h"
#include "backend/cuda/device_memory.h"
#include "backend/cuda/elementwise.h"
#include "backend/cuda/norm.h"
#include "backend/cuda/placeholders.h"
#include "backend/cuda/random_fill.h"
#include "backend/cuda/rope_cache.h"
#include "backend/cuda/routing.h"
#include "backend/cuda/step_metadata.h"
#include "backend/cuda/cuda_ops.h"

namespace dsinfer::backend::cuda {
namespace {

using bf16 = __nv_bfloat16;

bf16* bf16_data(const Tensor& t) { return static_cast<bf16*>(t.raw()); }

void expect_device(const Tensor& t, const char* op, const char* what) {
  DSINFER_CHECK(t.defined() && t.device() == Device::kCuda, op, ": ", what, " must be a CUDA tensor");
}

void expect_bf16(const Tensor& t, const char* op, const char* what, int rank) {
  expect_device(t, op, what);
  DSINFER_CHECK(t.dtype() == DType::kBF16, op, ": ", what, " must be bf16, got ", dtype_name(t.dtype()));
  DSINFER_CHECK(rank < 0 || t.rank() == rank, op, ": ", what, " must have rank ", rank, ", got ",
                t.shape().to_string());
}

// A latent cache the GPU takes: [pages, page_size, row] in bf16 or e4m3 (supports_cache_dtype).
void expect_cache(const Tensor& t, const char* op) {
  expect_device(t, op, "cache");
  DSINFER_CHECK(t.dtype() == DType::kBF16 || t.dtype() == DType::kF8E4M3, op, ": the cache must be bf16 or e4m3 (",
                "--kv-cache-dtype auto or fp8), got ", dtype_name(t.dtype()));
  DSINFER_CHECK(t.rank() == 3, op, ": the cache must have rank 3, got ", t.shape().to_string());
}

void expect_f32(const Tensor& t, const char* op, const char* what) {
  expect_device(t, op, what);
  DSINFER_CHECK(t.dtype() == DType::kF32, op, ": ", what, " must be float32, got ", dtype_name(t.dtype()));
}

// The kernels trust these: every slot inside the cache [pages, page_size, width], every position
// inside the rotary table.
void expect_slots(const AttentionBatch& batch, const Tensor& cache, const char* op) {
  const int64_t slots = cache.dim(0) * cache.dim(1);
  for (int64_t slot : batch.slot_mapping)
    DSINFER_CHECK(slot >= 0 && slot < slots, op, ": slot ", slot, " outside the cache of ", slots);
}

void expect_positions(const std::vector<int32_t>& positions, const RopeTable& table, const char* op) {
  for (int32_t p : positions)
    DSINFER_CHECK(p >= 0 && p < table.cos.dim(0), op, ": position ", p, " outside the table");
}

// Whether `event` has completed, without waiting: cudaEventQuery's "not ready" is an answer, not an
// error (cleared where the runtime left it as the last error, so that no later launch check sees it).
bool event_done(cudaEvent_t event) {
  const cudaError_t status = cudaEventQuery(event);
  if (status == cudaSuccess) return true;
  if (status != cudaErrorNotReady) DSINFER_CUDA_CHECK(status);
  if (cudaPeekAtLastError() == cudaErrorNotReady) (void)cudaGetLastError();
  return false;
}

// Backend::mark_work: an event recorded on the stream, polled by the host.
class CudaWorkMark final : public WorkMark {
 public:
  explicit CudaWorkMark(cudaStream_t stream) {
    DSINFER_CUDA_CHECK(cudaEventCreateWithFlags(&event_, cudaEventDisableTiming));
    DSINFER_CUDA_CHECK(cudaEventRecord(event_, stream));
  }
  ~CudaWorkMark() override { cudaEventDestroy(event_); }
  CudaWorkMark(const CudaWorkMark&) = delete;
  CudaWorkMark& operator=(const CudaWorkMark&) = delete;

  bool reached() override { return reached_ = reached_ || event_done(event_); }

 private:
  cudaEvent_t event_ = nullptr;
  bool reached_ = false;
};

// A captured step: one cudaGraphExec_t, replayed on the backend's stream when the step's metadata
// sits where the captured step's did. Lives no longer than its backend.
class CudaGraph final : public StepGraph {
 public:
  CudaGraph(cudaGraphExec_t exec, cudaStream_t stream, const StepMetadata& metadata, std::vector<uintptr_t> layout)
      : exec_(exec), stream_(stream), metadata_(metadata), layout_(std::move(layout)) {}
  ~CudaGraph() override { cudaGraphExecDestroy(exec_); }
  CudaGraph(const CudaGraph&) = delete;
  CudaGraph& operator=(const CudaGraph&) = delete;

  bool replay() override {
    if (metadata_.layout() != layout_) return false;
    DSINFER_CUDA_CHECK(cudaGraphLaunch(exec_, stream_));
    return true;
  }

 private:
  cudaGraphExec_t exec_;
  cudaStream_t stream_;
  const StepMetadata& metadata_;
  std::vector<uintptr_t> layout_;
};

class CudaBackend final : public Backend, public CudaContext {
 public:
  explicit CudaBackend(const CudaOptions& options) : device_(options.device) {
    DSINFER_CUDA_CHECK(cudaSetDevice(device_));
    DSINFER_CUDA_CHECK(cudaStreamCreateWithFlags(&stream_, cudaStreamNonBlocking));
    allocator_ = std::make_shared<DeviceAllocator>();
    metadata_ = std::make_unique<StepMetadata>(allocator_, stream_);
    DSINFER_CUDA_CHECK(cudaDeviceGetAttribute(&sm_count_, cudaDevAttrMultiProcessorCount, device_));
    ops_ = make_cuda_ops(*this, options);
  }

  ~CudaBackend() override {
    ops_.reset();
    metadata_.reset();
    if (stream_) cudaStreamDestroy(stream_);
  }

  // CudaContext: what the op families (cuda_ops.h) share.
  cudaStream_t stream() const override { return stream_; }
  Tensor allocate(DType dtype, Shape shape) override { return allocator_->allocate(dtype, shape); }
  std::shared_ptr<void> allocate_bytes(size_t bytes) override { return allocator_->allocate_bytes(bytes); }
  StepMetadata& metadata() override { return *metadata_; }
  int sm_count() const override { return sm_count_; }
  void wait_for(cudaEvent_t event) override {
    if (!wait_poll_) {
      DSINFER_CUDA_CHECK(cudaEventSynchronize(event));
      return;
    }
    while (!event_done(event)) {
      if (!wait_poll_()) {
        DSINFER_CUDA_CHECK(cudaEventSynchronize(event));
        return;
      }
      std::this_thread::yield();
    }
  }

  std::string name() const override { return "cuda"; }
  Device device() const override { return Device::kCuda; }
  DType compute_dtype() const override { return DType::kBF16; }
  // bf16, and the fp8 cache (e4m3 rows, mla_decode_fp8.h); not fp8_ds_mla's 656-byte rows yet.
  bool supports_cache_dtype(DType dtype) const override { return dtype == DType::kBF16 || dtype == DType::kF8E4M3; }
  // W4A8 runs as routed experts only (moe_w4a8_rows.h); a W4A8 linear has no kernel here.
  bool supports_weight_format(WeightFormat format, WeightUse use) const override {
    return format != WeightFormat::kW4A8 || use == WeightUse::kExperts;
  }

  void begin_step(const StepContext& step) override {
    DSINFER_CUDA_CHECK(cudaSetDevice(device_));
    metadata_->upload(step);
  }

  void synchronize() override { DSINFER_CUDA_CHECK(cudaStreamSynchronize(stream_)); }
  std::unique_ptr<WorkMark> mark_work() override {
    DSINFER_CUDA_CHECK(cudaSetDevice(device_));
    return std::make_unique<CudaWorkMark>(stream_);
  }
  void set_wait_poll(std::function<bool()> poll) override { wait_poll_ = std::move(poll); }

  // Relaxed capture mode: a cudaMalloc for a size the graph pool has not seen is legal while
  // recording (it enqueues nothing); a synchronizing call still invalidates the capture and throws.
  std::unique_ptr<StepGraph> capture(const std::function<void()>& body) override {
    DSINFER_CUDA_CHECK(cudaSetDevice(device_));
    std::vector<uintptr_t> layout = metadata_->layout();
    auto end_capture = [this]() {
      cudaGraph_t graph = nullptr;
      cudaError_t status = cudaStreamEndCapture(stream_, &graph);
      allocator_->use_pool(MemoryPool::kSteps);
      metadata_->set_capturing(false);
      return std::make_pair(status, graph);
    };
    DSINFER_CUDA_CHECK(cudaStreamBeginCapture(stream_, cudaStreamCaptureModeRelaxed));
    allocator_->use_pool(MemoryPool::kGraphs);
    metadata_->set_capturing(true);
    try {
      body();
    } catch (...) {
      auto [status, graph] = end_capture();
      if (graph) cudaGraphDestroy(graph);
      (void)cudaGetLastError();  // capture errors are not sticky
      throw;
    }
    auto [status, graph] = end_capture();
    if (status != cudaSuccess) {
      if (graph) cudaGraphDestroy(graph);
      (void)cudaGetLastError();
      DSINFER_CUDA_CHECK(status);
    }
    cudaGraphExec_t exec = nullptr;
    cudaError_t instantiated = cudaGraphInstantiate(&exec, graph, 0);
    cudaGraphDestroy(graph);
    DSINFER_CUDA_CHECK(instantiated);
    return std::make_unique<CudaGraph>(exec, stream_, *metadata_, std::move(layout));
  }

  MemoryInfo memory_info() override {
    size_t free = 0, total = 0;
    DSINFER_CUDA_CHECK(cudaSetDevice(device_));
    DSINFER_CUDA_CHECK(cudaMemGetInfo(&free, &total));
    return {static_cast<int64_t>(total), static_cast<int64_t>(free), static_cast<int64_t>(allocator_->cached_bytes()),
            static_cast<int64_t>(allocator_->reserved_bytes(MemoryPool::kGraphs))};
  }

  void release_cached_memory() override {
    synchronize();
    allocator_->release_cached();
  }

  Tensor empty(DType dtype, Shape shape) override {
    Tensor t = allocate(dtype, shape);
    DSINFER_CUDA_CHECK(cudaMemsetAsync(t.raw(), 0, t.nbytes(), stream_));
    return t;
  }

  Tensor to_device(const Tensor& host) override {
    if (host.device() == Device::kCuda) return host;
    if (host.dtype() == DType::kI32)
      if (const int32_t* device = metadata_->find(host.raw()))
        return Tensor::wrap(const_cast<int32_t*>(device), DType::kI32, host.shape(), Device::kCuda, nullptr);
    Tensor out = allocate(host.dtype(), host.shape());
    if (host.nbytes()) {
      DSINFER_CUDA_CHECK(cudaMemcpyAsync(out.raw(), host.raw(), host.nbytes(), cudaMemcpyHostToDevice, stream_));
      DSINFER_CUDA_CHECK(cudaStreamSynchronize(stream_));  // pageable host memory: the caller may free it
    }
    return out;
  }

  Tensor to_host(const Tensor& tensor) override {
    if (tensor.device() == Device::kCpu) return tensor;
    Tensor out = Tensor::empty(tensor.dtype(), tensor.shape());
    if (tensor.nbytes()) {
      DSINFER_CUDA_CHECK(cudaMemcpyAsync(out.raw(), tensor.raw(), tensor.nbytes(), cudaMemcpyDeviceToHost, stream_));
      DSINFER_CUDA_CHECK(cudaStreamSynchronize(stream_));
    }
    return out;
  }

  // The host KV tier's memory and copies: page-locked, so that cudaMemcpyAsync returns at once and
  // the copy runs on the stream in order with the steps.
  std::shared_ptr<std::byte> allocate_host(size_t bytes) override {
    DSINFER_CUDA_CHECK(cudaSetDevice(device_));
    void* data = nullptr;
    DSINFER_CUDA_CHECK(cudaMallocHost(&data, bytes));
    return std::shared_ptr<std::byte>(static_cast<std::byte*>(data), [](std::byte* p) { (void)cudaFreeHost(p); });
  }

  void queue_copy_to_host(std::byte* host, const Tensor& tensor, size_t offset, size_t bytes) override {
    expect_device(tensor, "queue_copy_to_host", "tensor");
    DSINFER_CHECK(offset + bytes <= tensor.nbytes(), "queue_copy_to_host: bytes [", offset, ", ", offset + bytes,
                  ") of a tensor of ", tensor.nbytes());
    DSINFER_CUDA_CHECK(cudaMemcpyAsync(host, static_cast<const std::byte*>(tensor.raw()) + offset, bytes,
                                       cudaMemcpyDeviceToHost, stream_));
  }

  void queue_copy_from_host(Tensor& tensor, size_t offset, const std::byte* host, size_t bytes) override {
    expect_device(tensor, "queue_copy_from_host", "tensor");
    DSINFER_CHECK(offset + bytes <= tensor.nbytes(), "queue_copy_from_host: bytes [", offset, ", ", offset + bytes,
                  ") of a tensor of ", tensor.nbytes());
    DSINFER_CUDA_CHECK(cudaMemcpyAsync(static_cast<std::byte*>(tensor.raw()) + offset, host, bytes,
                                       cudaMemcpyHostToDevice, stream_));
  }

  void fill_uniform(Tensor& t, uint64_t seed, float low, float high) override {
    expect_device(t, "fill_uniform", "t");
    cuda::fill_uniform(t.raw(), t.dtype(), t.numel(), seed, low, high, stream_);
  }

  // --- Elementwise and normalisation ---

  Tensor embedding(const Tensor& table, const Tensor& ids) override {
    expect_device(table, "embedding", "table");
    expect_device(ids, "embedding", "ids");
    DSINFER_CHECK(table.rank() == 2 && (table.dtype() == DType::kBF16 || table.dtype() == DType::kF32) &&
                      ids.dtype() == DType::kI32,
                  "embedding: table must be [V, D] bf16 or f32 and ids int32");
    int64_t T = ids.numel(), D = table.dim(1);
    Tensor out = allocate(DType::kBF16, {T, D});
    cuda::embedding(table.raw(), table.dtype(), ids.data<int32_t>(), bf16_data(out), T, D, stream_);
    return out;
  }

  void map_expert_ids(Tensor& expert_ids, const Tensor& replica_start, const Tensor& replica_slots) override {
    expect_device(expert_ids, "map_expert_ids", "expert_ids");
    expect_device(replica_start, "map_expert_ids", "replica_start");
    expect_device(replica_slots, "map_expert_ids", "replica_slots");
    DSINFER_CHECK(expert_ids.dtype() == DType::kI32 && expert_ids.rank() == 2 && replica_start.dtype() == DType::kI32 &&
                      replica_slots.dtype() == DType::kI32,
                  "map_expert_ids: ids [T, k], replica_start and replica_slots must be int32");
    cuda::map_expert_ids(expert_ids.data<int32_t>(), expert_ids.dim(0), expert_ids.dim(1),
                         replica_start.data<int32_t>(), replica_slots.data<int32_t>(), stream_);
  }

  void count_expert_ids(const Tensor& expert_ids, Tensor& counts) override {
    expect_device(expert_ids, "count_expert_ids", "expert_ids");
    expect_device(counts, "count_expert_ids", "counts");
    DSINFER_CHECK(expert_ids.dtype() == DType::kI32 && counts.dtype() == DType::kI64 && counts.rank() == 1,
                  "count_expert_ids: ids must be int32 and counts [E] int64");
    cuda::count_expert_ids(expert_ids.data<int32_t>(), expert_ids.numel(),
                           reinterpret_cast<unsigned long long*>(counts.data<int64_t>()), counts.numel(), stream_);
  }

  void resolve_placeholders(Tensor& token_ids, const Tensor& previous) override {
    expect_device(token_ids, "resolve_placeholders", "token_ids");
    expect_device(previous, "resolve_placeholders", "previous");
    DSINFER_CHECK(token_ids.dtype() == DType::kI32 && token_ids.rank() == 1 && previous.dtype() == DType::kI32 &&
                      previous.rank() == 1,
                  "resolve_placeholders: token ids and previous tokens must be [n] int32");
    cuda::resolve_placeholders(token_ids.data<int32_t>(), token_ids.numel(), previous.data<int32_t>(), stream_);
  }

  Tensor rms_norm(const Tensor& x_in, const Tensor& weight, float eps) override {
    Tensor x = activation(x_in);
    expect_bf16(x, "rms_norm", "x", 2);
    expect_f32(weight, "rms_norm", "weight");
    int64_t T = x.dim(0), D = x.dim(1);
    DSINFER_CHECK(weight.numel() == D, "rms_norm: weight has ", weight.numel(), " values for width ", D);
    Tensor out = allocate(DType::kBF16, {T, D});
    cuda::rms_norm(bf16_data(x), D, weight.data<float>(), bf16_data(out), D, T, D, eps, stream_);
    return out;
  }

  Tensor add_rms_norm_inplace(Tensor& residual, const Tensor& x_in, const Tensor& weight, float eps) override {
    Tensor x = activation(x_in);
    expect_bf16(residual, "add_rms_norm_inplace", "residual", 2);
    expect_bf16(x, "add_rms_norm_inplace", "x", 2);
    expect_f32(weight, "add_rms_norm_inplace", "weight");
    DSINFER_CHECK(residual.shape() == x.shape(), "add_rms_norm_inplace: residual ", residual.shape().to_string(),
                  " and x ", x.shape().to_string(), " differ");
    int64_t T = x.dim(0), D = x.dim(1);
    Tensor out = allocate(DType::kBF16, {T, D});
    cuda::add_rms_norm_inplace(bf16_data(residual), bf16_data(x), weight.data<float>(), bf16_data(out), T, D, eps,
                               stream_);
    return out;
  }

  void add_inplace(Tensor& x, const Tensor& y_in) override {
    Tensor y = activation(y_in);
    expect_bf16(x, "add_inplace", "x", -1);
    expect_bf16(y, "add_inplace", "y", -1);
    DSINFER_CHECK(x.shape() == y.shape(), "add_inplace: ", x.shape().to_string(), " vs ", y.shape().to_string());
    cuda::add_inplace(bf16_data(x), bf16_data(y), x.numel(), stream_);
  }

  Tensor silu_mul(const Tensor& x_in) override {
    Tensor x = activation(x_in);
    expect_bf16(x, "silu_mul", "x", 2);
    DSINFER_CHECK(x.dim(1) % 2 == 0, "silu_mul: last dimension must be even, got ", x.shape().to_string());
    int64_t T = x.dim(0), I = x.dim(1) / 2;
    Tensor out = allocate(DType::kBF16, {T, I});
    cuda::silu_mul(bf16_data(x), bf16_data(out), T, I, stream_);
    return out;
  }

  Tensor concat_last(const Tensor& a, const Tensor& b) override {
    expect_device(a, "concat_last", "a");
    expect_device(b, "concat_last", "b");
    DSINFER_CHECK(a.rank() == 2 && b.rank() == 2 && a.dim(0) == b.dim(0) && a.dtype() == b.dtype(),
                  "concat_last: ", a.shape().to_string(), " and ", b.shape().to_string(), " do not concatenate");
    int64_t T = a.dim(0), A = a.dim(1), B = b.dim(1);
    Tensor out = allocate(a.dtype(), {T, A + B});
    concat_columns(a.raw(), A, b.raw(), B, out.raw(), T, static_cast<int>(dtype_size(a.dtype())), stream_);
    return out;
  }

  Tensor slice_last(const Tensor& x, int64_t begin, int64_t end) override {
    expect_device(x, "slice_last", "x");
    DSINFER_CHECK(x.rank() == 2 && begin >= 0 && begin <= end && end <= x.dim(1), "slice_last: [", begin, ", ",
                  end, ") of ", x.shape().to_string());
    int64_t T = x.dim(0), D = x.dim(1);
    Tensor out = allocate(x.dtype(), {T, end - begin});
    copy_rows({x.raw(), D, begin, nullptr, out.raw(), end - begin, 0, T, end - begin,
               static_cast<int>(dtype_size(x.dtype()))},
              stream_);
    return out;
  }

  Tensor gather_rows(const Tensor& x, const std::vector<int32_t>& rows) override {
    expect_device(x, "gather_rows", "x");
    DSINFER_CHECK(x.rank() == 2, "gather_rows: x must be a matrix, got ", x.shape().to_string());
    auto R = static_cast<int64_t>(rows.size());
    int64_t D = x.dim(1);
    for (int32_t row : rows)
      DSINFER_CHECK(row >= 0 && row < x.dim(0), "gather_rows: row ", row, " outside [0, ", x.dim(0), ")");
    Tensor out = allocate(x.dtype(), {R, D});
    if (R == 0) return out;
    const int32_t* device_rows = metadata_->int32_array(rows.data(), rows.size());
    copy_rows({x.raw(), D, 0, device_rows, out.raw(), D, 0, R, D, static_cast<int>(dtype_size(x.dtype()))}, stream_);
    return out;
  }

  Tensor concat_rows(const Tensor& a, const Tensor& b) override {
    expect_device(a, "concat_rows", "a");
    expect_device(b, "concat_rows", "b");
    DSINFER_CHECK(a.rank() == 2 && b.rank() == 2 && a.dim(1) == b.dim(1) && a.dtype() == b.dtype(),
                  "concat_rows: ", a.shape().to_string(), " and ", b.shape().to_string(), " do not stack");
    Tensor out = allocate(a.dtype(), {a.dim(0) + b.dim(0), a.dim(1)});
    if (a.nbytes())
      DSINFER_CUDA_CHECK(cudaMemcpyAsync(out.raw(), a.raw(), a.nbytes(), cudaMemcpyDeviceToDevice, stream_));
    if (b.nbytes())
      DSINFER_CUDA_CHECK(cudaMemcpyAsync(static_cast<char*>(out.raw()) + a.nbytes(), b.raw(), b.nbytes(),
                                         cudaMemcpyDeviceToDevice, stream_));
    return out;
  }

  // --- Products, attention, MoE and sampling: cuda_ops.h ---

  Tensor linear(const Tensor& x, const LinearWeight& weight) override {
    return ops_->linear(activation(x), weight, DType::kBF16);
  }
  Tensor linear_f32(const Tensor& x, const LinearWeight& weight) override {
    return ops_->linear(activation(x), weight, DType::kF32);
  }
  Tensor grouped_linear(const Tensor& x, const Tensor& weight) override {
    return ops_->grouped_linear(activation(x), weight);
  }
  Tensor absorb_query(const Tensor& q, const Tensor& w_uk_t) override {
    return ops_->absorb_query(activation(q), w_uk_t);
  }

  void rope_inplace(Tensor& x, int64_t begin, const std::vector<int32_t>& positions,
                    const RopeTable& table) override {
    expect_bf16(x, "rope_inplace", "x", 3);
    expect_f32(table.cos, "rope_inplace", "cos table");
    expect_f32(table.sin, "rope_inplace", "sin table");
    int64_t T = x.dim(0), G = x.dim(1), D = x.dim(2), rope_dim = 2 * table.cos.dim(1);
    DSINFER_CHECK(static_cast<int64_t>(positions.size()) == T && begin >= 0 && begin + rope_dim <= D,
                  "rope_inplace: ", positions.size(), " positions for x ", x.shape().to_string());
    expect_positions(positions, table, "rope_inplace");
    const int32_t* device_positions = metadata_->int32_array(positions.data(), positions.size());
    cuda::rope_inplace(bf16_data(x), T, G, D, G * D, begin, rope_dim, device_positions, table.cos.data<float>(),
                       table.sin.data<float>(), table.interleaved, stream_);
  }

  void write_cache(Tensor& cache, const Tensor& latent_in, const AttentionBatch& batch) override {
    Tensor latent = activation(latent_in);
    expect_cache(cache, "write_cache");
    expect_bf16(latent, "write_cache", "latent", 2);
    int64_t width = cache.dim(2);
    DSINFER_CHECK(latent.dim(1) == width && latent.dim(0) == static_cast<int64_t>(batch.slot_mapping.size()),
                  "write_cache: latent ", latent.shape().to_string(), " does not match the cache ",
                  cache.shape().to_string());
    expect_slots(batch, cache, "write_cache");
    const DeviceAttention& device = metadata_->attention(batch);
    if (cache.dtype() == DType::kF8E4M3)
      cuda::write_cache_fp8(bf16_data(latent), width, device.slot_mapping, static_cast<uint8_t*>(cache.raw()),
                            latent.dim(0), width, stream_);
    else
      cuda::write_cache(bf16_data(latent), width, device.slot_mapping, bf16_data(cache), latent.dim(0), width,
                        stream_);
  }

  void write_latent_cache(Tensor& cache, const Tensor& kv_a_in, const Tensor& norm_weight, float eps,
                          const RopeTable& table, const AttentionBatch& batch) override {
    Tensor kv_a = activation(kv_a_in);
    expect_cache(cache, "write_latent_cache");
    expect_bf16(kv_a, "write_latent_cache", "kv_a", 2);
    expect_f32(norm_weight, "write_latent_cache", "norm_weight");
    expect_f32(table.cos, "write_latent_cache", "cos table");
    expect_f32(table.sin, "write_latent_cache", "sin table");
    const int64_t T = kv_a.dim(0), width = cache.dim(2), rope = 2 * table.cos.dim(1), latent = width - rope;
    DSINFER_CHECK(kv_a.dim(1) == width && latent > 0 && norm_weight.numel() == latent &&
                      T == static_cast<int64_t>(batch.slot_mapping.size()) &&
                      T == static_cast<int64_t>(batch.positions.size()),
                  "write_latent_cache: kv_a ", kv_a.shape().to_string(), " does not match the cache ",
                  cache.shape().to_string(), ", a norm of ", norm_weight.numel(), " and ", rope, " rope dims");
    expect_slots(batch, cache, "write_latent_cache");
    expect_positions(batch.positions, table, "write_latent_cache");
    const DeviceAttention& device = metadata_->attention(batch);
    const int32_t* positions = metadata_->int32_array(batch.positions.data(), batch.positions.size());
    if (cache.dtype() == DType::kF8E4M3)
      cuda::write_latent_cache_fp8(bf16_data(kv_a), T, latent, rope, norm_weight.data<float>(), eps, positions,
                                   table.cos.data<float>(), table.sin.data<float>(), table.interleaved,
                                   device.slot_mapping, static_cast<uint8_t*>(cache.raw()), stream_);
    else
      cuda::write_latent_cache(bf16_data(kv_a), T, latent, rope, norm_weight.data<float>(), eps, positions,
                               table.cos.data<float>(), table.sin.data<float>(), table.interleaved, device.slot_mapping,
                               bf16_data(cache), stream_);
  }

  // An FP8 cache comes out dequantized, in bf16 (the prefill's cached prefix up-projects it).
  Tensor gather_cache(const Tensor& cache, const AttentionBatch& batch) override {
    expect_cache(cache, "gather_cache");
    const DeviceAttention& device = metadata_->attention(batch);
    int64_t width = cache.dim(2);
    Tensor out = allocate(DType::kBF16, {device.total_context, width});
    if (cache.dtype() == DType::kF8E4M3)
      cuda::gather_cache_fp8(static_cast<const uint8_t*>(cache.raw()), device.page_table_start, device.page_ids,
                             device.context_lens, device.context_start, bf16_data(out), device.num_sequences,
                             device.max_context, static_cast<int>(cache.dim(1)), width, stream_);
    else
      cuda::gather_cache(bf16_data(cache), device.page_table_start, device.page_ids, device.context_lens,
                         device.context_start, bf16_data(out), device.num_sequences, device.max_context,
                         static_cast<int>(cache.dim(1)), width, stream_);
    return out;
  }

  Tensor attention_expanded(const Tensor& q, const Tensor& kv, const Tensor& k_rope, const AttentionBatch& batch,
                            float scale) override {
    return ops_->attention_expanded(activation(q), activation(kv), activation(k_rope), batch, scale);
  }

  Tensor attention_absorbed(const Tensor& q, const Tensor& cache, const AttentionBatch& batch, float scale,
                            int64_t latent_width) override {
    return ops_->attention_absorbed(activation(q), cache, batch, scale, latent_width);
  }

  Routing route(const Tensor& logits, const Tensor& bias, const RouterParams& params) override {
    expect_f32(logits, "route", "logits");
    DSINFER_CHECK(logits.rank() == 2, "route: logits must be [T, E]");
    if (bias.defined()) expect_f32(bias, "route", "bias");
    int64_t T = logits.dim(0);
    auto E = static_cast<int>(logits.dim(1));
    DSINFER_CHECK(params.top_k >= 1 && params.top_k <= E && params.n_group >= 1 && E % params.n_group == 0 &&
                      params.topk_group >= 1 && params.topk_group <= params.n_group,
                  "route: bad router parameters for ", E, " experts");
    Routing routing{allocate(DType::kI32, {T, params.top_k}), allocate(DType::kF32, {T, params.top_k})};
    cuda::route(logits.data<float>(), bias.defined() ? bias.data<float>() : nullptr,
                routing.expert_ids.data<int32_t>(), routing.weights.data<float>(), T, E, params, stream_);
    return routing;
  }

  Tensor moe_experts(const Tensor& x, const Routing& routing, const ExpertStack& experts) override {
    return ops_->moe_experts(activation(x), routing, experts);
  }

  SampledTokens sample_tokens(Tensor& logits, const SamplingBatch& batch) override {
    return queue_sample_tokens(logits, batch)->wait();
  }

  std::unique_ptr<PendingTokens> queue_sample_tokens(Tensor& logits, const SamplingBatch& batch) override {
    Tensor device_logits = logits.device() == Device::kCuda ? logits : to_device(logits);
    return ops_->queue_sample_tokens(device_logits, batch);
  }

 private:
  // Activations in the compute dtype: f32 inputs (from to_device of host f32 data) are narrowed.
  Tensor activation(const Tensor& x) {
    expect_device(x, "op", "input");
    if (x.dtype() != DType::kF32) return x;
    Tensor out = allocate(DType::kBF16, x.shape());
    convert_f32_to_bf16(x.data<float>(), bf16_data(out), x.numel(), stream_);
    return out;
  }

  int device_;
  int sm_count_ = 0;
  cudaStream_t stream_ = nullptr;
  std::shared_ptr<DeviceAllocator> allocator_;
  std::unique_ptr<StepMetadata> metadata_;
  std::unique_ptr<CudaOps> ops_;
  std::function<bool()> wait_poll_;  // set_wait_poll's
};

}  // namespace

int device_count() {
  int count = 0;
  if (cudaGetDeviceCount(&count) != cudaSuccess) {
    (void)cudaGetLastError();
    return 0;
  }
  return count;
}

CudaDeviceInfo device_info(int device) {
  cudaDeviceProp props{};
  DSINFER_CUDA_CHECK(cudaGetDeviceProperties(&props, device));
  CudaDeviceInfo info;
  info.name = props.name;
  info.multiprocessors = props.multiProcessorCount;
  DSINFER_CUDA_CHECK(cudaSetDevice(device));
  DSINFER_CUDA_CHECK(cudaMemGetInfo(&info.free_bytes, &info.total_bytes));
  return info;
}

cudaStream_t stream_of(Backend& backend) {
  auto* cuda = dynamic_cast<CudaBackend*>(&backend);
  DSINFER_CHECK(cuda, "stream_of: the ", backend.name(), " backend is not a CUDA backend");
  return cuda->stream();
}

std::unique_ptr<Backend> make_cuda_backend(const CudaOptions& options) {
  DSINFER_CHECK(device_count() > options.device, "--device cuda: no CUDA device ", options.device,
                " (found ", device_count(), ")");
  return std::make_unique<CudaBackend>(options);
}

}  // namespace dsinfer::backend::cuda
