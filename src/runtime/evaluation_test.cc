// The held-out KV-cache comparison (evaluation.h) on the bundled model: a cache format against
// itself moves nothing; an FP8 cache moves the distributions a little and keeps the top-1 tokens.
#include "runtime/evaluation.h"

#include <gtest/gtest.h>

#include "backend/make_backend.h"
#include "core/source_path.h"
#include "model/deepseek_model.h"
#include "tokenizer/tokenizer.h"

namespace dsinfer::runtime {
namespace {

TEST(Evaluation, CacheKlIsZeroForTheSameCacheAndSmallForFp8) {
  const std::string dir = source_path("models/dsv3-tiny");
  auto backend = backend::make_backend("cpu");
  const tokenizer::Tokenizer tokenizer = tokenizer::Tokenizer::from_dir(dir);
  const std::string texts = dir + "/eval/mtp_text.jsonl";
  auto reference = model::DeepseekModel::load(dir, *backend);
  auto same = model::DeepseekModel::load(dir, *backend);
  const CacheKlResult none = evaluate_cache_kl(*reference, *same, tokenizer, texts, 3);
  EXPECT_GT(none.positions, 30);
  EXPECT_EQ(none.mean_kl, 0.0);
  EXPECT_EQ(none.max_kl, 0.0);
  EXPECT_EQ(none.top1_agreement, 1.0);

  model::ModelOptions options;
  options.cache_format = model::CacheFormat::kFp8DsMla;
  auto fp8 = model::DeepseekModel::load(dir, *backend, options);
  const CacheKlResult moved = evaluate_cache_kl(*reference, *fp8, tokenizer, texts, 3);
  EXPECT_EQ(moved.positions, none.positions);
  EXPECT_GT(moved.mean_kl, 0.0);  // the cache is quantized
  EXPECT_LT(moved.mean_kl, 1e-3);
  EXPECT_GE(moved.top1_agreement, 0.98);
}

}  // namespace
}  // namespace dsinfer::runtime
