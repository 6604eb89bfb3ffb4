#include "kernel_activity.h"  // bench/gpu/, next to this file

#ifdef DSINFER_HAVE_CUPTI
#include <cupti.h>
#include <dlfcn.h>
#endif

#include <cxxabi.h>

#include <algorithm>
#include <cstdint>
#include <cstdlib>
#include <mutex>
#include <string>

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
  std::string name;  // a kernel's mangled name (CUPTI's string lives only as long as its buffer)
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
        records.push_back({kernel->start, kernel->end, false, kernel->name != nullptr ? kernel->name : ""});
      } else if (record->kind == CUPTI_ACTIVITY_KIND_MEMSET) {
        const auto* memset = reinterpret_cast<const CUpti_ActivityMemset4*>(record);
        records.push_back({memset->start, memset->end, true, {}});
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

namespace {

// The records since begin(), in start order; forgets them.
std::vector<Record> take_sorted() {
  cupti->flush_all(CUPTI_ACTIVITY_FLAG_FLUSH_FORCED);
  std::vector<Record> sorted;
  {
    std::lock_guard<std::mutex> lock(records_mutex);
    sorted.swap(records);
  }
  std::sort(sorted.begin(), sorted.end(), [](const Record& a, const Record& b) { return a.start < b.start; });
  return sorted;
}

// "void ns::(anonymous namespace)::kernel<2, 128>(Params)" -> "kernel<2, 128>": the demangled name
// without return type, namespaces and arguments (the mangled one where it does not demangle).
std::string short_name(const std::string& mangled) {
  int status = 0;
  char* demangled = abi::__cxa_demangle(mangled.c_str(), nullptr, nullptr, &status);
  std::string name = status == 0 && demangled != nullptr ? demangled : mangled;
  std::free(demangled);
  // "(anonymous namespace)" is a namespace, not an argument list.
  for (size_t at; (at = name.find("(anonymous namespace)")) != std::string::npos;) name.replace(at, 21, "anon");
  // Cut the argument list: the last '(' at template depth 0.
  int depth = 0;
  size_t cut = name.size(), begin = 0;
  for (size_t i = 0; i < name.size(); ++i) {
    const char ch = name[i];
    if (ch == '<') ++depth;
    if (ch == '>') --depth;
    if (depth == 0 && ch == '(' && cut == name.size()) cut = i;
    // A return type ends at a space at depth 0 before the arguments; namespaces at "::".
    if (depth == 0 && i < cut && ch == ' ') begin = i + 1;
    if (depth == 0 && i + 1 < cut && ch == ':' && name[i + 1] == ':') begin = i + 2;
  }
  return name.substr(begin, cut - begin);
}

}  // namespace

std::vector<KernelRecord> KernelActivity::kernels() {
  std::vector<KernelRecord> out;
  uint64_t origin = 0;  // the first kernel's start: a clock's raw nanoseconds lose digits in a double
  for (const Record& r : take_sorted()) {
    if (r.memset) continue;
    if (out.empty()) origin = r.start;
    out.push_back({short_name(r.name), static_cast<double>(r.start - origin) * 1e-3,
                   static_cast<double>(r.end - origin) * 1e-3});
  }
  return out;
}

std::vector<double> KernelActivity::spans_us(int calls) {
  const std::vector<Record> sorted = take_sorted();
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
std::vector<KernelRecord> KernelActivity::kernels() { return {}; }

#endif
}  // namespace dsinfer::bench
