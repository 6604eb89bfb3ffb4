#include "core/tensor.h"

#include <cstdlib>
#include <cstring>
#include <new>

namespace dsinfer {

Shape::Shape(std::initializer_list<int64_t> dims) {
  DSINFER_CHECK(dims.size() <= kMaxRank, "tensor rank ", dims.size(), " exceeds ", kMaxRank);
  for (int64_t dim : dims) dims_[rank_++] = dim;
}

int64_t Shape::numel() const {
  int64_t count = 1;
  for (int i = 0; i < rank_; ++i) count *= dims_[i];
  return count;
}

std::string Shape::to_string() const {
  std::string out = "[";
  for (int i = 0; i < rank_; ++i) {
    if (i) out += ", ";
    out += std::to_string(dims_[i]);
  }
  return out + "]";
}

bool operator==(const Shape& a, const Shape& b) {
  if (a.rank_ != b.rank_) return false;
  for (int i = 0; i < a.rank_; ++i)
    if (a.dims_[i] != b.dims_[i]) return false;
  return true;
}

Tensor Tensor::empty(DType dtype, Shape shape) {
  for (int i = 0; i < shape.rank(); ++i)
    DSINFER_CHECK(shape[i] >= 0, "negative dimension in shape ", shape.to_string());
  Tensor tensor;
  tensor.dtype_ = dtype;
  tensor.shape_ = shape;
  size_t bytes = tensor.nbytes();
  size_t rounded = (bytes + 63) / 64 * 64;
  void* memory = std::aligned_alloc(64, rounded == 0 ? 64 : rounded);
  if (memory == nullptr) throw std::bad_alloc();
  std::memset(memory, 0, rounded == 0 ? 64 : rounded);
  tensor.storage_ = std::shared_ptr<void>(memory, std::free);
  tensor.data_ = memory;
  return tensor;
}

Tensor Tensor::wrap(void* data, DType dtype, Shape shape, Device device,
                    std::shared_ptr<void> keep_alive) {
  Tensor tensor;
  tensor.storage_ = std::move(keep_alive);
  tensor.data_ = data;
  tensor.dtype_ = dtype;
  tensor.device_ = device;
  tensor.shape_ = shape;
  return tensor;
}

Tensor Tensor::view(Shape shape) const {
  DSINFER_CHECK(shape.numel() == numel(), "cannot view ", shape_.to_string(), " as ",
                shape.to_string());
  Tensor out = *this;
  out.shape_ = shape;
  return out;
}

Tensor Tensor::slice(int64_t begin, int64_t end) const {
  DSINFER_CHECK(rank() >= 1 && 0 <= begin && begin <= end && end <= dim(0), "slice [", begin, ", ",
                end, ") out of range for ", shape_.to_string());
  Tensor out = *this;
  size_t row_bytes = nbytes() / static_cast<size_t>(dim(0) == 0 ? 1 : dim(0));
  out.data_ = static_cast<char*>(data_) + static_cast<size_t>(begin) * row_bytes;
  out.shape_[0] = end - begin;
  return out;
}

Tensor Tensor::clone() const {
  DSINFER_CHECK(device_ == Device::kCpu, "clone() of a non-CPU tensor");
  Tensor out = empty(dtype_, shape_);
  if (nbytes()) std::memcpy(out.data_, data_, nbytes());
  return out;
}

}  // namespace dsinfer
