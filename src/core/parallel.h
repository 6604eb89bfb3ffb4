// Data parallelism on the CPU: split a range of indices over a pool of threads.
//
// The one place that knows how threads are made, so the ops stay plain loops.
#pragma once

#include <cstdint>
#include <functional>

namespace dsinfer {

// Calls body(begin, end) on disjoint chunks covering [0, count), at least grain indices a chunk
// (except the last), in parallel. Runs inline when count is small or one thread is configured.
void parallel_for(int64_t count, int64_t grain, const std::function<void(int64_t, int64_t)>& body);

// Threads used by parallel_for; defaults to the machine's cores (or DSINFER_NUM_THREADS).
int num_threads();
void set_num_threads(int threads);

}  // namespace dsinfer
