// Process-wide tuning of the C allocator for a long-running server.
#pragma once

namespace dsinfer {

// Keeps freed heap memory mapped instead of returning it to the kernel after every step: the
// engine allocates and frees the same few hundred kilobytes each step, and glibc's default
// trimming turned that into page faults on every step. Call once, early in main().
void keep_freed_memory();

}  // namespace dsinfer
