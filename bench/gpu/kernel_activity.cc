#include "kernel_activity.h"  // bench/gpu/, next to this file

#ifdef DSINFER_HAVE_CUPTI
#include <cupti.h>
#include <dlfcn.h>
#endif

#include <algorithm>
#include <cstdint>
#include <cstdlib>
#include <mutex>

namespace dsinfer::bench {
#ifdef DSINFER_HAVE_CUPTI
namespace {

// The CUPTI functions used, looked up in libcupti at run time (no link-time dependency).
struct Cupti {
  decltype(&cuptiActivityRegisterCallbacks) register_callbacks = nullptr;
  decltype(&cuptiActivityEnable) enable = nullptr;
  decltype(&cuptiActivityFlushAll) flush_all = nullptr;
  decltype(&cuptiActivityGetNextRecord) next_record = nullptr;
};

struct Record {
  uint64_t start, end;  // ns, the GPU's clock
  bool memset;
};

std::mutex records_mutex;
std::vector<Record> records;  // what the completed buffers held, since begin()
const Cupti* cupti = nullptr;

constexpr size_t kBufferBytes = size_t{4} << 20;

void CUPTIAPI buffer_requested(uint8_t** buffer, size_t* size, size_t* max_records) {
  *buffer = static_cast<uint8_t*>(std::aligned_alloc(8, kBufferBytes));
  *size = *buffer != nullptr ? kBufferBytes : 0;
  *max_records = 0;  // as many as fit
}

void CUPTIAPI buffer_completed(CUcontext, uint32_t, uint8_t* buffer, size_t, size_t valid_bytes) {
  {
    std::lock_guard<std::mutex> lock(records_mutex);
    CUpti_Activity* record = nullptr;
    while (cupti->next_record(buffer, valid_bytes, &record) == CUPTI_SUCCESS) {
      if (record->kind == CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL) {
        const auto* kernel = reinterpret_cast<const CUpti_ActivityKernel10*>(record);
        records.push_back({kernel->start, kernel->end, false});
      } else if (record->kind == CUPTI_ACTIVITY_KIND_MEMSET) {
        const auto* memset = reinterpret_cast<const CUpti_ActivityMemset4*>(record);
        records.push_back({memset->start, memset->end, true});
      }
    }
  }
  std::free(buffer);
}

const Cupti* load() {
  void* library = dlopen("libcupti.so.13", RTLD_NOW | RTLD_LOCAL);
  if (library == nullptr) library = dlopen("libcupti.so", RTLD_NOW | RTLD_LOCAL);
  if (library == nullptr) return nullptr;
  static Cupti functions;
  functions.register_callbacks =
      reinterpret_cast<decltype(functions.register_callbacks)>(dlsym(library, "cuptiActivityRegisterCallbacks"));
  functions.enable = reinterpret_cast<decltype(functions.enable)>(dlsym(library, "cuptiActivityEnable"));
  functions.flush_all = reinterpret_cast<decltype(functions.flush_all)>(dlsym(library, "cuptiActivityFlushAll"));
  functions.next_record =
      reinterpret_cast<decltype(functions.next_record)>(dlsym(library, "cuptiActivityGetNextRecord"));
  if (functions.register_callbacks == nullptr || functions.enable == nullptr || functions.flush_all == nullptr ||
      functions.next_record == nullptr)
    return nullptr;
  cupti = &functions;
  // Concurrent-kernel records (the plain kernel kind would serialise the kernels) and memsets.
  if (functions.register_callbacks(buffer_requested, buffer_completed) != CUPTI_SUCCESS ||
      functions.enable(CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL) != CUPTI_SUCCESS ||
      functions.enable(CUPTI_ACTIVITY_KIND_MEMSET) != CUPTI_SUCCESS)
    return nullptr;
  return &functions;
}

}  // namespace

KernelActivity* KernelActivity::get() {
  static KernelActivity* const activity = load() != nullptr ? new KernelActivity() : nullptr;
  return activity;
}

void KernelActivity::begin() {
  cupti->flush_all(CUPTI_ACTIVITY_FLAG_FLUSH_FORCED);
  std::lock_guard<std::mutex> lock(records_mutex);
  records.clear();
}

std::vector<double> KernelActivity::spans_us(int calls) {
  cupti->flush_all(CUPTI_ACTIVITY_FLAG_FLUSH_FORCED);
  std::vector<Record> sorted;
  {
    std::lock_guard<std::mutex> lock(records_mutex);
    sorted.swap(records);
  }
  std::sort(sorted.begin(), sorted.end(), [](const Record& a, const Record& b) { return a.start < b.start; });
  std::vector<double> spans;
  uint64_t first = 0, last = 0;
  bool open = false, any = false;
  for (const Record& r : sorted) {
    if (r.memset) {
      if (open) {
        if (!any) return {};  // a call without a kernel
        spans.push_back(static_cast<double>(last - first) * 1e-3);
      }
      open = true, any = false;
    } else if (open) {
      first = any ? std::min(first, r.start) : r.start;
      last = any ? std::max(last, r.end) : r.end;
      any = true;
    }
  }
  if (open && any) spans.push_back(static_cast<double>(last - first) * 1e-3);
  if (static_cast<int>(spans.size()) != calls) return {};
  return spans;
}

#else  // built without CUPTI's headers: no kernel times

KernelActivity* KernelActivity::get() { return nullptr; }
void KernelActivity::begin() {}
std::vector<double> KernelActivity::spans_us(int) { return {}; }

#endif
}  // namespace dsinfer::bench
