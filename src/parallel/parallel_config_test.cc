#include "parallel/parallel_config.h"

#include <gtest/gtest.h>

#include "core/error.h"
#include "parallel/rank_plan.h"

namespace dsinfer::parallel {
namespace {

io::ModelConfig deepseek_v3_widths() {
  io::ModelConfig model;
  model.num_attention_heads = 128;
  model.intermediate_size = 18432;
  model.n_routed_experts = 256;
  model.n_shared_experts = 1;
  model.moe_intermediate_size = 2048;
  return model;
}

TEST(ParallelConfig, RanksHoldDisjointShardsThatCoverEveryModule) {
  ParallelConfig config{.attention_tp = 2, .attention_dp = 2, .expert_parallel = true};
  config.check_fits(deepseek_v3_widths());
  std::vector<int> heads_seen(128, 0), experts_seen(256, 0);
  for (int rank = 0; rank < 4; ++rank) {
    RankPlace place{config, rank};
    EXPECT_EQ(place.dp_rank(), rank / 2);
    for (int64_t h = place.heads(128).begin; h < place.heads(128).end; ++h) ++heads_seen[h];
    for (int64_t e = place.experts(256).begin; e < place.experts(256).end; ++e) ++experts_seen[e];
    EXPECT_EQ(place.expert_columns(2048).size(), 2048);
    EXPECT_EQ(place.dense_columns(18432).size(), 18432);  // DP attention: dense layers whole
  }
  for (int count : heads_seen) EXPECT_EQ(count, 2);  // once in each DP group
  for (int count : experts_seen) EXPECT_EQ(count, 1);
}

TEST(ParallelConfig, WithoutExpertParallelismEachRankHoldsASliceOfEveryExpert) {
  ParallelConfig config{.attention_tp = 4};
  RankPlace third{config, 2};
  EXPECT_EQ(third.experts(256).size(), 256);
  EXPECT_EQ(third.expert_columns(2048).begin, 1024);
  EXPECT_EQ(third.dense_columns(18432).size(), 18432 / 4);
}

TEST(ParallelConfig, WidthsThatDoNotDivideAreRefused) {
  io::ModelConfig model = deepseek_v3_widths();
  EXPECT_THROW((ParallelConfig{.attention_tp = 3}).check_fits(model), Error);                   // 128 heads
  EXPECT_THROW((ParallelConfig{.attention_dp = 3, .expert_parallel = true}).check_fits(model), Error);  // 256 experts
  EXPECT_NO_THROW((ParallelConfig{.attention_tp = 8, .expert_parallel = true}).check_fits(model));
}

TEST(RankGroups, GroupsFollowTheAttentionLayout) {
  ParallelConfig config{.attention_tp = 2, .attention_dp = 3};
  EXPECT_EQ(attention_groups(config), (std::vector<std::vector<int>>{{0, 1}, {2, 3}, {4, 5}}));
  EXPECT_EQ(across_dp_groups(config), (std::vector<std::vector<int>>{{0, 2, 4}, {1, 3, 5}}));
  std::vector<RankGroups> groups = make_local_rank_groups(config);
  ASSERT_EQ(groups.size(), 6u);
  EXPECT_EQ(groups[3].world->rank(), 3);
  EXPECT_EQ(groups[3].attention->rank(), 1);
  EXPECT_EQ(groups[3].attention->size(), 2);
  EXPECT_EQ(groups[3].across_dp->rank(), 1);
  EXPECT_EQ(groups[3].across_dp->size(), 3);
}

}  // namespace
}  // namespace dsinfer::parallel
