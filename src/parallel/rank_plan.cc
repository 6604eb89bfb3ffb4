#include "parallel/rank_plan.h"

#include "parallel/local_communicator.h"

namespace dsinfer::parallel {

std::vector<std::vector<int>> attention_groups(const ParallelConfig& config) {
  std::vector<std::vector<int>> groups(config.attention_dp);
  for (int rank = 0; rank < config.world_size(); ++rank) groups[rank / config.attention_tp].push_back(rank);
  return groups;
}

std::vector<std::vector<int>> across_dp_groups(const ParallelConfig& config) {
  std::vector<std::vector<int>> groups(config.attention_tp);
  for (int rank = 0; rank < config.world_size(); ++rank) groups[rank % config.attention_tp].push_back(rank);
  return groups;
}

namespace {

// One local group per list of ranks; each member's communicator goes to its rank's slot.
void assign(const std::vector<std::vector<int>>& groups, std::vector<RankGroups>& ranks,
            std::unique_ptr<Communicator> RankGroups::*slot) {
  for (const std::vector<int>& members : groups) {
    auto communicators = make_local_group(static_cast<int>(members.size()));
    for (size_t i = 0; i < members.size(); ++i) ranks[members[i]].*slot = std::move(communicators[i]);
  }
}

}  // namespace

std::vector<RankGroups> make_local_rank_groups(const ParallelConfig& config) {
  std::vector<RankGroups> ranks(config.world_size());
  std::vector<int> everyone;
  for (int rank = 0; rank < config.world_size(); ++rank) everyone.push_back(rank);
  assign({everyone}, ranks, &RankGroups::world);
  assign(attention_groups(config), ranks, &RankGroups::attention);
  assign(across_dp_groups(config), ranks, &RankGroups::across_dp);
  add_peer_exchanges(config, ranks, make_cpu_peer_device);
  return ranks;
}

void add_peer_exchanges(const ParallelConfig& config, std::vector<RankGroups>& ranks,
                        const std::function<std::shared_ptr<PeerDevice>()>& device) {
  if (!config.dispatches_experts()) return;
  auto add = [&](int64_t tokens, std::unique_ptr<PeerExchange> RankGroups::*slot) {
    if (tokens <= 0) return;
    auto exchanges = make_peer_exchanges(config.world_size(), tokens, device());
    for (size_t r = 0; r < ranks.size(); ++r) ranks[r].*slot = std::move(exchanges[r]);
  };
  add(config.low_latency_tokens, &RankGroups::peer);
  add(config.chunk_tokens, &RankGroups::peer_chunks);
}

}  // namespace dsinfer::parallel
