// Backend conformance: every op of backend.h run on a candidate backend and on the CPU reference
// (make_cpu_backend), both through Backend&, at DeepSeek-V3's shapes and dtypes, and compared
// (DESIGN.md, the device step, item 7; llama.cpp's test-backend-ops is the model).
//
// A case is one op at one shape. It builds its inputs on the host from a fixed seed with realistic
// magnitudes (activations ~N(0, 1), weights ~N(0, 0.02) in bf16 or FP8 with 128x128 block scales,
// router logits, paged caches with scrambled page ids, prefill / decode / MTP-like batches), then
// runs the op on each backend. Activations are rounded to bf16 on the host before either backend
// sees them, and uploaded in the backend's compute dtype (bf16 on the GPU, f32 on the CPU: the same
// values), so a comparison measures the op's own error and nothing else.
//
// Comparisons (CheckResult):
//   nmse   = ||candidate - reference||^2 / ||reference||^2 over one output, against a bound per case
//            (the candidate's bf16 output rounding alone gives ~2.7e-6); attention takes the worst
//            token row instead; a NaN or Inf in the candidate always fails;
//   exact  = the number of differing elements must be 0: integer outputs, and outputs that are copies
//            (slices, concatenations, gathers, cache writes, bf16 embedding rows);
//   zeros  = moe_experts over a slice of the experts (ExpertStack::first_expert, expert parallelism):
//            besides the nmse, the rows of tokens routed to other ranks' experts only must be exactly
//            zero on both backends;
//   routing: the chosen experts of each token as a set (order free), then the weights matched by
//            expert id (nmse). Router inputs are drawn with a margin at every selection boundary
//            (group and expert), so a correct backend picks exactly the reference's experts;
//   sampling: greedy tokens exactly (inputs drawn with a margin between the best two logits after
//            penalties); random draws must fall in the support the sampling parameters allow, and
//            token frequencies over many stratified draws must match (total variation distance).
//   guard  = in-place ops (add_inplace, add_rms_norm_inplace, rope_inplace, write_cache,
//            fill_uniform, sample_tokens' logits) get their tensor as a view into a larger
//            allocation whose extra rows (pages for the cache) hold a sentinel; the candidate must
//            leave them unchanged. Ops that return new tensors allocate them inside the backend, so an
//            overrun past those cannot be seen from outside this interface (compute-sanitizer
//            on the GPU covers them).
//   inputs = every input the op may not modify (all but the in-place ones; those up to 256 MB, so
//            not the multi-GB weights) must be unchanged on the candidate afterwards.
//
// fill_uniform is checked with NMSE bounds near zero rather than bit equality: a device may contract
// low + (high - low) * u into one FMA, one ulp away from the CPU.
//
// Tiers: kSmall runs in CI on the CPU in seconds (reduced widths: hidden 512, 16 heads, 16 experts of
// 256 x 512, vocab 4096; MLA head widths and the router stay real); kFull uses V3's shapes and is
// meant for the GPU machine. Both also run the tiny test model's shapes ("v3-tiny" cases: hidden
// 128, q_lora_rank 96, 2 heads, 8 experts of I = 64, top-3; T = 1, 7, 23, 70), where FP8 blocks are
// partial and K is 64 or 96. Their linear inputs have a real model's spread (per-token, per-128-column
// and outlier-column scales) and are also checked row by row. The CPU reference computes 64 evenly spread rows of the row-independent
// ops (linear, linear_f32, moe_experts) when T > 64; the candidate runs every row and the same 64 are
// compared.
//
// After each case the runner calls candidate.release_cached_memory(), so that device memory stays
// bounded by the largest case (a full-size bf16 expert stack is 22.5 GB).
//
// Perf mode times the candidate alone: begin_step, synchronize, host clock, the op, synchronize,
// host clock; the median of `perf_runs` runs after the checked one.
#pragma once

#include <cstdint>
#include <functional>
#include <iosfwd>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "backend/backend.h"

namespace dsinfer::backend::conformance {

enum class Tier : uint8_t { kSmall, kFull };
enum class Role : uint8_t { kReference, kCandidate };

// Host copies of what one run of a case produced.
struct Outputs {
  std::vector<std::pair<std::string, Tensor>> tensors;        // host f32 or int32, by output name
  std::vector<std::pair<std::string, int64_t>> guard_damage;  // guard elements an in-place op changed
  std::vector<std::pair<std::string, int64_t>> changed_inputs;  // elements of a read-only input changed

  void add(std::string name, Tensor host) { tensors.emplace_back(std::move(name), std::move(host)); }
  const Tensor& get(std::string_view name) const;  // throws when the case did not produce it
};

// One comparison of one output.
struct CheckResult {
  std::string output;  // "y", "expert sets", "guard x", ...
  std::string metric;  // "nmse", "mismatches", "tv", "damaged"
  double value = 0.0;  // the measured error
  double bound = 0.0;  // the largest value that passes
  bool passed = false;
  std::string detail;  // where it went wrong (first mismatch, worst element, non-finite count)
};

// A case bound to one backend: inputs uploaded, the op ready to run (again and again in perf mode).
struct Invocation {
  std::function<void()> run;         // the op alone
  std::function<Outputs()> collect;  // the last run's results, on the host
};

// One case's host inputs, ready to run on any backend. The runner calls begin_step(step) before
// bind uploads anything (a device backend finds registered host arrays by address, so stale
// registrations of an earlier case must be gone) and again before every timed run.
struct CaseProgram {
  StepContext step;
  std::function<Invocation(Backend& backend, Role role)> bind;
  std::function<std::vector<CheckResult>(const Outputs& reference, const Outputs& candidate)> compare;
};

struct Case {
  std::string op;                     // the Backend method under test
  std::string name;                   // shapes and flavour: "q_b 1536->24576 fp8 T=64"
  std::function<CaseProgram()> make;  // builds the inputs (fixed seed) when the case runs
};

struct CaseResult {
  std::string op;
  std::string name;
  std::vector<CheckResult> checks;
  std::string error;        // an exception from either backend: the case fails
  double median_us = -1.0;  // the candidate's median time in perf mode, else negative
  // Wall seconds of the case's stages: building its inputs, the reference, the candidate (with the
  // comparison). The summary names the slowest cases, so that a long suite says where its time goes.
  double build_seconds = 0.0, reference_seconds = 0.0, candidate_seconds = 0.0;
  bool passed() const;
};

struct ConformanceReport {
  std::string candidate;
  std::vector<CaseResult> cases;
  bool passed() const;
  int num_failed() const;
  std::vector<std::string> failing_ops() const;  // distinct, in case order
};

struct ConformanceOptions {
  Tier tier = Tier::kSmall;
  bool perf = false;
  int perf_runs = 10;            // timed runs per case in perf mode (at least 10 are made)
  std::vector<std::string> ops;  // run only the cases of these ops; empty: every op
  std::string name_contains;     // run only the cases whose name contains this
  // Of the cases the filters above leave, run only those whose index i has i % shards == shard, so
  // that `shards` runs (shard 0 .. shards - 1) split a long tier between them.
  int shard = 0;
  int shards = 1;
};

// Runs every case of the tier on `candidate` and the CPU reference, printing one table row per check
// to `log` as it goes and a summary at the end: op, case, output, metric, value, bound, pass/FAIL and,
// in perf mode, the candidate's median microseconds.
ConformanceReport run_conformance(Backend& candidate, Tier tier, std::ostream& log, bool perf = false);
ConformanceReport run_conformance(Backend& candidate, const ConformanceOptions& options, std::ostream& log);
// The same over any list of cases and any reference.
ConformanceReport run_cases(Backend& candidate, Backend& reference, const std::vector<Case>& cases,
                            const ConformanceOptions& options, std::ostream& log);
void print_summary(const ConformanceReport& report, std::ostream& log);

std::vector<Case> conformance_cases(Tier tier);
// The compute ops of Backend, each of which must have cases in both tiers.
const std::vector<std::string>& conformance_ops();
// Backend's other virtual methods: plumbing every case uses (the "to_host" case checks round trips).
const std::vector<std::string>& backend_plumbing();

// Helpers for cases (also for tests of a backend outside this harness).
// host f32 -> the backend's compute dtype (bf16 and f16 rounded to nearest even), always a fresh copy.
Tensor upload_activation(Backend& backend, const Tensor& host_f32);
// Any result back as a fresh host tensor: float dtypes as f32, integers as they are. Host tensors
// (sample_tokens' results) are read directly.
Tensor download(Backend& backend, const Tensor& tensor);
// Values rounded to bf16 and kept as f32 (what both backends receive).
Tensor round_to_bf16(const Tensor& host_f32);
// A fresh host copy in `dtype`: f32 to bf16, f16 or f8e4m3 (nearest, saturating), those to f32, or a
// copy when the dtype is already `dtype`.
Tensor convert(const Tensor& host, DType dtype);

CheckResult check_nmse(std::string output, const Tensor& reference, const Tensor& candidate, double bound);
// The worst nmse over the rows (dimension 0) of an output: for attention, where one sequence's rows
// (a context of 1 copies a cached row) can outweigh another's and hide its error in a global nmse.
CheckResult check_nmse_worst_row(std::string output, const Tensor& reference, const Tensor& candidate, double bound);
CheckResult check_exact(std::string output, const Tensor& reference, const Tensor& candidate);
// ids [T, k] int32 and weights [T, k] f32 of both: expert sets per token (mismatching tokens, bound 0)
// and the weights matched by expert id over the tokens whose sets agree (nmse).
std::vector<CheckResult> check_routing(const Tensor& reference_ids, const Tensor& reference_weights,
                                       const Tensor& candidate_ids, const Tensor& candidate_weights,
                                       double weight_bound);

}  // namespace dsinfer::backend::conformance
