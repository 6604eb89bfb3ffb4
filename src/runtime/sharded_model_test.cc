// The model held by several ranks against the whole model on one rank: tensor-parallel attention,
// dense MLPs split along I, routed experts split by expert (EP) or along I, DP attention (each DP
// group its own sequences, the experts' tokens gathered), on the fixture models, over prompts and
// decode steps; and the engine serving a sharded model greedily as it serves the whole one.
//
// On the CPU the ranks are threads with the local communicator (float32: the sums' order moves the
// logits by rounding only). DSINFER_TEST_DEVICE=cuda runs the same on GPUs 0..N-1 through NCCL (bf16
// tolerance; scripts/gpu-test.sh on a machine of 2 or more GPUs); layouts needing more ranks than
// GPUs fail there, never skip.
#include "runtime/sharded_model.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <future>
#include <thread>

#include "backend/make_backend.h"
#include "backend/test_device.h"
#include "core/source_path.h"
#include "model/batch_builder.h"
#include "model/test_logits.h"
#include "parallel/nccl_rank_groups.h"
#include "runtime/completion.h"
#include "runtime/engine.h"
#include "runtime/sharded_executor.h"
#include "runtime/step_error.h"
#include "runtime/stream_collector.h"

namespace dsinfer::runtime {
namespace {

using backend::test_device;
using parallel::ParallelConfig;

std::string fixture_dir(const std::string& name) { return source_path("tests/fixtures/models/" + name); }
bool on_cpu() { return test_device() == "cpu"; }

// Of the largest logit: float32 sums in another order on the CPU; bf16 partial sums on GPUs.
float tolerance() { return on_cpu() ? 2e-5f : 2e-2f; }

backend::BackendOptions backend_options(const std::string& fixture) {
  backend::BackendOptions options;
  options.fp8_bf16_activations = fixture.find("fp8") != std::string::npos;  // as model_test
  return options;
}

// The model in `dir` over the ranks of `config`: CPU threads, or GPUs 0..N-1 through NCCL.
std::unique_ptr<ShardedModel> load_sharded(const std::string& dir, const ParallelConfig& config,
                                           ExpertBalance balance = {}, backend::BackendOptions options = {}) {
  auto make_backend = [&](int rank) {
    return backend::make_backend(on_cpu() ? "cpu" : "cuda:" + std::to_string(rank), options);
  };
  auto make_groups = [&](const std::vector<backend::Backend*>& backends) {
    return on_cpu() ? parallel::make_local_rank_groups(config) : parallel::make_nccl_rank_groups(config, backends);
  };
  return std::make_unique<ShardedModel>(dir, config, model::ModelOptions{}, make_backend, make_groups,
                                        std::move(balance));
}

// A few sequences stepped together: a prompt each, then decode steps that feed back the argmax.
struct Sequences {
  std::vector<std::vector<int32_t>> tokens = {
      {1, 17, 42, 7, 99, 5, 63, 12, 8, 71, 30}, {1, 250, 3}, {1, 9, 9, 9, 120, 64, 33, 18, 2, 44, 91, 17, 6, 77, 55,
                                                                 21, 13, 88, 4, 49, 101, 36, 28, 11, 60, 3, 95}};
  std::vector<int32_t> computed = {0, 0, 0};

  // The next step of the sequences in `which` (each gets pages [8i, 8i + 8)): their uncomputed tokens.
  model::ForwardBatch batch(const std::vector<int>& which) const {
    model::BatchBuilder builder;
    for (int i : which) {
      std::vector<int32_t> pages;
      for (int32_t p = 0; p < 8; ++p) pages.push_back(8 * i + p);
      std::span<const int32_t> fresh(tokens[i].data() + computed[i], tokens[i].size() - computed[i]);
      builder.add(fresh, computed[i], pages, model::LogitRows::kLast);
    }
    return builder.build();
  }
};

// The logits [3, vocab] of each step of the whole model (prompts, then `decodes` decode steps), and
// its router's choices per expert over them.
struct WholeModelRun {
  std::vector<Tensor> steps;
  Tensor expert_load;  // [MoE layers, E]
};
WholeModelRun whole_model_steps(const std::string& fixture, int decodes) {
  auto backend = backend::make_backend(on_cpu() ? "cpu" : "cuda:0", backend_options(fixture));
  parallel::RankPlan counting;
  counting.count_expert_load = true;
  model::ModelOptions options;
  options.plan = &counting;
  auto model = model::DeepseekModel::load(fixture_dir(fixture), *backend, options);
  model::LatentCache cache = model->make_cache(24);
  Sequences sequences;
  std::vector<Tensor> steps;
  for (int step = 0; step <= decodes; ++step) {
    steps.push_back(model->forward(sequences.batch({0, 1, 2}), cache).logits);
    for (int i = 0; i < 3; ++i) {
      sequences.computed[i] = static_cast<int32_t>(sequences.tokens[i].size());
      sequences.tokens[i].push_back(model::argmax_row(steps.back(), i));
    }
  }
  return {steps, model->expert_load()};
}

struct Layout {
  const char* fixture;
  ParallelConfig config;
  int redundant_experts = 0;  // EPLB: replicas of the hot experts (placed from a skewed load)
};

// The EPLB placement of v3-tiny's MoE layers (1 and 2; 8 experts, 4 groups) over `ranks` ranks with
// `redundant` replicas, from a load that makes experts 2 and 5 hot.
std::vector<parallel::ExpertPlacement> skewed_placements(int ranks, int redundant) {
  std::vector<double> load = {1, 1, 9, 1, 1, 6, 1, 1};
  parallel::PlacementShape shape{.logical_experts = 8, .expert_groups = 4, .nodes = 1, .ranks = ranks,
                                 .redundant_experts = redundant};
  parallel::ExpertPlacement placement = parallel::place_experts(shape, load);
  return {parallel::contiguous_placement(shape), placement, placement};  // layer 0 is dense
}

std::string layout_name(const ::testing::TestParamInfo<Layout>& info) {
  const ParallelConfig& c = info.param.config;
  std::string name = std::string(info.param.fixture) + "_tp" + std::to_string(c.attention_tp) + "_dp" +
                     std::to_string(c.attention_dp) + (c.expert_parallel ? "_ep" : "") +
                     (info.param.redundant_experts ? "_redundant" + std::to_string(info.param.redundant_experts) : "") +
                     (c.dispatches_experts() ? (c.low_latency_tokens ? "_lowlatency" : "") +
                                                   std::string(c.chunk_tokens ? "_chunks" : "_alltoall")
                                             : "");
  std::replace(name.begin(), name.end(), '-', '_');
  return name;
}

class ShardedModelTest : public ::testing::TestWithParam<Layout> {};

// Each DP group steps its own sequences (one group of the three sequences has none in a layout of 4
// groups: its rank still joins every collective with an empty step) (sequence i in group i % dp) on its own cache; every rank's
// logits of a sequence match the whole model's, at every step, and the ranks of a group agree bit
// for bit.
TEST_P(ShardedModelTest, EveryStepGivesTheWholeModelsLogits) {
  const Layout& layout = GetParam();
  const int decodes = 3;
  const WholeModelRun whole = whole_model_steps(layout.fixture, decodes);
  const std::vector<Tensor>& expected = whole.steps;
  ExpertBalance balance;
  if (layout.redundant_experts) balance.placements = skewed_placements(layout.config.world_size(), layout.redundant_experts);
  balance.count_load = true;
  auto sharded = load_sharded(fixture_dir(layout.fixture), layout.config, balance, backend_options(layout.fixture));
  const int ranks = sharded->size(), groups = layout.config.attention_dp;
  std::vector<std::unique_ptr<model::LatentCache>> caches(ranks);
  sharded->on_every_rank([&](int r) { caches[r] = std::make_unique<model::LatentCache>(sharded->rank(r).make_cache(24)); });

  Sequences sequences;
  int64_t low_latency_steps = 0, chunk_rounds = 0;
  for (int step = 0; step <= decodes; ++step) {
    std::vector<Tensor> logits(ranks);  // [its group's sequences, vocab]
    std::vector<int64_t> group_tokens(groups, 0);  // as the executor does: the largest group's tokens
    for (int i = 0; i < 3; ++i) group_tokens[i % groups] += std::ssize(sequences.tokens[i]) - sequences.computed[i];
    const int64_t most = *std::max_element(group_tokens.begin(), group_tokens.end());
    sharded->set_step_tokens(most);
    const bool low_latency = most <= layout.config.low_latency_tokens;
    low_latency_steps += low_latency;
    if (!low_latency && layout.config.chunk_tokens)
      chunk_rounds += (most + layout.config.chunk_tokens - 1) / layout.config.chunk_tokens;
    sharded->on_every_rank([&](int r) {
      std::vector<int> mine;
      for (int i = 0; i < 3; ++i)
        if (i % groups == sharded->rank(r).place().dp_rank()) mine.push_back(i);
      logits[r] = sharded->rank(r).forward(sequences.batch(mine), *caches[r]).logits;
    });
    const float bound = tolerance() * model::max_abs(expected[step]);
    for (int r = 0; r < ranks; ++r) {
      int group = sharded->rank(r).place().dp_rank(), row = 0;
      for (int i = group; i < 3; i += groups, ++row) {
        const int64_t vocab = expected[step].dim(1);
        Tensor mine = logits[r].slice(row, row + 1), theirs = expected[step].slice(i, i + 1);
        EXPECT_LE(model::max_abs_diff(mine.view({1, vocab}), theirs.view({1, vocab})), bound)
            << "rank " << r << ", sequence " << i << ", step " << step;
      }
      const int first_of_group = group * layout.config.attention_tp;
      EXPECT_EQ(0.0f, model::max_abs_diff(logits[r], logits[first_of_group])) << "rank " << r << ", step " << step;
    }
    for (int i = 0; i < 3; ++i) {  // the whole model's tokens, so both follow the same sequences
      sequences.computed[i] = static_cast<int32_t>(sequences.tokens[i].size());
      sequences.tokens[i].push_back(model::argmax_row(expected[step], i));
    }
    // With EPLB, the experts move once mid-run (placed from the loads counted so far, weights
    // reloaded): the steps after it must match as well.
    if (layout.redundant_experts && step == 1) sharded->rebalance(sharded->expert_load());
  }
  // The steps that fit went through the peer buffers (every decode step; the prompt step under 4
  // groups), at both MoE layers on every rank.
  if (layout.config.dispatches_experts() && layout.config.low_latency_tokens) {
    EXPECT_GE(low_latency_steps, decodes);
    EXPECT_EQ(sharded->peer_dispatches(), 2 * low_latency_steps * ranks);
  }
  // The other steps went through the chunked buffers, a round per chunk of their largest group.
  if (layout.config.dispatches_experts() && layout.config.chunk_tokens) {
    EXPECT_GT(chunk_rounds, 1);
    EXPECT_EQ(sharded->peer_dispatches(/*chunks=*/true), 2 * chunk_rounds * ranks);
  }
  // The DP groups' expert loads add up to the whole model's, choice for choice (under EPLB too: the
  // counts are of logical experts, before the map to slots).
  Tensor load = sharded->expert_load();
  ASSERT_EQ(load.shape(), whole.expert_load.shape());
  for (int64_t i = 0; i < load.numel(); ++i)
    ASSERT_EQ(load.data<int64_t>()[i], whole.expert_load.data<int64_t>()[i]) << "layer and expert " << i;
}

INSTANTIATE_TEST_SUITE_P(
    Layouts, ShardedModelTest,
    ::testing::Values(Layout{"v3-tiny", {.attention_tp = 2}},                                       // experts along I
                      Layout{"v3-tiny", {.attention_tp = 2, .expert_parallel = true}},              // EP 2
                      Layout{"v3-tiny-fp8", {.attention_tp = 2, .expert_parallel = true}},          // FP8 shards
                      Layout{"v3-tiny-fp8", {.attention_tp = 2}},                                   // widened shards
                      Layout{"v3-tiny", {.attention_dp = 2, .expert_parallel = true}},              // DP attention
                      Layout{"v3-tiny", {.attention_tp = 2, .attention_dp = 2, .expert_parallel = true}},  // EP 4
                      Layout{"v3-tiny", {.attention_tp = 2, .attention_dp = 2, .expert_parallel = true}, 4},  // + EPLB
                      Layout{"v3-tiny", {.attention_tp = 2, .expert_parallel = true}, 2},
                      Layout{"v3-tiny-fp8", {.attention_tp = 2, .expert_parallel = true}, 2},
                      Layout{"v3-tiny", {.attention_dp = 4, .expert_parallel = true}},
                      Layout{"v3-tiny", {.attention_dp = 4, .expert_parallel = true}, 4},  // all-to-all + EPLB
                      Layout{"v3-tiny", {.attention_dp = 2, .expert_parallel = true, .all_to_all = false}},  // gather
                      // Low-latency dispatch for steps of up to 32 tokens a rank: the prompt steps
                      // (38 tokens in a group of 2) take the all-to-all, the decode steps the peer
                      // buffers; with 4 groups one rank's steps are empty.
                      Layout{"v3-tiny", {.attention_dp = 2, .expert_parallel = true, .low_latency_tokens = 32}},
                      Layout{"v3-tiny-fp8", {.attention_dp = 2, .expert_parallel = true, .low_latency_tokens = 32}},
                      Layout{"v3-tiny", {.attention_dp = 4, .expert_parallel = true, .low_latency_tokens = 32}, 4},
                      Layout{"v2-lite-tiny", {.attention_dp = 2, .expert_parallel = true, .low_latency_tokens = 32}},
                      // Chunked peer buffers of 8 tokens a rank for the larger steps: the prompt
                      // steps in rounds (5 for the 38 tokens of a group of 2), the decode steps through
                      // the low-latency buffers of 4, or every step in rounds without them.
                      Layout{"v3-tiny",
                             {.attention_dp = 2, .expert_parallel = true, .low_latency_tokens = 4, .chunk_tokens = 8}},
                      Layout{"v3-tiny", {.attention_dp = 4, .expert_parallel = true, .chunk_tokens = 8}, 4},
                      Layout{"v3-tiny", {.attention_dp = 2}},
                      Layout{"v2-lite-tiny", {.attention_tp = 3}},
                      Layout{"v2-lite-tiny", {.attention_tp = 3, .expert_parallel = true}},
                      Layout{"v2-lite-tiny", {.attention_dp = 2, .expert_parallel = true}}),
    layout_name);

// The engine serving a sharded model answers greedy requests with the whole model's tokens, on the
// bundled model. Three requests at once, so that under DP attention
// the groups run steps of different sizes, and empty ones; with EPLB the experts move between steps
// while the requests run.
// The bundled model, trained: its greedy choices have clear margins (a random fixture's near-ties
// may flip under bf16 sums in another order on GPUs).
std::string bundled_model() { return source_path("models/dsv3-tiny"); }

// The chat template's renderings of "123+456", "Sort 228, 881, 622, 489 from smallest to largest."
// and "987*65" for the bundled model.
const std::vector<std::vector<int32_t>> kChatPrompts = {
    {0, 3, 2310, 26, 1551, 4},
    {0, 3, 495, 236, 1570, 27, 236, 1986, 27, 236, 1647, 27, 236, 1932, 505, 389, 371, 385, 29, 4},
    {0, 3, 2086, 25, 418, 4}};

// What `run` gives on an engine over the whole bundled model on one rank (the reference).
template <typename Run>
auto on_the_whole_model(const tokenizer::Tokenizer& tokenizer, const EngineConfig& config, Run run) {
  auto backend = backend::make_backend(on_cpu() ? "cpu" : "cuda:0");
  auto whole = model::DeepseekModel::load(bundled_model(), *backend);
  Engine engine(*whole, tokenizer, config);
  return run(engine);
}

struct EngineLayout {
  ParallelConfig config;
  ExpertBalance balance;
  int graphs = 0;  // decode graphs up to this batch (on GPUs; the CPU has none and runs eagerly)
};

class ShardedEngineTest : public ::testing::TestWithParam<EngineLayout> {};

TEST_P(ShardedEngineTest, GreedyRequestsGiveTheWholeModelsTokens) {
  tokenizer::Tokenizer tokenizer = tokenizer::Tokenizer::from_dir(bundled_model());
  EngineConfig config = offline_engine_config(3, 64, 160);
  config.cuda_graph_max_batch = 0;  // the whole model's run: eager
  RequestOptions options;
  options.max_tokens = 160;
  const std::vector<std::vector<int32_t>>& prompts = kChatPrompts;
  auto run_all = [&](Engine& engine) {
    std::vector<std::future<Completion>> running;
    for (const auto& prompt : prompts)
      running.push_back(std::async(std::launch::async, [&] { return complete_request(engine, prompt, options); }));
    std::vector<Completion> done;
    for (auto& result : running) done.push_back(result.get());
    return done;
  };

  const std::vector<Completion> expected = on_the_whole_model(tokenizer, config, run_all);
  auto sharded = load_sharded(bundled_model(), GetParam().config, GetParam().balance);
  config.cuda_graph_max_batch = GetParam().graphs;
  Engine engine(*sharded, tokenizer, config);
  std::vector<Completion> results = run_all(engine);
  for (size_t i = 0; i < prompts.size(); ++i) {
    ASSERT_NE(results[i].finish_reason, FinishReason::kError) << results[i].error;
    EXPECT_GT(results[i].tokens.size(), 10u);
    EXPECT_EQ(results[i].tokens, expected[i].tokens) << "prompt " << i;
  }
  if (GetParam().config.low_latency_tokens) { EXPECT_GT(sharded->peer_dispatches(), 0); }
  if (GetParam().config.chunk_tokens) { EXPECT_GT(sharded->peer_dispatches(/*chunks=*/true), 0); }
  // Each DP group's ranks hold a cache of their own: the pool is the groups' caches together.
  EXPECT_EQ(engine.stats().total_pages, config.num_pages * GetParam().config.attention_dp);
  // Every page back in the pool, once the engine thread has finished the requests' bookkeeping.
  for (int i = 0; i < 10000 && engine.stats().free_pages != engine.stats().total_pages; ++i)
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  EXPECT_EQ(engine.stats().free_pages, engine.stats().total_pages);
  // On GPUs the decode steps replayed graphs (the CPU has none).
  if (GetParam().graphs && !on_cpu()) { EXPECT_GT(engine.stats().graph_steps, 50); }
  // EPLB placed the experts anew every 7 steps while the requests ran (160 tokens each).
  if (GetParam().balance.rebalance_steps) { EXPECT_GE(sharded->rebalances(), 10); }
}

// Prefix caching under DP attention loses no hits: a request goes to the group whose cache holds its
// prompt's prefix (today's engines lose about a factor of dp_size there). Requests one after another
// that share a long prefix hit the cache as on the whole model, and answer the same. The long
// repeated prefix is far from what the bundled model was trained on, so its greedy choices there
// can be near-ties, which bf16 sums in another order (a cached prefix, other ranks) may flip on
// GPUs: the tokens must agree up to the first step where the whole model's top two are within
// kNearTie, and there may part.
TEST(ShardedEngine, PrefixCacheHitsUnderDpAttentionAreTheWholeModels) {
  constexpr float kNearTie = 0.1f;  // nats between the whole model's top two logprobs
  tokenizer::Tokenizer tokenizer = tokenizer::Tokenizer::from_dir(bundled_model());
  EngineConfig config = offline_engine_config(2, 200, 8);
  config.enable_prefix_caching = true;
  config.cuda_graph_max_batch = 0;
  RequestOptions options;
  options.max_tokens = 8;
  options.logprobs = 2;  // the top two
  std::vector<int32_t> prefix;
  for (int i = 0; i < 7; ++i) prefix.insert(prefix.end(), kChatPrompts[1].begin(), kChatPrompts[1].end());
  std::vector<std::vector<int32_t>> prompts;
  for (int i = 0; i < 4; ++i) {
    prompts.push_back(prefix);
    prompts.back().insert(prompts.back().end(), kChatPrompts[i % 3].begin(), kChatPrompts[i % 3].end());
  }
  struct Output {
    std::vector<int32_t> tokens;
    std::vector<TokenLogprob> logprobs;
  };
  auto run = [&](Engine& engine) {  // one request after another, and the cache's hits
    std::vector<Output> outputs;
    for (const auto& prompt : prompts) {
      Collector collector;
      engine.submit(prompt, options, collector.sink());
      collector.wait();
      outputs.push_back({collector.tokens, collector.logprobs});
    }
    return std::make_pair(outputs, engine.stats().prefix_hits);
  };
  const auto [whole_outputs, whole_hits] = on_the_whole_model(tokenizer, config, run);
  auto sharded = load_sharded(bundled_model(), {.attention_dp = 2, .expert_parallel = true, .low_latency_tokens = 64});
  Engine engine(*sharded, tokenizer, config);
  const auto [outputs, hits] = run(engine);
  ASSERT_EQ(outputs.size(), prompts.size());
  for (size_t i = 0; i < prompts.size(); ++i) {
    const Output &got = outputs[i], &want = whole_outputs[i];
    ASSERT_EQ(got.tokens.size(), want.tokens.size()) << "prompt " << i;
    ASSERT_EQ(want.logprobs.size(), want.tokens.size()) << "prompt " << i;
    for (size_t step = 0; step < want.tokens.size(); ++step) {
      if (got.tokens[step] == want.tokens[step]) continue;
      const auto& top = want.logprobs[step].top;
      ASSERT_EQ(top.size(), 2u) << "prompt " << i << " step " << step;
      EXPECT_LT(top[0].second - top[1].second, kNearTie)
          << "prompt " << i << " step " << step << ": token " << got.tokens[step] << ", the whole model's "
          << want.tokens[step] << " by a clear margin";
      break;  // the continuations part at a near-tie
    }
  }
  EXPECT_EQ(hits, whole_hits);
  EXPECT_GE(hits, 3 * 128);  // the 2 full pages of the prefix, for each request after the first
}

// vLLM's prompt_logprobs under DP attention: each group scores its own sequences' prompt rows and
// the engine gets them back in its order; two requests at once, each the whole model's scores.
TEST(ShardedEngine, PromptLogprobsUnderDpAttentionAreTheWholeModels) {
  tokenizer::Tokenizer tokenizer = tokenizer::Tokenizer::from_dir(bundled_model());
  EngineConfig config = offline_engine_config(2, 64, 4);
  config.cuda_graph_max_batch = 0;
  RequestOptions options;
  options.max_tokens = 4;
  options.prompt_logprobs = 3;
  const std::vector<std::vector<int32_t>> prompts = {kChatPrompts[1], kChatPrompts[2]};
  auto scores_of = [&](Engine& engine) {
    std::vector<std::unique_ptr<Collector>> collectors;
    for (const auto& prompt : prompts) {
      collectors.push_back(std::make_unique<Collector>());
      engine.submit(prompt, options, collectors.back()->sink());
    }
    std::vector<std::vector<PromptLogprob>> scores;
    for (auto& collector : collectors) {
      collector->wait();
      scores.push_back(collector->prompt_logprobs);
    }
    return scores;
  };
  const std::vector<std::vector<PromptLogprob>> expected = on_the_whole_model(tokenizer, config, scores_of);
  auto sharded = load_sharded(bundled_model(), {.attention_dp = 2, .expert_parallel = true});
  Engine engine(*sharded, tokenizer, config);
  std::vector<std::vector<PromptLogprob>> scores = scores_of(engine);
  for (size_t i = 0; i < prompts.size(); ++i) {
    ASSERT_EQ(scores[i].size(), prompts[i].size() - 1) << "prompt " << i;
    for (size_t row = 0; row < scores[i].size(); ++row) {
      const PromptLogprob &got = scores[i][row], &want = expected[i][row];
      EXPECT_EQ(got.token_id, want.token_id) << "prompt " << i << " row " << row;
      EXPECT_NEAR(got.logprob, want.logprob, on_cpu() ? 1e-4 : 5e-2) << "prompt " << i << " row " << row;
      EXPECT_EQ(got.top.size(), 3u);
    }
  }
}

std::string engine_layout_name(const ::testing::TestParamInfo<EngineLayout>& info) {
  const ParallelConfig& c = info.param.config;
  return "tp" + std::to_string(c.attention_tp) + "_dp" + std::to_string(c.attention_dp) +
         (c.expert_parallel ? "_ep" : "") + (c.low_latency_tokens ? "_lowlatency" + std::to_string(c.low_latency_tokens) : "") +
         (c.chunk_tokens ? "_chunks" + std::to_string(c.chunk_tokens) : "") +
         (info.param.balance.rebalance_steps ? "_eplb" : "") + (info.param.graphs ? "_graphs" : "");
}

INSTANTIATE_TEST_SUITE_P(
    Layouts, ShardedEngineTest,
    ::testing::Values(EngineLayout{{.attention_tp = 2, .expert_parallel = true}, {}},
                      EngineLayout{{.attention_dp = 2, .expert_parallel = true}, {}},  // all-to-all
                      // the low-latency dispatch for every step of up to 128 tokens a rank
                      EngineLayout{{.attention_dp = 2, .expert_parallel = true, .low_latency_tokens = 128}, {}},
                      // decode graphs on every rank: NCCL's all-reduce, and the peer buffers, in them
                      EngineLayout{{.attention_tp = 2, .expert_parallel = true}, {}, 8},
                      EngineLayout{{.attention_dp = 2, .expert_parallel = true, .low_latency_tokens = 128}, {}, 8},
                      // buffers of 16 tokens a rank: the prompt steps run eagerly through the
                      // all-to-all on every rank, the decode steps replay graphs through the buffers
                      EngineLayout{{.attention_dp = 2, .expert_parallel = true, .low_latency_tokens = 16}, {}, 8},
                      // the same with the prompt steps through chunked peer buffers of 8 tokens
                      EngineLayout{{.attention_dp = 2, .expert_parallel = true, .low_latency_tokens = 16, .chunk_tokens = 8},
                                   {}, 8},
                      // EPLB every 7 steps with graphs: every rank captures them anew after each
                      EngineLayout{{.attention_dp = 2, .expert_parallel = true, .low_latency_tokens = 128},
                                   {.placements = {}, .redundant_experts = 2, .rebalance_steps = 7}, 8},
                      EngineLayout{{.attention_tp = 2, .attention_dp = 2, .expert_parallel = true}, {}},
                      // 2 spare slots, the experts placed anew every 7 steps
                      EngineLayout{{.attention_dp = 2, .expert_parallel = true},
                                   {.placements = {}, .redundant_experts = 2, .rebalance_steps = 7}}),
    engine_layout_name);

// Under DP attention the overlap scheduler's placeholders point at rows of the whole previous step;
// the executor turns them into rows of each group's part of it. Decode steps launched before their
// predecessor is collected (placeholders resolved on each group's ranks) sample what steps over the
// real tokens sample. Sequences 0 and 2 live in group 0's pages, sequence 1 in group 1's. GPUs only
// (scripts/gpu-test.sh): the CPU backend takes no placeholders, its steps are never overlapped.
TEST(ShardedEngine, OverlappedDpStepsResolvePlaceholdersInTheirOwnGroup) {
  if (on_cpu()) GTEST_SKIP() << "placeholders need a device backend (the CPU's steps are not overlapped)";
  auto sharded = load_sharded(fixture_dir("v3-tiny"),
                              {.attention_dp = 2, .expert_parallel = true, .low_latency_tokens = 32});
  const int64_t pages = 8;  // a rank's: group 1's pages are 8 .. 15 of the pool
  const std::vector<std::vector<int32_t>> pages_of = {{0, 1}, {8, 9}, {2, 3}};
  const std::vector<std::vector<int32_t>> prompts = {{1, 17, 42, 7, 99}, {1, 250, 3}, {1, 9, 9, 120, 64, 33, 18}};
  auto greedy = [](int rows) {
    backend::SamplingBatch batch;
    batch.rows.resize(rows);
    batch.history_start.assign(rows + 1, 0);
    batch.banned_start.assign(rows + 1, 0);
    return batch;
  };
  auto run = [&](bool overlapped) {
    std::unique_ptr<StepExecutor> executor = make_sharded_executor(*sharded, pages);
    EXPECT_EQ(executor->page_groups(), 2);
    EXPECT_EQ(executor->num_pages(), 2 * pages);
    std::vector<std::vector<int32_t>> tokens(3);
    model::BatchBuilder prefill;
    for (int s = 0; s < 3; ++s) prefill.add(prompts[s], 0, pages_of[s], model::LogitRows::kLast);
    backend::SampledTokens first = executor->run(prefill.build(), greedy(3));
    for (int s = 0; s < 3; ++s) tokens[s].push_back(first.tokens.data<int32_t>()[s]);
    auto decode = [&](int step, bool placeholders) {
      model::BatchBuilder builder;
      for (int s = 0; s < 3; ++s)
        builder.add(std::vector<int32_t>{placeholders ? -(s + 1) : tokens[s].back()},
                    static_cast<int32_t>(prompts[s].size()) + step, pages_of[s], model::LogitRows::kLast);
      return builder.build();
    };
    const int steps = 6;
    if (overlapped) executor->launch(decode(0, false), greedy(3));
    for (int step = 0; step < steps; ++step) {
      backend::SampledTokens sampled;
      if (overlapped) {
        if (step + 1 < steps) executor->launch(decode(step + 1, true), greedy(3));
        sampled = executor->collect();
      } else {
        sampled = executor->run(decode(step, false), greedy(3));
      }
      for (int s = 0; s < 3; ++s) tokens[s].push_back(sampled.tokens.data<int32_t>()[s]);
    }
    return tokens;
  };
  const std::vector<std::vector<int32_t>> synchronous = run(false);
  EXPECT_EQ(run(true), synchronous);
  for (const auto& sequence : synchronous) EXPECT_EQ(sequence.size(), 7u);
}

// A rank that fails its step does not leave the others waiting in a collective: the step fails,
// and the sharded model refuses further steps instead of hanging.
TEST(ShardedEngine, ARankThatFailsStopsTheOthersInsteadOfHangingThem) {
  auto sharded = load_sharded(fixture_dir("v3-tiny"), {.attention_tp = 2});
  std::vector<std::unique_ptr<model::LatentCache>> caches(2);
  sharded->on_every_rank([&](int r) { caches[r] = std::make_unique<model::LatentCache>(sharded->rank(r).make_cache(8)); });
  Sequences sequences;
  EXPECT_THROW(sharded->on_every_rank([&](int r) {
    model::ForwardBatch batch = sequences.batch({0});
    if (r == 1) batch.token_ids[0] = -5;  // refused by rank 1 alone, before its first collective
    sharded->rank(r).forward(batch, *caches[r]);
  }),
               FatalDeviceError);
  EXPECT_THROW(sharded->on_every_rank([](int) {}), Error);
}

}  // namespace
}  // namespace dsinfer::runtime
