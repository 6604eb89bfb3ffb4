#include "backend/cuda/step_metadata.h"

#include <algorithm>
#include <cstring>

#include "backend/cuda/cuda_check.h"

namespace dsinfer::backend::cuda {
namespace {

constexpr size_t kAlign = 16;

size_t aligned(size_t bytes) { return (bytes + kAlign - 1) / kAlign * kAlign; }

// Host arrays laid out in one buffer: each piece's offset, then one copy.
class Packer {
 public:
  template <typename T>
  size_t add(const T* data, size_t count) {
    size_t offset = bytes_.size();
    size_t size = count * sizeof(T);
    bytes_.resize(offset + aligned(size));
    if (size) std::memcpy(bytes_.data() + offset, data, size);
    return offset;
  }
  const std::vector<char>& bytes() const { return bytes_; }

 private:
  std::vector<char> bytes_;
};

struct Derived {
  std::vector<int32_t> token_sequence, context_start;
  int max_context = 0, max_query_len = 0;
};

Derived derive(const AttentionBatch& batch) {
  Derived d;
  int B = batch.num_sequences();
  d.context_start.push_back(0);
  for (int b = 0; b < B; ++b) {
    for (int32_t t = batch.query_start[b]; t < batch.query_start[b + 1]; ++t) d.token_sequence.push_back(b);
    d.context_start.push_back(d.context_start.back() + batch.context_lens[b]);
    d.max_context = std::max(d.max_context, batch.context_lens[b]);
    d.max_query_len = std::max(d.max_query_len, batch.query_start[b + 1] - batch.query_start[b]);
  }
  return d;
}

struct BatchOffsets {
  size_t positions, slot_mapping, query_start, context_lens, page_table_start, page_ids, token_sequence,
      context_start;
  DeviceAttention shape;
};

// Every array of a batch but its page ids, whose count varies with the contexts: those go after
// the fixed-size arrays of every batch (pack_page_ids), so that steps of one shape (a CUDA graph's
// bucket) put each array at the same offset whatever their contexts.
BatchOffsets pack_batch(Packer& packer, const AttentionBatch& batch) {
  DSINFER_CHECK(static_cast<int>(batch.query_start.size()) == batch.num_sequences() + 1 &&
                    static_cast<int>(batch.page_table_start.size()) == batch.num_sequences() + 1 &&
                    batch.positions.size() == batch.slot_mapping.size() &&
                    static_cast<int64_t>(batch.positions.size()) == batch.query_start.back(),
                "attention batch: inconsistent sizes");
  Derived d = derive(batch);
  BatchOffsets o{};
  o.positions = packer.add(batch.positions.data(), batch.positions.size());
  o.slot_mapping = packer.add(batch.slot_mapping.data(), batch.slot_mapping.size());
  o.query_start = packer.add(batch.query_start.data(), batch.query_start.size());
  o.context_lens = packer.add(batch.context_lens.data(), batch.context_lens.size());
  o.page_table_start = packer.add(batch.page_table_start.data(), batch.page_table_start.size());
  o.token_sequence = packer.add(d.token_sequence.data(), d.token_sequence.size());
  o.context_start = packer.add(d.context_start.data(), d.context_start.size());
  o.shape.num_tokens = static_cast<int>(batch.positions.size());
  o.shape.num_sequences = batch.num_sequences();
  o.shape.total_context = d.context_start.back();
  o.shape.max_context = d.max_context;
  o.shape.max_query_len = d.max_query_len;
  o.shape.page_size = batch.page_size;
  return o;
}

void pack_page_ids(Packer& packer, const AttentionBatch& batch, BatchOffsets& o) {
  o.page_ids = packer.add(batch.page_ids.data(), batch.page_ids.size());
}

DeviceAttention resolve(const BatchOffsets& o, const char* base) {
  DeviceAttention out = o.shape;
  out.positions = reinterpret_cast<const int32_t*>(base + o.positions);
  out.slot_mapping = reinterpret_cast<const int64_t*>(base + o.slot_mapping);
  out.query_start = reinterpret_cast<const int32_t*>(base + o.query_start);
  out.context_lens = reinterpret_cast<const int32_t*>(base + o.context_lens);
  out.page_table_start = reinterpret_cast<const int32_t*>(base + o.page_table_start);
  out.page_ids = reinterpret_cast<const int32_t*>(base + o.page_ids);
  out.token_sequence = reinterpret_cast<const int32_t*>(base + o.token_sequence);
  out.context_start = reinterpret_cast<const int32_t*>(base + o.context_start);
  return out;
}

}  // namespace

StepMetadata::StepMetadata(std::shared_ptr<DeviceAllocator> allocator, cudaStream_t stream)
    : allocator_(std::move(allocator)), stream_(stream) {
  for (cudaEvent_t& event : staged_) DSINFER_CUDA_CHECK(cudaEventCreateWithFlags(&event, cudaEventDisableTiming));
}

StepMetadata::~StepMetadata() {
  for (cudaEvent_t event : staged_)
    if (event) cudaEventDestroy(event);
}

void StepMetadata::upload(const StepContext& step) {
  arrays_.clear();
  batches_.clear();
  extra_.clear();
  extra_batches_.clear();

  Packer packer;
  size_t ids = packer.add(step.token_ids.data(), step.token_ids.size());
  std::vector<BatchOffsets> offsets;
  for (const AttentionBatch* batch : step.batches) offsets.push_back(pack_batch(packer, *batch));
  for (size_t i = 0; i < step.batches.size(); ++i) pack_page_ids(packer, *step.batches[i], offsets[i]);
  size_t rows = packer.add(step.logit_rows.data(), step.logit_rows.size());  // last: see layout()
  const std::vector<char>& bytes = packer.bytes();

  // Staging buffer i is free once the copy that last read it has run.
  PinnedBuffer& staging = staging_[next_staging_];
  cudaEvent_t& staged = staged_[next_staging_];
  DSINFER_CUDA_CHECK(cudaEventSynchronize(staged));
  staging.reserve(std::max<size_t>(bytes.size(), 1));
  std::memcpy(staging.data(), bytes.data(), bytes.size());
  if (bytes.size() > device_bytes_) {
    // Grows only while the largest step is still unseen; the old block is recycled in stream order.
    device_ = allocator_->allocate_bytes(bytes.size() * 2);
    device_bytes_ = bytes.size() * 2;
  }
  if (!bytes.empty())
    DSINFER_CUDA_CHECK(cudaMemcpyAsync(device_.get(), staging.data(), bytes.size(), cudaMemcpyHostToDevice, stream_));
  DSINFER_CUDA_CHECK(cudaEventRecord(staged, stream_));
  next_staging_ ^= 1;

  const char* base = static_cast<const char*>(device_.get());
  layout_.assign({reinterpret_cast<uintptr_t>(base), ids});
  for (const BatchOffsets& o : offsets)
    layout_.insert(layout_.end(), {o.positions, o.slot_mapping, o.query_start, o.context_lens, o.page_table_start,
                                   o.token_sequence, o.context_start, o.page_ids});
  if (!step.token_ids.empty()) arrays_[step.token_ids.data()] = reinterpret_cast<const int32_t*>(base + ids);
  if (!step.logit_rows.empty()) arrays_[step.logit_rows.data()] = reinterpret_cast<const int32_t*>(base + rows);
  for (size_t i = 0; i < step.batches.size(); ++i) {
    DeviceAttention device = resolve(offsets[i], base);
    batches_[step.batches[i]] = device;
    if (!step.batches[i]->positions.empty()) arrays_[step.batches[i]->positions.data()] = device.positions;
  }
}

const DeviceAttention& StepMetadata::attention(const AttentionBatch& batch) {
  if (auto it = batches_.find(&batch); it != batches_.end()) return it->second;
  DSINFER_CHECK(!capturing_, "step metadata: an attention batch that begin_step did not register cannot be uploaded "
                "while a CUDA graph is captured");
  Packer packer;
  BatchOffsets offsets = pack_batch(packer, batch);
  pack_page_ids(packer, batch, offsets);
  std::shared_ptr<void> block = allocator_->allocate_bytes(std::max<size_t>(packer.bytes().size(), 1));
  DSINFER_CUDA_CHECK(cudaMemcpyAsync(block.get(), packer.bytes().data(), packer.bytes().size(),
                                     cudaMemcpyHostToDevice, stream_));
  DSINFER_CUDA_CHECK(cudaStreamSynchronize(stream_));  // the host bytes die with `packer`
  extra_.push_back(block);
  // Not cached by address: another batch may live at this address later in the step.
  return extra_batches_.emplace_back(resolve(offsets, static_cast<const char*>(block.get())));
}

const int32_t* StepMetadata::find(const void* host) const {
  auto it = arrays_.find(host);
  return it == arrays_.end() ? nullptr : it->second;
}

const int32_t* StepMetadata::int32_array(const int32_t* host, size_t count) {
  if (const int32_t* device = find(host)) return device;
  DSINFER_CHECK(!capturing_, "step metadata: a host array that begin_step did not register cannot be uploaded while "
                "a CUDA graph is captured");
  std::shared_ptr<void> block = allocator_->allocate_bytes(std::max<size_t>(count * sizeof(int32_t), 1));
  if (count)
    DSINFER_CUDA_CHECK(cudaMemcpyAsync(block.get(), host, count * sizeof(int32_t), cudaMemcpyHostToDevice, stream_));
  DSINFER_CUDA_CHECK(cudaStreamSynchronize(stream_));
  extra_.push_back(block);
  return static_cast<const int32_t*>(block.get());
}

}  // namespace dsinfer::backend::cuda
