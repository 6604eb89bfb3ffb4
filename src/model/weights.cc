#include "model/weights.h"

#include <cstdint>
#include <cstring>

#include "io/weight_format.h"

namespace dsinfer::model {
namespace {

bool aligned_for(const Tensor& tensor) {
  return reinterpret_cast<uintptr_t>(tensor.raw()) % dtype_size(tensor.dtype()) == 0;
}

}  // namespace

void WeightLoader::expect_shape(const std::string& name, Shape expected) const {
  const io::TensorInfo& info = checkpoint_.info(name);
  DSINFER_CHECK(info.shape == expected, checkpoint_.dir(), ": ", name, " has shape ", info.shape.to_string(),
                ", expected ", expected.to_string());
}

Tensor WeightLoader::host_f32(const std::string& name) const {
  return io::load_f32(checkpoint_, name, static_cast<int>(config_.quantization.block_n),
                      static_cast<int>(config_.quantization.block_k));
}

Tensor WeightLoader::f32(const std::string& name) const { return backend_.to_device(host_f32(name)); }

Tensor WeightLoader::linear(const std::string& name) const {
  const io::TensorInfo& info = checkpoint_.info(name);
  DSINFER_CHECK(info.shape.rank() == 2, checkpoint_.dir(), ": ", name, " must be a matrix, has shape ",
                info.shape.to_string());
  if (info.dtype == DType::kBF16 || info.dtype == DType::kF32) {
    Tensor stored = checkpoint_.tensor(name);
    // Safetensors does not promise alignment; copy the rare unaligned tensor once.
    return backend_.to_device(aligned_for(stored) ? stored : stored.clone());
  }
  return f32(name);
}

Tensor WeightLoader::stacked(const std::string& first, const std::string& second) const {
  Tensor a = linear(first), b = linear(second);
  Tensor host_a = backend_.to_host(a), host_b = backend_.to_host(b);
  DSINFER_CHECK(host_a.dim(1) == host_b.dim(1) && host_a.dtype() == host_b.dtype(), checkpoint_.dir(), ": ",
                first, " ", host_a.shape().to_string(), " and ", second, " ", host_b.shape().to_string(),
                " cannot be stacked");
  Tensor out = Tensor::empty(host_a.dtype(), {host_a.dim(0) + host_b.dim(0), host_a.dim(1)});
  std::memcpy(out.raw(), host_a.raw(), host_a.nbytes());
  std::memcpy(static_cast<char*>(out.raw()) + host_a.nbytes(), host_b.raw(), host_b.nbytes());
  return backend_.to_device(out);
}

}  // namespace dsinfer::model
