// Which kernels a step's time goes to: CUPTI's records of one step (kernel_activity.h) folded into
// time per kernel name, for the model-step benchmark's breakdown of a decode step.
//
// Kernels overlap under programmatic launch (a kernel starts, then waits for its predecessor), so a
// record's own span would count that wait twice. Each kernel is charged only the part of its span
// past every earlier kernel's end: the charges add up to the time some kernel ran, and the rest of
// the step's span is time the GPU had no kernel (launch gaps, host work inside the step).
#pragma once

#include <string>
#include <vector>

#include "core/json.h"
#include "kernel_activity.h"  // bench/gpu/, next to this file

namespace dsinfer::bench {

struct KernelShare {
  std::string name;
  double us = 0;  // charged time, summed over the step's calls of this kernel
  int calls = 0;
};

struct StepBreakdown {
  double span_us = 0;  // the first kernel's start to the last kernel's end
  double busy_us = 0;  // the sum of the charges: time a kernel ran
  std::vector<KernelShare> kernels;  // largest charge first
};

StepBreakdown fold_kernels(const std::vector<KernelRecord>& records);

// {"span_us", "busy_us", "kernels": [{"name", "us", "calls"}, ...]}.
Json breakdown_json(const StepBreakdown& breakdown);

// The breakdown as a table on stdout: the `rows` largest kernels, then the rest in one line.
void print_breakdown(const StepBreakdown& breakdown, const std::string& title, int rows);

}  // namespace dsinfer::bench
