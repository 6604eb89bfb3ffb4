// Backend::resolve_placeholders on the host: the definition the device ops are checked against.
#include "backend/cpu/ops.h"
#include "core/error.h"

namespace dsinfer::backend::cpu {

void resolve_placeholders(Tensor& token_ids, const Tensor& previous) {
  DSINFER_CHECK(token_ids.dtype() == DType::kI32 && token_ids.rank() == 1 && previous.dtype() == DType::kI32 &&
                    previous.rank() == 1,
                "resolve_placeholders: token ids and previous tokens must be [n] int32");
  int32_t* ids = token_ids.data<int32_t>();
  const int32_t* source = previous.data<int32_t>();
  const int64_t rows = previous.numel();
  for (int64_t t = 0; t < token_ids.numel(); ++t) {
    if (ids[t] >= 0) continue;
    const int64_t row = -static_cast<int64_t>(ids[t]) - 1;
    DSINFER_CHECK(row < rows, "resolve_placeholders: token ", t, " stands for row ", row, " of a step that sampled ",
                  rows, " tokens");
    ids[t] = source[row];
  }
}

}  // namespace dsinfer::backend::cpu
