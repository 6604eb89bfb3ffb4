// CUDA graph replay against eager execution (GPU only: scripts/gpu-test.sh; without a GPU it fails).
//
// A replayed decode step must compute exactly what an eager run of the same padded step computes
// (the same kernels with the same launch shapes: equal bit for bit), and what the unpadded step
// computes within the bf16 tolerance. Replays must survive the allocator giving memory back and the
// step metadata moving, and steps no bucket takes must be left to eager execution.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>

#include "backend/make_backend.h"
#include "core/file.h"
#include "core/json.h"
#include "core/source_path.h"
#include "model/batch_builder.h"
#include "model/decode_graphs.h"
#include "model/test_logits.h"

namespace dsinfer::model {
namespace {

constexpr int kSequences = 3;      // a batch of 3 runs as the bucket of 4
constexpr int kPagesEach = 3;      // pages 3s .. 3s + 2 belong to sequence s
constexpr int32_t kScratchPage = 11;
constexpr int kCachePages = 12;

std::vector<int32_t> pages_of(int sequence) {
  std::vector<int32_t> pages;
  for (int i = 0; i < kPagesEach; ++i) pages.push_back(sequence * kPagesEach + i);
  return pages;
}

// The padding convention DecodeGraphs documents, written out independently: sequences past the
// batch are q rows of token 0 at positions 0..q-1 with a q-token context in the scratch page.
ForwardBatch padded(const ForwardBatch& batch, int sequences, int q = 1) {
  ForwardBatch out = batch;
  backend::AttentionBatch& a = out.attention;
  for (int b = batch.attention.num_sequences(); b < sequences; ++b) {
    for (int j = 0; j < q; ++j) {
      out.token_ids.push_back(0);
      a.positions.push_back(j);
      a.slot_mapping.push_back(int64_t{kScratchPage} * kPageSize + j);
    }
    a.query_start.push_back((b + 1) * q);
    a.context_lens.push_back(q);
    a.add_pages(std::vector<int32_t>{kScratchPage});
  }
  out.absorbed_sequences = sequences;
  out.absorbed_tokens = sequences * q;
  return out;
}

class DecodeGraphsTest : public ::testing::TestWithParam<std::string> {
 protected:
  void SetUp() override {
    backend_ = backend::make_backend("cuda");
    model_ = DeepseekModel::load(source_path("tests/fixtures/models/" + GetParam()), *backend_);
    cache_ = std::make_unique<LatentCache>(model_->make_cache(kCachePages));
    // Three prompts of 60, 20 and 5 tokens: the first crosses a page boundary while decoding.
    Json reference = Json::parse(read_file(source_path("tests/fixtures/models/" + GetParam() + "/reference.json")));
    std::vector<int32_t> all;
    for (const Json& id : reference.find("cases")->as_array()[2].find("prompt_ids")->as_array())
      all.push_back(static_cast<int32_t>(id.as_int()));
    for (int s = 0; s < kSequences; ++s) {
      size_t length = std::min<size_t>(all.size(), s == 0 ? 60 : s == 1 ? 20 : 5);
      std::vector<int32_t> prompt(all.begin(), all.begin() + static_cast<std::ptrdiff_t>(length));
      BatchBuilder builder;
      builder.add(prompt, 0, pages_of(s), LogitRows::kLast);
      Tensor logits = model_->forward(builder.build(), *cache_).logits;
      next_.push_back(argmax_row(logits, 0));
      positions_.push_back(static_cast<int32_t>(length));
    }
    graphs_ = std::make_unique<DecodeGraphs>(*model_, *cache_, DecodeGraphOptions{8, kScratchPage});
  }

  ForwardBatch decode_step() const {
    BatchBuilder builder;
    for (int s = 0; s < kSequences; ++s)
      builder.add(std::vector<int32_t>{next_[s]}, positions_[s], pages_of(s), LogitRows::kLast);
    return builder.build();
  }

  // One decode step three ways: replayed, eager over the padded step, eager over the real one.
  void check_step() {
    ForwardBatch batch = decode_step();
    ASSERT_EQ(graphs_->bucket_for(batch), 4);
    std::optional<Tensor> replayed = graphs_->logits(batch);
    ASSERT_TRUE(replayed.has_value());
    Tensor graph = backend_->to_host(*replayed);
    Tensor eager_padded = backend_->to_host(model_->forward_on_device(padded(batch, 4), *cache_).logits);
    Tensor eager = model_->forward(batch, *cache_).logits;
    ASSERT_EQ(graph.dim(0), kSequences);
    EXPECT_EQ(max_abs_diff(graph, eager_padded), 0.0f);
    EXPECT_LE(max_abs_diff(graph, eager), 2e-2f * max_abs(eager));
    for (int s = 0; s < kSequences; ++s) {
      next_[s] = argmax_row(eager, s);
      ++positions_[s];
    }
  }

  std::unique_ptr<backend::Backend> backend_;
  std::unique_ptr<DeepseekModel> model_;
  std::unique_ptr<LatentCache> cache_;
  std::unique_ptr<DecodeGraphs> graphs_;
  std::vector<int32_t> next_, positions_;
};

TEST_P(DecodeGraphsTest, CapturesEveryBucketUpToTheLargest) {
  EXPECT_EQ(graphs_->buckets(), (std::vector<int>{1, 2, 4, 8}));
  EXPECT_GT(backend_->memory_info().graph_pool_bytes, 0);
}

TEST_P(DecodeGraphsTest, ReplayEqualsTheEagerStep) {
  for (int step = 0; step < 8; ++step) {  // the 60-token sequence crosses into its second page
    SCOPED_TRACE(step);
    check_step();
  }
}

TEST_P(DecodeGraphsTest, ReplaysSurviveReleasedMemoryAndMovedMetadata) {
  check_step();
  backend_->release_cached_memory();  // the graph pool is kept
  check_step();
  // A larger eager step grows the metadata buffer: the bucket is captured again over its new home.
  BatchBuilder big;
  for (int s = 0; s < kSequences; ++s) big.add(std::vector<int32_t>(64, 1), 0, {9 + s % 2}, LogitRows::kLast);
  (void)model_->forward(big.build(), *cache_);
  check_step();
  EXPECT_EQ(graphs_->recaptures(), 1);
}

// Steps of 9 to 16 sequences share the bucket of 16, but their logit rows (the real rows, which the
// eager head reads) differ in count, by more than the metadata's 16-byte alignment: that must not
// move what the graph reads. (It did, and a server at 128 concurrent requests captured its bucket
// again 39 times in 15 s.) Sequence s decodes at position s of page 0 (the values are not checked).
TEST_P(DecodeGraphsTest, ABucketKeepsItsGraphWhateverItsRealRows) {
  DecodeGraphs graphs(*model_, *cache_, DecodeGraphOptions{16, kScratchPage});
  auto step = [&](int sequences) {
    BatchBuilder builder;
    for (int s = 0; s < sequences; ++s) builder.add(std::vector<int32_t>{1}, s, {0}, LogitRows::kLast);
    ForwardBatch batch = builder.build();
    ASSERT_EQ(graphs.bucket_for(batch), 16);
    std::optional<Tensor> logits = graphs.logits(batch);
    ASSERT_TRUE(logits.has_value());
    EXPECT_EQ(logits->dim(0), sequences);
  };
  step(9);
  const int64_t recaptures = graphs.recaptures();
  for (int sequences : {13, 16, 10, 14, 9}) step(sequences);
  EXPECT_EQ(graphs.recaptures(), recaptures);
}

TEST_P(DecodeGraphsTest, StepsNoBucketTakesRunEagerly) {
  BatchBuilder prefill;
  prefill.add(std::vector<int32_t>{1, 2, 3}, 0, {9}, LogitRows::kLast);
  ForwardBatch prompt = prefill.build();
  EXPECT_EQ(graphs_->bucket_for(prompt), 0);
  EXPECT_FALSE(graphs_->logits(prompt).has_value());

  BatchBuilder many;
  for (int s = 0; s < 9; ++s) many.add(std::vector<int32_t>{1}, 0, {9}, LogitRows::kLast);
  EXPECT_EQ(graphs_->bucket_for(many.build()), 0);  // above the largest bucket

  BatchBuilder mixed;
  mixed.add(std::vector<int32_t>{1}, 3, {9}, LogitRows::kLast);
  mixed.add(std::vector<int32_t>(10, 1), 0, {10}, LogitRows::kLast);
  EXPECT_EQ(graphs_->bucket_for(mixed.build()), 0);
}

// Speculative decoding's verification steps (three sequences of 1 + 2 rows: the bucket of 4) and
// the drafter's MTP pass over them: each replay equals the eager run of the same padded step bit for
// bit, and the unpadded step within the bf16 tolerance. The fixture with an MTP module only.
class VerificationGraphsTest : public DecodeGraphsTest {
 protected:
  static constexpr int kRows = 3;  // a sequence's last token and two drafts

  ForwardBatch verify_step() const {
    BatchBuilder builder;
    for (int s = 0; s < kSequences; ++s)
      builder.add(std::vector<int32_t>{next_[s], next_[s], 7}, positions_[s], pages_of(s), LogitRows::kAll);
    return builder.build();
  }
};

TEST_P(VerificationGraphsTest, ReplaysOfTheStepAndItsMtpPassEqualTheEagerOnes) {
  DecodeGraphOptions options{4, kScratchPage};
  options.tokens_per_sequence = kRows;
  options.mtp_extend = true;
  // The prompts ran the main layers only: the module's cache rows before the drafts are arbitrary,
  // but must be numbers (uninitialized memory could hold NaNs, which no comparison survives).
  backend_->fill_uniform(cache_->layer(model_->config().num_hidden_layers), 1, -0.5f, 0.5f);
  DecodeGraphs graphs(*model_, *cache_, options);
  EXPECT_EQ(graphs.buckets(), (std::vector<int>{1, 2, 4}));
  for (int step = 0; step < 4; ++step) {
    SCOPED_TRACE(step);
    ForwardBatch batch = verify_step();
    ASSERT_EQ(graphs.bucket_for(batch), 4);
    EXPECT_EQ(graphs_->bucket_for(batch), 0);  // the one-token graphs leave it
    std::optional<ForwardResult> replayed = graphs.forward(batch);
    ASSERT_TRUE(replayed.has_value());
    Tensor graph_logits = backend_->to_host(replayed->logits);
    Tensor graph_hidden = backend_->to_host(replayed->hidden);
    // The drafter's pass: each row with the token after it, logits at each sequence's last row.
    ForwardBatch extend = batch;
    for (int64_t t = 0; t < extend.num_tokens(); ++t)
      extend.token_ids[t] = t % kRows == kRows - 1 ? 5 : batch.token_ids[t + 1];
    extend.logit_rows = {2, 5, 8};
    std::optional<ForwardResult> mtp = graphs.mtp_extend(extend);
    ASSERT_TRUE(mtp.has_value());
    Tensor mtp_logits = backend_->to_host(mtp->logits);
    EXPECT_FALSE(graphs.mtp_extend(extend).has_value());  // one pass a replayed step

    ForwardResult eager_padded = model_->forward_on_device(padded(batch, 4, kRows), *cache_);
    Tensor eager_mtp = backend_->to_host(
        model_->forward_mtp_on_device(0, eager_padded.hidden, padded(extend, 4, kRows), *cache_).logits);
    ASSERT_EQ(graph_logits.dim(0), kSequences * kRows);
    ASSERT_EQ(graph_hidden.dim(0), kSequences * kRows);
    ASSERT_EQ(mtp_logits.dim(0), kSequences);
    EXPECT_EQ(max_abs_diff(graph_logits, backend_->to_host(eager_padded.logits)), 0.0f);
    EXPECT_EQ(max_abs_diff(mtp_logits, eager_mtp), 0.0f);
    Tensor eager = model_->forward(batch, *cache_).logits;
    EXPECT_LE(max_abs_diff(graph_logits, eager), 2e-2f * max_abs(eager));
    for (int s = 0; s < kSequences; ++s) {
      next_[s] = argmax_row(eager, s * kRows);
      ++positions_[s];  // the drafts' rows are written again by the next step, as when rejected
    }
  }
  EXPECT_EQ(graphs.replays(), 4);
}

TEST_P(VerificationGraphsTest, StepsOfOtherShapesRunEagerly) {
  DecodeGraphOptions options{4, kScratchPage};
  options.tokens_per_sequence = kRows;
  options.mtp_extend = true;
  DecodeGraphs graphs(*model_, *cache_, options);
  EXPECT_EQ(graphs.bucket_for(decode_step()), 0);  // one token a sequence
  BatchBuilder uneven;  // 1 + 5 rows: as many as two sequences of 3, but not 3 each
  uneven.add(std::vector<int32_t>{1}, 3, {9}, LogitRows::kAll);
  uneven.add(std::vector<int32_t>(5, 1), 0, {10}, LogitRows::kAll);
  ForwardBatch batch = uneven.build();
  EXPECT_EQ(graphs.bucket_for(batch), 0);
  EXPECT_FALSE(graphs.forward(batch).has_value());
  EXPECT_FALSE(graphs.mtp_extend(batch).has_value());  // nothing was replayed
}

auto fixture_name = [](const auto& info) {
  std::string name = info.param;
  std::replace(name.begin(), name.end(), '-', '_');
  return name;
};
INSTANTIATE_TEST_SUITE_P(Fixtures, DecodeGraphsTest, ::testing::Values("v3-tiny", "v2-lite-tiny"), fixture_name);
INSTANTIATE_TEST_SUITE_P(Fixtures, VerificationGraphsTest, ::testing::Values("v3-tiny"), fixture_name);

}  // namespace
}  // namespace dsinfer::model
