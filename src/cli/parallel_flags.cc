#include "cli/parallel_flags.h"

#include "core/error.h"

namespace dsinfer::cli {

void add_parallel_flags(Flags& flags) {
  flags.add_int("tensor-parallel-size", "ranks (GPUs, or CPU threads with --device cpu) that split each attention's "
                "heads; the dense MLPs and experts are split over every rank", 1);
  flags.add_alias("tp", "tensor-parallel-size");
  flags.add_alias("tp-size", "tensor-parallel-size");  // SGLang
  flags.add_int("data-parallel-size", "attention groups with batches of their own (DP attention); with "
                "--enable-dp-attention they share --tp's ranks (SGLang), else each has --tp ranks (vLLM)", 1);
  flags.add_alias("dp", "data-parallel-size");
  flags.add_alias("dp-size", "data-parallel-size");  // SGLang
  flags.add_bool("enable-dp-attention", "SGLang's layout: --tp is the rank count and --dp attention groups share them");
  flags.add_int("expert-parallel-size", "1, or the rank count: split the routed experts by expert (SGLang)", 1);
  flags.add_alias("ep", "expert-parallel-size");
  flags.add_alias("ep-size", "expert-parallel-size");  // SGLang
  flags.add_bool("enable-expert-parallel", "split the routed experts by expert over every rank (vLLM)");
  flags.add_bool("enable-eplb", "expert-parallel load balancing: count each expert's tokens and place the experts "
                 "anew, with replicas of the hot ones, every --eplb-rebalance-num-iterations steps");
  flags.add_int("num-redundant-experts", "EPLB: spare expert slots in all, for replicas of hot experts", 0);
  flags.add_alias("ep-num-redundant-experts", "num-redundant-experts");  // SGLang
  flags.add_int("eplb-rebalance-num-iterations", "EPLB: steps between rebalances", 1000);
  flags.add_int("num-max-dispatch-tokens-per-rank", "DP attention + expert parallelism: steps of at most this many "
                "tokens a rank send tokens to their experts through peer buffers with no host round trip "
                "(DeepEP's low-latency mode); larger steps use the all-to-all; 0: always the all-to-all", 128);
  flags.set_range("num-max-dispatch-tokens-per-rank", 0, 1 << 20);
  flags.add_int("dispatch-chunk-tokens", "DP attention + expert parallelism: steps over the low-latency buffers send "
                "tokens through peer buffers of this many tokens a rank, in rounds, with no host round trip "
                "(DeepEP's normal mode); 0: NCCL's all-to-all", 4096);
  flags.set_range("dispatch-chunk-tokens", 0, 1 << 20);
  for (const char* size : {"tensor-parallel-size", "data-parallel-size", "expert-parallel-size"})
    flags.set_range(size, 1, 4096);
  flags.set_range("num-redundant-experts", 0, 65536);
  flags.set_range("eplb-rebalance-num-iterations", 1, 1e12);
}

runtime::ExpertBalance expert_balance(const Flags& flags, const parallel::ParallelConfig& config) {
  runtime::ExpertBalance balance;
  const bool eplb = flags.get_bool("enable-eplb");
  const int redundant = static_cast<int>(flags.get_int("num-redundant-experts"));
  if (!eplb) {
    DSINFER_CHECK(redundant == 0, "--num-redundant-experts needs --enable-eplb");
    return balance;
  }
  DSINFER_CHECK(config.expert_parallel, "--enable-eplb balances the experts of an expert-parallel layout: add "
                "--enable-expert-parallel (or --ep equal to the rank count)");
  balance.redundant_experts = redundant;
  balance.rebalance_steps = flags.get_int("eplb-rebalance-num-iterations");
  return balance;
}

parallel::ParallelConfig parallel_config(const Flags& flags) {
  const int tp = static_cast<int>(flags.get_int("tensor-parallel-size"));
  const int dp = static_cast<int>(flags.get_int("data-parallel-size"));
  const int ep = static_cast<int>(flags.get_int("expert-parallel-size"));
  parallel::ParallelConfig config;
  if (flags.get_bool("enable-dp-attention")) {
    DSINFER_CHECK(tp % dp == 0, "--enable-dp-attention: --dp ", dp, " must divide --tp ", tp,
                  " (the ranks the attention groups share)");
    config.attention_tp = tp / dp;
  } else {
    config.attention_tp = tp;
  }
  config.attention_dp = dp;
  const int world = config.world_size();
  DSINFER_CHECK(ep == 1 || ep == world, "--expert-parallel-size ", ep, " must be 1 or the number of ranks (", world,
                "): the routed experts are split over every rank");
  config.expert_parallel = flags.get_bool("enable-expert-parallel") || (ep == world && world > 1);
  config.low_latency_tokens = flags.get_int("num-max-dispatch-tokens-per-rank");
  config.chunk_tokens = flags.get_int("dispatch-chunk-tokens");
  return config;
}

}  // namespace dsinfer::cli
