// Tensor: a typed, shaped, contiguous (row-major) block of memory on one device.
//
// A Tensor either owns its memory (Tensor::empty on the CPU) or views memory kept alive by
// someone else (Tensor::wrap: an mmap'd checkpoint, a CUDA allocation made by a backend). Copies
// are shallow: they share the storage. core/ knows nothing of CUDA; backends allocate device
// memory and wrap it.
#pragma once

#include <array>
#include <cstdint>
#include <initializer_list>
#include <memory>
#include <string>

#include "core/dtype.h"
#include "core/error.h"

namespace dsinfer {

enum class Device : uint8_t { kCpu, kCuda };

class Shape {
 public:
  static constexpr int kMaxRank = 6;
  Shape() = default;
  Shape(std::initializer_list<int64_t> dims);
  template <typename Container>
  static Shape from(const Container& dims) {
    Shape shape;
    DSINFER_CHECK(dims.size() <= kMaxRank, "tensor rank ", dims.size(), " exceeds ", kMaxRank);
    for (auto dim : dims) shape.dims_[shape.rank_++] = static_cast<int64_t>(dim);
    return shape;
  }

  int rank() const { return rank_; }
  int64_t operator[](int axis) const { return dims_[axis < 0 ? axis + rank_ : axis]; }
  int64_t& operator[](int axis) { return dims_[axis < 0 ? axis + rank_ : axis]; }
  int64_t numel() const;
  std::string to_string() const;  // "[3, 4]"
  friend bool operator==(const Shape& a, const Shape& b);
  friend bool operator!=(const Shape& a, const Shape& b) { return !(a == b); }

 private:
  std::array<int64_t, kMaxRank> dims_{};
  int rank_ = 0;
};

class Tensor {
 public:
  Tensor() = default;

  // New zero-filled CPU memory, 64-byte aligned.
  static Tensor empty(DType dtype, Shape shape);
  // A view on memory that keep_alive owns (may be null when the caller guarantees lifetime).
  static Tensor wrap(void* data, DType dtype, Shape shape, Device device,
                     std::shared_ptr<void> keep_alive);

  bool defined() const { return data_ != nullptr || shape_.rank() > 0; }
  DType dtype() const { return dtype_; }
  Device device() const { return device_; }
  const Shape& shape() const { return shape_; }
  int rank() const { return shape_.rank(); }
  int64_t dim(int axis) const { return shape_[axis]; }
  int64_t numel() const { return shape_.numel(); }
  size_t nbytes() const { return static_cast<size_t>(numel()) * dtype_size(dtype_); }

  void* raw() const { return data_; }
  template <typename T>
  T* data() const { return static_cast<T*>(data_); }

  // Same storage, new shape with the same element count.
  Tensor view(Shape shape) const;
  // Rows [begin, end) of dimension 0, sharing storage.
  Tensor slice(int64_t begin, int64_t end) const;
  // A deep copy in new CPU memory (CPU tensors only).
  Tensor clone() const;

 private:
  std::shared_ptr<void> storage_;
  void* data_ = nullptr;
  DType dtype_ = DType::kF32;
  Device device_ = Device::kCpu;
  Shape shape_;
};

}  // namespace dsinfer
