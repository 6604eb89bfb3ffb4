// Backend::resolve_placeholders, Backend::map_expert_ids and Backend::count_expert_ids on the host:
// the definitions the device ops are checked against (small passes over int32 ids).
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

void map_expert_ids(Tensor& expert_ids, const Tensor& replica_start, const Tensor& replica_slots) {
  DSINFER_CHECK(expert_ids.dtype() == DType::kI32 && expert_ids.rank() == 2 && replica_start.dtype() == DType::kI32 &&
                    replica_start.rank() == 1 && replica_slots.dtype() == DType::kI32 && replica_slots.rank() == 1,
                "map_expert_ids: ids [T, k], replica_start [E + 1] and replica_slots [slots] must be int32");
  const int64_t T = expert_ids.dim(0), k = expert_ids.dim(1), E = replica_start.numel() - 1;
  const int32_t* start = replica_start.data<int32_t>();
  int32_t* ids = expert_ids.data<int32_t>();
  for (int64_t t = 0; t < T; ++t) {
    for (int64_t j = 0; j < k; ++j) {
      const int32_t e = ids[t * k + j];
      DSINFER_CHECK(e >= 0 && e < E, "map_expert_ids: expert ", e, " outside [0, ", E, ")");
      const int64_t replicas = start[e + 1] - start[e];
      DSINFER_CHECK(replicas >= 1 && start[e + 1] <= replica_slots.numel(), "map_expert_ids: expert ", e, " has ",
                    replicas, " replicas");
      ids[t * k + j] = replica_slots.data<int32_t>()[start[e] + (t + j) % replicas];
    }
  }
}

void count_expert_ids(const Tensor& expert_ids, Tensor& counts) {
  DSINFER_CHECK(expert_ids.dtype() == DType::kI32 && counts.dtype() == DType::kI64 && counts.rank() == 1,
                "count_expert_ids: ids must be int32 and counts [E] int64");
  const int64_t experts = counts.numel();
  for (int64_t i = 0; i < expert_ids.numel(); ++i) {
    const int32_t e = expert_ids.data<int32_t>()[i];
    if (e >= 0 && e < experts) ++counts.data<int64_t>()[e];
  }
}

}  // namespace dsinfer::backend::cpu
