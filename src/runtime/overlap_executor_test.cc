// The overlapped executor on the GPU (scripts/gpu-test.sh; without a GPU it fails): step N + 1 is
// launched with placeholders for step N's tokens before step N is collected, and must sample
// exactly what synchronous steps over the real tokens sample (the same kernels and launch shapes:
// equal bit for bit), with CUDA graphs and eagerly, greedy and with seeded sampling.
#include <gtest/gtest.h>

#include <vector>

#include "backend/make_backend.h"
#include "core/file.h"
#include "core/json.h"
#include "core/source_path.h"
#include "model/batch_builder.h"
#include "runtime/executor.h"

namespace dsinfer::runtime {
namespace {

constexpr int kSequences = 3;
constexpr int kPagesEach = 4;  // pages 4s .. 4s + 3 belong to sequence s
constexpr int kPages = kSequences * kPagesEach;
constexpr int kDecodeSteps = 12;

std::vector<int32_t> pages_of(int sequence) {
  std::vector<int32_t> pages;
  for (int i = 0; i < kPagesEach; ++i) pages.push_back(sequence * kPagesEach + i);
  return pages;
}

struct SampledRun {
  std::vector<std::vector<int32_t>> tokens;  // per sequence: every sampled token
};

class OverlapExecutorTest : public ::testing::TestWithParam<std::tuple<int, bool>> {
 protected:
  void SetUp() override {
    backend_ = backend::make_backend("cuda");
    model_ = model::DeepseekModel::load(source_path("tests/fixtures/models/v3-tiny"), *backend_);
    Json reference = Json::parse(read_file(source_path("tests/fixtures/models/v3-tiny/reference.json")));
    std::vector<int32_t> all;
    for (const Json& id : reference.find("cases")->as_array()[2].find("prompt_ids")->as_array())
      all.push_back(static_cast<int32_t>(id.as_int()));
    for (size_t length : {size_t{60}, size_t{17}, size_t{5}})
      prompts_.emplace_back(all.begin(), all.begin() + static_cast<std::ptrdiff_t>(std::min(length, all.size())));
  }

  // Greedy rows, or temperature 0.9 / top-p 0.9 with fixed draws per step.
  backend::SamplingBatch sampling(int step) const {
    backend::SamplingBatch batch;
    for (int s = 0; s < kSequences; ++s) {
      backend::SamplingRow row;
      if (std::get<1>(GetParam())) {
        row.params.temperature = 0.9f;
        row.params.top_p = 0.9f;
        row.uniform = static_cast<float>((step * 7 + s * 3) % 10) / 10.0f + 0.05f;
      }
      batch.rows.push_back(row);
      batch.history_start.push_back(0);
      batch.banned_start.push_back(0);
    }
    return batch;
  }

  // Prefill, then kDecodeSteps decode steps. overlapped: each decode step is launched with
  // placeholders -(s + 1) before the previous step is collected.
  SampledRun run(bool overlapped) {
    ExecutorOptions options;
    options.cuda_graph_max_batch = std::get<0>(GetParam());
    std::unique_ptr<StepExecutor> executor = make_model_executor(*model_, kPages, options);
    EXPECT_TRUE(executor->overlaps());
    SampledRun out;
    out.tokens.resize(kSequences);
    std::vector<int32_t> positions;
    model::BatchBuilder prefill;
    for (int s = 0; s < kSequences; ++s) {
      prefill.add(prompts_[s], 0, pages_of(s), model::LogitRows::kLast);
      positions.push_back(static_cast<int32_t>(prompts_[s].size()));
    }
    backend::SampledTokens first = executor->run(prefill.build(), sampling(0));
    for (int s = 0; s < kSequences; ++s) out.tokens[s].push_back(first.tokens.data<int32_t>()[s]);
    auto decode_batch = [&](int step, bool placeholders) {
      model::BatchBuilder builder;
      for (int s = 0; s < kSequences; ++s) {
        int32_t input = placeholders ? -(s + 1) : out.tokens[s].back();
        builder.add(std::vector<int32_t>{input}, positions[s] + step, pages_of(s), model::LogitRows::kLast);
      }
      return builder.build();
    };
    if (!overlapped) {
      for (int step = 0; step < kDecodeSteps; ++step) {
        backend::SampledTokens sampled = executor->run(decode_batch(step, false), sampling(step + 1));
        for (int s = 0; s < kSequences; ++s) out.tokens[s].push_back(sampled.tokens.data<int32_t>()[s]);
      }
      return out;
    }
    // The first decode step takes real tokens; each later one is launched before its predecessor
    // is collected, its inputs the predecessor's tokens on the device.
    executor->launch(decode_batch(0, false), sampling(1));
    for (int step = 1; step <= kDecodeSteps; ++step) {
      if (step < kDecodeSteps) executor->launch(decode_batch(step, true), sampling(step + 1));
      backend::SampledTokens sampled = executor->collect();
      for (int s = 0; s < kSequences; ++s) out.tokens[s].push_back(sampled.tokens.data<int32_t>()[s]);
    }
    return out;
  }

  std::unique_ptr<backend::Backend> backend_;
  std::unique_ptr<model::DeepseekModel> model_;
  std::vector<std::vector<int32_t>> prompts_;
};

TEST_P(OverlapExecutorTest, PlaceholdersResolvedOnTheDeviceGiveTheTokensOfSynchronousSteps) {
  SampledRun synchronous = run(false);
  SampledRun overlapped = run(true);
  for (int s = 0; s < kSequences; ++s) {
    EXPECT_EQ(overlapped.tokens[s].size(), static_cast<size_t>(kDecodeSteps + 1));
    EXPECT_EQ(overlapped.tokens[s], synchronous.tokens[s]) << "sequence " << s;
  }
}

TEST_P(OverlapExecutorTest, AThirdLaunchBeforeACollectIsRefused) {
  ExecutorOptions options;
  options.cuda_graph_max_batch = std::get<0>(GetParam());
  std::unique_ptr<StepExecutor> executor = make_model_executor(*model_, kPages, options);
  model::BatchBuilder builder;
  builder.add(prompts_[2], 0, pages_of(0), model::LogitRows::kLast);
  model::ForwardBatch batch = builder.build();
  backend::SamplingBatch rows;
  rows.rows.resize(1);
  rows.history_start = {0, 0};
  rows.banned_start = {0, 0};
  executor->launch(batch, rows);
  executor->launch(batch, rows);
  EXPECT_THROW(executor->launch(batch, rows), Error);
  executor->collect();
  executor->collect();
  EXPECT_THROW(executor->collect(), Error);
}

INSTANTIATE_TEST_SUITE_P(GraphsAndEager, OverlapExecutorTest,
                         testing::Combine(testing::Values(8, 0), testing::Bool()),
                         [](const testing::TestParamInfo<std::tuple<int, bool>>& info) {
                           return std::string(std::get<0>(info.param) ? "Graphs" : "Eager") +
                                  (std::get<1>(info.param) ? "Sampled" : "Greedy");
                         });

}  // namespace
}  // namespace dsinfer::runtime
