// Kernel times from the GPU's own timestamps (CUPTI activity records, what PyTorch's profiler and
// so DeepGEMM's and FlashMLA's benchmarks read), beside the CUDA-event times of kernel_timing.h.
//
// ANCHORS.md's DeepGEMM and FlashMLA figures are such kernel times: from the first kernel's start
// to its end, without the launch and the two event records that a CUDA-event time around one call
// also holds (about 2-3 us on an H200, all of it for a kernel of a few microseconds). The kernel
// benchmark reports both, and compares with those anchors like with like.
//
// libcupti is loaded at run time (it ships with the CUDA toolkit and PyTorch's wheels); where it
// cannot be loaded, available() is false and there are no kernel times (the event times remain).
#pragma once

#include <string>
#include <vector>

namespace dsinfer::bench {

// One kernel's run, as CUPTI recorded it: its (demangled, argument-free) name and its span.
struct KernelRecord {
  std::string name;
  double start_us, end_us;  // the GPU's clock, from the first record's start
};

class KernelActivity {
 public:
  // The process's recorder, started on first use; nullptr when libcupti cannot be loaded or refuses.
  static KernelActivity* get();

  // Forgets every record so far (call after the warm-ups, before the timed calls are queued).
  void begin();
  // After the timed calls have finished on the GPU: for each memset since begin() (the timer's L2
  // flush, one before each call), the span of the kernels after it and before the next memset, in
  // microseconds, in order. Empty when the records do not split into `calls` such groups.
  std::vector<double> spans_us(int calls);
  // After the work has finished on the GPU: every kernel since begin(), in start order (graph
  // replays' kernels included, each node its own record).
  std::vector<KernelRecord> kernels();

 private:
  KernelActivity() = default;
};

}  // namespace dsinfer::bench
