// DSINFER_HOST_DEVICE marks a function that both the host and the CUDA kernels call (the shared
// definitions of backend/cache_layout.h and backend/cpu/random_fill.h); plain inline elsewhere.
#pragma once

#if defined(__CUDACC__)
#define DSINFER_HOST_DEVICE __host__ __device__
#else
#define DSINFER_HOST_DEVICE
#endif
