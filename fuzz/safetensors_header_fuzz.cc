// libFuzzer target: safetensors headers, the untrusted first bytes of every checkpoint file.
//
// Rejecting an input with dsinfer::Error is the expected outcome for most inputs. Any other
// exception, a crash, a sanitizer report, or an accepted header that breaks the parser's promises
// (tensors inside the data region, byte counts matching shapes) is a bug.
#include <cstddef>
#include <cstdint>
#include <cstdlib>

#include "core/error.h"
#include "io/safetensors.h"

namespace {

void check_accepted(const dsinfer::io::SafetensorsHeader& header, const uint8_t* data, size_t size) {
  if (header.data_start > size) std::abort();
  size_t data_size = size - header.data_start;
  volatile uint8_t sink = 0;
  for (const dsinfer::io::TensorInfo& info : header.tensors) {
    if (info.offset > data_size || info.nbytes > data_size - info.offset) std::abort();
    if (static_cast<size_t>(info.shape.numel()) * dsinfer::dtype_size(info.dtype) != info.nbytes)
      std::abort();
    // Touch both ends so that AddressSanitizer checks the bounds the header promised.
    if (info.nbytes > 0) {
      sink = sink + data[header.data_start + info.offset];
      sink = sink + data[header.data_start + info.offset + info.nbytes - 1];
    }
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  try {
    check_accepted(dsinfer::io::parse_safetensors_header(data, size, "fuzz.safetensors"), data, size);
  } catch (const dsinfer::Error&) {
    // Rejected with a message: fine.
  }
  return 0;
}
