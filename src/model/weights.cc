#include "model/weights.h"

#include <cstdint>
#include <cstring>

#include "backend/cpu/random_fill.h"
#include "core/log.h"
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

uint64_t seed_of(const std::string& name) { return std::hash<std::string>{}(name); }

// Dummy magnitudes: weights uniform with standard deviation ~0.02; FP8 codes of std ~130 times a
// block scale of ~1.5e-4 give the same.
constexpr float kWeightBound = 0.035f;
constexpr float kFp8CodeBound = 224.0f;
constexpr float kFp8ScaleLow = 1.4e-4f, kFp8ScaleHigh = 1.7e-4f;

}  // namespace

WeightLoader::WeightLoader(const io::ModelConfig& config, io::StoredFormat format, backend::Backend& backend)
    : config_(config), backend_(backend) {
  for (io::TensorSpec& spec : io::checkpoint_tensors(config, format)) {
    std::string name = spec.name;
    dummy_specs_.emplace(std::move(name), std::move(spec));
  }
}

bool WeightLoader::contains(const std::string& name) const {
  return checkpoint_ ? checkpoint_->contains(name) : dummy_specs_.count(name) > 0;
}

std::string WeightLoader::source() const { return checkpoint_ ? checkpoint_->dir() : "dummy weights"; }

const io::TensorSpec& WeightLoader::spec(const std::string& name) const {
  auto it = dummy_specs_.find(name);
  DSINFER_CHECK(it != dummy_specs_.end(), "dummy weights: the layout of this config has no tensor ", name);
  return it->second;
}

backend::LinearWeight WeightLoader::dummy_linear(Shape shape, bool fp8, const std::string& seed_name) const {
  uint64_t seed = seed_of(seed_name);
  backend::LinearWeight weight;
  if (!fp8) {
    weight.data = backend_.empty(backend_.compute_dtype(), shape);
    backend_.fill_uniform(weight.data, seed, -kWeightBound, kWeightBound);
    count(weight);
    return weight;
  }
  weight.format = backend::WeightFormat::kFp8Block;
  weight.data = backend_.empty(DType::kF8E4M3, shape);
  backend_.fill_uniform(weight.data, seed, -kFp8CodeBound, kFp8CodeBound);
  Shape blocks = shape;
  blocks[-2] = (shape[-2] + backend::kWeightBlock - 1) / backend::kWeightBlock;
  blocks[-1] = (shape[-1] + backend::kWeightBlock - 1) / backend::kWeightBlock;
  weight.scale = backend_.empty(DType::kF32, blocks);
  backend_.fill_uniform(weight.scale, seed + 1, kFp8ScaleLow, kFp8ScaleHigh);
  count(weight);
  return weight;
}

Tensor WeightLoader::dummy_host_f32(const std::string& name) const {
  const io::TensorSpec& tensor = spec(name);
  Tensor out = Tensor::empty(DType::kF32, tensor.shape);
  bool norm = name.find("norm") != std::string::npos;
  bool bias = name.find("bias") != std::string::npos;
  float low = norm ? 0.9f : bias ? -0.01f : -kWeightBound, high = norm ? 1.1f : bias ? 0.01f : kWeightBound;
  for (int64_t i = 0; i < out.numel(); ++i)
    out.data<float>()[i] = backend::uniform_at(seed_of(name), static_cast<uint64_t>(i), low, high);
  return out;
}

double WeightLoader::seconds() const {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - start_).count();
}

void WeightLoader::count(const Tensor& tensor) const {
  loaded_bytes_ += static_cast<int64_t>(tensor.nbytes());
  auto now = std::chrono::steady_clock::now();
  if (now - last_report_ < std::chrono::seconds(5)) return;
  last_report_ = now;
  double elapsed = seconds();
  log_info("loading ", source(), ": ", static_cast<double>(loaded_bytes_) / 1e9, " GB in ", elapsed, " s (",
           static_cast<double>(loaded_bytes_) / 1e9 / elapsed, " GB/s)");
}

void WeightLoader::count(const backend::LinearWeight& weight) const {
  count(weight.data);
  if (weight.scale.defined()) count(weight.scale);
}

void WeightLoader::expect_shape(const std::string& name, Shape expected) const {
  if (!checkpoint_) {
    DSINFER_CHECK(spec(name).shape == expected, "dummy weights: ", name, " has shape ",
                  spec(name).shape.to_string(), ", expected ", expected.to_string());
    return;
  }
  const io::TensorInfo& info = checkpoint_->info(name);
  DSINFER_CHECK(info.shape == expected, checkpoint_->dir(), ": ", name, " has shape ", info.shape.to_string(),
                ", expected ", expected.to_string());
}

Tensor WeightLoader::host_f32(const std::string& name) const {
  if (!checkpoint_) return dummy_host_f32(name);
  return io::load_f32(*checkpoint_, name, static_cast<int>(config_.quantization.block_n),
                      static_cast<int>(config_.quantization.block_k));
}

Tensor WeightLoader::f32(const std::string& name) const {
  Tensor device = backend_.to_device(host_f32(name));
  count(device);
  return device;
}

Tensor WeightLoader::to_compute(const Tensor& host) const {
  Tensor device = backend_.to_device(compute_host(host));
  count(device);
  return device;
}

backend::LinearWeight WeightLoader::host_linear(const std::string& name) const {
  const io::TensorInfo& info = checkpoint_->info(name);
  DSINFER_CHECK(info.shape.rank() == 2, checkpoint_->dir(), ": ", name, " must be a matrix, has shape ",
                info.shape.to_string());
  if (info.dtype == DType::kBF16 || info.dtype == DType::kF32) return {aligned(checkpoint_->tensor(name)), {}, {}};
  bool block_128 = config_.quantization.block_n == backend::kWeightBlock &&
                   config_.quantization.block_k == backend::kWeightBlock;
  if (info.dtype == DType::kF8E4M3 && block_128 && checkpoint_->contains(scale_name(name))) {
    Tensor scale = host_f32(scale_name(name));
    int64_t blocks_n = (info.shape[0] + 127) / 128, blocks_k = (info.shape[1] + 127) / 128;
    DSINFER_CHECK(scale.rank() == 2 && scale.dim(0) == blocks_n && scale.dim(1) == blocks_k, checkpoint_->dir(),
                  ": ", scale_name(name), " has shape ", scale.shape().to_string(), ", expected [", blocks_n, ", ",
                  blocks_k, "]");
    return {aligned(checkpoint_->tensor(name)), scale, backend::WeightFormat::kFp8Block};
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
  count(device);
  return device;
}

backend::LinearWeight WeightLoader::linear(const std::string& name) const {
  if (!checkpoint_) return dummy_linear(spec(name).shape, is_fp8(name), name);
  return to_device(host_linear(name));
}

bool WeightLoader::is_fp8(const std::string& name) const {
  return spec(name).dtype == DType::kF8E4M3 && config_.quantization.block_n == backend::kWeightBlock &&
         config_.quantization.block_k == backend::kWeightBlock;
}

backend::LinearWeight WeightLoader::stack_to_device(const std::vector<backend::LinearWeight>& parts) const {
  std::vector<Tensor> data, scales;
  for (const backend::LinearWeight& part : parts) {
    DSINFER_CHECK(part.format == parts.front().format, checkpoint_->dir(),
                  ": the weights of one stack are stored in different formats");
    data.push_back(part.data);
    if (part.scale.defined()) scales.push_back(part.scale);
  }
  backend::LinearWeight out{backend_.to_device(stack_host(data, true)), {}, parts.front().format};
  if (!scales.empty()) out.scale = backend_.to_device(stack_host(scales, true));
  count(out);
  return out;
}

backend::LinearWeight WeightLoader::stacked(const std::vector<std::string>& names) const {
  if (!checkpoint_) {
    Shape one = spec(names.front()).shape;
    return dummy_linear({static_cast<int64_t>(names.size()), one[0], one[1]}, is_fp8(names.front()), names.front());
  }
  std::vector<backend::LinearWeight> parts;
  for (const std::string& name : names) parts.push_back(host_linear(name));
  return stack_to_device(parts);
}

backend::LinearWeight WeightLoader::stacked_gate_up(const std::vector<std::string>& gates,
                                                    const std::vector<std::string>& ups) const {
  DSINFER_CHECK(gates.size() == ups.size(), "stacked_gate_up: ", gates.size(), " gates but ", ups.size(), " ups");
  if (!checkpoint_) {
    Shape one = spec(gates.front()).shape;
    bool fp8 = is_fp8(gates.front()) && one[0] % backend::kWeightBlock == 0;  // as host_rows decides
    return dummy_linear({static_cast<int64_t>(gates.size()), 2 * one[0], one[1]}, fp8, gates.front());
  }
  std::vector<backend::LinearWeight> parts;
  for (size_t i = 0; i < gates.size(); ++i) parts.push_back(host_rows(gates[i], ups[i]));
  return stack_to_device(parts);
}

backend::LinearWeight WeightLoader::host_rows(const std::string& first, const std::string& second) const {
  backend::LinearWeight a = host_linear(first), b = host_linear(second);
  DSINFER_CHECK(a.format == b.format && a.data.dim(1) == b.data.dim(1), checkpoint_->dir(), ": ", first, " ",
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
  if (!checkpoint_) {
    Shape a = spec(first).shape, b = spec(second).shape;
    bool fp8 = is_fp8(first) && a[0] % backend::kWeightBlock == 0;
    return dummy_linear({a[0] + b[0], a[1]}, fp8, first);
  }
  return to_device(host_rows(first, second));
}

}  // namespace dsinfer::model
