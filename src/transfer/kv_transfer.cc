#include "transfer/kv_transfer.h"

namespace dsinfer::transfer {

std::vector<Write> merge_contiguous(std::span<const Write> writes) {
  std::vector<Write> merged;
  for (const Write& w : writes) {
    if (w.bytes == 0) continue;
    if (!merged.empty()) {
      Write& last = merged.back();
      if (last.local_offset + last.bytes == w.local_offset && last.remote_offset + last.bytes == w.remote_offset) {
        last.bytes += w.bytes;
        continue;
      }
    }
    merged.push_back(w);
  }
  return merged;
}

}  // namespace dsinfer::transfer
