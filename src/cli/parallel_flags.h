// The parallel layout flags of `serve`, `generate` and `eval`, in vLLM's and SGLang's spellings,
// and the one rule that turns them into a parallel::ParallelConfig:
//
//   vLLM:   --tensor-parallel-size T --data-parallel-size D [--enable-expert-parallel]
//           T x D ranks; D > 1 runs attention data-parallel (D groups of T ranks).
//   SGLang: --tp N [--dp D --enable-dp-attention] [--ep N]
//           with --enable-dp-attention N ranks in all, attention in D groups of N / D; without it
//           N x D as vLLM reads it (--dp alone is vLLM's data parallelism).
//   --tp, --tp-size, --dp, --dp-size, --ep, --ep-size are aliases of the vLLM names. Expert
//   parallelism (--enable-expert-parallel, or --ep equal to the rank count) splits the routed
//   experts by expert; otherwise every rank holds a slice of each.
#pragma once

#include "cli/flags.h"
#include "parallel/parallel_config.h"
#include "runtime/sharded_model.h"

namespace dsinfer::cli {

void add_parallel_flags(Flags& flags);
// Throws dsinfer::Error a user can act on (an --ep that is neither 1 nor the rank count, a --dp that
// does not divide --tp under --enable-dp-attention).
parallel::ParallelConfig parallel_config(const Flags& flags);
// Expert-parallel load balancing: --enable-eplb (vLLM's and SGLang's), --num-redundant-experts
// (SGLang: --ep-num-redundant-experts) spare slots, rebalanced every --eplb-rebalance-num-iterations
// steps. Throws unless the layout is expert parallel when EPLB is asked for.
runtime::ExpertBalance expert_balance(const Flags& flags, const parallel::ParallelConfig& config);

}  // namespace dsinfer::cli
