// MLA attention on the CPU, both forms, plus the latent cache's writes and gathers.
//
// Expanded (prefill): per head, scores = q_nope . k_nope + q_rope . k_rope over per-head keys
// from kv_b_proj. Absorbed (decode): q_nope is first mapped into the 512-wide latent space, so
// scores are one 576-wide dot product against the cached row and the output stays latent.
// Both are causal by position: a query at position p sees keys 0..p of its own sequence.
// The cache is f32, or one of the FP8 formats of cache_layout.h, which rows are quantized into on
// write and dequantized out of on read; the attention itself is f32 either way.
#include <algorithm>
#include <cmath>
#include <cstring>
#include <vector>

#include "backend/cpu/ops.h"
#include "backend/cpu/vec.h"
#include "core/parallel.h"

namespace dsinfer::backend::cpu {
namespace {

void check_batch(const AttentionBatch& batch, int64_t tokens, const char* op) {
  int B = batch.num_sequences();
  DSINFER_CHECK(static_cast<int>(batch.query_start.size()) == B + 1 &&
                    static_cast<int>(batch.page_table_start.size()) == B + 1 &&
                    static_cast<int64_t>(batch.positions.size()) == tokens && batch.query_start[B] == tokens,
                op, ": attention batch does not describe ", tokens, " tokens");
  for (int b = 0; b < B; ++b) {
    for (int32_t t = batch.query_start[b]; t < batch.query_start[b + 1]; ++t)
      DSINFER_CHECK(batch.positions[t] >= 0 && batch.positions[t] < batch.context_lens[b], op, ": token ", t,
                    " at position ", batch.positions[t], " is outside its context of ", batch.context_lens[b]);
    int64_t pages_needed = (batch.context_lens[b] + batch.page_size - 1) / batch.page_size;
    DSINFER_CHECK(static_cast<int64_t>(batch.pages(b).size()) >= pages_needed, op, ": sequence ", b, " has ",
                  batch.pages(b).size(), " pages for ", batch.context_lens[b], " tokens");
  }
}

int64_t cache_slot(const AttentionBatch& batch, int b, int64_t index) {
  return static_cast<int64_t>(batch.pages(b)[index / batch.page_size]) * batch.page_size +
         index % batch.page_size;
}

// The values a row of `cache` holds (cache_layout.h's formats), checking the cache's dtype and rank.
int64_t cache_values(const Tensor& cache, const char* op) {
  DSINFER_CHECK(cache.shape().rank() == 3, op, ": the cache must be [pages, page_size, row], got ",
                cache.shape().to_string());
  const int64_t row = cache.dim(2);
  switch (cache.dtype()) {
    case DType::kF32:
    case DType::kF8E4M3:
      return row;
    case DType::kU8: {
      const int64_t latent = ds_mla_latent(row);
      DSINFER_CHECK(latent > 0 && latent % kDsMlaTile == 0 && ds_mla_row_bytes(latent) == row, op,
                    ": a row of ", row, " bytes is not an fp8_ds_mla row");
      return latent + kDsMlaRope;
    }
    default:
      throw Error(str_cat(op, ": the cache must be f32, e4m3 or fp8_ds_mla bytes, got ", dtype_name(cache.dtype())));
  }
}

// values[0, width) -> row `slot` of the cache, in its format.
void store_row(Tensor& cache, int64_t slot, const float* values, int64_t width) {
  if (cache.dtype() == DType::kF32) {
    std::memcpy(cache.data<float>() + slot * width, values, width * sizeof(float));
    return;
  }
  if (cache.dtype() == DType::kF8E4M3) {
    uint8_t* row = cache.data<uint8_t>() + slot * width;
    for (int64_t i = 0; i < width; ++i) row[i] = f32_to_fp8e4m3(values[i] / kFp8CacheScale);
    return;
  }
  const int64_t latent = width - kDsMlaRope, tiles = latent / kDsMlaTile;
  uint8_t* row = cache.data<uint8_t>() + slot * ds_mla_row_bytes(latent);
  for (int64_t tile = 0; tile < tiles; ++tile) {
    const float* x = values + tile * kDsMlaTile;
    float amax = 0;
    for (int64_t i = 0; i < kDsMlaTile; ++i) amax = std::max(amax, std::fabs(x[i]));
    const float scale = amax > 0 ? amax / kFp8E4M3Max : 1.0f;
    for (int64_t i = 0; i < kDsMlaTile; ++i) row[tile * kDsMlaTile + i] = f32_to_fp8e4m3(x[i] / scale);
    std::memcpy(row + latent + 4 * tile, &scale, 4);
  }
  for (int64_t i = 0; i < kDsMlaRope; ++i) {
    const uint16_t bits = f32_to_bf16(values[latent + i]);
    std::memcpy(row + latent + 4 * tiles + 2 * i, &bits, 2);
  }
}

// Row `slot` of the cache -> values[0, width), in f32.
void load_row(const Tensor& cache, int64_t slot, float* values, int64_t width) {
  if (cache.dtype() == DType::kF32) {
    std::memcpy(values, cache.data<float>() + slot * width, width * sizeof(float));
    return;
  }
  if (cache.dtype() == DType::kF8E4M3) {
    const uint8_t* row = cache.data<uint8_t>() + slot * width;
    for (int64_t i = 0; i < width; ++i) values[i] = fp8e4m3_to_f32(row[i]) * kFp8CacheScale;
    return;
  }
  const int64_t latent = width - kDsMlaRope, tiles = latent / kDsMlaTile;
  const uint8_t* row = cache.data<uint8_t>() + slot * ds_mla_row_bytes(latent);
  for (int64_t tile = 0; tile < tiles; ++tile) {
    float scale;
    std::memcpy(&scale, row + latent + 4 * tile, 4);
    for (int64_t i = 0; i < kDsMlaTile; ++i)
      values[tile * kDsMlaTile + i] = fp8e4m3_to_f32(row[tile * kDsMlaTile + i]) * scale;
  }
  for (int64_t i = 0; i < kDsMlaRope; ++i) {
    uint16_t bits;
    std::memcpy(&bits, row + latent + 4 * tiles + 2 * i, 2);
    values[latent + i] = bf16_to_f32(bits);
  }
}

// Sequence of each token row.
std::vector<int> sequence_of_tokens(const AttentionBatch& batch) {
  std::vector<int> owner(batch.positions.size());
  for (int b = 0; b < batch.num_sequences(); ++b)
    for (int32_t t = batch.query_start[b]; t < batch.query_start[b + 1]; ++t) owner[t] = b;
  return owner;
}

// scores <- softmax(scores), max-subtracted for stability.
void softmax(float* scores, int64_t n) {
  float max_score = *std::max_element(scores, scores + n);
  double total = 0.0;
  for (int64_t j = 0; j < n; ++j) {
    scores[j] = std::exp(scores[j] - max_score);
    total += scores[j];
  }
  float inverse = static_cast<float>(1.0 / total);
  for (int64_t j = 0; j < n; ++j) scores[j] *= inverse;
}

// The loop both forms share: for every (token, head) of the step, softmax of score(t, h, b, j)
// over the keys j the token sees, then the weighted sum of value(t, h, b, j) rows of `width`.
template <typename Score, typename Value>
Tensor attend(const AttentionBatch& batch, int64_t T, int64_t H, int64_t width, Score score, Value value) {
  std::vector<int> owner = sequence_of_tokens(batch);
  Tensor out = Tensor::empty(DType::kF32, {T, H, width});
  parallel_for(T * H, 1, [&](int64_t begin, int64_t end) {
    std::vector<float> scores;
    for (int64_t item = begin; item < end; ++item) {
      int64_t t = item / H, h = item % H;
      int b = owner[t];
      int64_t visible = batch.positions[t] + 1;
      scores.resize(visible);
      for (int64_t j = 0; j < visible; ++j) scores[j] = score(t, h, b, j);
      softmax(scores.data(), visible);
      float* output = out.data<float>() + (t * H + h) * width;
      for (int64_t j = 0; j < visible; ++j) axpy(scores[j], value(h, b, j), output, width);
    }
  });
  return out;
}

}  // namespace

void write_cache(Tensor& cache, const Tensor& latent, const AttentionBatch& batch) {
  const int64_t width = cache_values(cache, "write_cache"), slots = cache.dim(0) * cache.dim(1);
  expect_f32(latent, "write_cache", "latent", 2);
  DSINFER_CHECK(latent.dim(1) == width && static_cast<int64_t>(batch.slot_mapping.size()) == latent.dim(0),
                "write_cache: latent ", latent.shape().to_string(), " does not fit cache ",
                cache.shape().to_string(), " with ", batch.slot_mapping.size(), " slots");
  for (int64_t t = 0; t < latent.dim(0); ++t) {
    int64_t slot = batch.slot_mapping[t];
    DSINFER_CHECK(slot >= 0 && slot < slots, "write_cache: slot ", slot, " outside the cache of ", slots);
    store_row(cache, slot, latent.data<float>() + t * width, width);
  }
}

// The definition the device's fused form is checked against: the four ops the model used to run.
void write_latent_cache(Tensor& cache, const Tensor& kv_a, const Tensor& norm_weight, float eps, const RopeTable& table,
                        const AttentionBatch& batch) {
  expect_f32(kv_a, "write_latent_cache", "kv_a", 2);
  const int64_t T = kv_a.dim(0), rope_dim = 2 * table.cos.dim(1), latent = kv_a.dim(1) - rope_dim;
  DSINFER_CHECK(latent > 0 && norm_weight.numel() == latent, "write_latent_cache: kv_a ", kv_a.shape().to_string(),
                " does not hold a latent of the norm's ", norm_weight.numel(), " values and ", rope_dim, " rope dims");
  Tensor k_rope = slice_last(kv_a, latent, latent + rope_dim).view({T, 1, rope_dim});
  rope_inplace(k_rope, 0, batch.positions, table);
  write_cache(cache, concat_last(rms_norm(slice_last(kv_a, 0, latent), norm_weight, eps), k_rope.view({T, rope_dim})),
              batch);
}

Tensor gather_cache(const Tensor& cache, const AttentionBatch& batch) {
  const int64_t width = cache_values(cache, "gather_cache");
  int64_t total = 0;
  for (int32_t length : batch.context_lens) total += length;
  Tensor out = Tensor::empty(DType::kF32, {total, width});
  int64_t row = 0;
  for (int b = 0; b < batch.num_sequences(); ++b) {
    for (int64_t j = 0; j < batch.context_lens[b]; ++j, ++row) {
      int64_t slot = cache_slot(batch, b, j);
      DSINFER_CHECK(slot < cache.dim(0) * cache.dim(1), "gather_cache: page outside the cache");
      load_row(cache, slot, out.data<float>() + row * width, width);
    }
  }
  return out;
}

Tensor attention_expanded(const Tensor& q, const Tensor& kv, const Tensor& k_rope, const AttentionBatch& batch,
                          float scale) {
  expect_f32(q, "attention_expanded", "q", 3);
  expect_f32(kv, "attention_expanded", "kv", 3);
  expect_f32(k_rope, "attention_expanded", "k_rope", 2);
  int64_t T = q.dim(0), H = q.dim(1), dr = k_rope.dim(1), dn = q.dim(2) - dr, dv = kv.dim(2) - dn;
  check_batch(batch, T, "attention_expanded");
  DSINFER_CHECK(kv.dim(1) == H && dn > 0 && dv > 0 && kv.dim(0) == k_rope.dim(0),
                "attention_expanded: q ", q.shape().to_string(), ", kv ", kv.shape().to_string(), " and k_rope ",
                k_rope.shape().to_string(), " do not agree");
  std::vector<int64_t> key_start(batch.num_sequences() + 1, 0);
  for (int b = 0; b < batch.num_sequences(); ++b) key_start[b + 1] = key_start[b] + batch.context_lens[b];
  DSINFER_CHECK(key_start.back() == kv.dim(0), "attention_expanded: ", kv.dim(0), " keys for contexts totalling ",
                key_start.back());
  const float* keys = kv.data<float>();
  auto score = [&](int64_t t, int64_t h, int b, int64_t j) {
    const float* query = q.data<float>() + (t * H + h) * (dn + dr);
    int64_t key = key_start[b] + j;
    return scale * (dot(query, keys + (key * H + h) * (dn + dv), dn) +
                    dot(query + dn, k_rope.data<float>() + key * dr, dr));
  };
  auto value = [&](int64_t h, int b, int64_t j) { return keys + ((key_start[b] + j) * H + h) * (dn + dv) + dn; };
  return attend(batch, T, H, dv, score, value);
}

Tensor attention_absorbed(const Tensor& q, const Tensor& cache, const AttentionBatch& batch, float scale,
                          int64_t latent_width) {
  expect_f32(q, "attention_absorbed", "q", 3);
  int64_t T = q.dim(0), H = q.dim(1), width = q.dim(2);
  DSINFER_CHECK(cache_values(cache, "attention_absorbed") == width && latent_width > 0 && latent_width <= width,
                "attention_absorbed: q ", q.shape().to_string(), " does not match cache ", cache.shape().to_string());
  check_batch(batch, T, "attention_absorbed");
  // Keys and values are the cached rows themselves: 576-wide scores, the first 512 as values. An
  // FP8 cache's rows are dequantized once, sequence after sequence (gather_cache's order).
  const bool direct = cache.dtype() == DType::kF32;
  Tensor rows;
  std::vector<int64_t> first_row(batch.num_sequences() + 1, 0);
  if (!direct) {
    rows = gather_cache(cache, batch);
    for (int b = 0; b < batch.num_sequences(); ++b) first_row[b + 1] = first_row[b] + batch.context_lens[b];
  }
  auto row = [&](int b, int64_t j) {
    return direct ? cache.data<float>() + cache_slot(batch, b, j) * width
                  : rows.data<float>() + (first_row[b] + j) * width;
  };
  auto score = [&](int64_t t, int64_t h, int b, int64_t j) {
    return scale * dot(q.data<float>() + (t * H + h) * width, row(b, j), width);
  };
  auto value = [&](int64_t, int b, int64_t j) { return row(b, j); };
  return attend(batch, T, H, latent_width, score, value);
}

}  // namespace dsinfer::backend::cpu
