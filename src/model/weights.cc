#include "model/weights.h"

#include <cstdint>
#include <cstring>

#include "io/weight_format.h"

namespace dsinfer::model {
namespace {

bool aligned_for(const Tensor& tensor) {
  return reinterpret_cast<uintptr_t>(tensor.raw()) % dtype_size(tensor.dtype()) == 0;
}

// Safetensors does not promise alignment; copy the rare unaligned tensor once.
Tensor aligned(const Tensor& stored) { return aligned_for(stored) ? stored : stored.clone(); }

// Tensors of one dtype and trailing shape, one after the other in new host memory: [count, rest...]
// when `new_axis`, else concatenated along the first axis.
Tensor stack_host(const std::vector<Tensor>& parts, bool new_axis) {
  const Tensor& first = parts.front();
  size_t bytes = 0;
  int64_t rows = 0;
  for (const Tensor& part : parts) {
    DSINFER_CHECK(part.dtype() == first.dtype() && part.rank() == first.rank() &&
                      part.numel() / part.dim(0) == first.numel() / first.dim(0),
                  "cannot stack ", part.shape().to_string(), " ", dtype_name(part.dtype()), " with ",
                  first.shape().to_string(), " ", dtype_name(first.dtype()));
    bytes += part.nbytes();
    rows += part.dim(0);
  }
  Shape shape = first.shape();
  if (new_axis) {
    std::vector<int64_t> dims{static_cast<int64_t>(parts.size())};
    for (int axis = 0; axis < first.rank(); ++axis) dims.push_back(first.dim(axis));
    shape = Shape::from(dims);
  } else {
    shape[0] = rows;
  }
  Tensor out = Tensor::empty(first.dtype(), shape);
  char* cursor = static_cast<char*>(out.raw());
  for (const Tensor& part : parts) {
    std::memcpy(cursor, part.raw(), part.nbytes());
    cursor += part.nbytes();
  }
  return out;
}

std::string scale_name(const std::string& name) {
  std::string base = name;
  auto at = base.rfind(".weight");
  DSINFER_CHECK(at != std::string::npos, name, " is not a weight");
  return base.substr(0, at) + ".weight_scale_inv";
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

Tensor WeightLoader::to_compute(const Tensor& host) const { return backend_.to_device(compute_host(host)); }

backend::LinearWeight WeightLoader::host_linear(const std::string& name) const {
  const io::TensorInfo& info = checkpoint_.info(name);
  DSINFER_CHECK(info.shape.rank() == 2, checkpoint_.dir(), ": ", name, " must be a matrix, has shape ",
                info.shape.to_string());
  if (info.dtype == DType::kBF16 || info.dtype == DType::kF32) return {aligned(checkpoint_.tensor(name)), {}, {}};
  bool block_128 = config_.quantization.block_n == backend::kWeightBlock &&
                   config_.quantization.block_k == backend::kWeightBlock;
  if (info.dtype == DType::kF8E4M3 && block_128 && checkpoint_.contains(scale_name(name))) {
    Tensor scale = host_f32(scale_name(name));
    int64_t blocks_n = (info.shape[0] + 127) / 128, blocks_k = (info.shape[1] + 127) / 128;
    DSINFER_CHECK(scale.rank() == 2 && scale.dim(0) == blocks_n && scale.dim(1) == blocks_k, checkpoint_.dir(),
                  ": ", scale_name(name), " has shape ", scale.shape().to_string(), ", expected [", blocks_n, ", ",
                  blocks_k, "]");
    return {aligned(checkpoint_.tensor(name)), scale, backend::WeightFormat::kFp8Block};
  }
  // f16, or FP8 with another block size: widen once.
  return {compute_host(host_f32(name)), {}, {}};
}

Tensor WeightLoader::compute_host(const Tensor& wide) const {
  if (backend_.compute_dtype() == DType::kF32) return wide;
  DSINFER_CHECK(backend_.compute_dtype() == DType::kBF16, "unsupported compute dtype ",
                dtype_name(backend_.compute_dtype()));
  Tensor narrow = Tensor::empty(DType::kBF16, wide.shape());
  for (int64_t i = 0; i < wide.numel(); ++i) narrow.data<uint16_t>()[i] = f32_to_bf16(wide.data<float>()[i]);
  return narrow;
}

backend::LinearWeight WeightLoader::to_device(const backend::LinearWeight& host) const {
  backend::LinearWeight device{backend_.to_device(host.data), {}, host.format};
  if (host.scale.defined()) device.scale = backend_.to_device(host.scale);
  return device;
}

backend::LinearWeight WeightLoader::linear(const std::string& name) const { return to_device(host_linear(name)); }

backend::LinearWeight WeightLoader::stack_to_device(const std::vector<backend::LinearWeight>& parts) const {
  std::vector<Tensor> data, scales;
  for (const backend::LinearWeight& part : parts) {
    DSINFER_CHECK(part.format == parts.front().format, checkpoint_.dir(),
                  ": the weights of one stack are stored in different formats");
    data.push_back(part.data);
    if (part.scale.defined()) scales.push_back(part.scale);
  }
  backend::LinearWeight out{backend_.to_device(stack_host(data, true)), {}, parts.front().format};
  if (!scales.empty()) out.scale = backend_.to_device(stack_host(scales, true));
  return out;
}

backend::LinearWeight WeightLoader::stacked(const std::vector<std::string>& names) const {
  std::vector<backend::LinearWeight> parts;
  for (const std::string& name : names) parts.push_back(host_linear(name));
  return stack_to_device(parts);
}

backend::LinearWeight WeightLoader::stacked_gate_up(const std::vector<std::string>& gates,
                                                    const std::vector<std::string>& ups) const {
  DSINFER_CHECK(gates.size() == ups.size(), "stacked_gate_up: ", gates.size(), " gates but ", ups.size(), " ups");
  std::vector<backend::LinearWeight> parts;
  for (size_t i = 0; i < gates.size(); ++i) parts.push_back(host_rows(gates[i], ups[i]));
  return stack_to_device(parts);
}

backend::LinearWeight WeightLoader::host_rows(const std::string& first, const std::string& second) const {
  backend::LinearWeight a = host_linear(first), b = host_linear(second);
  DSINFER_CHECK(a.format == b.format && a.data.dim(1) == b.data.dim(1), checkpoint_.dir(), ": ", first, " ",
                a.data.shape().to_string(), " and ", second, " ", b.data.shape().to_string(), " cannot be stacked");
  if (a.format == backend::WeightFormat::kFp8Block && a.data.dim(0) % backend::kWeightBlock != 0) {
    // The scale blocks of the second half would not line up: widen both.
    a = {compute_host(host_f32(first)), {}, {}};
    b = {compute_host(host_f32(second)), {}, {}};
  }
  backend::LinearWeight out{stack_host({a.data, b.data}, false), {}, a.format};
  if (a.scale.defined()) out.scale = stack_host({a.scale, b.scale}, false);
  return out;
}

backend::LinearWeight WeightLoader::concatenated_rows(const std::string& first, const std::string& second) const {
  return to_device(host_rows(first, second));
}

}  // namespace dsinfer::model
