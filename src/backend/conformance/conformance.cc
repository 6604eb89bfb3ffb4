// The conformance harness: host inputs, comparisons, the cases of every op, the runner and its
// table. What is compared and how is in conformance.h.
#include "backend/conformance/conformance.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstring>
#include <iomanip>
#include <limits>
#include <map>
#include <memory>
#include <numbers>
#include <numeric>
#include <optional>
#include <ostream>
#include <random>
#include <span>
#include <sstream>

#include "core/parallel.h"

namespace dsinfer::backend::conformance {
namespace {

// ------------------------------------------------------------------------------------------------
// Random inputs. Value i of stream `seed` depends on (seed, i) alone, so tensors fill in parallel
// and come out the same for any thread count.

uint64_t hash_at(uint64_t seed, uint64_t i) {  // splitmix64
  uint64_t z = seed + (i + 1) * 0x9e3779b97f4a7c15ull;
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  return z ^ (z >> 31);
}

// Approximately N(0, 1): the sum of four 16-bit uniforms (Irwin-Hall), bounded at +-3.46. Cheap
// enough for the 11G weights of a full-size expert stack.
float normal_at(uint64_t seed, int64_t i) {
  uint64_t h = hash_at(seed, static_cast<uint64_t>(i));
  float sum = static_cast<float>(h & 0xffff) + static_cast<float>((h >> 16) & 0xffff) +
              static_cast<float>((h >> 32) & 0xffff) + static_cast<float>(h >> 48);
  return (sum - 131070.0f) * (1.7320508f / 65536.0f);
}

float uniform_at(uint64_t seed, int64_t i) {  // [0, 1)
  return static_cast<float>(hash_at(seed, static_cast<uint64_t>(i)) >> 40) * 0x1p-24f;
}

uint64_t case_seed(std::string_view op, std::string_view name) {  // FNV-1a of "op/name"
  uint64_t h = 0xcbf29ce484222325ull;
  auto eat = [&](std::string_view text) {
    for (char c : text) h = (h ^ static_cast<uint8_t>(c)) * 0x100000001b3ull;
  };
  eat(op);
  eat("/");
  eat(name);
  return h;
}

uint64_t stream(uint64_t seed, int k) { return hash_at(seed, 1000003ull * static_cast<uint64_t>(k + 1)); }

template <typename Fill>
void fill_parallel(int64_t count, const Fill& fill) {
  parallel_for(count, 1 << 16, [&](int64_t begin, int64_t end) {
    for (int64_t i = begin; i < end; ++i) fill(i);
  });
}

float bf16_round(float value) { return bf16_to_f32(f32_to_bf16(value)); }

// f32 ~ N(mean, std^2) rounded to bf16: an activation as both backends receive it.
Tensor activation(Shape shape, uint64_t seed, float std, float mean = 0.0f) {
  Tensor t = Tensor::empty(DType::kF32, shape);
  float* data = t.data<float>();
  fill_parallel(t.numel(), [&](int64_t i) { data[i] = bf16_round(mean + std * normal_at(seed, i)); });
  return t;
}

Tensor normal_bf16(Shape shape, uint64_t seed, float std) {
  Tensor t = Tensor::empty(DType::kBF16, shape);
  auto* data = t.data<uint16_t>();
  fill_parallel(t.numel(), [&](int64_t i) { data[i] = f32_to_bf16(std * normal_at(seed, i)); });
  return t;
}

// The e4m3 code nearest to `value` (ties away from zero), by bit arithmetic: core's f32_to_fp8e4m3
// scans all 127 codes, too slow for the 11G codes of a full-size expert stack. The codes are data, so
// the tie rule does not matter.
uint8_t fast_fp8e4m3(float value) {
  uint32_t bits;
  std::memcpy(&bits, &value, sizeof(bits));
  auto sign = static_cast<uint8_t>((bits >> 24) & 0x80);
  float magnitude = std::fabs(value);
  uint32_t code;
  if (magnitude < 0x1p-6f) {  // subnormal: m * 2^-9, m in 0..8 (8 is the smallest normal, 0x08)
    code = static_cast<uint32_t>(magnitude * 512.0f + 0.5f);
  } else {  // (exponent, 3 mantissa bits) rounded, rebiased from 127 to 7
    code = (((bits & 0x7fffffffu) + (1u << 19)) >> 20) - ((127u - 7u) << 3);
  }
  return sign | static_cast<uint8_t>(std::min<uint32_t>(code, 0x7e));  // 0x7e = 448; 0x7f is NaN
}

// A weight [N, K] (experts == 0) or a stack [experts, N, K] ~ N(0, std^2): bf16, or FP8 e4m3 codes
// ~N(0, 64^2) (well inside +-448) with per-128x128-block scales std / 64 * [0.5, 1.5) like
// DeepSeek's weight_scale_inv.
LinearWeight make_weight(int64_t experts, int64_t N, int64_t K, WeightFormat format, uint64_t seed, float std) {
  Shape shape = experts > 0 ? Shape{experts, N, K} : Shape{N, K};
  if (format == WeightFormat::kDense) return {normal_bf16(shape, seed, std), {}, format};
  DSINFER_CHECK(format == WeightFormat::kFp8Block, "conformance: no generator for this weight format");
  Tensor data = Tensor::empty(DType::kF8E4M3, shape);
  auto* codes = data.data<uint8_t>();
  fill_parallel(data.numel(), [&](int64_t i) { codes[i] = fast_fp8e4m3(64.0f * normal_at(seed, i)); });
  int64_t blocks_n = (N + kWeightBlock - 1) / kWeightBlock, blocks_k = (K + kWeightBlock - 1) / kWeightBlock;
  Tensor scale = Tensor::empty(DType::kF32, experts > 0 ? Shape{experts, blocks_n, blocks_k} : Shape{blocks_n, blocks_k});
  uint64_t scale_seed = hash_at(seed, 77);
  for (int64_t i = 0; i < scale.numel(); ++i)
    scale.data<float>()[i] = std / 64.0f * (0.5f + uniform_at(scale_seed, i));
  return {data, scale, format};
}

// A W4A8 weight [N, K] (experts == 0) or stack [experts, N, K] as docs/w4a8.md stores it: int4 values
// q in -8..7 (triangular, std ~3: the sum of two uniforms, rounded) two to a byte, the lower column in
// the low nibble, as q + 8, with one f32 scale per `group` columns, std / 3 * [0.5, 1.5) (w ~ std).
LinearWeight make_w4a8_weight(int64_t experts, int64_t N, int64_t K, int64_t group, uint64_t seed, float std) {
  DSINFER_CHECK(K % 2 == 0 && group > 0 && K % group == 0, "conformance: a W4A8 weight of ", K,
                " columns in groups of ", group);
  Shape bytes_shape = experts > 0 ? Shape{experts, N, K / 2} : Shape{N, K / 2};
  Tensor data = Tensor::empty(DType::kU8, bytes_shape);
  auto* bytes = data.data<uint8_t>();
  auto nibble = [](uint32_t bits) {  // (-1, 1) triangular, times 7.5, rounded and clamped, offset by 8
    const float t = (static_cast<float>(bits & 0xffff) + static_cast<float>(bits >> 16)) / 65536.0f - 1.0f;
    return static_cast<uint8_t>(std::clamp(static_cast<int>(std::nearbyint(7.5f * t)), -8, 7) + 8);
  };
  fill_parallel(data.numel(), [&](int64_t i) {
    const uint64_t h = hash_at(seed, static_cast<uint64_t>(i));
    bytes[i] = static_cast<uint8_t>(nibble(static_cast<uint32_t>(h)) | (nibble(static_cast<uint32_t>(h >> 32)) << 4));
  });
  Shape scale_shape = experts > 0 ? Shape{experts, N, K / group} : Shape{N, K / group};
  Tensor scale = Tensor::empty(DType::kF32, scale_shape);
  const uint64_t scale_seed = hash_at(seed, 77);
  float* scales = scale.data<float>();
  fill_parallel(scale.numel(), [&](int64_t i) { scales[i] = std / 3.0f * (0.5f + uniform_at(scale_seed, i)); });
  return {data, scale, WeightFormat::kW4A8};
}

// T token ids in [0, V): the first and last ids of the table and a repeat among random ones.
Tensor random_ids(int64_t T, int64_t V, uint64_t seed) {
  Tensor ids = Tensor::empty(DType::kI32, {T});
  for (int64_t t = 0; t < T; ++t) ids.data<int32_t>()[t] = static_cast<int32_t>(hash_at(seed, t) % V);
  if (T > 1) ids.data<int32_t>()[0] = 0;
  if (T > 2) ids.data<int32_t>()[T - 1] = static_cast<int32_t>(V - 1);
  if (T > 3) ids.data<int32_t>()[2] = ids.data<int32_t>()[1];
  return ids;
}

// ------------------------------------------------------------------------------------------------
// Host tensors, uploads and downloads.

bool is_float(DType dtype) {
  return dtype == DType::kF32 || dtype == DType::kBF16 || dtype == DType::kF16 || dtype == DType::kF8E4M3;
}

Tensor select_rows(const Tensor& host, const std::vector<int32_t>& rows) {
  Shape shape = host.shape();
  shape[0] = static_cast<int64_t>(rows.size());
  Tensor out = Tensor::empty(host.dtype(), shape);
  size_t row_bytes = host.dim(0) > 0 ? host.nbytes() / static_cast<size_t>(host.dim(0)) : 0;
  for (size_t r = 0; r < rows.size(); ++r) {
    DSINFER_CHECK(rows[r] >= 0 && rows[r] < host.dim(0), "conformance: row ", rows[r], " outside ",
                  host.shape().to_string());
    std::memcpy(static_cast<char*>(out.raw()) + r * row_bytes,
                static_cast<const char*>(host.raw()) + rows[r] * row_bytes, row_bytes);
  }
  return out;
}

// The rows the reference computes for a row-independent op of T rows: all of them, or 64 evenly
// spread (first and last included) when T is larger, to keep the CPU's share of a kFull run short.
constexpr int64_t kMaxReferenceRows = 64;
std::vector<int32_t> rows_to_check(int64_t T) {
  std::vector<int32_t> rows;
  if (T <= kMaxReferenceRows) {
    rows.resize(T);
    std::iota(rows.begin(), rows.end(), 0);
  } else {
    for (int64_t i = 0; i < kMaxReferenceRows; ++i)
      rows.push_back(static_cast<int32_t>(i * (T - 1) / (kMaxReferenceRows - 1)));
  }
  return rows;
}

// Guard rows around a tensor an op modifies in place. The sentinel is exact in bf16 and f16 and far
// outside every input's range.
constexpr float kSentinel = 12288.0f;  // saturates to 448 in f8e4m3: still outside the data

struct Guarded {
  Tensor padded;    // on the backend: guard rows, the tensor, guard rows
  Tensor inner;     // the view the op gets
  Tensor expected;  // the host copy of `padded` as uploaded, in its dtype
  int64_t guard_rows = 0;
};

Guarded upload_guarded(Backend& backend, const Tensor& host_f32, DType dtype, int64_t guard_rows) {
  DSINFER_CHECK(host_f32.dtype() == DType::kF32 && host_f32.rank() >= 1, "conformance: guarded tensors start as f32");
  Shape shape = host_f32.shape();
  int64_t rows = shape[0];
  shape[0] = rows + 2 * guard_rows;
  Tensor staged = Tensor::empty(DType::kF32, shape);
  std::fill_n(staged.data<float>(), staged.numel(), kSentinel);
  int64_t row_elements = rows > 0 ? host_f32.numel() / rows : 0;
  std::memcpy(staged.data<float>() + guard_rows * row_elements, host_f32.raw(), host_f32.nbytes());
  Guarded guarded;
  Tensor converted = convert(staged, dtype);
  guarded.expected = converted.clone();  // on the CPU, to_device shares `converted`
  guarded.padded = backend.to_device(converted);
  guarded.inner = guarded.padded.slice(guard_rows, guard_rows + rows);
  guarded.guard_rows = guard_rows;
  return guarded;
}

// Elements of `tensor` (on the backend) that differ from `expected` (host, same dtype), bytewise.
int64_t changed_elements(Backend& backend, const Tensor& tensor, const Tensor& expected) {
  Tensor now = tensor.device() == Device::kCpu ? tensor : backend.to_host(tensor);
  size_t element = dtype_size(expected.dtype());
  const auto* a = static_cast<const char*>(now.raw());
  const auto* b = static_cast<const char*>(expected.raw());
  int64_t changed = 0;
  for (int64_t i = 0; i < expected.numel(); ++i) changed += std::memcmp(a + i * element, b + i * element, element) != 0;
  return changed;
}

// Read-only inputs up to this size are checked for changes after the op (the multi-GB weights of the
// full tier are not: copying them back would dominate the run).
constexpr size_t kMaxCheckedInputBytes = size_t{256} << 20;

int64_t guard_damage(Backend& backend, const Guarded& guarded) {
  int64_t total = guarded.padded.dim(0), rows = guarded.guard_rows;
  int64_t damaged = 0;
  for (auto [begin, end] : {std::pair{int64_t{0}, rows}, std::pair{total - rows, total}})
    damaged += changed_elements(backend, guarded.padded.slice(begin, end), guarded.expected.slice(begin, end));
  return damaged;
}

// ------------------------------------------------------------------------------------------------
// Comparisons.

constexpr double kExact = -1.0;  // a bound that asks for check_exact

std::string format_number(double value) {
  std::ostringstream out;
  out << std::setprecision(4) << value;
  return out.str();
}

std::string index_string(const Shape& shape, int64_t flat) {
  std::vector<int64_t> index(shape.rank());
  for (int axis = shape.rank() - 1; axis >= 0; --axis) {
    int64_t size = std::max<int64_t>(1, shape[axis]);
    index[axis] = flat % size;
    flat /= size;
  }
  std::string out = "[";
  for (size_t i = 0; i < index.size(); ++i) out += (i ? ", " : "") + std::to_string(index[i]);
  return out + "]";
}

std::string element_string(const Tensor& t, int64_t i) {
  switch (t.dtype()) {
    case DType::kF32: return format_number(t.data<float>()[i]);
    case DType::kI32: return std::to_string(t.data<int32_t>()[i]);
    case DType::kI64: return std::to_string(t.data<int64_t>()[i]);
    default: {
      std::ostringstream out;
      out << "0x" << std::hex;
      for (size_t b = 0; b < dtype_size(t.dtype()); ++b)
        out << std::setw(2) << std::setfill('0')
            << static_cast<int>(static_cast<const uint8_t*>(t.raw())[i * dtype_size(t.dtype()) + b]);
      return out.str();
    }
  }
}

bool same_layout(CheckResult& result, const Tensor& reference, const Tensor& candidate) {
  if (!candidate.defined() || reference.shape() != candidate.shape() || reference.dtype() != candidate.dtype()) {
    result.value = std::numeric_limits<double>::infinity();
    result.detail = candidate.defined() ? str_cat("candidate ", dtype_name(candidate.dtype()), " ",
                                                  candidate.shape().to_string(), ", reference ",
                                                  dtype_name(reference.dtype()), " ", reference.shape().to_string())
                                        : "no candidate output";
    return false;
  }
  return true;
}

std::vector<CheckResult> compare_all(const Outputs& reference, const Outputs& candidate, double bound) {
  std::vector<CheckResult> checks;
  for (const auto& [name, expected] : reference.tensors) {
    const Tensor& actual = candidate.get(name);
    checks.push_back(bound == kExact ? check_exact(name, expected, actual) : check_nmse(name, expected, actual, bound));
  }
  return checks;
}

// Columns [begin, begin + width) of x [T, G, D] (host f32), and the rest of each row.
std::pair<Tensor, Tensor> split_columns(const Tensor& x, int64_t begin, int64_t width) {
  int64_t rows = x.numel() / x.dim(-1), D = x.dim(-1);
  Tensor inside = Tensor::empty(DType::kF32, {rows, width});
  Tensor outside = Tensor::empty(DType::kF32, {rows, D - width});
  for (int64_t r = 0; r < rows; ++r) {
    const float* row = x.data<float>() + r * D;
    std::copy_n(row + begin, width, inside.data<float>() + r * width);
    std::copy_n(row, begin, outside.data<float>() + r * (D - width));
    std::copy(row + begin + width, row + D, outside.data<float>() + r * (D - width) + begin);
  }
  return {inside, outside};
}

// ------------------------------------------------------------------------------------------------
// A case as data: the op's arguments, how to call it, how to compare.

enum class ArgKind : uint8_t {
  kActivation,  // host f32 (bf16-rounded), uploaded in the backend's compute dtype
  kConstant,    // uploaded as it is (weights, scales, ids, f32 logits, tables)
  kInPlace,     // host f32 the op modifies: uploaded inside guard rows, downloaded as an output
};

struct Arg {
  Arg(std::string name, ArgKind kind, Tensor host, std::optional<DType> storage = std::nullopt)
      : name(std::move(name)), kind(kind), host(std::move(host)), storage(storage) {}

  std::string name;
  ArgKind kind;
  Tensor host;
  Tensor reference_host;         // when defined, what the reference gets instead (a subset of rows)
  std::optional<DType> storage;  // kInPlace: its dtype on the backend (default: the compute dtype)
  int64_t guard_rows = 2;        // kInPlace: rows of dimension 0 before and after
};

using Comparer = std::function<std::vector<CheckResult>(const Outputs&, const Outputs&)>;

struct OpSpec {
  std::vector<Arg> args;
  std::vector<std::string> results;  // names of the tensors `call` returns
  std::function<std::vector<Tensor>(Backend&, std::vector<Tensor>&)> call;
  std::vector<int32_t> candidate_rows;         // the rows of each result that are compared (empty: all)
  std::vector<const AttentionBatch*> batches;  // registered with begin_step; owned by keep_alive
  std::span<const int32_t> logit_rows;         // registered with begin_step; owned by keep_alive
  Comparer compare;
  std::shared_ptr<const void> keep_alive;  // host data that call, batches and compare point into
};

Comparer compare_with(double bound) {
  return [bound](const Outputs& reference, const Outputs& candidate) { return compare_all(reference, candidate, bound); };
}

CaseProgram program_of(std::shared_ptr<const OpSpec> spec) {
  CaseProgram program;
  program.bind = [spec](Backend& backend, Role role) {
    struct State {
      std::vector<Tensor> args;
      std::vector<std::pair<size_t, Guarded>> guarded;  // (argument index, its guarded upload)
      std::vector<std::pair<size_t, Tensor>> read_only;  // (argument index, a host copy as uploaded)
      std::vector<Tensor> results;
    };
    auto state = std::make_shared<State>();
    for (size_t i = 0; i < spec->args.size(); ++i) {
      const Arg& arg = spec->args[i];
      const Tensor& host = role == Role::kReference && arg.reference_host.defined() ? arg.reference_host : arg.host;
      if (!host.defined()) {
        state->args.emplace_back();
      } else if (arg.kind != ArgKind::kInPlace) {
        Tensor staged = arg.kind == ArgKind::kActivation ? convert(host, backend.compute_dtype()) : host;
        state->args.push_back(backend.to_device(staged));
        if (role == Role::kCandidate && staged.nbytes() <= kMaxCheckedInputBytes)
          state->read_only.emplace_back(i, staged.clone());  // on the CPU, to_device shares `staged`
      } else {
        Guarded guarded = upload_guarded(backend, host, arg.storage.value_or(backend.compute_dtype()), arg.guard_rows);
        state->args.push_back(guarded.inner);
        state->guarded.emplace_back(i, std::move(guarded));
      }
    }
    Invocation invocation;
    Backend* target = &backend;
    invocation.run = [spec, state, target] { state->results = spec->call(*target, state->args); };
    bool select = role == Role::kCandidate && !spec->candidate_rows.empty();
    invocation.collect = [spec, state, target, select] {
      DSINFER_CHECK(state->results.size() == spec->results.size(), "conformance: the op returned ",
                    state->results.size(), " tensors, the case names ", spec->results.size());
      Outputs outputs;
      for (size_t i = 0; i < spec->results.size(); ++i) {
        Tensor host = download(*target, state->results[i]);
        if (select && host.defined()) host = select_rows(host, spec->candidate_rows);
        outputs.add(spec->results[i], host);
      }
      for (const auto& [index, guarded] : state->guarded) {
        outputs.add(spec->args[index].name, download(*target, guarded.inner));
        outputs.guard_damage.emplace_back(spec->args[index].name, guard_damage(*target, guarded));
      }
      for (const auto& [index, expected] : state->read_only)
        outputs.changed_inputs.emplace_back(spec->args[index].name, changed_elements(*target, state->args[index], expected));
      return outputs;
    };
    return invocation;
  };
  program.step.logit_rows = spec->logit_rows;
  program.step.batches = spec->batches;
  program.compare = spec->compare;
  return program;
}

Case make_case(std::string op, std::string name, std::function<OpSpec(uint64_t seed)> build) {
  uint64_t seed = case_seed(op, name);
  return Case{op, name, [build, seed] { return program_of(std::make_shared<const OpSpec>(build(seed))); }};
}

// ------------------------------------------------------------------------------------------------
// Shapes and bounds.

constexpr int64_t kLatent = 512;  // kv_lora_rank
constexpr int64_t kRopeDim = 64;  // qk_rope_head_dim
constexpr int64_t kNopeDim = 128;
constexpr int64_t kValueDim = 128;
constexpr int64_t kCacheWidth = kLatent + kRopeDim;  // 576
constexpr float kWeightStd = 0.02f;
constexpr float kNormEps = 1e-6f;
// V3's softmax scale: YaRN mscale(40)^2 / sqrt(192) = (0.1 ln 40 + 1)^2 / sqrt(192).
constexpr float kSoftmaxScale = 0.13523f;

// NMSE bounds. Rounding a result to bf16 alone costs ~2.7e-6 (measured: conformance_test's bf16
// emulation), so the bounds leave 7x (elementwise) to 35x (attention) for a kernel's own error.
constexpr double kBoundElementwise = 2e-5;  // norms, adds, silu, rope, f32 -> bf16 embedding
constexpr double kBoundProduct = 5e-5;      // bf16 products over long K (f32 accumulation)
constexpr double kBoundF32Product = 1e-5;   // products with an f32 result (router, lm_head logits)
constexpr double kBoundAttention = 1e-4;    // softmax(QK^T)V with bf16 P allowed
// FP8 block weights: a kernel that also quantizes activations to FP8 (per token, per 128 columns,
// as DeepGEMM does) costs ~8e-4 against the dequantized product (measured; up to 2e-3 through both
// expert products at T = 1); one that keeps bf16 activations costs what a bf16 product does.
constexpr double kBoundFp8Product = 4e-3;
// The FP8 KV cache (--kv-cache-dtype fp8). Its writes round each value once to e4m3, as the CPU does,
// from f32 results computed in another order: only a value at a rounding tie can land one e4m3 step
// away (~6% of it, ~1e-7 of a row set's energy each). Its attention, at DeepSeek's widths, also rounds
// q (one scale per head row) and P to e4m3 (3 mantissa bits: ~2.5% rms per value each), which on
// these random rows (scores of ~1.6 nats' spread, zero-mean values, so the output is a small
// average that relative errors stand out in) costs a row nmse of a few 1e-3: measured on an H200,
// 1.2e-3 to 2.5e-3 over the real-shape cases, 1.3e-3 to 2.1e-3 over the small ones (2.8e-6 for the
// reference kernel, which keeps q and P in f32). The bound leaves 2x.
constexpr double kBoundCacheFp8 = 1e-4;
constexpr double kBoundAttentionFp8 = 5e-3;
constexpr double kBoundMoe = 1e-4;     // bf16 experts: two products, bf16 intermediates
constexpr double kBoundMoeFp8 = 6e-3;  // FP8 experts, activations possibly FP8 at both products
// W4A8 experts: the CPU quantizes the activations to e4m3 exactly as the GPU must (per row, or the static
// input scale), so the two differ by the order of f32 sums and by h: bf16 on the GPU before the down
// product's quantization, f32 on the CPU. That moves ~1-2% of h's e4m3 codes by one step (h's rounding,
// and its amax, hence the row's scale, by ~2^-9), 1e-4..3.5e-4 through the down product (measured on the
// small tier with conformance_test's bf16 emulation, which also rounds gate and up to bf16). One row
// holds only I / 50 such flips (~1 at I = 64), so the worst row's nmse scatters up to 1.2e-3 there
// (the emulation again) and gets a bound of its own. A row or group scale applied to the wrong row or
// group costs > 1e-2 with these inputs (varied_activation: token scales 1/4..4; group scales 0.5..1.5).
constexpr double kBoundMoeW4A8 = 1e-3;
constexpr double kBoundMoeW4A8Row = 5e-3;
constexpr double kBoundRouteWeights = 1e-6;
constexpr double kBoundLogprobs = 1e-6;

struct Dims {
  Tier tier;
  int64_t hidden, q_lora, heads, dense_inter, moe_inter, experts, vocab;
  bool full() const { return tier == Tier::kFull; }
  template <typename Value>
  std::vector<Value> pick(std::vector<Value> small, std::vector<Value> large) const {
    return full() ? large : small;
  }
};

Dims dims_of(Tier tier) {
  if (tier == Tier::kFull) return {tier, 7168, 1536, 128, 18432, 2048, 256, 129280};
  return {tier, 512, 256, 16, 1024, 256, 16, 4096};
}

std::string shape_name(std::initializer_list<int64_t> dims) {
  std::string out = "[";
  for (int64_t dim : dims) out += (out.size() > 1 ? ", " : "") + std::to_string(dim);
  return out + "]";
}

using Results = std::vector<Tensor>;

// ------------------------------------------------------------------------------------------------
// Elementwise, normalisation and copies.

void add_elementwise_cases(std::vector<Case>& cases, const Dims& d) {
  for (int64_t T : d.pick<int64_t>({64}, {1, 2048})) {
    int64_t V = d.vocab, H = d.hidden;
    cases.push_back(make_case("embedding", str_cat("bf16 table ", shape_name({V, H}), " T=", T), [=](uint64_t seed) {
      OpSpec s;
      s.args = {{"table", ArgKind::kConstant, normal_bf16({V, H}, stream(seed, 0), 1.0f)},
                {"ids", ArgKind::kConstant, random_ids(T, V, stream(seed, 1))}};
      s.results = {"y"};
      s.call = [](Backend& b, std::vector<Tensor>& a) { return Results{b.embedding(a[0], a[1])}; };
      s.compare = compare_with(kExact);
      return s;
    }));
  }
  cases.push_back(make_case("embedding", str_cat("f32 table ", shape_name({4096, d.hidden}), " T=64"), [=](uint64_t seed) {
    OpSpec s;
    Tensor table = Tensor::empty(DType::kF32, {4096, d.hidden});
    for (int64_t i = 0; i < table.numel(); ++i) table.data<float>()[i] = normal_at(stream(seed, 0), i);
    s.args = {{"table", ArgKind::kConstant, table}, {"ids", ArgKind::kConstant, random_ids(64, 4096, stream(seed, 1))}};
    s.results = {"y"};
    s.call = [](Backend& b, std::vector<Tensor>& a) { return Results{b.embedding(a[0], a[1])}; };
    s.compare = compare_with(kBoundElementwise);
    return s;
  }));

  struct Norm { const char* what; int64_t T, D; };
  for (Norm n : d.pick<Norm>({{"hidden", 64, d.hidden}, {"q_a output", 5, d.q_lora}, {"kv latent", 64, kLatent}},
                             {{"hidden", 1, d.hidden}, {"hidden", 2048, d.hidden}, {"q_a output", 256, d.q_lora},
                              {"kv latent", 2048, kLatent}})) {
    int64_t T = n.T, D = n.D;
    cases.push_back(make_case("rms_norm", str_cat(n.what, " ", shape_name({T, D})), [=](uint64_t seed) {
      OpSpec s;
      s.args = {{"x", ArgKind::kActivation, activation({T, D}, stream(seed, 0), 2.0f)},
                {"weight", ArgKind::kConstant, activation({D}, stream(seed, 1), 0.2f, 1.0f)}};
      s.results = {"y"};
      s.call = [](Backend& b, std::vector<Tensor>& a) { return Results{b.rms_norm(a[0], a[1], kNormEps)}; };
      s.compare = compare_with(kBoundElementwise);
      return s;
    }));
  }
  for (int64_t T : d.pick<int64_t>({64}, {1, 2048})) {
    int64_t D = d.hidden;
    cases.push_back(make_case("add_rms_norm_inplace", str_cat("residual ", shape_name({T, D})), [=](uint64_t seed) {
      OpSpec s;
      s.args = {{"residual", ArgKind::kInPlace, activation({T, D}, stream(seed, 0), 3.0f)},
                {"x", ArgKind::kActivation, activation({T, D}, stream(seed, 1), 1.0f)},
                {"weight", ArgKind::kConstant, activation({D}, stream(seed, 2), 0.2f, 1.0f)}};
      s.results = {"normed"};
      s.call = [](Backend& b, std::vector<Tensor>& a) {
        return Results{b.add_rms_norm_inplace(a[0], a[1], a[2], kNormEps)};
      };
      s.compare = compare_with(kBoundElementwise);
      return s;
    }));
    cases.push_back(make_case("add_inplace", str_cat("x ", shape_name({T, D})), [=](uint64_t seed) {
      OpSpec s;
      s.args = {{"x", ArgKind::kInPlace, activation({T, D}, stream(seed, 0), 3.0f)},
                {"y", ArgKind::kActivation, activation({T, D}, stream(seed, 1), 1.0f)}};
      s.call = [](Backend& b, std::vector<Tensor>& a) {
        b.add_inplace(a[0], a[1]);
        return Results{};
      };
      s.compare = compare_with(kBoundElementwise);
      return s;
    }));
  }
  using Rows = std::pair<int64_t, int64_t>;
  for (auto [T, I] : d.pick<Rows>({{64, d.dense_inter}, {16, d.moe_inter}},
                                  {{1, d.dense_inter}, {2048, d.dense_inter}, {256, d.moe_inter}})) {
    cases.push_back(make_case("silu_mul", str_cat("x ", shape_name({T, 2 * I})), [=](uint64_t seed) {
      OpSpec s;
      s.args = {{"x", ArgKind::kActivation, activation({T, 2 * I}, stream(seed, 0), 1.5f)}};
      s.results = {"y"};
      s.call = [](Backend& b, std::vector<Tensor>& a) { return Results{b.silu_mul(a[0])}; };
      s.compare = compare_with(kBoundElementwise);
      return s;
    }));
  }
}

void add_copy_cases(std::vector<Case>& cases, const Dims& d) {
  int64_t T = d.pick<int64_t>({64}, {2048})[0];
  int64_t decode_rows = d.pick<int64_t>({64 * d.heads}, {256 * d.heads})[0];  // T * H query rows
  for (int64_t rows : {T, decode_rows}) {
    cases.push_back(make_case("concat_last", str_cat(shape_name({rows, kLatent}), " + ", shape_name({rows, kRopeDim})),
                              [=](uint64_t seed) {
                                OpSpec s;
                                s.args = {{"a", ArgKind::kActivation, activation({rows, kLatent}, stream(seed, 0), 1.0f)},
                                          {"b", ArgKind::kActivation, activation({rows, kRopeDim}, stream(seed, 1), 1.0f)}};
                                s.results = {"y"};
                                s.call = [](Backend& b, std::vector<Tensor>& a) { return Results{b.concat_last(a[0], a[1])}; };
                                s.compare = compare_with(kExact);
                                return s;
                              }));
  }
  struct Slice { int64_t rows, width, begin, end; };
  for (Slice slice : {Slice{T, kCacheWidth, 0, kLatent}, Slice{T, kCacheWidth, kLatent, kCacheWidth},
                      Slice{decode_rows, kNopeDim + kRopeDim, kNopeDim, kNopeDim + kRopeDim}}) {
    cases.push_back(make_case("slice_last", str_cat(shape_name({slice.rows, slice.width}), " columns [", slice.begin,
                                                    ", ", slice.end, ")"),
                              [=](uint64_t seed) {
                                OpSpec s;
                                s.args = {{"x", ArgKind::kActivation,
                                           activation({slice.rows, slice.width}, stream(seed, 0), 1.0f)}};
                                s.results = {"y"};
                                s.call = [slice](Backend& b, std::vector<Tensor>& a) {
                                  return Results{b.slice_last(a[0], slice.begin, slice.end)};
                                };
                                s.compare = compare_with(kExact);
                                return s;
                              }));
  }
  int64_t picked = d.pick<int64_t>({5}, {64})[0];
  cases.push_back(make_case("gather_rows", str_cat(picked, " logit rows of ", shape_name({T, d.hidden})), [=](uint64_t seed) {
    auto rows = std::make_shared<std::vector<int32_t>>();
    rows->push_back(static_cast<int32_t>(T - 1));
    for (int64_t i = 1; i + 2 < picked; ++i) rows->push_back(static_cast<int32_t>(hash_at(seed, i) % T));
    rows->push_back(0);
    rows->push_back(rows->front());  // a repeat, out of order
    OpSpec s;
    s.args = {{"x", ArgKind::kActivation, activation({T, d.hidden}, stream(seed, 0), 1.0f)}};
    s.results = {"y"};
    s.call = [rows](Backend& b, std::vector<Tensor>& a) { return Results{b.gather_rows(a[0], *rows)}; };
    s.logit_rows = *rows;
    s.keep_alive = rows;
    s.compare = compare_with(kExact);
    return s;
  }));
  int64_t width = d.heads * kValueDim, decodes = d.pick<int64_t>({5}, {64})[0];
  cases.push_back(make_case("concat_rows", str_cat(shape_name({decodes, width}), " + ", shape_name({T - decodes, width})),
                            [=](uint64_t seed) {
                              OpSpec s;
                              s.args = {{"a", ArgKind::kActivation, activation({decodes, width}, stream(seed, 0), 1.0f)},
                                        {"b", ArgKind::kActivation, activation({T - decodes, width}, stream(seed, 1), 1.0f)}};
                              s.results = {"y"};
                              s.call = [](Backend& b, std::vector<Tensor>& a) { return Results{b.concat_rows(a[0], a[1])}; };
                              s.compare = compare_with(kExact);
                              return s;
                            }));
}

// ------------------------------------------------------------------------------------------------
// Matrix products.

// How a case draws its activations [T, K].
enum class Spread : uint8_t {
  kIid,     // ~N(0, 1) everywhere
  kVaried,  // varied_activation: token, 128-column group and outlier-column scales
};

// Activations [T, K] with a real model's spread (DeepSeek's residual stream and normed latents):
// N(0, 1) times a token scale 2^u (u uniform in [-2, 2]), a scale per 128-column group 2^v (v in
// [-1, 1]) and 8 on a few outlier columns (1 in 29). The per-token, per-group FP8 activation scales
// then differ by up to ~100x from block to block, so a kernel that applies one block's scale to
// another's values is far off; with iid N(0, 1) inputs every group's amax is ~3 and such a mistake
// hides inside the FP8 bound. The errors of a correct kernel stay relative (e4m3 is a float format).
Tensor varied_activation(int64_t T, int64_t K, uint64_t seed) {
  Tensor t = Tensor::empty(DType::kF32, {T, K});
  uint64_t row_seed = hash_at(seed, 1), group_seed = hash_at(seed, 2), column_seed = hash_at(seed, 3);
  std::vector<float> column_scale(K);
  for (int64_t k = 0; k < K; ++k)
    column_scale[k] = std::exp2(2.0f * uniform_at(group_seed, k / kWeightBlock) - 1.0f) *
                      (hash_at(column_seed, static_cast<uint64_t>(k)) % 29 == 0 ? 8.0f : 1.0f);
  float* data = t.data<float>();
  for (int64_t r = 0; r < T; ++r) {
    float row_scale = std::exp2(4.0f * uniform_at(row_seed, r) - 2.0f);
    for (int64_t k = 0; k < K; ++k)
      data[r * K + k] = bf16_round(normal_at(seed, r * K + k) * row_scale * column_scale[k]);
  }
  return t;
}

// y = x W^T for x [T, K] and W [N, K]; f32_result: linear_f32; f32_weight: the router's f32 gate.
// kVaried inputs are also checked row by row: a token of scale 1/4 carries 1/256 of a token of scale
// 4's energy, so a wrong small row would hide in the global nmse.
Case linear_case(const std::string& op, const std::string& name, int64_t T, int64_t K, int64_t N, WeightFormat format,
                 bool f32_weight, double bound, Spread spread = Spread::kIid) {
  bool f32_result = op == "linear_f32";
  return make_case(op, name, [=](uint64_t seed) {
    OpSpec s;
    Tensor x = spread == Spread::kVaried ? varied_activation(T, K, stream(seed, 0)) : activation({T, K}, stream(seed, 0), 1.0f);
    Arg x_arg{"x", ArgKind::kActivation, x};
    std::vector<int32_t> rows = rows_to_check(T);
    if (static_cast<int64_t>(rows.size()) < T) {
      x_arg.reference_host = select_rows(x, rows);
      s.candidate_rows = rows;
    }
    LinearWeight weight = f32_weight ? LinearWeight{activation({N, K}, stream(seed, 1), kWeightStd), {}, format}
                                     : make_weight(0, N, K, format, stream(seed, 1), kWeightStd);
    s.args = {x_arg, {"weight", ArgKind::kConstant, weight.data}, {"scale", ArgKind::kConstant, weight.scale}};
    s.results = {"y"};
    s.call = [format, f32_result](Backend& b, std::vector<Tensor>& a) {
      LinearWeight w{a[1], a[2], format};
      return Results{f32_result ? b.linear_f32(a[0], w) : b.linear(a[0], w)};
    };
    s.compare = compare_with(bound);
    if (spread == Spread::kVaried) {
      s.compare = [bound](const Outputs& reference, const Outputs& candidate) {
        return std::vector<CheckResult>{check_nmse("y", reference.get("y"), candidate.get("y"), bound),
                                        check_nmse_worst_row("y", reference.get("y"), candidate.get("y"), bound)};
      };
    }
    return s;
  });
}

// y[t, h] = x[t, h] W[h]^T for x [T, H, K] and W [H, N, K] bf16 (absorbed MLA's per-head products).
Case grouped_case(const std::string& name, int64_t T, int64_t H, int64_t K, int64_t N) {
  return make_case("grouped_linear", name, [=](uint64_t seed) {
    OpSpec s;
    s.args = {{"x", ArgKind::kActivation, activation({T, H, K}, stream(seed, 0), 1.0f)},
              {"weight", ArgKind::kConstant, normal_bf16({H, N, K}, stream(seed, 1), 0.05f)}};
    s.results = {"y"};
    s.call = [](Backend& b, std::vector<Tensor>& a) { return Results{b.grouped_linear(a[0], a[1])}; };
    s.compare = compare_with(kBoundProduct);
    return s;
  });
}

// Absorbed MLA's query, q [T, H, dn + dr] and w_uk_t [H, L, dn] -> [T, H, L + dr].
Case absorb_query_case(const std::string& name, int64_t T, int64_t H) {
  return make_case("absorb_query", name, [=](uint64_t seed) {
    OpSpec s;
    s.args = {{"q", ArgKind::kActivation, activation({T, H, kNopeDim + kRopeDim}, stream(seed, 0), 1.0f)},
              {"w_uk_t", ArgKind::kConstant, normal_bf16({H, kLatent, kNopeDim}, stream(seed, 1), 0.05f)}};
    s.results = {"query"};
    s.call = [](Backend& b, std::vector<Tensor>& a) { return Results{b.absorb_query(a[0], a[1])}; };
    s.compare = compare_with(kBoundProduct);
    return s;
  });
}

struct MlaGrouped { const char* name; int64_t K, N; };
constexpr MlaGrouped kMlaGrouped[] = {{"w_uk absorb", kNopeDim, kLatent}, {"w_uv unfold", kLatent, kValueDim}};

void add_linear_cases(std::vector<Case>& cases, const Dims& d) {
  struct Projection { const char* name; int64_t K, N; };
  std::vector<Projection> projections = {
      {"q_a", d.hidden, d.q_lora},
      {"q_b", d.q_lora, d.heads * (kNopeDim + kRopeDim)},
      {"kv_a", d.hidden, kCacheWidth},
      {"o_proj", d.heads * kValueDim, d.hidden},
      {"gate_up", d.hidden, 2 * d.dense_inter},
      {"down", d.dense_inter, d.hidden},
  };
  std::vector<int64_t> tokens = d.pick<int64_t>({1, 4, 64}, {1, 4, 64, 256, 2048});
  for (WeightFormat format : {WeightFormat::kDense, WeightFormat::kFp8Block}) {
    bool fp8 = format == WeightFormat::kFp8Block;
    double bound = fp8 ? kBoundFp8Product : kBoundProduct;
    for (const Projection& p : projections)
      for (int64_t T : tokens)
        cases.push_back(linear_case("linear", str_cat(p.name, " ", p.K, "->", p.N, fp8 ? " fp8" : " bf16", " T=", T), T,
                                    p.K, p.N, format, false, bound));
    for (int64_t T : {1, 4})
      cases.push_back(linear_case("linear", str_cat("lm_head ", d.hidden, "->", d.vocab, fp8 ? " fp8" : " bf16", " T=", T),
                                  T, d.hidden, d.vocab, format, false, bound));
  }
  for (int64_t T : d.pick<int64_t>({4, 64}, {1, 64, 2048}))
    cases.push_back(linear_case("linear_f32", str_cat("router gate f32 ", 256, "x", d.hidden, " T=", T), T, d.hidden, 256,
                                WeightFormat::kDense, true, kBoundF32Product));
  for (int64_t T : {1, 4})
    cases.push_back(linear_case("linear_f32", str_cat("lm_head bf16 ", d.vocab, "x", d.hidden, " T=", T), T, d.hidden,
                                d.vocab, WeightFormat::kDense, false, kBoundF32Product));

  // MLA's absorbed matrices: q_nope [T, H, 128] into the latent space, the latent output back out.
  for (MlaGrouped g : kMlaGrouped)
    for (int64_t T : d.pick<int64_t>({1, 16}, {1, 64, 256}))
      cases.push_back(grouped_case(str_cat(g.name, " ", d.heads, "x", g.K, "->", g.N, " T=", T), T, d.heads, g.K, g.N));
  for (int64_t T : d.pick<int64_t>({1, 16}, {1, 64, 256}))
    cases.push_back(absorb_query_case(str_cat(d.heads, " heads T=", T), T, d.heads));

  // One-token shapes that take each tiling of the CUDA GEMV (gemv.cu): 8-lane teams (K = 64),
  // 16-lane teams, rows that 4 does not divide, K split over 8 warps (N = 8, K = 16384), a K that is
  // not a multiple of 8 (the fallback), and grouped products with odd widths.
  struct Edge { int64_t K, N; };
  for (Edge e : {Edge{64, 12}, Edge{128, 36}, Edge{136, 6}, Edge{2048, 7}, Edge{16384, 8}, Edge{7168, 577}, Edge{100, 9}})
    cases.push_back(linear_case("linear", str_cat("gemv edge ", e.K, "->", e.N, " bf16 T=1"), 1, e.K, e.N,
                                WeightFormat::kDense, false, kBoundProduct));
  cases.push_back(linear_case("linear_f32", "gemv edge 7168->577 bf16 f32-out T=1", 1, 7168, 577, WeightFormat::kDense,
                              false, kBoundF32Product));
  for (Edge e : {Edge{24, 5}, Edge{64, 12}, Edge{520, 3}})
    cases.push_back(grouped_case(str_cat("gemv edge 3x", e.K, "->", e.N, " T=1"), 1, 3, e.K, e.N));
}

// ------------------------------------------------------------------------------------------------
// Paged batches, rotary tables, the cache and attention.

struct SequenceSpec {
  int32_t context;     // cached tokens after this step's writes
  int32_t new_tokens;  // this step's tokens: the last new_tokens positions of the context
};

// Sequences over a paged cache whose page ids are a shuffled pool with spare pages nobody owns (they
// hold random rows too, so reading a wrong page changes the result).
struct PagedBatch {
  AttentionBatch batch;
  int64_t num_pages = 0;
  int64_t num_tokens = 0;
  int64_t num_context_rows = 0;  // sum of context_lens
};

std::shared_ptr<PagedBatch> make_paged_batch(const std::vector<SequenceSpec>& sequences, uint64_t seed) {
  auto paged = std::make_shared<PagedBatch>();
  int64_t needed = 0;
  for (const SequenceSpec& s : sequences) {
    DSINFER_CHECK(s.context >= 1 && s.new_tokens >= 1 && s.new_tokens <= s.context, "conformance: bad sequence");
    needed += (s.context + kPageSize - 1) / kPageSize;
  }
  paged->num_pages = needed + needed / 4 + 2;
  std::vector<int32_t> pool(paged->num_pages);
  std::iota(pool.begin(), pool.end(), 0);
  std::mt19937_64 rng(seed);
  std::shuffle(pool.begin(), pool.end(), rng);
  AttentionBatch& batch = paged->batch;
  batch.page_size = static_cast<int>(kPageSize);
  batch.query_start = {0};
  size_t next = 0;
  for (const SequenceSpec& s : sequences) {
    size_t pages = (s.context + kPageSize - 1) / kPageSize;
    std::span<const int32_t> mine(pool.data() + next, pages);
    next += pages;
    batch.add_pages(mine);
    batch.context_lens.push_back(s.context);
    for (int32_t p = s.context - s.new_tokens; p < s.context; ++p) {
      batch.positions.push_back(p);
      batch.slot_mapping.push_back(cache_slot(mine.data(), kPageSize, p));
    }
    batch.query_start.push_back(batch.query_start.back() + s.new_tokens);
    paged->num_context_rows += s.context;
  }
  paged->num_tokens = batch.query_start.back();
  return paged;
}

// B sequences adding `min_new`..`max_new` tokens each, contexts log-uniform in [max_new, max_context]
// with the extremes included.
std::vector<SequenceSpec> random_sequences(int B, int32_t max_context, int32_t min_new, int32_t max_new, uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::vector<SequenceSpec> out;
  for (int b = 0; b < B; ++b) {
    int32_t added = min_new + static_cast<int32_t>(rng() % (max_new - min_new + 1));
    double log_context = std::log(static_cast<double>(max_new)) +
                         (std::log(static_cast<double>(max_context)) - std::log(static_cast<double>(max_new))) *
                             std::uniform_real_distribution<double>(0.0, 1.0)(rng);
    int32_t context = b == 0 ? max_context : b == 1 ? added : static_cast<int32_t>(std::exp(log_context));
    out.push_back({std::max(context, added), added});
  }
  return out;
}

// A YaRN table like DeepSeek-V3's (theta 10000, factor 40 over 4096 original positions, beta_fast 32,
// beta_slow 1): fast-rotating pairs keep their frequency, slow ones are divided by the factor, a linear
// ramp between. Built here because backend/ may not include model/.
RopeTable make_rope_table(int64_t max_positions) {
  int64_t pairs = kRopeDim / 2;
  auto correction_dim = [](double rotations) {
    return kRopeDim * std::log(4096.0 / (rotations * 2 * std::numbers::pi)) / (2 * std::log(10000.0));
  };
  double low = std::max(0.0, std::floor(correction_dim(32.0)));
  double high = std::min(static_cast<double>(kRopeDim - 1), std::ceil(correction_dim(1.0)));
  RopeTable table{Tensor::empty(DType::kF32, {max_positions, pairs}), Tensor::empty(DType::kF32, {max_positions, pairs}),
                  true};
  for (int64_t i = 0; i < pairs; ++i) {
    double frequency = std::pow(10000.0, -2.0 * static_cast<double>(i) / kRopeDim);
    double ramp = std::clamp((static_cast<double>(i) - low) / (high - low), 0.0, 1.0);
    double blended = frequency / 40.0 * ramp + frequency * (1.0 - ramp);
    for (int64_t p = 0; p < max_positions; ++p) {
      table.cos.data<float>()[p * pairs + i] = static_cast<float>(std::cos(static_cast<double>(p) * blended));
      table.sin.data<float>()[p * pairs + i] = static_cast<float>(std::sin(static_cast<double>(p) * blended));
    }
  }
  return table;
}

// A prefill chunk, decodes and an MTP-like sequence in one step: what rope and cache writes see.
std::vector<SequenceSpec> mixed_step(const Dims& d, uint64_t seed) {
  std::vector<SequenceSpec> sequences = d.full() ? std::vector<SequenceSpec>{{2048, 2048}, {8000, 4}, {129, 64}}
                                                 : std::vector<SequenceSpec>{{300, 64}, {1500, 3}, {77, 77}};
  for (const SequenceSpec& s : random_sequences(d.full() ? 64 : 6, d.full() ? 8000 : 1500, 1, 1, seed))
    sequences.push_back(s);
  return sequences;
}

void add_rope_cases(std::vector<Case>& cases, const Dims& d) {
  int64_t max_positions = d.full() ? 8192 : 2048;
  struct Rope { const char* name; int64_t groups, width, begin; };
  for (Rope r : {Rope{"q", d.heads, kNopeDim + kRopeDim, kNopeDim}, Rope{"k_rope", 1, kRopeDim, 0}}) {
    cases.push_back(make_case("rope_inplace", str_cat(r.name, " [T, ", r.groups, ", ", r.width, "] dims [", r.begin, ", ",
                                                      r.begin + kRopeDim, ") mixed step"),
                              [=](uint64_t seed) {
                                auto paged = make_paged_batch(mixed_step(d, stream(seed, 9)), stream(seed, 8));
                                auto table = std::make_shared<RopeTable>(make_rope_table(max_positions));
                                int64_t T = paged->num_tokens;
                                OpSpec s;
                                s.args = {{"x", ArgKind::kInPlace, activation({T, r.groups, r.width}, stream(seed, 0), 1.0f)},
                                          {"cos", ArgKind::kConstant, table->cos},
                                          {"sin", ArgKind::kConstant, table->sin}};
                                s.call = [paged, begin = r.begin](Backend& b, std::vector<Tensor>& a) {
                                  b.rope_inplace(a[0], begin, paged->batch.positions, RopeTable{a[1], a[2], true});
                                  return Results{};
                                };
                                s.batches = {&paged->batch};
                                s.keep_alive = paged;
                                s.compare = [begin = r.begin](const Outputs& reference, const Outputs& candidate) {
                                  auto [expected_rotated, expected_rest] = split_columns(reference.get("x"), begin, kRopeDim);
                                  auto [rotated, rest] = split_columns(candidate.get("x"), begin, kRopeDim);
                                  return std::vector<CheckResult>{
                                      check_nmse("x rotated dims", expected_rotated, rotated, kBoundElementwise),
                                      check_exact("x other dims", expected_rest, rest)};
                                };
                                return s;
                              }));
  }
}

// The cache ops over one cache format: the compute dtype's (what the model's cache holds by default),
// or the FP8 cache (kF8E4M3, cache_layout.h), where the writes quantize (compared with the CPU's bytes:
// exactly for write_cache, whose input is the bf16 value both sides round; kBoundCacheFp8 for
// write_latent_cache, whose f32 values are computed in another order) and the gather dequantizes
// (exactly, into the compute dtype).
struct CacheFormatCases {
  std::optional<DType> storage;  // the cache's dtype on the backend; none: the compute dtype
  std::string label;             // before each case's description ("" or "fp8 cache, ")
  float scale = 1.0f;            // of the written latents and the gathered cache (FP8: its range)
  double latent_bound = kBoundElementwise;  // write_latent_cache's
  std::vector<SequenceSpec> contexts;       // gather_cache's sequences
};

void add_cache_format_cases(std::vector<Case>& cases, const Dims& d, const CacheFormatCases& f) {
  cases.push_back(make_case("write_cache", f.label + "mixed step, scrambled pages", [=](uint64_t seed) {
    auto paged = make_paged_batch(mixed_step(d, stream(seed, 9)), stream(seed, 8));
    OpSpec s;
    Arg cache{"cache", ArgKind::kInPlace, activation({paged->num_pages, kPageSize, kCacheWidth}, stream(seed, 0), 1.0f),
              f.storage};
    cache.guard_rows = 1;  // a page before and after
    s.args = {cache,
              {"latent", ArgKind::kActivation, activation({paged->num_tokens, kCacheWidth}, stream(seed, 1), f.scale)}};
    s.call = [paged](Backend& b, std::vector<Tensor>& a) {
      b.write_cache(a[0], a[1], paged->batch);
      return Results{};
    };
    s.batches = {&paged->batch};
    s.keep_alive = paged;
    s.compare = compare_with(kExact);
    return s;
  }));

  // The fused form of MLA's cache write: norm, rope and scatter from the kv_a projection; a mixed
  // step, and a decode batch (what a graph replays).
  for (bool decode : {false, true}) {
    cases.push_back(make_case("write_latent_cache",
                              f.label + (decode ? "decode batch, scrambled pages" : "mixed step, scrambled pages"),
                              [=](uint64_t seed) {
      std::vector<SequenceSpec> sequences = decode ? random_sequences(d.full() ? 256 : 16, 3000, 1, 1, stream(seed, 7))
                                                   : mixed_step(d, stream(seed, 9));
      auto paged = make_paged_batch(sequences, stream(seed, 8));
      auto table = std::make_shared<RopeTable>(make_rope_table(d.full() ? 8192 : 4096));
      OpSpec s;
      Arg cache{"cache", ArgKind::kInPlace, activation({paged->num_pages, kPageSize, kCacheWidth}, stream(seed, 0), 1.0f),
                f.storage};
      cache.guard_rows = 1;
      s.args = {cache,
                {"kv_a", ArgKind::kActivation, activation({paged->num_tokens, kCacheWidth}, stream(seed, 1), 2.0f)},
                {"norm", ArgKind::kConstant, activation({kLatent}, stream(seed, 2), 0.2f, 1.0f)},
                {"cos", ArgKind::kConstant, table->cos},
                {"sin", ArgKind::kConstant, table->sin}};
      s.call = [paged](Backend& b, std::vector<Tensor>& a) {
        b.write_latent_cache(a[0], a[1], a[2], kNormEps, RopeTable{a[3], a[4], true}, paged->batch);
        return Results{};
      };
      s.batches = {&paged->batch};
      s.keep_alive = paged;
      s.compare = compare_with(f.latent_bound);
      return s;
    }));
  }

  int32_t longest = 0;
  for (const SequenceSpec& s : f.contexts) longest = std::max(longest, s.context);
  cases.push_back(make_case("gather_cache", str_cat(f.label, f.contexts.size(), " sequences, contexts 1..", longest),
                            [=](uint64_t seed) {
    auto paged = make_paged_batch(f.contexts, stream(seed, 8));
    Tensor cache = activation({paged->num_pages, kPageSize, kCacheWidth}, stream(seed, 0), f.scale);
    OpSpec s;
    // Another format's cache is given as its values, stored as the backend stores them.
    s.args = {f.storage ? Arg{"cache", ArgKind::kConstant, convert(cache, *f.storage)}
                        : Arg{"cache", ArgKind::kActivation, cache}};
    s.results = {"rows"};
    s.call = [paged](Backend& b, std::vector<Tensor>& a) { return Results{b.gather_cache(a[0], paged->batch)}; };
    s.batches = {&paged->batch};
    s.keep_alive = paged;
    s.compare = compare_with(kExact);
    return s;
  }));
}

// The compute dtype's cache cases and the FP8 cache's.
CacheFormatCases compute_cache_format(const Dims& d) {
  return {std::nullopt, "", 1.0f, kBoundElementwise,
          d.full() ? std::vector<SequenceSpec>{{4096, 1}, {1, 1}, {1000, 1}, {64, 1}, {129, 1}, {2048, 1}}
                   : std::vector<SequenceSpec>{{1, 1}, {63, 1}, {64, 1}, {65, 1}, {200, 1}}};
}
CacheFormatCases fp8_cache_format(const Dims& d) {
  return {DType::kF8E4M3, "fp8 cache, ", 4.0f, kBoundCacheFp8,
          d.full() ? std::vector<SequenceSpec>{{4096, 1}, {1, 1}, {1000, 1}, {129, 1}}
                   : std::vector<SequenceSpec>{{1, 1}, {63, 1}, {65, 1}, {200, 1}}};
}

Case expanded_case(const std::string& name, int64_t H, std::vector<SequenceSpec> sequences) {
  return make_case("attention_expanded", str_cat(name, " H=", H), [=](uint64_t seed) {
    auto paged = make_paged_batch(sequences, stream(seed, 8));
    int64_t T = paged->num_tokens, S = paged->num_context_rows;
    OpSpec s;
    s.args = {{"q", ArgKind::kActivation, activation({T, H, kNopeDim + kRopeDim}, stream(seed, 0), 1.0f)},
              {"kv", ArgKind::kActivation, activation({S, H, kNopeDim + kValueDim}, stream(seed, 1), 1.0f)},
              {"k_rope", ArgKind::kActivation, activation({S, kRopeDim}, stream(seed, 2), 1.0f)}};
    s.results = {"out"};
    s.call = [paged](Backend& b, std::vector<Tensor>& a) {
      return Results{b.attention_expanded(a[0], a[1], a[2], paged->batch, kSoftmaxScale)};
    };
    s.batches = {&paged->batch};
    s.keep_alive = paged;
    s.compare = [](const Outputs& reference, const Outputs& candidate) {
      return std::vector<CheckResult>{
          check_nmse_worst_row("out", reference.get("out"), candidate.get("out"), kBoundAttention)};
    };
    return s;
  });
}

Case absorbed_case(const std::string& name, int64_t H, std::vector<SequenceSpec> sequences) {
  return make_case("attention_absorbed", str_cat(name, " H=", H), [=](uint64_t seed) {
    auto paged = make_paged_batch(sequences, stream(seed, 8));
    OpSpec s;
    s.args = {{"q", ArgKind::kActivation, activation({paged->num_tokens, H, kCacheWidth}, stream(seed, 0), 0.5f)},
              {"cache", ArgKind::kActivation,
               activation({paged->num_pages, kPageSize, kCacheWidth}, stream(seed, 1), 1.0f)}};
    s.results = {"out"};
    s.call = [paged](Backend& b, std::vector<Tensor>& a) {
      return Results{b.attention_absorbed(a[0], a[1], paged->batch, kSoftmaxScale, kLatent)};
    };
    s.batches = {&paged->batch};
    s.keep_alive = paged;
    s.compare = [](const Outputs& reference, const Outputs& candidate) {
      return std::vector<CheckResult>{
          check_nmse_worst_row("out", reference.get("out"), candidate.get("out"), kBoundAttention)};
    };
    return s;
  });
}

// Absorbed attention over an FP8 cache: the cache's bytes are the input (both sides read the same
// e4m3 rows); the GPU's FP8 kernel rounds q and P to e4m3 as well (kBoundAttentionFp8).
Case absorbed_fp8_case(const std::string& name, int64_t H, std::vector<SequenceSpec> sequences) {
  return make_case("attention_absorbed", str_cat("fp8 cache, ", name, " H=", H), [=](uint64_t seed) {
    auto paged = make_paged_batch(sequences, stream(seed, 8));
    OpSpec s;
    s.args = {{"q", ArgKind::kActivation, activation({paged->num_tokens, H, kCacheWidth}, stream(seed, 0), 0.5f)},
              {"cache", ArgKind::kConstant,
               convert(activation({paged->num_pages, kPageSize, kCacheWidth}, stream(seed, 1), 1.0f), DType::kF8E4M3)}};
    s.results = {"out"};
    s.call = [paged](Backend& b, std::vector<Tensor>& a) {
      return Results{b.attention_absorbed(a[0], a[1], paged->batch, kSoftmaxScale, kLatent)};
    };
    s.batches = {&paged->batch};
    s.keep_alive = paged;
    s.compare = [](const Outputs& reference, const Outputs& candidate) {
      return std::vector<CheckResult>{
          check_nmse_worst_row("out", reference.get("out"), candidate.get("out"), kBoundAttentionFp8)};
    };
    return s;
  });
}

// The FP8 cache's decode: 128 and 16 heads, one and two query tokens, a context of one row, partial
// last pages, one long context alone (split into chunks) and a batch (unsplit at 128 heads).
void add_fp8_attention_cases(std::vector<Case>& cases, const Dims& d) {
  const int32_t longest = d.full() ? 4096 : 300;
  const int batch = d.full() ? 64 : 8;
  for (int64_t heads : {int64_t{128}, int64_t{16}}) {
    cases.push_back(absorbed_fp8_case("decode B=1 context 1", heads, {{1, 1}}));
    cases.push_back(absorbed_fp8_case(str_cat("decode B=1 context ", longest - 3, " (split, partial last page)"), heads,
                                      {{longest - 3, 1}}));
    cases.push_back(absorbed_fp8_case(str_cat("decode B=", batch, " contexts 1..", longest), heads,
                                      random_sequences(batch, longest, 1, 1, case_seed("fp8 decode", std::to_string(heads)))));
    cases.push_back(absorbed_fp8_case(str_cat("MTP B=", batch / 2, " q_len 2"), heads,
                                      random_sequences(batch / 2, longest, 2, 2, case_seed("fp8 mtp", std::to_string(heads)))));
  }
}

void add_attention_cases(std::vector<Case>& cases, const Dims& d) {
  int64_t H = d.heads;
  if (d.full()) {
    cases.push_back(expanded_case("prefill 1 prompt of 2048", H, {{2048, 2048}}));
    cases.push_back(expanded_case("prefill 3 sequences, cached prefixes 256/0/130", H,
                                  {{768, 512}, {1024, 1024}, {167, 37}}));
  } else {
    cases.push_back(expanded_case("prefill 1 prompt of 100", H, {{100, 100}}));
    cases.push_back(expanded_case("prefill 3 sequences, cached prefixes 60/0/135", H, {{90, 30}, {33, 33}, {140, 5}}));
  }
  int32_t max_context = d.full() ? 4096 : 300;
  std::vector<int64_t> decode_heads = d.full() ? std::vector<int64_t>{128, 16} : std::vector<int64_t>{16, 128};
  cases.push_back(absorbed_case("decode B=1 context 1", H, {{1, 1}}));
  cases.push_back(absorbed_case(str_cat("decode B=1 context ", max_context), H, {{max_context, 1}}));
  int decode_batch = d.full() ? 64 : 8;
  for (int64_t heads : decode_heads) {
    int B = d.full() || heads == H ? decode_batch : 2;
    cases.push_back(absorbed_case(str_cat("decode B=", B, " contexts 1..", max_context), heads,
                                  random_sequences(B, max_context, 1, 1, case_seed("decode", std::to_string(heads)))));
  }
  int mtp_batch = d.full() ? 32 : 4, mixed_batch = d.full() ? 16 : 6;
  cases.push_back(absorbed_case(str_cat("MTP B=", mtp_batch, " q_len 2..4"), H,
                                random_sequences(mtp_batch, max_context, 2, 4, case_seed("mtp", ""))));
  cases.push_back(absorbed_case(str_cat("mixed B=", mixed_batch, " q_len 1..4"), H,
                                random_sequences(mixed_batch, max_context, 1, 4, case_seed("mixed", ""))));
}

// ------------------------------------------------------------------------------------------------
// MoE: routing and experts.

double relative_gap(double above, double below) {
  double scale = std::max({std::fabs(above), std::fabs(below), 1e-30});
  return (above - below) / scale;
}

// The smallest relative gap at a routing row's selection boundaries (between the last kept and the
// first dropped group, and between the k-th and the next expert), in double, from the definitions in
// backend.h. Rows are redrawn until it exceeds kRouterMargin, so float rounding cannot flip a choice.
constexpr double kRouterMargin = 1e-4;

double selection_margin(const float* logits, const float* bias, int E, const RouterParams& p) {
  std::vector<double> scores(E), choice(E);
  if (p.scoring == Scoring::kSigmoid) {
    for (int e = 0; e < E; ++e) scores[e] = 1.0 / (1.0 + std::exp(-static_cast<double>(logits[e])));
  } else {
    double max_logit = *std::max_element(logits, logits + E), total = 0.0;
    for (int e = 0; e < E; ++e) total += scores[e] = std::exp(logits[e] - max_logit);
    for (double& s : scores) s /= total;
  }
  for (int e = 0; e < E; ++e) choice[e] = scores[e] + (bias ? bias[e] : 0.0f);
  double margin = std::numeric_limits<double>::infinity();
  if (p.selection != ExpertSelection::kGreedy && p.topk_group < p.n_group) {
    int per_group = E / p.n_group;
    std::vector<std::pair<double, int>> groups;
    for (int g = 0; g < p.n_group; ++g) {
      std::vector<double> members(choice.begin() + g * per_group, choice.begin() + (g + 1) * per_group);
      std::sort(members.rbegin(), members.rend());
      double score = p.selection == ExpertSelection::kNoauxTc ? members[0] + (per_group > 1 ? members[1] : 0.0) : members[0];
      groups.emplace_back(score, g);
    }
    std::sort(groups.rbegin(), groups.rend());
    margin = relative_gap(groups[p.topk_group - 1].first, groups[p.topk_group].first);
    double fill = p.selection == ExpertSelection::kNoauxTc ? -std::numeric_limits<double>::infinity() : 0.0;
    for (int rank = p.topk_group; rank < p.n_group; ++rank) {
      int g = groups[rank].second;
      std::fill(choice.begin() + g * per_group, choice.begin() + (g + 1) * per_group, fill);
    }
  }
  std::sort(choice.rbegin(), choice.rend());
  if (p.top_k < E) margin = std::min(margin, relative_gap(choice[p.top_k - 1], choice[p.top_k]));
  return margin;
}

struct RouterVariant {
  const char* name;
  int experts;
  RouterParams params;
  bool biased;
  float logit_mean, logit_std;
};

void add_route_cases(std::vector<Case>& cases, const Dims& d) {
  std::vector<std::pair<RouterVariant, std::vector<int64_t>>> variants = {
      {{"V3 sigmoid noaux_tc E=256 top-8 of 4/8 groups", 256,
        {Scoring::kSigmoid, ExpertSelection::kNoauxTc, 8, 8, 4, true, 2.5f}, true, -1.0f, 1.5f},
       d.pick<int64_t>({64}, {1, 2048})},
      {{"V2 softmax group-limited E=160 top-6 of 3/8 groups", 160,
        {Scoring::kSoftmax, ExpertSelection::kGroupLimitedGreedy, 6, 8, 3, false, 16.0f}, false, 0.0f, 1.5f},
       d.pick<int64_t>({64}, {256})},
      {{"V2-Lite softmax greedy E=64 top-6", 64, {Scoring::kSoftmax, ExpertSelection::kGreedy, 6, 1, 1, false, 1.0f},
        false, 0.0f, 1.5f},
       d.pick<int64_t>({64}, {256})},
  };
  for (const auto& entry : variants) {
    const RouterVariant& variant = entry.first;
    for (int64_t T : entry.second) {
      cases.push_back(make_case("route", str_cat(variant.name, " T=", T), [T, v = variant](uint64_t seed) {
        int E = v.experts;
        Tensor bias;
        if (v.biased) bias = activation({E}, stream(seed, 1), 0.1f);
        Tensor logits = Tensor::empty(DType::kF32, {T, E});
        for (int64_t t = 0; t < T; ++t) {
          float* row = logits.data<float>() + t * E;
          for (int attempt = 0;; ++attempt) {
            DSINFER_CHECK(attempt < 1000, "conformance: no router row with a selection margin");
            uint64_t row_seed = hash_at(stream(seed, 0), static_cast<uint64_t>(t) * 1000 + attempt);
            for (int e = 0; e < E; ++e) row[e] = v.logit_mean + v.logit_std * normal_at(row_seed, e);
            if (selection_margin(row, v.biased ? bias.data<float>() : nullptr, E, v.params) > kRouterMargin) break;
          }
        }
        OpSpec s;
        s.args = {{"logits", ArgKind::kConstant, logits}, {"bias", ArgKind::kConstant, bias}};
        s.results = {"expert_ids", "weights"};
        s.call = [params = v.params](Backend& b, std::vector<Tensor>& a) {
          Routing routing = b.route(a[0], a[1], params);
          return Results{routing.expert_ids, routing.weights};
        };
        s.compare = [](const Outputs& reference, const Outputs& candidate) {
          return check_routing(reference.get("expert_ids"), reference.get("weights"), candidate.get("expert_ids"),
                               candidate.get("weights"), kBoundRouteWeights);
        };
        return s;
      }));
    }
  }
}

// Routing for moe_experts, drawn on the host: experts with lognormal popularity (a few hot, every
// seventh never chosen), k distinct per token, weights summing to 2.5 (routed_scaling_factor).
std::pair<Tensor, Tensor> host_routing(int64_t T, int E, int k, uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::vector<double> popularity(E);
  for (int e = 0; e < E; ++e) popularity[e] = e % 7 == 3 ? 0.0 : std::exp(normal_at(seed, e));
  Tensor ids = Tensor::empty(DType::kI32, {T, k}), weights = Tensor::empty(DType::kF32, {T, k});
  for (int64_t t = 0; t < T; ++t) {
    std::vector<double> left = popularity;
    double total = 0.0;
    for (int i = 0; i < k; ++i) {
      std::discrete_distribution<int> pick(left.begin(), left.end());
      int e = pick(rng);
      left[e] = 0.0;
      ids.data<int32_t>()[t * k + i] = e;
      total += weights.data<float>()[t * k + i] = 0.05f + std::uniform_real_distribution<float>(0.0f, 1.0f)(rng);
    }
    for (int i = 0; i < k; ++i) weights.data<float>()[t * k + i] *= static_cast<float>(2.5 / total);
  }
  return {ids, weights};
}

// The experts a stack holds: [first, first + count) of a layer of `total` (ExpertStack::first_expert),
// a rank's share under expert parallelism; the whole layer is {0, E, E}.
struct ExpertSlice {
  int64_t first = 0, count = 0, total = 0;
  bool whole() const { return first == 0 && count == total; }
  bool holds(int32_t id) const { return id >= first && id < first + count; }
};

// Routing for a slice of the experts: host_routing's draws over every expert, with some ids pinned
// so that the slice's kernel paths are all reached whatever the draws: token 0 has the slice's first
// and last experts and the other ranks' experts just outside it (an off-by-one in the range keeps or
// drops one of them); expert first + 1 is in every token (T - 1 rows: the 64-row tensor-core tile at
// T = 64, 15 rows at T = 16, 2 at T = 2) and first + 2 in every fourth (16 rows at T = 64). With
// three tokens or more the last one is routed to other ranks' experts only: its output is zeros.
// Ids stay distinct within a token; the weights are host_routing's.
std::pair<Tensor, Tensor> slice_routing(int64_t T, const ExpertSlice& slice, int k, uint64_t seed) {
  DSINFER_CHECK(slice.count >= 3 && slice.total - slice.count >= k, "conformance: a slice of ", slice.count, " of ",
                slice.total, " experts cannot place top-", k, " routing");
  auto [ids, weights] = host_routing(T, static_cast<int>(slice.total), k, seed);
  auto id = [](int64_t e) { return static_cast<int32_t>(e); };
  for (int64_t t = 0; t < T; ++t) {
    int32_t* row = ids.data<int32_t>() + t * k;
    std::vector<int32_t> drawn(row, row + k), chosen;
    auto take = [&](int32_t e) {
      if (static_cast<int>(chosen.size()) < k && std::find(chosen.begin(), chosen.end(), e) == chosen.end())
        chosen.push_back(e);
    };
    if (T >= 3 && t == T - 1) {  // other ranks' experts only: each drawn id of the slice moves past it
      for (int32_t e : drawn)
        if (!slice.holds(e)) chosen.push_back(e);
      for (int32_t e : drawn) {
        if (!slice.holds(e)) continue;
        while (slice.holds(e) || std::find(chosen.begin(), chosen.end(), e) != chosen.end())
          e = id((e + 1) % slice.total);
        chosen.push_back(e);
      }
    } else {
      if (t == 0) {
        take(id(slice.first));
        take(id(slice.first + slice.count - 1));
        if (slice.first > 0) take(id(slice.first - 1));
        if (slice.first + slice.count < slice.total) take(id(slice.first + slice.count));
      }
      take(id(slice.first + 1));
      if (t % 4 == 0) take(id(slice.first + 2));
      for (int32_t e : drawn) take(e);
    }
    std::copy(chosen.begin(), chosen.end(), row);
  }
  return {ids, weights};
}

// W4A8 experts of a moe case (docs/w4a8.md): int4 weights in groups of `group` columns, and static
// activation scales per expert (input_scale) or none (each row's amax / 448).
struct W4a8Experts {
  int64_t group = 128;
  bool static_scales = false;
  bool pre_scales = false;  // AWQ's factors on each expert's inputs (pre_quant_scale)
};

// AWQ factors [E, K] f32 that each expert's input is multiplied by, 2^[-1.5, 1.5): a channel's
// product with its factor decides the row's amax as often as the channel itself does.
Tensor w4a8_pre_scales(int64_t experts, int64_t width, uint64_t seed) {
  Tensor factors = Tensor::empty(DType::kF32, {experts, width});
  for (int64_t i = 0; i < factors.numel(); ++i) factors.data<float>()[i] = std::exp2(3.0f * uniform_at(seed, i) - 1.5f);
  return factors;
}

// Static input scales [E] f32 for W4A8 experts whose inputs reach `typical` (the magnitude a
// calibration would have picked): typical / 448 * [0.5, 1.5), so that some experts' inputs saturate at
// 448 and some leave codes unused, both of which the two backends must round alike.
Tensor w4a8_input_scales(int64_t experts, float typical, uint64_t seed) {
  Tensor scales = Tensor::empty(DType::kF32, {experts});
  for (int64_t e = 0; e < experts; ++e)
    scales.data<float>()[e] = typical / kFp8E4M3Max * (0.5f + uniform_at(seed, e));
  return scales;
}

// Routed experts: a stack of the experts of `slice` (E = slice.count) of [2I, H] (gate_up) and
// [H, I] (down), each in its own format (a loader may widen gate_up to bf16 and keep down in FP8), k
// experts per token chosen among slice.total. A slice is also checked for exact zeros in the rows of
// tokens routed to other ranks' experts only (nothing to add, not even rounding). W4A8 experts get
// varied_activation inputs (token scales 1/4..4, so that a row's e4m3 scale applied to another row is
// far off) and are also checked row by row.
Case moe_case(const std::string& name, int64_t T, const ExpertSlice& slice, int k, int64_t I, int64_t H,
              WeightFormat gate_up_format, WeightFormat down_format, W4a8Experts int4 = {}) {
  bool fp8 = gate_up_format == WeightFormat::kFp8Block || down_format == WeightFormat::kFp8Block;
  bool w4a8 = gate_up_format == WeightFormat::kW4A8 || down_format == WeightFormat::kW4A8;
  return make_case("moe_experts", name, [=](uint64_t seed) {
    auto [ids, weights] = slice.whole() ? host_routing(T, static_cast<int>(slice.total), k, stream(seed, 0))
                                        : slice_routing(T, slice, k, stream(seed, 0));
    Tensor x = w4a8 ? varied_activation(T, H, stream(seed, 1)) : activation({T, H}, stream(seed, 1), 1.0f);
    auto expert_weight = [&](int64_t N, int64_t K, WeightFormat format, uint64_t weight_seed) {
      return format == WeightFormat::kW4A8 ? make_w4a8_weight(slice.count, N, K, int4.group, weight_seed, kWeightStd)
                                           : make_weight(slice.count, N, K, format, weight_seed, kWeightStd);
    };
    LinearWeight gate_up = expert_weight(2 * I, H, gate_up_format, stream(seed, 2));
    LinearWeight down = expert_weight(H, I, down_format, stream(seed, 3));
    if (int4.static_scales) {
      // x reaches ~32 (varied_activation's outlier columns at token scale 1); gate and up are ~N(0, g^2)
      // with g = 0.02 sqrt(4.3 H) (4.3: the mean square of varied_activation's columns), h ~ 4 g^2.
      const float g = kWeightStd * std::sqrt(4.3f * static_cast<float>(H));
      if (gate_up_format == WeightFormat::kW4A8)
        gate_up.input_scale = w4a8_input_scales(slice.count, 32.0f, stream(seed, 4));
      if (down_format == WeightFormat::kW4A8)
        down.input_scale = w4a8_input_scales(slice.count, 4.0f * g * g, stream(seed, 5));
    }
    if (int4.pre_scales) {
      if (gate_up_format == WeightFormat::kW4A8) gate_up.pre_scale = w4a8_pre_scales(slice.count, H, stream(seed, 6));
      if (down_format == WeightFormat::kW4A8) down.pre_scale = w4a8_pre_scales(slice.count, I, stream(seed, 7));
    }
    OpSpec s;
    s.args = {{"x", ArgKind::kActivation, x},
              {"expert_ids", ArgKind::kConstant, ids},
              {"weights", ArgKind::kConstant, weights},
              {"gate_up", ArgKind::kConstant, gate_up.data},
              {"gate_up scale", ArgKind::kConstant, gate_up.scale},
              {"down", ArgKind::kConstant, down.data},
              {"down scale", ArgKind::kConstant, down.scale},
              {"gate_up input scale", ArgKind::kConstant, gate_up.input_scale},
              {"down input scale", ArgKind::kConstant, down.input_scale},
              {"gate_up pre scale", ArgKind::kConstant, gate_up.pre_scale},
              {"down pre scale", ArgKind::kConstant, down.pre_scale}};
    std::vector<int32_t> rows = rows_to_check(T);
    if (static_cast<int64_t>(rows.size()) < T) {
      for (int i = 0; i < 3; ++i) s.args[i].reference_host = select_rows(s.args[i].host, rows);
      s.candidate_rows = rows;
    }
    s.results = {"y"};
    s.call = [gate_up_format, down_format, first = slice.first](Backend& b, std::vector<Tensor>& a) {
      ExpertStack experts{{a[3], a[4], gate_up_format, a[7], a[9]}, {a[5], a[6], down_format, a[8], a[10]}, first};
      return Results{b.moe_experts(a[0], Routing{a[1], a[2]}, experts)};
    };
    double bound = w4a8 ? kBoundMoeW4A8 : fp8 ? kBoundMoeFp8 : kBoundMoe;
    if (slice.whole()) {
      s.compare = compare_with(bound);
      if (w4a8) {
        s.compare = [bound](const Outputs& reference, const Outputs& candidate) {
          return std::vector<CheckResult>{
              check_nmse("y", reference.get("y"), candidate.get("y"), bound),
              check_nmse_worst_row("y", reference.get("y"), candidate.get("y"), kBoundMoeW4A8Row)};
        };
      }
      return s;
    }
    // The compared rows (indexes into the outputs) whose token has no expert of the slice.
    std::vector<int64_t> elsewhere;
    for (size_t r = 0; r < rows.size(); ++r) {
      const int32_t* row = ids.data<int32_t>() + int64_t{rows[r]} * k;
      if (std::none_of(row, row + k, [&](int32_t e) { return slice.holds(e); }))
        elsewhere.push_back(static_cast<int64_t>(r));
    }
    s.compare = [bound, elsewhere, w4a8](const Outputs& reference, const Outputs& candidate) {
      std::vector<CheckResult> checks = compare_all(reference, candidate, bound);
      if (w4a8) checks.push_back(check_nmse_worst_row("y", reference.get("y"), candidate.get("y"), kBoundMoeW4A8Row));
      const Tensor& expected = reference.get("y");
      const Tensor& actual = candidate.get("y");
      CheckResult zeros{"y of tokens routed elsewhere", "nonzero", 0.0, 0.0, false, ""};
      if (same_layout(zeros, expected, actual)) {
        int64_t width = expected.dim(1), candidate_nonzero = 0, reference_nonzero = 0;
        for (int64_t r : elsewhere) {
          for (int64_t c = 0; c < width; ++c) {
            candidate_nonzero += actual.data<float>()[r * width + c] != 0.0f;
            reference_nonzero += expected.data<float>()[r * width + c] != 0.0f;
          }
        }
        zeros.value = static_cast<double>(candidate_nonzero + reference_nonzero);
        if (zeros.value > 0)
          zeros.detail = str_cat(candidate_nonzero, " candidate and ", reference_nonzero, " reference elements of ",
                                 elsewhere.size(), " rows");
      }
      zeros.passed = zeros.value == 0.0;
      checks.push_back(zeros);
      return checks;
    };
    return s;
  });
}

void add_moe_cases(std::vector<Case>& cases, const Dims& d) {
  add_route_cases(cases, d);
  int64_t E = d.experts, I = d.moe_inter, H = d.hidden;
  constexpr int kTopK = 8;
  for (WeightFormat format : {WeightFormat::kDense, WeightFormat::kFp8Block}) {
    bool fp8 = format == WeightFormat::kFp8Block;
    // 96, 256, 1024: the reference takes 64 rows. 1024 tokens (8192 rows) take the prefill form, each
    // expert's rows through the library GEMM (cuda/moe.h, moe_experts_by_expert).
    for (int64_t T : d.pick<int64_t>({1, 16, 96, 1024}, {1, 16, 256, 1024}))
      cases.push_back(moe_case(str_cat("E=", E, " top-", kTopK, " I=", I, " hidden ", H, fp8 ? " fp8" : " bf16", " T=", T),
                               T, ExpertSlice{0, E, E}, kTopK, I, H, format, format));
    // Expert parallelism: a quarter of the experts in the middle of the layer and the last quarter
    // (V3: [64, 128) and [192, 256)), at each decode kernel's sizes (1 and 2 rows: the GEMVs; 16 and
    // 64: the 16- and 64-row tiles) and at the prefill form's 8192 rows.
    for (ExpertSlice slice : {ExpertSlice{E / 4, E / 4, E}, ExpertSlice{3 * E / 4, E / 4, E}}) {
      for (int64_t T : {1, 2, 16, 64, 1024})
        cases.push_back(moe_case(str_cat("E=", E, " slice [", slice.first, ", ", slice.first + slice.count, ") top-",
                                         kTopK, " I=", I, " hidden ", H, fp8 ? " fp8" : " bf16", " T=", T),
                                 T, slice, kTopK, I, H, format, format));
    }
  }
  // W4A8 experts (docs/w4a8.md), int4 in groups of 128 (dsinfer quantize) and 32 (Kimi-K2), with e4m3
  // activations per row or with static input scales (1 token: one row per expert; 16: a few), then a
  // slice of the experts (expert parallelism), whose other ranks' tokens must come out as exact zeros.
  // Decode sizes only: the CPU's reference dequantizes every expert a step touches, and 256 int4
  // experts at prefill sizes took minutes of the suite on the device (moe_w4a8_rows_check compares
  // the kernels at every size, prefill included, with the reference kernel and a float64 product).
  // With AWQ's factors (dsinfer quantize --awq: pre_quant_scale on both products' inputs here, as
  // checkpoints may carry them), x is quantized per row, each times its expert's factors.
  struct W4a8Case {
    int64_t group;
    bool static_scales;
    std::vector<int64_t> tokens;
    bool pre_scales = false;
  };
  for (const W4a8Case& c : {W4a8Case{128, false, {1, 16}}, W4a8Case{128, true, {1}}, W4a8Case{32, false, {1}},
                            W4a8Case{32, true, {1}}, W4a8Case{128, false, {1, 16}, true},
                            W4a8Case{128, true, {1}, true}}) {
    for (int64_t T : c.tokens)
      cases.push_back(moe_case(str_cat("E=", E, " top-", kTopK, " I=", I, " hidden ", H, " w4a8 group ", c.group,
                                       c.static_scales ? " static input scales" : " per-row scales",
                                       c.pre_scales ? " AWQ pre-scales" : "", " T=", T),
                               T, ExpertSlice{0, E, E}, kTopK, I, H, WeightFormat::kW4A8, WeightFormat::kW4A8,
                               W4a8Experts{c.group, c.static_scales, c.pre_scales}));
  }
  for (int64_t T : {1})
    cases.push_back(moe_case(str_cat("E=", E, " slice [", 3 * E / 4, ", ", E, ") top-", kTopK, " I=", I, " hidden ", H,
                                     " w4a8 group 128 T=", T),
                             T, ExpertSlice{3 * E / 4, E / 4, E}, kTopK, I, H, WeightFormat::kW4A8,
                             WeightFormat::kW4A8));
}

// ------------------------------------------------------------------------------------------------
// The tiny test model's shapes (tests/fixtures/models/v3-tiny and v3-tiny-fp8: hidden 128,
// q_lora_rank 96, 2 heads, dense intermediate 256, 8 experts of I = 64, top-3, vocab 1024; prompts of
// 1, 7, 23 and 70 tokens), in both tiers: they are cheap, and they are where the widths are not
// multiples of 128 (partial FP8 blocks in N and K, K = 64 and 96, a weight-scale row stride of 1 or 2)
// and T is not a multiple of 4 or 16. The FP8 products follow what the loader stores: every *_proj
// in FP8, except gate_up of width 2I = 128 built from two 64-row halves, widened to bf16.

void add_fixture_cases(std::vector<Case>& cases) {
  constexpr int64_t kHidden = 128, kQLora = 96, kHeads = 2, kDenseInter = 256, kExperts = 8, kInter = 64,
                    kVocab = 1024;
  constexpr int kTopK = 3;
  struct Projection { const char* name; int64_t K, N; std::vector<int64_t> tokens; };
  const Projection projections[] = {
      {"q_a", kHidden, kQLora, {1, 23}},                              // N = 96: a partial N block
      {"q_b", kQLora, kHeads * (kNopeDim + kRopeDim), {1, 70}},       // K = 96: a partial K block
      {"kv_a", kHidden, kCacheWidth, {1, 23}},                        // N = 576: 4.5 N blocks
      // The one FP8 shape cuBLASLt takes (K / 128 = 4), at T padded to 4, 8, 24 and 72.
      {"kv_b", kLatent, kHeads * (kNopeDim + kValueDim), {1, 7, 23, 70}},
      {"o_proj/down", kHeads * kValueDim, kHidden, {1, 23}},          // K = 256: scale row stride 2
      {"dense gate_up", kHidden, 2 * kDenseInter, {1, 23}},
      {"expert down", kInter, kHidden, {1, 7}},                       // K = 64: half a K block
      {"lm_head", kHidden, kVocab, {1, 23}},
  };
  for (WeightFormat format : {WeightFormat::kDense, WeightFormat::kFp8Block}) {
    bool fp8 = format == WeightFormat::kFp8Block;
    double bound = fp8 ? kBoundFp8Product : kBoundProduct;
    for (const Projection& p : projections) {
      for (int64_t T : p.tokens) {
        cases.push_back(linear_case("linear", str_cat("v3-tiny ", p.name, " ", p.K, "->", p.N, fp8 ? " fp8" : " bf16",
                                                      " T=", T),
                                    T, p.K, p.N, format, false, bound, Spread::kVaried));
      }
    }
  }
  // kv_b with iid inputs too: failing with varied inputs alone points at the activation scales.
  cases.push_back(linear_case("linear", str_cat("v3-tiny kv_b ", kLatent, "->", kHeads * (kNopeDim + kValueDim),
                                                " fp8 T=70 iid"),
                              70, kLatent, kHeads * (kNopeDim + kValueDim), WeightFormat::kFp8Block, false,
                              kBoundFp8Product));
  for (int64_t T : {1, 23})
    cases.push_back(linear_case("linear_f32", str_cat("v3-tiny lm_head bf16 ", kVocab, "x", kHidden, " T=", T), T,
                                kHidden, kVocab, WeightFormat::kDense, false, kBoundF32Product, Spread::kVaried));
  for (int64_t T : {1, 70})
    for (MlaGrouped g : kMlaGrouped)
      cases.push_back(grouped_case(str_cat("v3-tiny ", g.name, " ", kHeads, "x", g.K, "->", g.N, " T=", T), T, kHeads,
                                   g.K, g.N));

  // Routed experts as the loader stores them (gate_up widened, down FP8), and all-bf16 / all-FP8.
  // I = 64: down's K is half a block; gate_up's 2I = 128 rows are one block holding both halves.
  struct Formats { const char* name; WeightFormat gate_up, down; };
  for (Formats f : {Formats{"bf16", WeightFormat::kDense, WeightFormat::kDense},
                    Formats{"fp8", WeightFormat::kFp8Block, WeightFormat::kFp8Block},
                    Formats{"gate_up bf16 + down fp8", WeightFormat::kDense, WeightFormat::kFp8Block}}) {
    for (int64_t T : {1, 7, 23, 70})
      cases.push_back(moe_case(str_cat("v3-tiny E=", kExperts, " top-", kTopK, " I=", kInter, " hidden ", kHidden, " ",
                                       f.name, " T=", T),
                               T, ExpertSlice{0, kExperts, kExperts}, kTopK, kInter, kHidden, f.gate_up, f.down));
  }
  // W4A8 in groups of 32 (K = 64 for down: under a 128-column block, so the CUDA backend's reference kernel
  // takes that product and the tensor-core kernel gate_up), and gate_up W4A8 beside a bf16 down.
  for (int64_t T : {1, 7, 23, 70}) {
    cases.push_back(moe_case(str_cat("v3-tiny E=", kExperts, " top-", kTopK, " I=", kInter, " hidden ", kHidden,
                                     " w4a8 group 32 T=", T),
                             T, ExpertSlice{0, kExperts, kExperts}, kTopK, kInter, kHidden, WeightFormat::kW4A8,
                             WeightFormat::kW4A8, W4a8Experts{32, T == 23}));
    cases.push_back(moe_case(str_cat("v3-tiny E=", kExperts, " top-", kTopK, " I=", kInter, " hidden ", kHidden,
                                     " w4a8 group 32 AWQ pre-scales T=", T),
                             T, ExpertSlice{0, kExperts, kExperts}, kTopK, kInter, kHidden, WeightFormat::kW4A8,
                             WeightFormat::kW4A8, W4a8Experts{32, T == 23, true}));
  }
  cases.push_back(moe_case(str_cat("v3-tiny E=", kExperts, " top-", kTopK, " I=", kInter, " hidden ", kHidden,
                                   " gate_up w4a8 group 64 + down bf16 T=23"),
                           23, ExpertSlice{0, kExperts, kExperts}, kTopK, kInter, kHidden, WeightFormat::kW4A8,
                           WeightFormat::kDense, W4a8Experts{64, false}));

  cases.push_back(expanded_case("v3-tiny prompt of 70", kHeads, {{70, 70}}));
  cases.push_back(expanded_case("v3-tiny prompts of 7 and 23, a cached prefix of 5", kHeads, {{7, 7}, {28, 23}}));
  cases.push_back(
      absorbed_case("v3-tiny 1 sequence, 70 query tokens at positions 0..69 over 2 pages", kHeads, {{70, 70}}));
  cases.push_back(absorbed_case("v3-tiny prompt of 1", kHeads, {{1, 1}}));
  cases.push_back(absorbed_case("v3-tiny MTP B=4 q_len 1..4", kHeads,
                                random_sequences(4, 200, 1, 4, case_seed("tiny mtp", ""))));
}

// ------------------------------------------------------------------------------------------------
// Sampling.

// A logits row like a language model's: a head of 32 tokens 0.1..0.15 apart above a long tail
// (N(-4, 1.5^2) clipped at 2). Returns the head, best first.
std::vector<int32_t> fill_logit_row(float* row, int64_t V, uint64_t seed) {
  for (int64_t i = 0; i < V; ++i) row[i] = std::min(2.0f, -4.0f + 1.5f * normal_at(seed, i));
  std::vector<int32_t> head;
  for (uint64_t i = 0; head.size() < std::min<size_t>(32, V / 2); ++i) {
    auto token = static_cast<int32_t>(hash_at(seed ^ 0x5bd1e995u, i) % V);
    if (std::find(head.begin(), head.end(), token) == head.end()) head.push_back(token);
  }
  for (size_t j = 0; j < head.size(); ++j)
    row[head[j]] = 8.65f - 0.15f * static_cast<float>(j) - 0.05f * uniform_at(seed ^ 0x1234u, static_cast<int64_t>(j));
  return head;
}

bool mask_allows(const SamplingBatch& batch, int b, int64_t V, int64_t token) {
  if (batch.bitmask_row.empty() || batch.bitmask_row[b] < 0) return true;
  const int32_t* mask = batch.bitmask.data() + batch.bitmask_row[b] * SamplingBatch::bitmask_words(V);
  return (static_cast<uint32_t>(mask[token >> 5]) >> (token & 31)) & 1u;
}

// Row b after SamplingRow's steps 2 to 4 (penalties, logit_bias, bans and bitmask), in double.
std::vector<double> penalized_row(const float* row, int64_t V, const SamplingBatch* batch, int b) {
  std::vector<double> out(row, row + V);
  if (batch == nullptr) return out;
  const SamplingRow& params = batch->rows[b];
  for (int32_t i = batch->history_start[b]; i < batch->history_start[b + 1]; ++i) {
    double& logit = out[batch->history_tokens[i]];
    if (params.repetition_penalty != 1.0f)
      logit = logit > 0 ? logit / params.repetition_penalty : logit * params.repetition_penalty;
    if (int32_t count = batch->history_output_counts[i]; count > 0)
      logit -= params.frequency_penalty * count + params.presence_penalty;
  }
  if (!batch->bias_start.empty())
    for (int32_t i = batch->bias_start[b]; i < batch->bias_start[b + 1]; ++i)
      out[batch->bias_tokens[i]] += batch->bias_values[i];
  for (int32_t i = batch->banned_start[b]; i < batch->banned_start[b + 1]; ++i)
    out[batch->banned_tokens[i]] = -std::numeric_limits<double>::infinity();
  for (int64_t token = 0; token < V; ++token)
    if (!mask_allows(*batch, b, V, token)) out[token] = -std::numeric_limits<double>::infinity();
  return out;
}

bool is_greedy(const SamplingParams& p) { return p.temperature <= 0.0f || p.top_k == 1; }

double top_two_gap(const std::vector<double>& row) {
  double first = -std::numeric_limits<double>::infinity(), second = first;
  for (double v : row) {
    if (v > first) {
      second = first;
      first = v;
    } else if (v > second) {
      second = v;
    }
  }
  return first - second;
}

// The tokens a row may draw (sorted): the survivors of temperature, top-k, top-p and min-p as
// backend.h defines them, loosened at each boundary (ties at the k-th logit, 1e-4 more mass for
// top-p, 1e-3 below the min-p threshold) so that rounding at a boundary is not a failure.
std::vector<int32_t> allowed_tokens(const std::vector<double>& row, const SamplingParams& p) {
  auto V = static_cast<int64_t>(row.size());
  std::vector<int32_t> order(V);
  std::iota(order.begin(), order.end(), 0);
  std::sort(order.begin(), order.end(), [&](int32_t a, int32_t b) { return row[a] > row[b] || (row[a] == row[b] && a < b); });
  int64_t kept = V;
  if (is_greedy(p)) {
    kept = 1;
  } else if (p.top_k > 0 && p.top_k < V) {
    kept = p.top_k;
  }
  while (kept < V && row[order[kept]] == row[order[kept - 1]]) ++kept;
  if (!is_greedy(p)) {
    std::vector<double> probs(kept);
    double total = 0.0;
    for (int64_t i = 0; i < kept; ++i) total += probs[i] = std::exp((row[order[i]] - row[order[0]]) / p.temperature);
    for (double& prob : probs) prob /= total;
    if (p.top_p < 1.0f) {
      double cumulative = 0.0;
      int64_t cut = 0;
      while (cut < kept && cumulative < p.top_p + 1e-4) cumulative += probs[cut++];
      kept = std::max<int64_t>(cut, 1);
    }
    if (p.min_p > 0.0f) {
      double threshold = p.min_p * probs[0] * (1.0 - 1e-3);
      int64_t cut = 1;
      while (cut < kept && probs[cut] >= threshold) ++cut;
      kept = cut;
    }
  }
  std::vector<int32_t> allowed;
  for (int64_t i = 0; i < kept; ++i)
    if (std::isfinite(row[order[i]])) allowed.push_back(order[i]);
  std::sort(allowed.begin(), allowed.end());
  return allowed;
}

// The rows of a sampling case and their parameters, in both forms the two ops take.
struct SamplingData {
  Tensor logits;  // [B, V] f32
  SamplingBatch batch;
  bool penalized = false;              // whether batch's penalties and bans apply (sample_tokens)
};

const SamplingParams kSamplingMix[] = {
    {1.0f, 0, 1.0f, 0.0f}, {0.7f, 40, 1.0f, 0.0f}, {1.0f, 0, 0.9f, 0.0f},
    {0.6f, 0, 1.0f, 0.05f}, {1.2f, 100, 0.95f, 0.01f}, {0.0f, 0, 1.0f, 0.0f},
};

// B rows over V tokens. greedy: every row greedy; else kSamplingMix in turn. penalties: two rows in
// three have a history (head tokens among them, so the order changes) and one in four bans tokens,
// the raw best among them. Greedy rows are redrawn until their best two penalized logits are 1e-3
// apart, so rounding cannot flip the argmax.
std::shared_ptr<SamplingData> make_sampling_data(int64_t B, int64_t V, bool greedy, bool penalties, uint64_t seed) {
  auto data = std::make_shared<SamplingData>();
  data->logits = Tensor::empty(DType::kF32, {B, V});
  data->penalized = penalties;
  constexpr int kTopLogprobs[] = {-1, 0, 1, 5, 20};
  std::mt19937_64 rng(seed);
  for (int64_t b = 0; b < B; ++b) {
    SamplingRow row;
    row.params = greedy ? SamplingParams{} : kSamplingMix[b % std::size(kSamplingMix)];
    row.uniform = uniform_at(seed, b);
    row.top_logprobs = kTopLogprobs[b % std::size(kTopLogprobs)];
    if (penalties && b % 3 == 0) row.repetition_penalty = 1.3f;
    if (penalties && b % 3 == 1) {
      row.frequency_penalty = 0.4f;
      row.presence_penalty = 0.3f;
    }
    float* logits = data->logits.data<float>() + b * V;
    for (int attempt = 0;; ++attempt) {
      DSINFER_CHECK(attempt < 1000, "conformance: no sampling row with a greedy margin");
      std::vector<int32_t> head = fill_logit_row(logits, V, hash_at(seed, static_cast<uint64_t>(b) * 1000 + attempt));
      SamplingBatch one;
      one.rows = {row};
      if (penalties && b % 3 != 2) {
        for (int i = 0; i < 6; ++i) {
          int32_t token = i < 3 ? head[2 * i] : static_cast<int32_t>(rng() % V);
          if (std::find(one.history_tokens.begin(), one.history_tokens.end(), token) != one.history_tokens.end()) continue;
          one.history_tokens.push_back(token);
          one.history_output_counts.push_back(i % 4);
        }
      }
      one.history_start.push_back(static_cast<int32_t>(one.history_tokens.size()));
      if (penalties && b % 4 == 1) one.banned_tokens = {head[0], static_cast<int32_t>(rng() % V), head[5]};
      one.banned_start.push_back(static_cast<int32_t>(one.banned_tokens.size()));
      if (is_greedy(row.params) && top_two_gap(penalized_row(logits, V, &one, 0)) < 1e-3) continue;
      SamplingBatch& all = data->batch;
      all.rows.push_back(row);
      all.history_tokens.insert(all.history_tokens.end(), one.history_tokens.begin(), one.history_tokens.end());
      all.history_output_counts.insert(all.history_output_counts.end(), one.history_output_counts.begin(),
                                       one.history_output_counts.end());
      all.history_start.push_back(static_cast<int32_t>(all.history_tokens.size()));
      all.banned_tokens.insert(all.banned_tokens.end(), one.banned_tokens.begin(), one.banned_tokens.end());
      all.banned_start.push_back(static_cast<int32_t>(all.banned_tokens.size()));
      break;
    }
  }
  return data;
}

// logit_bias and allowed-token bitmasks (structured output), B rows in four kinds: (0) greedy, a
// bias of +3 on the head's 11th token (1.5 below the best) and -5 on the best: the argmax moves;
// (1) greedy, a mask that allows three tail tokens only; (2) sampled (top-k 40), a random mask
// allowing about half the vocabulary plus biases on head tokens; (3) sampled, neither (index -1).
// Every other row asks for logprobs, which stay those of the raw logits. A backend that ignores the
// bias or the mask gives other tokens in rows 0 and 1, and masked tokens in rows 1 and 2.
std::shared_ptr<SamplingData> make_bias_mask_data(int64_t B, int64_t V, uint64_t seed) {
  auto data = std::make_shared<SamplingData>();
  data->logits = Tensor::empty(DType::kF32, {B, V});
  data->penalized = true;
  const int64_t words = SamplingBatch::bitmask_words(V);
  constexpr int kTopLogprobs[] = {-1, 5, -1, 0, 20};
  SamplingBatch& all = data->batch;
  all.bias_start = {0};
  all.bitmask_row.assign(B, -1);
  for (int64_t b = 0; b < B; ++b) {
    const int kind = static_cast<int>(b % 4);
    SamplingRow row;
    row.params = kind < 2 ? SamplingParams{} : SamplingParams{1.0f, 40, 1.0f, 0.0f};
    row.uniform = uniform_at(seed, b);
    row.top_logprobs = kTopLogprobs[b % std::size(kTopLogprobs)];
    float* logits = data->logits.data<float>() + b * V;
    for (int attempt = 0;; ++attempt) {
      DSINFER_CHECK(attempt < 1000, "conformance: no bias/mask row with a greedy margin");
      const uint64_t row_seed = hash_at(seed, static_cast<uint64_t>(b) * 1000 + attempt);
      std::vector<int32_t> head = fill_logit_row(logits, V, row_seed);
      SamplingBatch one;
      one.rows = {row};
      one.history_start = {0, 0};
      one.banned_start = {0, 0};
      one.bias_start = {0};
      one.bitmask_row = {-1};
      if (kind == 0) {
        one.bias_tokens = {head[10], head[0]};
        one.bias_values = {3.0f, -5.0f};
      } else if (kind == 1) {
        one.bitmask.assign(words, 0);
        for (uint64_t i = 0, allowed = 0; allowed < 3; ++i) {
          auto token = static_cast<int32_t>(hash_at(row_seed ^ 0x77u, i) % V);
          if (std::find(head.begin(), head.end(), token) != head.end()) continue;
          one.bitmask[token >> 5] |= static_cast<int32_t>(1u << (token & 31));
          ++allowed;
        }
        one.bitmask_row = {0};
      } else if (kind == 2) {
        one.bitmask.resize(words);
        for (int64_t w = 0; w < words; ++w) one.bitmask[w] = static_cast<int32_t>(hash_at(row_seed ^ 0x99u, w));
        one.bitmask[head[4] >> 5] |= static_cast<int32_t>(1u << (head[4] & 31));  // a head token survives
        one.bitmask_row = {0};
        one.bias_tokens = {head[1], head[6], static_cast<int32_t>(hash_at(row_seed, 7) % V)};
        if (one.bias_tokens[2] == head[1] || one.bias_tokens[2] == head[6]) one.bias_tokens.pop_back();
        one.bias_values = {0.5f, 2.0f, 1.0f};
        one.bias_values.resize(one.bias_tokens.size());
      }
      one.bias_start.push_back(static_cast<int32_t>(one.bias_tokens.size()));
      if (is_greedy(row.params) && top_two_gap(penalized_row(logits, V, &one, 0)) < 1e-3) continue;
      all.rows.push_back(row);
      all.history_start.push_back(0);
      all.banned_start.push_back(0);
      all.bias_tokens.insert(all.bias_tokens.end(), one.bias_tokens.begin(), one.bias_tokens.end());
      all.bias_values.insert(all.bias_values.end(), one.bias_values.begin(), one.bias_values.end());
      all.bias_start.push_back(static_cast<int32_t>(all.bias_tokens.size()));
      if (one.bitmask_row[0] >= 0) {
        all.bitmask_row[b] = static_cast<int32_t>(static_cast<int64_t>(all.bitmask.size()) / words);
        all.bitmask.insert(all.bitmask.end(), one.bitmask.begin(), one.bitmask.end());
      }
      break;
    }
  }
  return data;
}

// Every row's token is one its bitmask allows (independently of the reference's tokens).
CheckResult check_tokens_allowed(const SamplingData& data, const Tensor& candidate) {
  CheckResult result{"tokens allowed by the bitmask", "violations", 0.0, 0.0, false, ""};
  const int64_t B = data.logits.dim(0), V = data.logits.dim(1);
  if (candidate.numel() != B) {
    result.detail = str_cat(candidate.numel(), " tokens for ", B, " rows");
    return result;
  }
  for (int64_t b = 0; b < B; ++b) {
    const int32_t token = candidate.data<int32_t>()[b];
    if (token >= 0 && token < V && mask_allows(data.batch, static_cast<int>(b), V, token)) continue;
    if (result.detail.empty()) result.detail = str_cat("row ", b, ": token ", token, " is masked");
    result.value += 1.0;
  }
  result.passed = result.value == 0.0;
  return result;
}

// Greedy rows must give the reference's token; sampled rows a token their parameters allow.
CheckResult check_sampled_tokens(const SamplingData& data, const Tensor& reference, const Tensor& candidate) {
  CheckResult result{"tokens", "mismatches", 0.0, 0.0, false, ""};
  if (!same_layout(result, reference, candidate)) return result;
  int64_t B = data.logits.dim(0), V = data.logits.dim(1);
  for (int64_t b = 0; b < B; ++b) {
    int32_t expected = reference.data<int32_t>()[b], actual = candidate.data<int32_t>()[b];
    bool ok = expected == actual;
    if (!ok && !is_greedy(data.batch.rows[b].params)) {
      std::vector<double> row = penalized_row(data.logits.data<float>() + b * V, V,
                                              data.penalized ? &data.batch : nullptr, static_cast<int>(b));
      std::vector<int32_t> allowed = allowed_tokens(row, data.batch.rows[b].params);
      ok = std::binary_search(allowed.begin(), allowed.end(), actual);
    }
    if (!ok) {
      if (result.detail.empty())
        result.detail = str_cat("row ", b, (is_greedy(data.batch.rows[b].params) ? " (greedy)" : " (sampled)"), ": candidate ", actual,
                                ", reference ", expected);
      result.value += 1.0;
    }
  }
  result.passed = result.value == 0.0;
  return result;
}

// The valid logprob entries of every row as flat [n] f32 / int32 tensors: the chosen token's logprob
// of the rows that asked and whose tokens agree (`rows_mask`), and each row's first N top entries.
struct LogprobEntries {
  Tensor chosen, top_ids, top_values;
};

LogprobEntries logprob_entries(const SamplingData& data, const Outputs& outputs, const std::vector<bool>& rows_mask) {
  const Tensor& chosen = outputs.get("logprob");
  const Tensor& top_ids = outputs.get("top ids");
  const Tensor& top_values = outputs.get("top logprobs");
  int64_t width = data.batch.max_top_logprobs();
  std::vector<float> chosen_out, values_out;
  std::vector<int32_t> ids_out;
  for (int64_t b = 0; b < data.batch.num_rows(); ++b) {
    int n = data.batch.rows[b].top_logprobs;
    if (n < 0) continue;
    if (rows_mask[b]) chosen_out.push_back(chosen.data<float>()[b]);
    for (int i = 0; i < n; ++i) {
      ids_out.push_back(top_ids.data<int32_t>()[b * width + i]);
      values_out.push_back(top_values.data<float>()[b * width + i]);
    }
  }
  auto pack = [](auto values, DType dtype) {
    Tensor t = Tensor::empty(dtype, {static_cast<int64_t>(values.size())});
    std::memcpy(t.raw(), values.data(), t.nbytes());
    return t;
  };
  return {pack(chosen_out, DType::kF32), pack(ids_out, DType::kI32), pack(values_out, DType::kF32)};
}

std::vector<CheckResult> compare_sampled(const SamplingData& data, const Outputs& reference, const Outputs& candidate) {
  std::vector<CheckResult> checks{check_sampled_tokens(data, reference.get("tokens"), candidate.get("tokens"))};
  if (!reference.get("logprob").defined()) return checks;
  const Tensor& expected_tokens = reference.get("tokens");
  const Tensor& actual_tokens = candidate.get("tokens");
  std::vector<bool> same(data.batch.num_rows(), false);
  if (actual_tokens.shape() == expected_tokens.shape())
    for (size_t b = 0; b < same.size(); ++b)
      same[b] = expected_tokens.data<int32_t>()[b] == actual_tokens.data<int32_t>()[b];
  for (const char* name : {"logprob", "top ids", "top logprobs"}) {
    const Tensor& t = candidate.get(name);
    const Tensor& r = reference.get(name);
    if (!t.defined() || t.shape() != r.shape()) {
      checks.push_back(check_exact(name, r, t));  // reports the layout mismatch
      return checks;
    }
  }
  LogprobEntries expected = logprob_entries(data, reference, same);
  LogprobEntries actual = logprob_entries(data, candidate, same);
  checks.push_back(check_nmse("chosen logprob", expected.chosen, actual.chosen, kBoundLogprobs));
  checks.push_back(check_exact("top ids", expected.top_ids, actual.top_ids));
  checks.push_back(check_nmse("top logprobs", expected.top_values, actual.top_values, kBoundLogprobs));
  return checks;
}

Results sampled_results(const SampledTokens& sampled) {
  return Results{sampled.tokens, sampled.logprobs, sampled.top_ids, sampled.top_logprobs};
}

// Two logit rows, each drawn `draws` times with stratified uniforms (i + 0.5) / draws; the candidate's
// token frequencies against the reference's, as total variation distance (the worst row).
Case frequency_case(int64_t draws, int64_t kVocab, double bound) {
  return make_case("sample_tokens", str_cat("token frequencies over ", draws, " stratified draws, V=", kVocab),
                   [=](uint64_t seed) {
                     auto data = std::make_shared<SamplingData>();
                     const SamplingParams groups[] = {{1.0f, 10, 1.0f, 0.0f}, {0.7f, 0, 0.8f, 0.02f}};
                     int64_t B = 2 * draws;
                     data->logits = Tensor::empty(DType::kF32, {B, kVocab});
                     for (int g = 0; g < 2; ++g) {
                       fill_logit_row(data->logits.data<float>() + g * draws * kVocab, kVocab, stream(seed, g));
                       for (int64_t i = 0; i < draws; ++i) {
                         int64_t b = g * draws + i;
                         std::copy_n(data->logits.data<float>() + g * draws * kVocab, kVocab,
                                     data->logits.data<float>() + b * kVocab);
                         SamplingRow row;
                         row.params = groups[g];
                         row.uniform = (static_cast<float>(i) + 0.5f) / static_cast<float>(draws);
                         data->batch.rows.push_back(row);
                         data->batch.history_start.push_back(0);
                         data->batch.banned_start.push_back(0);
                       }
                     }
                     OpSpec s;
                     s.args = {{"logits", ArgKind::kInPlace, data->logits, DType::kF32}};
                     s.results = {"tokens"};
                     s.call = [data](Backend& b, std::vector<Tensor>& a) {
                       return Results{b.sample_tokens(a[0], data->batch).tokens};
                     };
                     s.compare = [draws, bound](const Outputs& reference, const Outputs& candidate) {
                       CheckResult result{"token frequencies", "tv", 0.0, bound, false, ""};
                       const Tensor& expected = reference.get("tokens");
                       const Tensor& actual = candidate.get("tokens");
                       if (!same_layout(result, expected, actual)) return std::vector<CheckResult>{result};
                       for (int g = 0; g < 2; ++g) {
                         std::map<int32_t, double> difference;
                         for (int64_t i = 0; i < draws; ++i) {
                           difference[expected.data<int32_t>()[g * draws + i]] += 1.0 / draws;
                           difference[actual.data<int32_t>()[g * draws + i]] -= 1.0 / draws;
                         }
                         double tv = 0.0;
                         for (const auto& [token, delta] : difference) tv += 0.5 * std::fabs(delta);
                         if (tv > result.value) result.detail = str_cat("row group ", g);
                         result.value = std::max(result.value, tv);
                       }
                       result.passed = result.value <= bound;
                       if (result.passed) result.detail.clear();
                       return std::vector<CheckResult>{result};
                     };
                     s.keep_alive = data;
                     return s;
                   });
}

// A sample_tokens case over the batch make_data(seed) builds: tokens, logprobs and top logprobs
// against the reference's (compare_sampled); with check_allowed, also that no chosen token lies
// outside its row's bitmask.
template <typename MakeData>
Case logprobs_case(std::string name, MakeData make_data, bool check_allowed) {
  return make_case("sample_tokens", std::move(name), [=](uint64_t seed) {
    std::shared_ptr<SamplingData> data = make_data(seed);
    OpSpec s;
    s.args = {{"logits", ArgKind::kInPlace, data->logits, DType::kF32}};
    s.results = {"tokens", "logprob", "top ids", "top logprobs"};
    s.call = [data](Backend& b, std::vector<Tensor>& a) { return sampled_results(b.sample_tokens(a[0], data->batch)); };
    s.compare = [data, check_allowed](const Outputs& reference, const Outputs& candidate) {
      std::vector<CheckResult> checks = compare_sampled(*data, reference, candidate);
      if (check_allowed) checks.push_back(check_tokens_allowed(*data, candidate.get("tokens")));
      return checks;
    };
    s.keep_alive = data;
    return s;
  });
}

void add_sampling_cases(std::vector<Case>& cases, const Dims& d) {
  int64_t V = d.vocab, B = d.pick<int64_t>({16}, {64})[0];
  for (bool greedy : {true, false}) {
    cases.push_back(make_case("sample_tokens",
                              str_cat(greedy ? "greedy" : "temperature/top-k/top-p/min-p mix", " B=", B, " V=", V),
                              [=](uint64_t seed) {
                                auto data = make_sampling_data(B, V, greedy, false, seed);
                                OpSpec s;
                                s.args = {{"logits", ArgKind::kInPlace, data->logits, DType::kF32}};
                                s.results = {"tokens"};
                                s.call = [data](Backend& b, std::vector<Tensor>& a) {
                                  return Results{b.sample_tokens(a[0], data->batch).tokens};
                                };
                                s.compare = [data](const Outputs& reference, const Outputs& candidate) {
                                  return std::vector<CheckResult>{
                                      check_sampled_tokens(*data, reference.get("tokens"), candidate.get("tokens"))};
                                };
                                s.keep_alive = data;
                                return s;
                              }));
    cases.push_back(logprobs_case(str_cat(greedy ? "greedy" : "sampled", ", penalties, bans, logprobs B=", B, " V=", V),
                                  [=](uint64_t seed) { return make_sampling_data(B, V, greedy, true, seed); },
                                  /*check_allowed=*/false));
  }
  cases.push_back(logprobs_case(str_cat("logit_bias and bitmasks, greedy and sampled, logprobs B=", B, " V=", V),
                                [=](uint64_t seed) { return make_bias_mask_data(B, V, seed); },
                                /*check_allowed=*/true));
  cases.push_back(d.full() ? frequency_case(2048, 8192, 0.08) : frequency_case(512, 2048, 0.15));
  // The overlap scheduler's form: queued, then waited for; the tokens it leaves on the device for the
  // next step must be the ones it hands the host.
  for (bool greedy : {true, false}) {
    cases.push_back(make_case("queue_sample_tokens",
                              str_cat(greedy ? "greedy" : "sampled", greedy ? "" : ", penalties, bans, logprobs",
                                      " B=", B, " V=", V),
                              [=](uint64_t seed) {
                                auto data = make_sampling_data(B, V, greedy, !greedy, seed);
                                OpSpec s;
                                s.args = {{"logits", ArgKind::kInPlace, data->logits, DType::kF32}};
                                s.results = {"tokens", "logprob", "top ids", "top logprobs", "device tokens"};
                                s.call = [data](Backend& b, std::vector<Tensor>& a) {
                                  std::unique_ptr<PendingTokens> pending = b.queue_sample_tokens(a[0], data->batch);
                                  Tensor device = pending->device_tokens();
                                  Results results = sampled_results(pending->wait());
                                  results.push_back(device);
                                  return results;
                                };
                                s.compare = [data](const Outputs& reference, const Outputs& candidate) {
                                  std::vector<CheckResult> checks = compare_sampled(*data, reference, candidate);
                                  checks.push_back(
                                      check_exact("device tokens", candidate.get("tokens"), candidate.get("device tokens")));
                                  return checks;
                                };
                                s.keep_alive = data;
                                return s;
                              }));
  }
  // Placeholders -(r + 1) in a step's ids, resolved from the previous step's B sampled tokens.
  for (int64_t T : d.pick<int64_t>({64}, {1, 256})) {
    cases.push_back(make_case("resolve_placeholders", str_cat("T=", T, " from B=", B, " tokens"), [=](uint64_t seed) {
      Tensor ids = random_ids(T, V, stream(seed, 0));
      for (int64_t t = 0; t < T; t += 2)  // every other id a placeholder, rows in scrambled order
        ids.data<int32_t>()[t] = -static_cast<int32_t>(hash_at(stream(seed, 1), t) % B) - 1;
      if (T > 1) ids.data<int32_t>()[T - 1] = -static_cast<int32_t>(B);  // the last row
      OpSpec s;
      s.args = {{"previous", ArgKind::kConstant, random_ids(B, V, stream(seed, 2))}};
      s.results = {"ids"};
      s.call = [ids](Backend& b, std::vector<Tensor>& a) {
        Tensor resolved = b.to_device(ids.clone());  // the op rewrites its ids: a fresh copy each run
        b.resolve_placeholders(resolved, a[0]);
        return Results{resolved};
      };
      s.compare = compare_with(kExact);
      return s;
    }));
  }
}

// Expert-parallel load balancing: the ids' map to replica slots, and the load counters (the router's
// ids of T tokens, top 8 of 256, with an id past the end and a negative one, added to counts that
// already hold a window's loads).
void add_eplb_cases(std::vector<Case>& cases, const Dims& d) {
  // EPLB: V3's 256 logical experts in 288 physical slots, the first 32 with a second replica, the
  // slots in scrambled order; the router's ids of T tokens, top 8.
  for (int64_t T : d.pick<int64_t>({16}, {1, 256, 4096})) {
    cases.push_back(make_case("map_expert_ids", str_cat("T=", T, ", 256 experts in 288 slots"), [=](uint64_t seed) {
      const int64_t E = 256, k = 8, slots = 288;
      Tensor ids = random_ids(T * k, E, stream(seed, 0)).view({T, k});
      Tensor start = Tensor::empty(DType::kI32, {E + 1}), order = Tensor::empty(DType::kI32, {slots});
      start.data<int32_t>()[0] = 0;
      for (int64_t e = 0; e < E; ++e) start.data<int32_t>()[e + 1] = start.data<int32_t>()[e] + (e < 32 ? 2 : 1);
      for (int64_t p = 0; p < slots; ++p) order.data<int32_t>()[p] = static_cast<int32_t>((p * 181 + 7) % slots);
      OpSpec s;
      s.args = {{"replica_start", ArgKind::kConstant, start}, {"replica_slots", ArgKind::kConstant, order}};
      s.results = {"ids"};
      s.call = [ids](Backend& b, std::vector<Tensor>& a) {
        Tensor mapped = b.to_device(ids.clone());  // the op rewrites its ids: a fresh copy each run
        b.map_expert_ids(mapped, a[0], a[1]);
        return Results{mapped};
      };
      s.compare = compare_with(kExact);
      return s;
    }));
  }
  for (int64_t T : d.pick<int64_t>({16}, {1, 256, 4096})) {
    cases.push_back(make_case("count_expert_ids", str_cat("T=", T, ", top 8 of 256"), [=](uint64_t seed) {
      const int64_t E = 256, k = 8;
      Tensor ids = random_ids(T * k, E, stream(seed, 0)).view({T, k});
      ids.data<int32_t>()[0] = static_cast<int32_t>(E + 3);  // not counted
      if (T * k > 1) ids.data<int32_t>()[1] = -1;
      Tensor start = Tensor::empty(DType::kI64, {E});
      for (int64_t e = 0; e < E; ++e) start.data<int64_t>()[e] = static_cast<int64_t>(hash_at(stream(seed, 1), e) % 1000);
      OpSpec s;
      s.args = {{"expert_ids", ArgKind::kConstant, ids}};
      s.results = {"counts"};
      s.call = [start](Backend& b, std::vector<Tensor>& a) {
        Tensor counts = b.to_device(start.clone());  // the op adds to its counts: a fresh copy each run
        b.count_expert_ids(a[0], counts);
        return Results{counts};
      };
      s.compare = compare_with(kExact);
      return s;
    }));
  }
}

// ------------------------------------------------------------------------------------------------
// Memory: what every other case stands on.

void add_memory_cases(std::vector<Case>& cases) {
  cases.push_back(make_case("to_host", "round trips f32 bf16 f8e4m3 int32 int64, empty()", [](uint64_t seed) {
    OpSpec s;
    Tensor f32 = activation({3, 1000}, stream(seed, 0), 1.0f);
    Tensor f8 = Tensor::empty(DType::kF8E4M3, {4, 256});
    for (int64_t i = 0; i < f8.numel(); ++i) {  // every code but the two NaNs (0x7f, 0xff)
      auto code = static_cast<uint8_t>(i % 256);
      f8.data<uint8_t>()[i] = (code & 0x7f) == 0x7f ? 0 : code;
    }
    Tensor i64 = Tensor::empty(DType::kI64, {17});
    for (int64_t i = 0; i < 17; ++i) i64.data<int64_t>()[i] = (int64_t{1} << 40) * i - 5;
    s.args = {{"f32", ArgKind::kConstant, f32},
              {"bf16", ArgKind::kConstant, normal_bf16({5, 777}, stream(seed, 1), 1.0f)},
              {"f8e4m3", ArgKind::kConstant, f8},
              {"int32", ArgKind::kConstant, random_ids(1001, 1 << 30, stream(seed, 2))},
              {"int64", ArgKind::kConstant, i64}};
    s.results = {"f32", "bf16", "f8e4m3", "int32", "int64", "empty shape"};
    s.call = [](Backend& b, std::vector<Tensor>& a) {
      Tensor empty = b.empty(DType::kBF16, {3, 5, 7});
      Tensor shape = Tensor::empty(DType::kI32, {5});
      int32_t* fields = shape.data<int32_t>();
      fields[0] = static_cast<int32_t>(empty.rank());
      fields[1] = static_cast<int32_t>(empty.dim(0) * 10000 + empty.dim(1) * 100 + empty.dim(2));
      fields[2] = static_cast<int32_t>(empty.dtype());
      fields[3] = empty.device() == b.device();
      fields[4] = empty.raw() != nullptr;
      Results out(a.begin(), a.end());
      out.push_back(shape);
      return out;
    };
    s.compare = compare_with(kExact);
    return s;
  }));
  // The host KV tier's copies (runtime/host_kv_tier.h): rows of a cache-like tensor to host memory
  // from allocate_host and back at other rows, queued, then one synchronize.
  constexpr int64_t kRows = 16, kWidth = 576;
  constexpr size_t kRowBytes = kWidth * 2;  // bf16
  auto host_copy_case = [](bool back_to_device) {
    return [back_to_device](uint64_t seed) {
      OpSpec s;
      s.args = {{"cache", ArgKind::kConstant, normal_bf16({kRows, kWidth}, stream(seed, 0), 1.0f)}};
      s.results = {back_to_device ? "rows [5, 11) from host" : "rows [3, 9) on the host"};
      s.call = [back_to_device](Backend& b, std::vector<Tensor>& a) {
        std::shared_ptr<std::byte> host = b.allocate_host(6 * kRowBytes);
        b.queue_copy_to_host(host.get(), a[0], 3 * kRowBytes, 6 * kRowBytes);
        if (!back_to_device) {
          b.synchronize();
          return Results{Tensor::wrap(host.get(), DType::kBF16, {6, kWidth}, Device::kCpu, host)};
        }
        Tensor back = b.empty(DType::kBF16, {kRows, kWidth});
        b.queue_copy_from_host(back, 5 * kRowBytes, host.get(), 6 * kRowBytes);
        b.synchronize();
        return Results{back};
      };
      s.compare = compare_with(kExact);
      return s;
    };
  };
  cases.push_back(make_case("queue_copy_to_host", "bf16 rows [3, 9) of [16, 576] to host memory", host_copy_case(false)));
  cases.push_back(make_case("queue_copy_from_host", "those rows back into rows [5, 11) of a zeroed [16, 576]",
                            host_copy_case(true)));
}

// Backend::fill_uniform: the dummy weights every backend must generate alike. Bounds near zero
// rather than bit equality: a device may contract low + (high - low) * u into one FMA (one ulp off).
void add_fill_cases(std::vector<Case>& cases, const Dims& d) {
  int64_t rows = d.pick<int64_t>({96}, {2048})[0], columns = d.pick<int64_t>({777}, {7168})[0];
  struct Fill { DType dtype; float low, high; double bound; };
  for (Fill f : {Fill{DType::kF32, -0.05f, 0.05f, 1e-12}, Fill{DType::kBF16, -0.05f, 0.05f, 1e-8},
                 Fill{DType::kF8E4M3, -224.0f, 224.0f, 1e-6}}) {
    cases.push_back(make_case("fill_uniform", str_cat(dtype_name(f.dtype), " ", shape_name({rows, columns}), " in [",
                                                      f.low, ", ", f.high, ")"),
                              [=](uint64_t seed) {
                                OpSpec s;
                                s.args = {{"t", ArgKind::kInPlace, Tensor::empty(DType::kF32, {rows, columns}), f.dtype}};
                                s.call = [f, seed](Backend& b, std::vector<Tensor>& a) {
                                  b.fill_uniform(a[0], seed, f.low, f.high);
                                  return Results{};
                                };
                                s.compare = compare_with(f.bound);
                                return s;
                              }));
  }
}

}  // namespace

// ------------------------------------------------------------------------------------------------
// Public helpers.

const Tensor& Outputs::get(std::string_view name) const {
  for (const auto& [key, value] : tensors)
    if (key == name) return value;
  throw Error(str_cat("conformance: the case produced no output named '", name, "'"));
}

Tensor convert(const Tensor& host, DType dtype) {
  DSINFER_CHECK(host.device() == Device::kCpu, "conformance: convert() takes host tensors");
  if (host.dtype() == dtype) return host.clone();
  Tensor out = Tensor::empty(dtype, host.shape());
  int64_t n = host.numel();
  if (host.dtype() == DType::kF32) {
    const float* source = host.data<float>();
    if (dtype == DType::kBF16) {
      auto* target = out.data<uint16_t>();
      fill_parallel(n, [&](int64_t i) { target[i] = f32_to_bf16(source[i]); });
      return out;
    }
    if (dtype == DType::kF16) {
      auto* target = out.data<uint16_t>();
      fill_parallel(n, [&](int64_t i) { target[i] = f32_to_f16(source[i]); });
      return out;
    }
    if (dtype == DType::kF8E4M3) {
      auto* target = out.data<uint8_t>();
      fill_parallel(n, [&](int64_t i) { target[i] = f32_to_fp8e4m3(source[i]); });
      return out;
    }
  } else if (dtype == DType::kF32) {
    float* target = out.data<float>();
    if (host.dtype() == DType::kBF16) {
      const auto* source = host.data<uint16_t>();
      fill_parallel(n, [&](int64_t i) { target[i] = bf16_to_f32(source[i]); });
      return out;
    }
    if (host.dtype() == DType::kF16) {
      const auto* source = host.data<uint16_t>();
      fill_parallel(n, [&](int64_t i) { target[i] = f16_to_f32(source[i]); });
      return out;
    }
    if (host.dtype() == DType::kF8E4M3) {
      const auto* source = host.data<uint8_t>();
      fill_parallel(n, [&](int64_t i) { target[i] = fp8e4m3_to_f32(source[i]); });
      return out;
    }
  }
  throw Error(str_cat("conformance: no conversion from ", dtype_name(host.dtype()), " to ", dtype_name(dtype)));
}

Tensor round_to_bf16(const Tensor& host_f32) { return convert(convert(host_f32, DType::kBF16), DType::kF32); }

Tensor upload_activation(Backend& backend, const Tensor& host_f32) {
  DSINFER_CHECK(host_f32.dtype() == DType::kF32, "conformance: activations start as f32, got ",
                dtype_name(host_f32.dtype()));
  return backend.to_device(convert(host_f32, backend.compute_dtype()));
}

Tensor download(Backend& backend, const Tensor& tensor) {
  if (!tensor.defined()) return Tensor();
  // Host results (sample_tokens') and every CPU tensor are read directly.
  Tensor host = tensor.device() == Device::kCpu ? tensor : backend.to_host(tensor);
  DSINFER_CHECK(host.device() == Device::kCpu, "conformance: ", backend.name(), "'s to_host gave a device tensor");
  return is_float(host.dtype()) ? convert(host, DType::kF32) : host.clone();
}

CheckResult check_nmse(std::string output, const Tensor& reference, const Tensor& candidate, double bound) {
  CheckResult result{std::move(output), "nmse", 0.0, bound, false, ""};
  if (!same_layout(result, reference, candidate)) return result;
  DSINFER_CHECK(reference.dtype() == DType::kF32, "conformance: nmse compares f32 host tensors");
  const float* expected = reference.data<float>();
  const float* actual = candidate.data<float>();
  double error = 0.0, norm = 0.0, worst = -1.0;
  int64_t worst_index = -1, nonfinite = 0, first_nonfinite = -1, reference_nonfinite = 0;
  for (int64_t i = 0; i < reference.numel(); ++i) {
    if (!std::isfinite(expected[i])) {
      ++reference_nonfinite;
      continue;
    }
    if (!std::isfinite(actual[i])) {
      if (nonfinite++ == 0) first_nonfinite = i;
      continue;
    }
    double difference = static_cast<double>(actual[i]) - expected[i];
    error += difference * difference;
    norm += static_cast<double>(expected[i]) * expected[i];
    if (std::fabs(difference) > worst) {
      worst = std::fabs(difference);
      worst_index = i;
    }
  }
  result.value = norm > 0.0 ? error / norm : error;
  if (nonfinite > 0) {
    result.value = std::numeric_limits<double>::infinity();
    result.detail = str_cat(nonfinite, " non-finite values, the first at ", index_string(reference.shape(), first_nonfinite),
                            ": ", actual[first_nonfinite]);
  } else if (reference_nonfinite > 0) {
    result.value = std::numeric_limits<double>::infinity();
    result.detail = str_cat("the reference has ", reference_nonfinite, " non-finite values (a bad case)");
  }
  result.passed = result.value <= bound;
  if (!result.passed && result.detail.empty() && worst_index >= 0)
    result.detail = str_cat("worst at ", index_string(reference.shape(), worst_index), ": candidate ",
                            format_number(actual[worst_index]), ", reference ", format_number(expected[worst_index]));
  return result;
}

CheckResult check_nmse_worst_row(std::string output, const Tensor& reference, const Tensor& candidate, double bound) {
  CheckResult result{output, "row nmse", 0.0, bound, false, ""};
  if (!same_layout(result, reference, candidate)) return result;
  int64_t rows = reference.rank() > 0 ? reference.dim(0) : 0;
  for (int64_t r = 0; r < rows; ++r) {
    CheckResult row = check_nmse(output, reference.slice(r, r + 1), candidate.slice(r, r + 1), bound);
    if (row.value > result.value || (std::isnan(row.value) && !std::isnan(result.value))) {
      result.value = row.value;
      result.detail = str_cat("row ", r, row.detail.empty() ? "" : ": ", row.detail);
    }
  }
  result.passed = result.value <= bound;
  if (result.passed) result.detail.clear();
  return result;
}

CheckResult check_exact(std::string output, const Tensor& reference, const Tensor& candidate) {
  CheckResult result{std::move(output), "mismatches", 0.0, 0.0, false, ""};
  if (!same_layout(result, reference, candidate)) return result;
  size_t element = dtype_size(reference.dtype());
  const auto* expected = static_cast<const char*>(reference.raw());
  const auto* actual = static_cast<const char*>(candidate.raw());
  bool floats = reference.dtype() == DType::kF32;
  int64_t mismatches = 0, first = -1;
  for (int64_t i = 0; i < reference.numel(); ++i) {
    bool equal = floats ? reference.data<float>()[i] == candidate.data<float>()[i]  // -0 == 0; NaN never equal
                        : std::memcmp(expected + i * element, actual + i * element, element) == 0;
    if (!equal && mismatches++ == 0) first = i;
  }
  result.value = static_cast<double>(mismatches);
  result.passed = mismatches == 0;
  if (!result.passed)
    result.detail = str_cat(mismatches, " of ", reference.numel(), " differ, the first at ",
                            index_string(reference.shape(), first), ": candidate ", element_string(candidate, first),
                            ", reference ", element_string(reference, first));
  return result;
}

std::vector<CheckResult> check_routing(const Tensor& reference_ids, const Tensor& reference_weights,
                                       const Tensor& candidate_ids, const Tensor& candidate_weights,
                                       double weight_bound) {
  CheckResult sets{"expert sets", "mismatches", 0.0, 0.0, false, ""};
  CheckResult weights{"weights by expert", "nmse", 0.0, weight_bound, false, ""};
  if (!same_layout(sets, reference_ids, candidate_ids) || !same_layout(weights, reference_weights, candidate_weights)) {
    sets.passed = weights.passed = false;
    if (weights.detail.empty()) weights.detail = "not compared";
    return {sets, weights};
  }
  int64_t T = reference_ids.dim(0), k = reference_ids.dim(1);
  std::vector<float> matched_expected, matched_actual;
  for (int64_t t = 0; t < T; ++t) {
    auto pairs = [&](const Tensor& ids, const Tensor& w) {
      std::vector<std::pair<int32_t, float>> out;
      for (int64_t i = 0; i < k; ++i) out.emplace_back(ids.data<int32_t>()[t * k + i], w.data<float>()[t * k + i]);
      std::sort(out.begin(), out.end());
      return out;
    };
    auto expected = pairs(reference_ids, reference_weights);
    auto actual = pairs(candidate_ids, candidate_weights);
    bool same = std::equal(expected.begin(), expected.end(), actual.begin(),
                           [](const auto& a, const auto& b) { return a.first == b.first; });
    if (!same) {
      if (sets.value == 0.0) {
        std::string want, got;
        for (int64_t i = 0; i < k; ++i) {
          want += (i ? "," : "") + std::to_string(expected[i].first);
          got += (i ? "," : "") + std::to_string(actual[i].first);
        }
        sets.detail = str_cat("token ", t, ": candidate {", got, "}, reference {", want, "}");
      }
      sets.value += 1.0;
      continue;
    }
    for (int64_t i = 0; i < k; ++i) {
      matched_expected.push_back(expected[i].second);
      matched_actual.push_back(actual[i].second);
    }
  }
  sets.passed = sets.value == 0.0;
  auto pack = [](const std::vector<float>& values) {
    Tensor t = Tensor::empty(DType::kF32, {static_cast<int64_t>(values.size())});
    std::copy(values.begin(), values.end(), t.data<float>());
    return t;
  };
  weights = check_nmse("weights by expert", pack(matched_expected), pack(matched_actual), weight_bound);
  return {sets, weights};
}

// ------------------------------------------------------------------------------------------------
// The case list.

const std::vector<std::string>& conformance_ops() {
  static const std::vector<std::string> ops = {
      "fill_uniform", "embedding",   "rms_norm",     "add_rms_norm_inplace", "add_inplace",  "silu_mul",
      "concat_last", "slice_last",   "gather_rows",          "concat_rows",  "linear",
      "linear_f32",  "grouped_linear", "absorb_query", "rope_inplace",       "write_cache",  "write_latent_cache", "gather_cache",
      "attention_expanded", "attention_absorbed", "route",   "moe_experts",
      "sample_tokens", "queue_sample_tokens", "resolve_placeholders", "map_expert_ids", "count_expert_ids",
      "queue_copy_to_host", "queue_copy_from_host",
  };
  return ops;
}

const std::vector<std::string>& backend_plumbing() {
  // capture and StepGraph::replay: CUDA graphs, tested against eager steps at the model level
  // (model/decode_graphs_test.cc), where a whole step is recorded.
  static const std::vector<std::string> names = {"name",       "device", "compute_dtype", "begin_step", "synchronize",
                                                 "memory_info", "release_cached_memory", "empty", "to_device",
                                                 "to_host", "capture", "replay",
                                                 // host memory, tested through queue_copy_to_host's cases
                                                 "allocate_host",
                                                 // PendingTokens, tested through queue_sample_tokens
                                                 "device_tokens", "wait",
                                                 // a capability, tested at the model level (model_test's
                                                 // CacheFormats: the CPU takes every FP8 cache, the GPU fp8 and not fp8_ds_mla)
                                                 "supports_cache_dtype",
                                                 // likewise: model_test's W4A8 checkpoint (W4A8 routed experts
                                                 // are moe_experts' cases here)
                                                 "supports_weight_format",
                                                 // the host's view of queued work (WorkMark) and its wait:
                                                 // prefill/decode disaggregation's layer-wise sends
                                                 // (disaggregation_test; pd_test on the GPU)
                                                 "mark_work", "reached", "set_wait_poll"};
  return names;
}

std::vector<Case> conformance_cases(Tier tier) {
  Dims d = dims_of(tier);
  std::vector<Case> cases;
  add_memory_cases(cases);
  add_fill_cases(cases, d);
  add_elementwise_cases(cases, d);
  add_copy_cases(cases, d);
  add_linear_cases(cases, d);
  add_rope_cases(cases, d);
  add_cache_format_cases(cases, d, compute_cache_format(d));
  add_attention_cases(cases, d);
  add_cache_format_cases(cases, d, fp8_cache_format(d));
  add_fp8_attention_cases(cases, d);
  add_moe_cases(cases, d);
  add_fixture_cases(cases);
  add_sampling_cases(cases, d);
  add_eplb_cases(cases, d);
  return cases;
}

// ------------------------------------------------------------------------------------------------
// The runner and its table.

bool CaseResult::passed() const {
  return error.empty() && !checks.empty() &&
         std::all_of(checks.begin(), checks.end(), [](const CheckResult& c) { return c.passed; });
}

bool ConformanceReport::passed() const { return num_failed() == 0; }

int ConformanceReport::num_failed() const {
  return static_cast<int>(std::count_if(cases.begin(), cases.end(), [](const CaseResult& c) { return !c.passed(); }));
}

std::vector<std::string> ConformanceReport::failing_ops() const {
  std::vector<std::string> ops;
  for (const CaseResult& c : cases)
    if (!c.passed() && std::find(ops.begin(), ops.end(), c.op) == ops.end()) ops.push_back(c.op);
  return ops;
}

namespace {

Outputs execute(Backend& backend, const CaseProgram& program, Role role, int timed_runs, double* median_us) {
  backend.begin_step(program.step);
  Invocation invocation = program.bind(backend, role);
  invocation.run();
  backend.synchronize();
  Outputs outputs = invocation.collect();
  if (timed_runs > 0) {
    std::vector<double> times;
    for (int i = 0; i < timed_runs; ++i) {
      backend.begin_step(program.step);
      backend.synchronize();
      auto start = std::chrono::steady_clock::now();
      invocation.run();
      backend.synchronize();
      times.push_back(std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - start).count());
    }
    std::nth_element(times.begin(), times.begin() + times.size() / 2, times.end());
    *median_us = times[times.size() / 2];
  }
  backend.begin_step(StepContext{});  // ends this case's registrations: its host arrays die with it
  return outputs;
}

constexpr int kOpWidth = 21, kCaseWidth = 56, kOutputWidth = 18, kMetricWidth = 11, kNumberWidth = 11;

void print_header(std::ostream& log, bool perf) {
  log << std::left << std::setw(kOpWidth) << "op" << ' ' << std::setw(kCaseWidth) << "case" << ' '
      << std::setw(kOutputWidth) << "output" << ' ' << std::setw(kMetricWidth) << "metric" << ' ' << std::right
      << std::setw(kNumberWidth) << "value" << ' ' << std::setw(kNumberWidth) << "bound" << "  result";
  if (perf) log << std::setw(12) << "median_us";
  log << '\n';
}

void print_case(std::ostream& log, const CaseResult& result, bool perf) {
  auto lead = [&](const std::string& output, const std::string& metric) {
    log << std::left << std::setw(kOpWidth) << result.op << ' ' << std::setw(kCaseWidth) << result.name << ' '
        << std::setw(kOutputWidth) << output << ' ' << std::setw(kMetricWidth) << metric << ' ' << std::right;
  };
  if (!result.error.empty()) {
    lead("-", "error");
    log << std::setw(kNumberWidth) << "-" << ' ' << std::setw(kNumberWidth) << "-" << "  FAIL\n    -> " << result.error
        << '\n';
    return;
  }
  for (size_t i = 0; i < result.checks.size(); ++i) {
    const CheckResult& check = result.checks[i];
    lead(check.output, check.metric);
    log << std::setw(kNumberWidth) << format_number(check.value) << ' ' << std::setw(kNumberWidth)
        << format_number(check.bound) << "  " << (check.passed ? "pass" : "FAIL");
    if (perf && i == 0 && result.median_us >= 0) log << "  " << std::setw(10) << std::fixed << std::setprecision(1)
                                                       << result.median_us << std::defaultfloat;
    log << '\n';
    if (!check.passed && !check.detail.empty()) log << "    -> " << check.detail << '\n';
  }
  log.flush();
}

}  // namespace

void print_summary(const ConformanceReport& report, std::ostream& log) {
  size_t checks = 0;
  double build = 0.0, reference = 0.0, candidate = 0.0;
  for (const CaseResult& c : report.cases) {
    checks += c.checks.size();
    build += c.build_seconds, reference += c.reference_seconds, candidate += c.candidate_seconds;
  }
  // Where the suite's time went: the stages in all, then the slowest cases.
  std::vector<const CaseResult*> slowest;
  for (const CaseResult& c : report.cases) slowest.push_back(&c);
  auto total = [](const CaseResult* c) { return c->build_seconds + c->reference_seconds + c->candidate_seconds; };
  std::sort(slowest.begin(), slowest.end(), [&](const CaseResult* a, const CaseResult* b) { return total(a) > total(b); });
  slowest.resize(std::min<size_t>(slowest.size(), 5));
  log << std::fixed << std::setprecision(1) << "host time: building inputs " << build << " s, reference " << reference
      << " s, candidate and comparison " << candidate << " s; slowest:";
  for (const CaseResult* c : slowest)
    log << "\n  " << c->op << " " << c->name << ": " << c->build_seconds << " + " << c->reference_seconds << " + "
        << c->candidate_seconds << " s";
  log << std::defaultfloat << '\n';
  log << "conformance of " << report.candidate << ": " << report.cases.size() << " cases, " << checks << " checks, ";
  if (report.passed()) {
    log << "all passed\n";
    return;
  }
  log << report.num_failed() << " cases failed in";
  for (const std::string& op : report.failing_ops()) log << ' ' << op;
  log << '\n';
}

ConformanceReport run_cases(Backend& candidate, Backend& reference, const std::vector<Case>& cases,
                            const ConformanceOptions& options, std::ostream& log) {
  ConformanceReport report;
  report.candidate = candidate.name();
  DSINFER_CHECK(options.shards >= 1 && options.shard >= 0 && options.shard < options.shards, "conformance: shard ",
                options.shard, " of ", options.shards, " is not one of them");
  print_header(log, options.perf);
  int selected = 0;  // cases the filters left so far
  for (const Case& c : cases) {
    if (!options.ops.empty() && std::find(options.ops.begin(), options.ops.end(), c.op) == options.ops.end()) continue;
    if (c.name.find(options.name_contains) == std::string::npos) continue;
    if (selected++ % options.shards != options.shard) continue;
    CaseResult result{c.op, c.name, {}, "", -1.0};
    const char* stage = "building inputs";
    auto since = std::chrono::steady_clock::now();
    auto lap = [&since] {  // seconds since the last lap
      const auto now = std::chrono::steady_clock::now();
      const double seconds = std::chrono::duration<double>(now - since).count();
      since = now;
      return seconds;
    };
    try {
      CaseProgram program = c.make();
      result.build_seconds = lap();
      stage = "reference";
      Outputs expected = execute(reference, program, Role::kReference, 0, nullptr);
      result.reference_seconds = lap();
      stage = "candidate";
      Outputs actual = execute(candidate, program, Role::kCandidate, options.perf ? std::max(10, options.perf_runs) : 0,
                               &result.median_us);
      stage = "comparing";
      result.checks = program.compare(expected, actual);
      result.candidate_seconds = lap();
      for (const auto& [name, damaged] : actual.guard_damage)
        result.checks.push_back({"guard " + name, "damaged", static_cast<double>(damaged), 0.0, damaged == 0,
                                 damaged ? str_cat(damaged, " elements around the tensor changed") : ""});
      if (!actual.changed_inputs.empty()) {
        CheckResult inputs{"read-only inputs", "changed", 0.0, 0.0, true, ""};
        for (const auto& [name, changed] : actual.changed_inputs) {
          inputs.value += static_cast<double>(changed);
          if (changed > 0) inputs.detail += str_cat(inputs.detail.empty() ? "" : ", ", changed, " elements of ", name);
        }
        inputs.passed = inputs.value == 0.0;
        result.checks.push_back(inputs);
      }
    } catch (const std::exception& e) {
      result.error = str_cat(stage, ": ", e.what());
    }
    try {  // a device allocator keeps freed blocks: without this, every case's sizes would add up
      candidate.release_cached_memory();
    } catch (const std::exception& e) {
      if (result.error.empty()) result.error = str_cat("release_cached_memory: ", e.what());
    }
    print_case(log, result, options.perf);
    // Slow cases are named as they finish too, so that a run stopped before its summary still says
    // where its time went.
    if (const double seconds = result.build_seconds + result.reference_seconds + result.candidate_seconds;
        seconds > 5.0)
      log << "  (" << result.op << " " << result.name << " took " << static_cast<int>(seconds) << " s: reference "
          << static_cast<int>(result.reference_seconds) << " s)\n" << std::flush;
    report.cases.push_back(std::move(result));
  }
  print_summary(report, log);
  return report;
}

ConformanceReport run_conformance(Backend& candidate, const ConformanceOptions& options, std::ostream& log) {
  std::unique_ptr<Backend> reference = make_cpu_backend();
  return run_cases(candidate, *reference, conformance_cases(options.tier), options, log);
}

ConformanceReport run_conformance(Backend& candidate, Tier tier, std::ostream& log, bool perf) {
  ConformanceOptions options;
  options.tier = tier;
  options.perf = perf;
  return run_conformance(candidate, options, log);
}

}  // namespace dsinfer::backend::conformance
