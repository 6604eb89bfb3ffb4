#include "core/allocator.h"

#include <malloc.h>

namespace dsinfer {

void keep_freed_memory() {
  mallopt(M_TRIM_THRESHOLD, 256 << 20);  // return memory to the kernel only past 256 MiB free at the top
  mallopt(M_TOP_PAD, 16 << 20);          // grow the heap 16 MiB at a time
  mallopt(M_MMAP_THRESHOLD, 32 << 20);   // blocks under 32 MiB come from the heap, reused, not mmap'd
}

}  // namespace dsinfer
