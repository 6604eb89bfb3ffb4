// GemmRunner: the backend's products through cuBLASLt, with our fallback kernel behind every path.
//
// Row-major to cuBLASLt's column-major. A row-major matrix R [r, c] with row stride ld is, read
// column-major with leading dimension ld, the matrix R^T [c, r]. So
//   W row-major [N, K], ld K        is column-major W^T [K, N], ld K
//   x row-major [T, K], ld x_stride is column-major x^T [K, T], ld x_stride
//   y row-major [T, N], ld y_stride is column-major y^T [N, T], ld y_stride
// and y = x W^T  <=>  y^T = W x^T = op(W^T) x^T with op = transpose. In cuBLASLt's terms
// (D = op(A) op(B), D m x n, op(A) m x k):
//   m = N, n = T, k = K
//   A = W: layout K x N, ld K, TRANSA = T        (op(A) = W, N x K)
//   B = x: layout K x T, ld x_stride, TRANSB = N
//   D = y: layout N x T, ld y_stride             (C = D, beta = 0)
// This is the "TN" form that FP8 requires (A transposed, B not).
//
// FP8 block scales (cuBLAS documentation, "128-element 1D and 128x128 2D block scaling for FP8
// data types", scaling factors layouts; Hopper only). With the mapping above, A is the weight and B
// the activations, L = ceil(K / 128):
//   A: CUBLASLT_MATMUL_MATRIX_SCALE_BLK128x128_32F. Scales are K-major, shape L4 x ceil(M / 128)
//      with the stride between columns a multiple of 4 (L4 = L rounded up to 4): scale (kb, nb) at
//      nb * stride + kb. DeepSeek's weight_scale_inv [ceil(N/128), L] row-major is exactly that with
//      stride L, so we pass it as is when L % 4 == 0 (true for every DeepSeek-V3 K: 7168, 1536, 512,
//      2048, 16384, 18432) and use the fallback otherwise.
//   B: CUBLASLT_MATMUL_MATRIX_SCALE_VEC128_32F. Scales are N-major (cuBLASLt's N = our tokens),
//      shape N x L: scale (t, kb) at kb * T + t, token-contiguous; quantize_fp8_per_token_group
//      writes that layout.
//   Both scale pointers 16-byte aligned; cuBLASLt's M and N (our N and T) multiples of 4: T is padded
//   to T4 with zero rows in scratch, and the product then goes to a scratch [T4, N] whose first T
//   rows are copied to y. Data pointers and dimensions 16-byte aligned ("Tensor Core Usage"): K % 16
//   (implied by K % 128) and N % 16 (the D rows). Compute type CUBLAS_COMPUTE_32F, scale type
//   CUDA_R_32F, D bf16 or f32 (not FP8 with these modes), no fast accumulation (the default).
//   Supported pairs: VEC128 x VEC128, VEC128 x BLK128x128, BLK128x128 x VEC128 (ours).
//   An H100 refused T = 1 and 2 without padding (CUBLAS_STATUS_NOT_SUPPORTED), as the M/N rule says.
#include "backend/cuda/gemm.h"

#include <cublasLt.h>
#include <cuda_fp8.h>

#include <algorithm>
#include <map>
#include <memory>
#include <string>
#include <tuple>

#include "backend/cuda/cuda_check.h"
#include "backend/cuda/elementwise.h"
#include "backend/cuda/fp8_gemm.h"
#include "backend/cuda/fp8_gemm_tiled.h"
#include "backend/cuda/fp8_gemm_wgmma.h"
#include "backend/cuda/gemv.h"
#include "core/log.h"

namespace dsinfer::backend::cuda {
namespace {

[[noreturn]] void throw_cublas_error(cublasStatus_t status, const char* call, const char* file, int line) {
  throw Error(str_cat("cuBLASLt error: ", cublasLtGetStatusName(status), " (", cublasLtGetStatusString(status),
                      ") in ", call, " at ", file, ":", line));
}

#define DSINFER_CUBLAS_CHECK(call)                                                    \
  do {                                                                                \
    cublasStatus_t dsinfer_cublas_status_ = (call);                                   \
    if (dsinfer_cublas_status_ != CUBLAS_STATUS_SUCCESS)                              \
      throw_cublas_error(dsinfer_cublas_status_, #call, __FILE__, __LINE__);          \
  } while (0)

constexpr int64_t kScratchAlign = 256;
constexpr size_t kMaxCachedPlans = 4096;  // bounds host memory if prefill sees many distinct T

int64_t round_up(int64_t value, int64_t multiple) { return (value + multiple - 1) / multiple * multiple; }

bool aligned(const void* p, int64_t bytes) { return reinterpret_cast<uintptr_t>(p) % bytes == 0; }

// The largest power of two up to 256 that divides the address and the byte stride to the next
// batch matrix (what cuBLASLt's MIN_ALIGNMENT preferences ask).
uint32_t alignment_of(const void* p, int64_t batch_stride_bytes = 0) {
  const uintptr_t bits = reinterpret_cast<uintptr_t>(p) | static_cast<uintptr_t>(batch_stride_bytes);
  uint32_t alignment = 256;
  while (alignment > 1 && bits % alignment != 0) alignment /= 2;
  return alignment;
}

// FP8: cuBLASLt's shape rules (see the top of the file).
bool fp8_shape_ok(int64_t out_features, int64_t in_features) {
  return in_features % kFp8Block == 0 && out_features % 16 == 0 && (in_features / kFp8Block) % 4 == 0;
}

int64_t padded_tokens(int64_t tokens) { return round_up(std::max<int64_t>(tokens, 1), 4); }

// Scratch of the FP8 paths: [T4, K] e4m3 activations, [K/128, T4] f32 scales, then one region that
// is cuBLASLt's [T4, N] output for a T that is not a multiple of 4, or the wgmma kernel's split-K
// partials (partial_bytes): always counted, both, so the size never decreases with T.
struct Fp8Scratch {
  int64_t scales_offset = 0;
  int64_t output_offset = 0;
  int64_t bytes = 0;
};

Fp8Scratch fp8_scratch(int64_t tokens, int64_t out_features, int64_t in_features, DType y_dtype,
                       size_t partial_bytes) {
  const int64_t t4 = padded_tokens(tokens);
  Fp8Scratch s;
  s.scales_offset = round_up(t4 * in_features, kScratchAlign);
  s.output_offset = s.scales_offset + round_up(in_features / kFp8Block * t4 * 4, kScratchAlign);
  s.bytes = s.output_offset + std::max(t4 * out_features * static_cast<int64_t>(dtype_size(y_dtype)),
                                       static_cast<int64_t>(partial_bytes));
  return s;
}

// Whether FP8 products of this shape may take the wgmma kernel at some T (fp8_gemm_wgmma.h: K a
// multiple of 128; N * K addressable by its TMA coordinates).
bool fp8_wgmma_shape_ok(const GemmOptions& options, int64_t out_features, int64_t in_features) {
  return options.fp8_wgmma_max_rows > options.fp8_fallback_max_rows && in_features % kFp8Block == 0 &&
         out_features < (int64_t{1} << 31) && in_features < (int64_t{1} << 31);
}

// The split-K partials the wgmma kernel may need at up to `tokens` rows (0 where it never runs):
// the bound over every T it takes up to min(tokens, fp8_wgmma_max_rows), so it never decreases.
size_t fp8_wgmma_partial_bytes(const GemmOptions& options, int64_t tokens, int64_t out_features,
                               int64_t in_features) {
  if (!fp8_wgmma_shape_ok(options, out_features, in_features) || tokens <= options.fp8_fallback_max_rows) return 0;
  return fp8_wgmma_workspace_bound(std::min(tokens, options.fp8_wgmma_max_rows), out_features, in_features, 1,
                                   fp8_wgmma_sm_count());
}

enum class Kind : uint8_t { kBf16, kF32, kFp8, kGroupedBf16 };

// Everything a cuBLASLt descriptor and algorithm depend on (scale pointers are set per call).
struct MatmulKey {
  Kind kind = Kind::kBf16;
  DType out = DType::kBF16;
  int64_t m = 0, n = 0, k = 0;
  int64_t lda = 0, ldb = 0, ldd = 0;
  int64_t batch = 1, stride_a = 0, stride_b = 0, stride_d = 0;  // strides in elements
  uint32_t align_a = 0, align_b = 0, align_d = 0;

  auto fields() const {
    return std::tie(kind, out, m, n, k, lda, ldb, ldd, batch, stride_a, stride_b, stride_d, align_a, align_b, align_d);
  }
  bool operator<(const MatmulKey& other) const { return fields() < other.fields(); }
};

struct MatmulPlan {
  cublasLtMatmulDesc_t desc = nullptr;
  cublasLtMatrixLayout_t a = nullptr, b = nullptr, d = nullptr;
  cublasLtMatmulAlgo_t algo{};
  bool supported = false;

  MatmulPlan() = default;
  MatmulPlan(const MatmulPlan&) = delete;
  MatmulPlan& operator=(const MatmulPlan&) = delete;
  ~MatmulPlan() {  // statuses ignored: a destructor must not throw
    if (d) cublasLtMatrixLayoutDestroy(d);
    if (b) cublasLtMatrixLayoutDestroy(b);
    if (a) cublasLtMatrixLayoutDestroy(a);
    if (desc) cublasLtMatmulDescDestroy(desc);
  }
};

struct PreferenceGuard {
  cublasLtMatmulPreference_t pref = nullptr;
  ~PreferenceGuard() {
    if (pref) cublasLtMatmulPreferenceDestroy(pref);
  }
};

template <typename T>
void set_desc(cublasLtMatmulDesc_t desc, cublasLtMatmulDescAttributes_t attribute, const T& value) {
  DSINFER_CUBLAS_CHECK(cublasLtMatmulDescSetAttribute(desc, attribute, &value, sizeof(value)));
}

template <typename T>
void set_layout(cublasLtMatrixLayout_t layout, cublasLtMatrixLayoutAttribute_t attribute, const T& value) {
  DSINFER_CUBLAS_CHECK(cublasLtMatrixLayoutSetAttribute(layout, attribute, &value, sizeof(value)));
}

template <typename T>
void set_pref(cublasLtMatmulPreference_t pref, cublasLtMatmulPreferenceAttributes_t attribute, const T& value) {
  DSINFER_CUBLAS_CHECK(cublasLtMatmulPreferenceSetAttribute(pref, attribute, &value, sizeof(value)));
}

cublasLtMatrixLayout_t make_layout(cudaDataType_t type, int64_t rows, int64_t cols, int64_t ld, int64_t batch,
                                   int64_t stride) {
  cublasLtMatrixLayout_t layout = nullptr;
  DSINFER_CUBLAS_CHECK(cublasLtMatrixLayoutCreate(&layout, type, static_cast<uint64_t>(rows),
                                                  static_cast<uint64_t>(cols), ld));
  if (batch > 1) {
    try {
      set_layout(layout, CUBLASLT_MATRIX_LAYOUT_BATCH_COUNT, static_cast<int32_t>(batch));
      set_layout(layout, CUBLASLT_MATRIX_LAYOUT_STRIDED_BATCH_OFFSET, stride);
    } catch (...) {
      cublasLtMatrixLayoutDestroy(layout);
      throw;
    }
  }
  return layout;
}

std::string describe(const MatmulKey& key) {
  static constexpr const char* kKindNames[] = {"bf16", "f32", "fp8-block", "grouped-bf16"};
  return str_cat(kKindNames[static_cast<int>(key.kind)], " m=", key.m, " n=", key.n, " k=", key.k, " batch=", key.batch,
                 " out=", dtype_name(key.out), " align=", key.align_a, "/", key.align_b, "/", key.align_d);
}

// Descriptors for one key and the heuristic's best algorithm; `supported` is false when cuBLASLt
// has none (the caller then runs the fallback).
std::unique_ptr<MatmulPlan> build_plan(cublasLtHandle_t handle, const MatmulKey& key, size_t workspace_bytes,
                                       const void* a_scale, const void* b_scale) {
  auto plan = std::make_unique<MatmulPlan>();
  const cudaDataType_t ab_type = key.kind == Kind::kF32 ? CUDA_R_32F : key.kind == Kind::kFp8 ? CUDA_R_8F_E4M3 : CUDA_R_16BF;
  const cudaDataType_t d_type = key.out == DType::kF32 ? CUDA_R_32F : CUDA_R_16BF;

  // CUBLAS_COMPUTE_32F: float32 accumulation, and for f32 inputs no TF32 (that is
  // CUBLAS_COMPUTE_32F_FAST_TF32, which we never ask for).
  DSINFER_CUBLAS_CHECK(cublasLtMatmulDescCreate(&plan->desc, CUBLAS_COMPUTE_32F, CUDA_R_32F));
  set_desc(plan->desc, CUBLASLT_MATMUL_DESC_TRANSA, CUBLAS_OP_T);
  set_desc(plan->desc, CUBLASLT_MATMUL_DESC_TRANSB, CUBLAS_OP_N);
  if (key.kind == Kind::kFp8) {
    set_desc(plan->desc, CUBLASLT_MATMUL_DESC_A_SCALE_MODE, static_cast<int32_t>(CUBLASLT_MATMUL_MATRIX_SCALE_BLK128x128_32F));
    set_desc(plan->desc, CUBLASLT_MATMUL_DESC_B_SCALE_MODE, static_cast<int32_t>(CUBLASLT_MATMUL_MATRIX_SCALE_VEC128_32F));
    set_desc(plan->desc, CUBLASLT_MATMUL_DESC_A_SCALE_POINTER, a_scale);
    set_desc(plan->desc, CUBLASLT_MATMUL_DESC_B_SCALE_POINTER, b_scale);
  }
  plan->a = make_layout(ab_type, key.k, key.m, key.lda, key.batch, key.stride_a);
  plan->b = make_layout(ab_type, key.k, key.n, key.ldb, key.batch, key.stride_b);
  plan->d = make_layout(d_type, key.m, key.n, key.ldd, key.batch, key.stride_d);

  PreferenceGuard guard;
  DSINFER_CUBLAS_CHECK(cublasLtMatmulPreferenceCreate(&guard.pref));
  set_pref(guard.pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, static_cast<uint64_t>(workspace_bytes));
  set_pref(guard.pref, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_A_BYTES, key.align_a);
  set_pref(guard.pref, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_B_BYTES, key.align_b);
  set_pref(guard.pref, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_C_BYTES, key.align_d);
  set_pref(guard.pref, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_D_BYTES, key.align_d);

  cublasLtMatmulHeuristicResult_t result{};
  int count = 0;
  const cublasStatus_t status = cublasLtMatmulAlgoGetHeuristic(handle, plan->desc, plan->a, plan->b, plan->d,
                                                               plan->d, guard.pref, 1, &result, &count);
  if (status == CUBLAS_STATUS_SUCCESS && count > 0 && result.state == CUBLAS_STATUS_SUCCESS) {
    plan->algo = result.algo;
    plan->supported = true;
  } else if (status == CUBLAS_STATUS_SUCCESS || status == CUBLAS_STATUS_NOT_SUPPORTED ||
             status == CUBLAS_STATUS_INVALID_VALUE) {
    // INVALID_VALUE too: cuBLASLt reports some unsupported combinations (alignment, scale modes)
    // that way. The fallback computes the same product.
    log_debug("gemm: cuBLASLt has no algorithm for ", describe(key), " (", cublasLtGetStatusName(status),
              "); using the fallback kernel");
  } else {
    throw_cublas_error(status, "cublasLtMatmulAlgoGetHeuristic", __FILE__, __LINE__);
  }
  return plan;
}

}  // namespace

struct GemmRunner::State {
  GemmOptions options;
  cublasLtHandle_t handle = nullptr;
  void* workspace = nullptr;
  size_t workspace_bytes = 0;
  bool owns_workspace = false;
  std::map<MatmulKey, std::unique_ptr<MatmulPlan>> plans;
  GemmPath last_path = GemmPath::kCublasLt;
  // The FP8 wgmma kernel's split-K tile counters: kFp8WgmmaMaxSplitTiles int32, zero between calls.
  int32_t* tile_counters = nullptr;

  ~State() {
    plans.clear();
    if (handle) cublasLtDestroy(handle);
    if (owns_workspace && workspace) cudaFree(workspace);
    if (tile_counters) cudaFree(tile_counters);
  }

  void allocate_tile_counters() {
    const size_t bytes = kFp8WgmmaMaxSplitTiles * sizeof(int32_t);
    DSINFER_CUDA_CHECK(cudaMalloc(&tile_counters, bytes));
    DSINFER_CUDA_CHECK(cudaMemset(tile_counters, 0, bytes));
    // cudaMemset is asynchronous on the legacy stream; the runner's stream may not wait for it.
    DSINFER_CUDA_CHECK(cudaDeviceSynchronize());
  }

  MatmulPlan& plan(const MatmulKey& key, const void* a_scale = nullptr, const void* b_scale = nullptr) {
    auto it = plans.find(key);
    if (it != plans.end()) return *it->second;
    if (plans.size() >= kMaxCachedPlans) plans.clear();
    auto built = build_plan(handle, key, workspace_bytes, a_scale, b_scale);
    return *plans.emplace(key, std::move(built)).first->second;
  }

  // Queues D = op(A) op(B). False when cuBLASLt refuses the product (the plan is then marked
  // unsupported, so later calls go straight to the fallback); throws on other errors.
  bool matmul(MatmulPlan& plan, const void* a, const void* b, void* d, cudaStream_t stream) {
    if (!plan.supported) return false;
    const float alpha = 1.0f;
    const float beta = 0.0f;
    const cublasStatus_t status = cublasLtMatmul(handle, plan.desc, &alpha, a, plan.a, b, plan.b, &beta, d, plan.d, d,
                                                 plan.d, &plan.algo, workspace, workspace_bytes, stream);
    if (status == CUBLAS_STATUS_NOT_SUPPORTED) {
      plan.supported = false;
      log_debug("gemm: cublasLtMatmul refused a planned product (NOT_SUPPORTED); using the fallback kernel");
      return false;
    }
    if (status != CUBLAS_STATUS_SUCCESS) throw_cublas_error(status, "cublasLtMatmul", __FILE__, __LINE__);
    return true;
  }

  bool linear_bf16(const LinearArgs& args, cudaStream_t stream);
  bool linear_f32_weight(const LinearArgs& args, cudaStream_t stream);
  bool linear_fp8(const LinearArgs& args, cudaStream_t stream);
  bool linear_fp8_wgmma(const LinearArgs& args, cudaStream_t stream);
};

LinearPlan plan_linear(const GemmOptions& options, DType weight_dtype, DType y_dtype, int64_t tokens,
                       int64_t out_features, int64_t in_features) {
  DSINFER_CHECK(tokens >= 0 && out_features > 0 && in_features > 0, "plan_linear: bad shape T ", tokens, ", N ",
                out_features, ", K ", in_features);
  DSINFER_CHECK(y_dtype == DType::kBF16 || y_dtype == DType::kF32, "linear: the output must be bf16 or f32, got ",
                dtype_name(y_dtype));
  if (options.force_fallback) return {GemmPath::kFallback, 0};
  switch (weight_dtype) {
    case DType::kBF16:
      if (tokens <= options.bf16_fallback_max_rows && out_features <= GemmOptions::kFallbackMaxOutputs)
        return {GemmPath::kFallback, 0};
      return {GemmPath::kCublasLt, 0};
    case DType::kF32:
      // One-row f32 products (the router's gate at decode) read x as it is: no conversion to f32.
      if (y_dtype != DType::kF32 || tokens <= options.bf16_fallback_max_rows) return {GemmPath::kFallback, 0};
      return {GemmPath::kCublasLt, static_cast<size_t>(tokens * in_features) * sizeof(float)};
    case DType::kF8E4M3: {
      const bool cublas_ok = fp8_shape_ok(out_features, in_features);
      const bool wgmma_ok = fp8_wgmma_shape_ok(options, out_features, in_features);
      if (tokens <= options.fp8_fallback_max_rows || (!cublas_ok && !wgmma_ok)) return {GemmPath::kFallback, 0};
      // The same layout (and size) for every path past the fallback's rows: monotonic in T.
      const size_t partials = fp8_wgmma_partial_bytes(options, tokens, out_features, in_features);
      const size_t scratch =
          static_cast<size_t>(fp8_scratch(tokens, out_features, in_features, y_dtype, partials).bytes);
      if (wgmma_ok && tokens <= options.fp8_wgmma_max_rows) return {GemmPath::kFp8Wgmma, scratch};
      return {cublas_ok ? GemmPath::kCublasLt : GemmPath::kFallback, scratch};
    }
    default:
      throw Error(str_cat("linear: weights must be bf16, f32 or f8e4m3, got ", dtype_name(weight_dtype)));
  }
}

bool GemmRunner::State::linear_bf16(const LinearArgs& args, cudaStream_t stream) {
  MatmulKey key;
  key.kind = Kind::kBf16;
  key.out = args.y_dtype;
  key.m = args.out_features;
  key.n = args.tokens;
  key.k = args.in_features;
  key.lda = args.in_features;
  key.ldb = args.x_row_stride;
  key.ldd = args.y_row_stride;
  key.align_a = alignment_of(args.weight.data);
  key.align_b = alignment_of(args.x);
  key.align_d = alignment_of(args.y);
  return matmul(plan(key), args.weight.data, args.x, args.y, stream);
}

bool GemmRunner::State::linear_f32_weight(const LinearArgs& args, cudaStream_t stream) {
  // convert_bf16_to_f32 is a flat copy: x must be contiguous.
  if (args.y_dtype != DType::kF32 || args.x_row_stride != args.in_features) return false;
  float* x_f32 = static_cast<float*>(args.scratch);
  MatmulKey key;
  key.kind = Kind::kF32;
  key.out = DType::kF32;
  key.m = args.out_features;
  key.n = args.tokens;
  key.k = args.in_features;
  key.lda = args.in_features;
  key.ldb = args.in_features;
  key.ldd = args.y_row_stride;
  key.align_a = alignment_of(args.weight.data);
  key.align_b = alignment_of(x_f32);
  key.align_d = alignment_of(args.y);
  MatmulPlan& p = plan(key);
  if (!p.supported) return false;
  convert_bf16_to_f32(args.x, x_f32, args.tokens * args.in_features, stream);
  return matmul(p, args.weight.data, x_f32, args.y, stream);
}

bool GemmRunner::State::linear_fp8(const LinearArgs& args, cudaStream_t stream) {
  const int64_t tokens = args.tokens, n = args.out_features, k = args.in_features;
  // cuBLASLt's 16-byte rules for the scale tensors and the weight; quantize_fp8_per_token_group's
  // 8-byte loads of x.
  if (!aligned(args.weight.scale, 16) || !aligned(args.weight.data, 16) || !aligned(args.x, 8) ||
      args.x_row_stride % 4 != 0) {
    return false;
  }
  const int64_t t4 = padded_tokens(tokens);
  const bool padded = t4 != tokens;
  const Fp8Scratch layout = fp8_scratch(tokens, n, k, args.y_dtype, 0);  // offsets only
  char* scratch = static_cast<char*>(args.scratch);
  auto* q = reinterpret_cast<__nv_fp8_e4m3*>(scratch);
  auto* x_scales = reinterpret_cast<float*>(scratch + layout.scales_offset);
  void* d = padded ? static_cast<void*>(scratch + layout.output_offset) : args.y;
  const int64_t ldd = padded ? n : args.y_row_stride;

  MatmulKey key;
  key.kind = Kind::kFp8;
  key.out = args.y_dtype;
  key.m = n;
  key.n = t4;
  key.k = k;
  key.lda = k;
  key.ldb = k;
  key.ldd = ldd;
  key.align_a = alignment_of(args.weight.data);
  key.align_b = alignment_of(q);
  key.align_d = alignment_of(d);
  MatmulPlan& p = plan(key, args.weight.scale, x_scales);
  if (!p.supported) return false;
  // The descriptor is shared by every weight of this shape: point it at this call's scales (host
  // state, read when cublasLtMatmul queues the kernel).
  set_desc(p.desc, CUBLASLT_MATMUL_DESC_A_SCALE_POINTER, static_cast<const void*>(args.weight.scale));
  set_desc(p.desc, CUBLASLT_MATMUL_DESC_B_SCALE_POINTER, static_cast<const void*>(x_scales));

  quantize_fp8_per_token_group(args.x, args.x_row_stride, tokens, t4, k, q, x_scales, stream);
  if (!matmul(p, args.weight.data, q, d, stream)) return false;
  if (padded) {
    const size_t element = dtype_size(args.y_dtype);
    DSINFER_CUDA_CHECK(cudaMemcpy2DAsync(args.y, args.y_row_stride * element, d, n * element, n * element, tokens,
                                         cudaMemcpyDeviceToDevice, stream));
  }
  return true;
}

// Quantizes x as for cuBLASLt (same scratch layout), then our swap-AB kernel; the split-K partials
// go where cuBLASLt's padded output would. False (nothing queued) where the kernel refuses the
// arguments.
bool GemmRunner::State::linear_fp8_wgmma(const LinearArgs& args, cudaStream_t stream) {
  const int64_t tokens = args.tokens, n = args.out_features, k = args.in_features;
  // quantize_fp8_per_token_group's 8-byte loads of x.
  if (!aligned(args.x, 8) || args.x_row_stride % 4 != 0) return false;
  const int64_t t4 = padded_tokens(tokens);
  const Fp8Scratch layout = fp8_scratch(tokens, n, k, args.y_dtype, 0);  // offsets only
  char* scratch = static_cast<char*>(args.scratch);
  auto* q = reinterpret_cast<__nv_fp8_e4m3*>(scratch);
  auto* x_scales = reinterpret_cast<float*>(scratch + layout.scales_offset);

  Fp8WgmmaGemm g;
  g.w = static_cast<const __nv_fp8_e4m3*>(args.weight.data);
  g.w_scale = args.weight.scale;
  g.q = q;
  g.q_rows = t4;
  g.x_scale = x_scales;
  g.scale_stride = t4;
  g.group_rows = tokens;
  g.y = args.y;
  g.y_dtype = args.y_dtype;
  g.y_row_stride = args.y_row_stride;
  g.n = n;
  g.k = k;
  g.groups = 1;
  g.workspace = scratch + layout.output_offset;
  g.workspace_bytes = args.scratch_bytes - static_cast<size_t>(layout.output_offset);  // >= the plan's partials
  g.tile_counters = tile_counters;
  g.tile_counter_capacity = kFp8WgmmaMaxSplitTiles;
  g.programmatic = options.programmatic_fp8_wgmma;
  if (!fp8_wgmma_supported(g)) return false;
  if (tokens >= options.fp8_tiled_min_rows && fp8_tiled_supported(g) &&
      fp8_tiled_preferred(tokens, n, k, 1, fp8_wgmma_sm_count())) {
    const Fp8TiledConfig config = choose_fp8_tiled_config(tokens, n, k, 1, fp8_wgmma_sm_count());
    quantize_fp8_per_token_group(args.x, args.x_row_stride, tokens, t4, k, q, x_scales, stream);
    fp8_tiled_gemm(g, config, stream);
    return true;
  }
  const Fp8WgmmaTiling tiling = choose_fp8_wgmma_tiling(tokens, n, k, 1, fp8_wgmma_sm_count());
  quantize_fp8_per_token_group(args.x, args.x_row_stride, tokens, t4, k, q, x_scales, stream);
  fp8_wgmma_gemm(g, tiling, stream);
  return true;
}

GemmRunner::GemmRunner(GemmOptions options) : state_(std::make_unique<State>()) {
  state_->options = options;
  DSINFER_CUBLAS_CHECK(cublasLtCreate(&state_->handle));
  DSINFER_CUDA_CHECK(cudaMalloc(&state_->workspace, kDefaultWorkspaceBytes));
  state_->owns_workspace = true;
  state_->workspace_bytes = kDefaultWorkspaceBytes;
  state_->allocate_tile_counters();
}

GemmRunner::GemmRunner(void* workspace, size_t workspace_bytes, GemmOptions options)
    : state_(std::make_unique<State>()) {
  DSINFER_CHECK(workspace_bytes == 0 || (workspace != nullptr && aligned(workspace, 256)),
                "GemmRunner: the cuBLASLt workspace must be 256-byte aligned device memory");
  state_->options = options;
  DSINFER_CUBLAS_CHECK(cublasLtCreate(&state_->handle));
  state_->workspace = workspace_bytes == 0 ? nullptr : workspace;
  state_->workspace_bytes = workspace_bytes;
  state_->allocate_tile_counters();
}

GemmRunner::~GemmRunner() = default;

const GemmOptions& GemmRunner::options() const { return state_->options; }

GemmPath GemmRunner::last_path() const { return state_->last_path; }

// One-token bf16 products stream their weights through gemv.h rather than the fallback GEMM or
// cuBLASLt, the LM head included (bf16_fallback_max_rows >= 1 turns it on; force_fallback off).
// FP8 weights likewise when fp8_fallback_max_rows >= 1 (DeepSeek's block scales applied per chunk).
bool GemmRunner::one_row_gemv(DType weight_dtype, int64_t tokens) const {
  const GemmOptions& options = state_->options;
  if (tokens != 1 || options.force_fallback) return false;
  if (weight_dtype == DType::kBF16) return options.bf16_fallback_max_rows >= 1;
  return weight_dtype == DType::kF8E4M3 && options.fp8_fallback_max_rows >= 1;
}

void GemmRunner::linear(const LinearArgs& in, cudaStream_t stream) {
  LinearArgs args = in;
  const int64_t tokens = args.tokens, n = args.out_features, k = args.in_features;
  if (args.x_row_stride == 0) args.x_row_stride = k;
  if (args.y_row_stride == 0) args.y_row_stride = n;
  DSINFER_CHECK(args.x != nullptr && args.weight.data != nullptr && args.y != nullptr, "linear: null x, weight or y");
  DSINFER_CHECK(args.x_row_stride >= k && args.y_row_stride >= n, "linear: row strides (x ", args.x_row_stride, ", y ",
                args.y_row_stride, ") must be at least K ", k, " and N ", n);
  DSINFER_CHECK(args.weight.dtype != DType::kF8E4M3 || args.weight.scale != nullptr,
                "linear: an FP8 weight needs its block scales");
  const LinearPlan planned = plan_linear(state_->options, args.weight.dtype, args.y_dtype, tokens, n, k);
  if (tokens == 0) return;

  bool done = false;
  GemmPath taken = GemmPath::kFallback;
  if (one_row_gemv(args.weight.dtype, tokens)) {
    Gemv g;
    g.x = args.x;
    g.w = args.weight.data;
    g.w_dtype = args.weight.dtype;
    g.w_scale = args.weight.scale;
    g.y = args.y;
    g.y_dtype = args.y_dtype;
    g.n = n;
    g.k = k;
    g.programmatic = state_->options.programmatic_gemv;
    done = gemv_supported(g);
    if (done) {
      gemv(g, stream);
      taken = GemmPath::kGemv;
    }
  }
  if (!done && (planned.path == GemmPath::kCublasLt || planned.path == GemmPath::kFp8Wgmma)) {
    DSINFER_CHECK(args.scratch_bytes >= planned.scratch_bytes &&
                      (planned.scratch_bytes == 0 || (args.scratch != nullptr && aligned(args.scratch, 16))),
                  "linear: T ", tokens, ", N ", n, ", K ", k, " with ", dtype_name(args.weight.dtype),
                  " weights needs ", planned.scratch_bytes, " bytes of 16-byte aligned scratch, got ",
                  args.scratch_bytes, " (size it with plan_linear for the largest T)");
    switch (args.weight.dtype) {
      case DType::kBF16:
        done = state_->linear_bf16(args, stream);
        break;
      case DType::kF32:
        done = state_->linear_f32_weight(args, stream);
        break;
      default:
        // The wgmma kernel where planned; cuBLASLt where it refuses the arguments (alignment) and
        // takes the shape, or where it was planned.
        if (planned.path == GemmPath::kFp8Wgmma) {
          done = state_->linear_fp8_wgmma(args, stream);
          if (done) {
            taken = GemmPath::kFp8Wgmma;
            break;
          }
          if (!fp8_shape_ok(n, k)) break;
        }
        done = state_->linear_fp8(args, stream);
        break;
    }
    if (done && taken == GemmPath::kFallback) taken = GemmPath::kCublasLt;
  }
  if (!done) {
    FallbackGemm g;
    g.x = args.x;
    g.x_row_stride = args.x_row_stride;
    g.w = args.weight.data;
    g.w_dtype = args.weight.dtype;
    g.w_scale = args.weight.scale;
    g.scale_row_stride = (k + kFp8Block - 1) / kFp8Block;
    g.y = args.y;
    g.y_dtype = args.y_dtype;
    g.y_row_stride = args.y_row_stride;
    g.rows = tokens;
    g.n = n;
    g.k = k;
    gemm_fallback(g, stream);
  }
  state_->last_path = taken;
}

void GemmRunner::grouped_linear(const __nv_bfloat16* x, const void* weight, DType weight_dtype, __nv_bfloat16* y,
                                int64_t tokens, int64_t groups, int64_t out_features, int64_t in_features,
                                cudaStream_t stream, const GroupedStrides& strides) {
  DSINFER_CHECK(x != nullptr && weight != nullptr && y != nullptr, "grouped_linear: null x, weight or y");
  DSINFER_CHECK(tokens >= 0 && groups > 0 && out_features > 0 && in_features > 0, "grouped_linear: bad shape T ",
                tokens, ", G ", groups, ", N ", out_features, ", K ", in_features);
  DSINFER_CHECK(weight_dtype == DType::kBF16 || weight_dtype == DType::kF32,
                "grouped_linear: weights must be bf16 or f32, got ", dtype_name(weight_dtype));
  if (tokens == 0) return;
  const int64_t x_row = strides.x_row ? strides.x_row : groups * in_features;
  const int64_t x_group = strides.x_group ? strides.x_group : in_features;
  const int64_t y_row = strides.y_row ? strides.y_row : groups * out_features;
  const int64_t y_group = strides.y_group ? strides.y_group : out_features;

  bool done = false, streamed = false;
  if (one_row_gemv(weight_dtype, tokens)) {
    Gemv g;
    g.x = x;
    g.x_group_stride = x_group;
    g.w = weight;
    g.w_group_stride = out_features * in_features;
    g.y = y;
    g.y_group_stride = y_group;
    g.n = out_features;
    g.k = in_features;
    g.groups = groups;
    g.programmatic = state_->options.programmatic_gemv;
    done = streamed = gemv_supported(g);
    if (done) gemv(g, stream);
  }
  if (!done && weight_dtype == DType::kBF16 && !state_->options.force_fallback) {
    // Per group g, with the mapping at the top of the file: A = W[g] (K x N, ld K, next group N * K
    // further), B = x[:, g, :] (K x T, ld x_row, next group x_group further), D = y[:, g, :] (N x T,
    // ld y_row, next group y_group further).
    MatmulKey key;
    key.kind = Kind::kGroupedBf16;
    key.out = DType::kBF16;
    key.m = out_features;
    key.n = tokens;
    key.k = in_features;
    key.lda = in_features;
    key.ldb = x_row;
    key.ldd = y_row;
    key.batch = groups;
    key.stride_a = out_features * in_features;
    key.stride_b = x_group;
    key.stride_d = y_group;
    constexpr int64_t kBytes = sizeof(__nv_bfloat16);
    key.align_a = alignment_of(weight, key.stride_a * kBytes);
    key.align_b = alignment_of(x, key.stride_b * kBytes);
    key.align_d = alignment_of(y, key.stride_d * kBytes);
    done = state_->matmul(state_->plan(key), weight, x, y, stream);
  }
  if (!done) {
    FallbackGemm g;
    g.x = x;
    g.x_row_stride = x_row;
    g.x_batch_stride = x_group;
    g.w = weight;
    g.w_dtype = weight_dtype;
    g.w_batch_stride = out_features * in_features;
    g.y = y;
    g.y_dtype = DType::kBF16;
    g.y_row_stride = y_row;
    g.y_batch_stride = y_group;
    g.rows = tokens;
    g.n = out_features;
    g.k = in_features;
    g.batch = groups;
    gemm_fallback(g, stream);
  }
  state_->last_path = streamed ? GemmPath::kGemv : done ? GemmPath::kCublasLt : GemmPath::kFallback;
}

}  // namespace dsinfer::backend::cuda
