// The CUDA backend against the CPU reference, op by op, through Backend& (backend/conformance):
// the fast kernels at DeepSeek-V3's real shapes, and the reference kernels (CUDA-core attention,
// our own fallback GEMM) at the small tier. Runs on a GPU machine (scripts/gpu-test.sh); without a
// GPU it fails at the first test, it never skips. Label "gpu": not part of `make test`.
#include <gtest/gtest.h>

#include <cstdlib>
#include <iostream>
#include <sstream>
#include <string>

#include "backend/conformance/conformance.h"
#include "backend/cuda/cuda_backend.h"

namespace dsinfer::backend::cuda {
namespace {

// The perf column of the report when DSINFER_CONFORMANCE_PERF is set; only the cases of some ops
// when DSINFER_CONFORMANCE_OPS lists them (comma-separated, e.g. "linear,grouped_linear"), for a
// quick run while a kernel is worked on. scripts/gpu-test.sh sets neither.
conformance::ConformanceOptions options_from_environment(conformance::Tier tier) {
  conformance::ConformanceOptions options;
  options.tier = tier;
  options.perf = std::getenv("DSINFER_CONFORMANCE_PERF") != nullptr;
  if (const char* ops = std::getenv("DSINFER_CONFORMANCE_OPS")) {
    std::stringstream list(ops);
    for (std::string op; std::getline(list, op, ',');)
      if (!op.empty()) options.ops.push_back(op);
  }
  return options;
}

void expect_conformance(const CudaOptions& options, conformance::Tier tier) {
  ASSERT_GT(device_count(), 0) << "no CUDA device: this test needs a GPU";
  auto backend = make_cuda_backend(options);
  conformance::ConformanceReport report =
      conformance::run_conformance(*backend, options_from_environment(tier), std::cout);
  EXPECT_TRUE(report.passed()) << report.num_failed() << " checks failed";
  for (const std::string& op : report.failing_ops()) ADD_FAILURE() << "failing op: " << op;
}

TEST(CudaConformance, FastKernelsMatchTheCpuAtRealDeepSeekShapes) {
  expect_conformance({}, conformance::Tier::kFull);
}

TEST(CudaConformance, FastKernelsMatchTheCpuAtSmallShapes) {
  expect_conformance({}, conformance::Tier::kSmall);
}

TEST(CudaConformance, ReferenceKernelsMatchTheCpuAtSmallShapes) {
  CudaOptions options;
  options.reference_kernels = true;
  expect_conformance(options, conformance::Tier::kSmall);
}

}  // namespace
}  // namespace dsinfer::backend::cuda
