#include "model/weights.h"

#include <algorithm>
#include <cmath>
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

// NAME ("P.weight") -> "P.<suffix>": the tensors stored beside or in place of a weight (its FP8
// block scales; compressed-tensors' int4 parts).
std::string weight_part(const std::string& name, const char* suffix) {
  auto at = name.rfind(".weight");
  DSINFER_CHECK(at != std::string::npos, name, " is not a weight");
  return str_cat(name.substr(0, at), ".", suffix);
}

std::string scale_name(const std::string& name) { return weight_part(name, "weight_scale_inv"); }

uint64_t seed_of(const std::string& name) { return std::hash<std::string>{}(name); }

// An int4 weight (`packed`, NAME.weight_packed) loaded as a plain linear layer, not a routed-expert
// stack: refused at load where the backend has no such kernel (the GPU runs W4A8 as experts only).
void expect_w4a8_linear(const backend::Backend& backend, const std::string& dir, const std::string& packed) {
  DSINFER_CHECK(backend.supports_weight_format(backend::WeightFormat::kW4A8, backend::WeightUse::kLinear), dir, ": ",
                packed, " is an int4 (W4A8) weight outside the routed experts, which the ", backend.name(),
                " backend runs only as routed experts; --device cpu runs it");
}

// The shard's rows and columns of a [N, K] matrix, checked against it.
parallel::Range rows_of(const WeightShard& shard, const Shape& full) {
  parallel::Range rows = shard.rows.value_or(parallel::Range{0, full[-2]});
  DSINFER_CHECK(rows.begin >= 0 && rows.begin < rows.end && rows.end <= full[-2], "rows [", rows.begin, ", ",
                rows.end, ") of a weight with ", full[-2]);
  return rows;
}
parallel::Range columns_of(const WeightShard& shard, const Shape& full) {
  parallel::Range columns = shard.columns.value_or(parallel::Range{0, full[-1]});
  DSINFER_CHECK(columns.begin >= 0 && columns.begin < columns.end && columns.end <= full[-1], "columns [",
                columns.begin, ", ", columns.end, ") of a weight with ", full[-1]);
  return columns;
}

// Whether a range of a dimension of `size` starts and ends on 128-element scale blocks.
bool on_blocks(parallel::Range range, int64_t size) {
  return range.begin % backend::kWeightBlock == 0 && (range.end % backend::kWeightBlock == 0 || range.end == size);
}
bool shard_on_blocks(const WeightShard& shard, const Shape& full) {
  return on_blocks(rows_of(shard, full), full[-2]) && on_blocks(columns_of(shard, full), full[-1]);
}

// Rows and columns of a host matrix [N, K]: a view when the columns are all of them, else a copy.
Tensor sub_matrix(const Tensor& matrix, parallel::Range rows, parallel::Range columns) {
  if (columns.begin == 0 && columns.end == matrix.dim(1)) return matrix.slice(rows.begin, rows.end);
  Tensor out = Tensor::empty(matrix.dtype(), {rows.size(), columns.size()});
  const size_t element = dtype_size(matrix.dtype());
  for (int64_t r = 0; r < rows.size(); ++r)
    std::memcpy(static_cast<char*>(out.raw()) + r * columns.size() * element,
                static_cast<const char*>(matrix.raw()) + ((rows.begin + r) * matrix.dim(1) + columns.begin) * element,
                columns.size() * element);
  return out;
}

// The scale blocks [ceil-divided] that cover a block-aligned range.
parallel::Range blocks_of(parallel::Range range) {
  return {range.begin / backend::kWeightBlock, (range.end + backend::kWeightBlock - 1) / backend::kWeightBlock};
}

// A dummy shard's seed: the weight's own when whole, else mixed with where the shard sits.
std::string seed_name_of(const std::string& name, const WeightShard& shard) {
  if (shard.whole()) return name;
  return str_cat(name, "#", shard.rows ? shard.rows->begin : -1, ":", shard.columns ? shard.columns->begin : -1);
}

// Dummy magnitudes: weights uniform with standard deviation ~0.02; FP8 codes of std ~130 times a
// block scale of ~1.5e-4 give the same.
constexpr float kWeightBound = 0.035f;
constexpr float kFp8CodeBound = 224.0f;
constexpr float kFp8ScaleLow = 1.4e-4f, kFp8ScaleHigh = 1.7e-4f;
// Dummy int4 weights: q in -8..7 times a group scale near kWeightBound / 7; AWQ factors around 1.
constexpr float kInt4ScaleLow = 4.0e-3f, kInt4ScaleHigh = 6.0e-3f;
constexpr float kAwqFactorLow = 0.5f, kAwqFactorHigh = 2.0f;

}  // namespace

WeightLoader::WeightLoader(const io::ModelConfig& config, io::StoredFormat format, backend::Backend& backend,
                           const parallel::RankPlan* plan)
    : config_(config), backend_(backend), plan_(plan ? *plan : parallel::RankPlan{}) {
  for (io::TensorSpec& spec : io::checkpoint_tensors(config, format)) {
    std::string name = spec.name;
    dummy_specs_.emplace(std::move(name), std::move(spec));
  }
}

bool WeightLoader::contains(const std::string& name) const {
  return checkpoint_ ? checkpoint_->contains(name) || is_int4(name) : dummy_specs_.count(name) > 0;
}

bool WeightLoader::is_int4(const std::string& name) const {
  return checkpoint_ && !checkpoint_->contains(name) && name.ends_with(".weight") &&
         checkpoint_->contains(weight_part(name, "weight_packed"));
}

Shape WeightLoader::int4_shape(const std::string& name) const {
  const std::string shape_name = weight_part(name, "weight_shape");
  const Tensor shape = checkpoint_->tensor(shape_name);
  DSINFER_CHECK(shape.dtype() == DType::kI64 && shape.numel() == 2, checkpoint_->dir(), ": ", shape_name,
                " must be two I64 values, is ", dtype_name(shape.dtype()), " ", shape.shape().to_string());
  const int64_t n = shape.data<int64_t>()[0], k = shape.data<int64_t>()[1];
  DSINFER_CHECK(n > 0 && k > 0, checkpoint_->dir(), ": ", shape_name, " holds [", n, ", ", k, "]");
  return {n, k};
}

backend::LinearWeight WeightLoader::host_int4_linear(const std::string& name, const WeightShard& shard) const {
  const std::string& dir = checkpoint_->dir();
  const int64_t group = config_.quantization.int4_group_size;
  const std::string packed_name = weight_part(name, "weight_packed"), scale_name = weight_part(name, "weight_scale");
  DSINFER_CHECK(group > 0, dir, ": ", packed_name, " is int4, but config.json has no compressed-tensors "
                "quantization_config to give its group size (docs/w4a8.md)");
  DSINFER_CHECK(backend_.supports_weight_format(backend::WeightFormat::kW4A8, backend::WeightUse::kExperts), dir,
                ": ", packed_name, " holds int4 experts (W4A8), which the ", backend_.name(),
                " backend does not run; --device cpu runs them");
  const Shape full = int4_shape(name);
  const int64_t N = full[0], K = full[1];
  const io::TensorInfo& packed = checkpoint_->info(packed_name);
  DSINFER_CHECK(K % group == 0 && K % 8 == 0 && packed.dtype == DType::kI32 && packed.shape == Shape({N, K / 8}),
                dir, ": ", packed_name, " is ", dtype_name(packed.dtype), " ", packed.shape.to_string(), " for a [", N,
                ", ", K, "] weight in groups of ", group, " (expected I32 [", N, ", ", K / 8, "], K a multiple of ",
                group, " and 8)");
  Tensor scale = host_f32(scale_name);
  DSINFER_CHECK(scale.shape() == Shape({N, K / group}), dir, ": ", scale_name, " has shape ", scale.shape().to_string(),
                ", expected [", N, ", ", K / group, "]");
  parallel::Range rows = rows_of(shard, full), columns = columns_of(shard, full);
  DSINFER_CHECK(columns.begin % group == 0 && (columns.end % group == 0 || columns.end == K), dir, ": a shard of ",
                packed_name, " cuts its groups of ", group, " columns at [", columns.begin, ", ", columns.end, ")");
  // Little-endian words read as bytes hold the values in column order, two to a byte.
  Tensor words = aligned(checkpoint_->tensor(packed_name));
  Tensor bytes = Tensor::empty(DType::kU8, {N, K / 2});
  std::memcpy(bytes.raw(), words.raw(), bytes.nbytes());
  backend::LinearWeight out{sub_matrix(bytes, rows, {columns.begin / 2, columns.end / 2}),
                            sub_matrix(scale, rows, {columns.begin / group, columns.end / group}),
                            backend::WeightFormat::kW4A8};
  const std::string input_name = weight_part(name, "input_scale");
  if (checkpoint_->contains(input_name)) {
    Tensor input = host_f32(input_name);
    DSINFER_CHECK(input.numel() == 1 && input.data<float>()[0] > 0 && std::isfinite(input.data<float>()[0]), dir,
                  ": ", input_name, " must be one positive number, is ", input.shape().to_string());
    out.input_scale = input.view(Shape());
  }
  const std::string pre_name = weight_part(name, "pre_quant_scale");
  if (checkpoint_->contains(pre_name)) {  // AWQ's factors on the input's columns (docs/w4a8.md)
    Tensor pre = host_f32(pre_name);
    DSINFER_CHECK(pre.shape() == Shape({K}), dir, ": ", pre_name, " has shape ", pre.shape().to_string(),
                  ", expected [", K, "] (one factor per input column of ", packed_name, ")");
    const float* factors = pre.data<float>();
    for (int64_t k = 0; k < K; ++k)
      DSINFER_CHECK(factors[k] > 0.0f && std::isfinite(factors[k]), dir, ": ", pre_name, "[", k, "] is ", factors[k],
                    ": every factor must be positive and finite");
    out.pre_scale = columns.size() == K ? pre : pre.slice(columns.begin, columns.end).clone();
  }
  return out;
}

std::string WeightLoader::source() const { return checkpoint_ ? checkpoint_->dir() : "dummy weights"; }

const io::TensorSpec& WeightLoader::spec(const std::string& name) const {
  auto it = dummy_specs_.find(name);
  DSINFER_CHECK(it != dummy_specs_.end(), "dummy weights: the layout of this config has no tensor ", name);
  return it->second;
}

backend::LinearWeight WeightLoader::dummy_linear(Shape shape, bool fp8, const std::string& seed_name,
                                                 const WeightShard& shard) const {
  uint64_t seed = seed_of(seed_name_of(seed_name, shard));
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

bool WeightLoader::dummy_int4(const std::string& name) const {
  return !checkpoint_ && config_.quantization.int4_group_size > 0 && name.find(".mlp.experts.") != std::string::npos;
}

backend::LinearWeight WeightLoader::dummy_int4_linear(Shape shape, bool with_pre_scale, const std::string& seed_name,
                                                      const WeightShard& shard) const {
  const int64_t group = config_.quantization.int4_group_size, K = shape[-1];
  DSINFER_CHECK(K % group == 0 && K % 8 == 0, "dummy weights: ", seed_name, " has ", K,
                " columns, not a multiple of the int4 group size ", group, " and of 8");
  DSINFER_CHECK(backend_.supports_weight_format(backend::WeightFormat::kW4A8, backend::WeightUse::kExperts),
                "dummy weights: int4 (W4A8) routed experts, which the ", backend_.name(), " backend does not run");
  const uint64_t seed = seed_of(seed_name_of(seed_name, shard));
  Shape packed = shape;
  packed[-1] = K / 2;
  // Random bytes (two int4 values each): an e4m3 fill, read as bytes (the backends fill only
  // floating-point dtypes); the byte view keeps the e4m3 tensor's storage.
  Tensor codes = backend_.empty(DType::kF8E4M3, packed);
  backend_.fill_uniform(codes, seed, -kFp8CodeBound, kFp8CodeBound);
  backend::LinearWeight weight;
  weight.format = backend::WeightFormat::kW4A8;
  weight.data = Tensor::wrap(codes.raw(), DType::kU8, packed, codes.device(),
                             std::shared_ptr<void>(nullptr, [codes](void*) {}));
  Shape groups = shape;
  groups[-1] = K / group;
  weight.scale = backend_.empty(DType::kF32, groups);
  backend_.fill_uniform(weight.scale, seed + 1, kInt4ScaleLow, kInt4ScaleHigh);
  if (with_pre_scale) {
    weight.pre_scale = backend_.empty(DType::kF32, {shape[0], K});  // [E, K]: one vector an expert
    backend_.fill_uniform(weight.pre_scale, seed + 2, kAwqFactorLow, kAwqFactorHigh);
  }
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
  if (weight.input_scale.defined()) count(weight.input_scale);
  if (weight.pre_scale.defined()) count(weight.pre_scale);
}

void WeightLoader::expect_shape(const std::string& name, Shape expected) const {
  if (is_int4(name)) {
    DSINFER_CHECK(int4_shape(name) == expected, checkpoint_->dir(), ": ", weight_part(name, "weight_shape"), " holds ",
                  int4_shape(name).to_string(), ", expected ", expected.to_string());
    return;
  }
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

Shape WeightLoader::shard_shape(const std::string& name, const WeightShard& shard) const {
  Shape shape = is_int4(name) ? int4_shape(name) : checkpoint_ ? checkpoint_->info(name).shape : spec(name).shape;
  shape[-2] = rows_of(shard, shape).size();
  shape[-1] = columns_of(shard, shape).size();
  return shape;
}

backend::LinearWeight WeightLoader::host_linear(const std::string& name, const WeightShard& shard) const {
  if (is_int4(name)) return host_int4_linear(name, shard);
  const io::TensorInfo& info = checkpoint_->info(name);
  DSINFER_CHECK(info.shape.rank() == 2, checkpoint_->dir(), ": ", name, " must be a matrix, has shape ",
                info.shape.to_string());
  parallel::Range rows = rows_of(shard, info.shape), columns = columns_of(shard, info.shape);
  if (info.dtype == DType::kBF16 || info.dtype == DType::kF32)
    return {sub_matrix(aligned(checkpoint_->tensor(name)), rows, columns), {}, {}};
  bool block_128 = config_.quantization.block_n == backend::kWeightBlock &&
                   config_.quantization.block_k == backend::kWeightBlock;
  if (info.dtype == DType::kF8E4M3 && block_128 && checkpoint_->contains(scale_name(name)) &&
      shard_on_blocks(shard, info.shape)) {
    Tensor scale = host_f32(scale_name(name));
    int64_t blocks_n = (info.shape[0] + 127) / 128, blocks_k = (info.shape[1] + 127) / 128;
    DSINFER_CHECK(scale.rank() == 2 && scale.dim(0) == blocks_n && scale.dim(1) == blocks_k, checkpoint_->dir(),
                  ": ", scale_name(name), " has shape ", scale.shape().to_string(), ", expected [", blocks_n, ", ",
                  blocks_k, "]");
    return {sub_matrix(aligned(checkpoint_->tensor(name)), rows, columns),
            sub_matrix(scale, blocks_of(rows), blocks_of(columns)), backend::WeightFormat::kFp8Block};
  }
  // f16, FP8 with another block size, or a shard that cuts FP8 scale blocks: widen once.
  return {compute_host(sub_matrix(host_f32(name), rows, columns)), {}, {}};
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
  if (host.input_scale.defined()) device.input_scale = backend_.to_device(host.input_scale);
  if (host.pre_scale.defined()) device.pre_scale = backend_.to_device(host.pre_scale);
  count(device);
  return device;
}

backend::LinearWeight WeightLoader::linear(const std::string& name, const WeightShard& shard) const {
  if (!checkpoint_)
    return dummy_linear(shard_shape(name, shard), is_fp8(name) && shard_on_blocks(shard, spec(name).shape), name,
                        shard);
  if (is_int4(name)) expect_w4a8_linear(backend_, checkpoint_->dir(), weight_part(name, "weight_packed"));
  return to_device(host_linear(name, shard));
}

bool WeightLoader::is_fp8(const std::string& name) const {
  return spec(name).dtype == DType::kF8E4M3 && config_.quantization.block_n == backend::kWeightBlock &&
         config_.quantization.block_k == backend::kWeightBlock;
}

backend::LinearWeight WeightLoader::stack_to_device(const std::vector<backend::LinearWeight>& parts) const {
  std::vector<Tensor> data, scales, input_scales, pre_scales;
  for (const backend::LinearWeight& part : parts) {
    DSINFER_CHECK(part.format == parts.front().format, checkpoint_->dir(),
                  ": the weights of one stack are stored in different formats");
    DSINFER_CHECK(part.input_scale.defined() == parts.front().input_scale.defined(), checkpoint_->dir(),
                  ": some W4A8 weights of one stack have an input_scale and some do not");
    data.push_back(part.data);
    if (part.scale.defined()) scales.push_back(part.scale);
    if (part.input_scale.defined()) input_scales.push_back(part.input_scale.view({1}));
    if (part.pre_scale.defined()) pre_scales.push_back(part.pre_scale);
  }
  backend::LinearWeight out{backend_.to_device(stack_host(data, true)), {}, parts.front().format};
  if (!scales.empty()) out.scale = backend_.to_device(stack_host(scales, true));
  if (!input_scales.empty()) out.input_scale = backend_.to_device(stack_host(input_scales, false));  // [E]
  if (!pre_scales.empty()) {
    // An expert without AWQ factors in a stack of experts with them multiplies its input by ones.
    const int64_t K = pre_scales.front().dim(0);
    std::vector<Tensor> rows;
    for (const backend::LinearWeight& part : parts) {
      if (part.pre_scale.defined()) {
        rows.push_back(part.pre_scale);
      } else {
        Tensor ones = Tensor::empty(DType::kF32, {K});
        std::fill_n(ones.data<float>(), K, 1.0f);
        rows.push_back(ones);
      }
    }
    out.pre_scale = backend_.to_device(stack_host(rows, true));  // [E, K]
  }
  count(out);
  return out;
}

backend::LinearWeight WeightLoader::stacked(const std::vector<std::string>& names, const WeightShard& shard) const {
  if (!checkpoint_) {
    Shape one = shard_shape(names.front(), shard);
    if (dummy_int4(names.front()))
      return dummy_int4_linear({static_cast<int64_t>(names.size()), one[0], one[1]}, false, names.front(), shard);
    bool fp8 = is_fp8(names.front()) && shard_on_blocks(shard, spec(names.front()).shape);
    return dummy_linear({static_cast<int64_t>(names.size()), one[0], one[1]}, fp8, names.front(), shard);
  }
  std::vector<backend::LinearWeight> parts;
  for (const std::string& name : names) parts.push_back(host_linear(name, shard));
  return stack_to_device(parts);
}

backend::LinearWeight WeightLoader::stacked_gate_up(const std::vector<std::string>& gates,
                                                    const std::vector<std::string>& ups,
                                                    const WeightShard& shard) const {
  DSINFER_CHECK(gates.size() == ups.size(), "stacked_gate_up: ", gates.size(), " gates but ", ups.size(), " ups");
  if (!checkpoint_) {
    Shape one = shard_shape(gates.front(), shard);
    if (dummy_int4(gates.front()))
      return dummy_int4_linear({static_cast<int64_t>(gates.size()), 2 * one[0], one[1]}, true, gates.front(), shard);
    bool fp8 = is_fp8(gates.front()) && shard_on_blocks(shard, spec(gates.front()).shape) &&
               one[0] % backend::kWeightBlock == 0;  // as host_rows decides
    return dummy_linear({static_cast<int64_t>(gates.size()), 2 * one[0], one[1]}, fp8, gates.front(), shard);
  }
  std::vector<backend::LinearWeight> parts;
  for (size_t i = 0; i < gates.size(); ++i) parts.push_back(host_rows(gates[i], ups[i], shard));
  return stack_to_device(parts);
}

backend::LinearWeight WeightLoader::host_rows(const std::string& first, const std::string& second,
                                              const WeightShard& shard) const {
  backend::LinearWeight a = host_linear(first, shard), b = host_linear(second, shard);
  DSINFER_CHECK(a.format == b.format && a.data.dim(1) == b.data.dim(1), checkpoint_->dir(), ": ", first, " ",
                a.data.shape().to_string(), " and ", second, " ", b.data.shape().to_string(), " cannot be stacked");
  if (a.format == backend::WeightFormat::kFp8Block && a.data.dim(0) % backend::kWeightBlock != 0) {
    // The scale blocks of the second half would not line up: widen both.
    const Shape& full = checkpoint_->info(first).shape;
    parallel::Range rows = rows_of(shard, full), columns = columns_of(shard, full);
    a = {compute_host(sub_matrix(host_f32(first), rows, columns)), {}, {}};
    b = {compute_host(sub_matrix(host_f32(second), rows, columns)), {}, {}};
  }
  backend::LinearWeight out{stack_host({a.data, b.data}, false), {}, a.format};
  if (a.scale.defined()) out.scale = stack_host({a.scale, b.scale}, false);
  if (a.input_scale.defined() || b.input_scale.defined()) {
    // One input for both halves: one activation scale, the larger (docs/w4a8.md).
    DSINFER_CHECK(a.input_scale.defined() && b.input_scale.defined(), checkpoint_->dir(), ": ", first, " and ",
                  second, " must both have an input_scale or neither");
    out.input_scale = Tensor::empty(DType::kF32, {});
    out.input_scale.data<float>()[0] = std::max(a.input_scale.data<float>()[0], b.input_scale.data<float>()[0]);
  }
  if (a.pre_scale.defined() || b.pre_scale.defined()) {
    // One input for both halves, quantized once: their AWQ factors must be one vector (docs/w4a8.md).
    const std::string a_name = weight_part(first, "pre_quant_scale"), b_name = weight_part(second, "pre_quant_scale");
    DSINFER_CHECK(a.pre_scale.defined() && b.pre_scale.defined(), checkpoint_->dir(), ": ",
                  a.pre_scale.defined() ? a_name : b_name, " is given but ", a.pre_scale.defined() ? b_name : a_name,
                  " is not: the two share their input, so both need the same factors");
    DSINFER_CHECK(std::equal(a.pre_scale.data<float>(), a.pre_scale.data<float>() + a.pre_scale.numel(),
                             b.pre_scale.data<float>()),
                  checkpoint_->dir(), ": ", a_name, " and ", b_name,
                  " differ: the two share their input, quantized once, so they need the same factors");
    out.pre_scale = a.pre_scale;
  }
  return out;
}

backend::LinearWeight WeightLoader::concatenated_rows(const std::string& first, const std::string& second,
                                                      const WeightShard& shard) const {
  if (!checkpoint_) {
    Shape a = shard_shape(first, shard), b = shard_shape(second, shard);
    bool fp8 = is_fp8(first) && shard_on_blocks(shard, spec(first).shape) && a[0] % backend::kWeightBlock == 0;
    return dummy_linear({a[0] + b[0], a[1]}, fp8, first, shard);
  }
  for (const std::string* name : {&first, &second})
    if (is_int4(*name)) expect_w4a8_linear(backend_, checkpoint_->dir(), weight_part(*name, "weight_packed"));
  return to_device(host_rows(first, second, shard));
}

}  // namespace dsinfer::model
