// A group of ranks that exchange tensors: the collectives the sharded model needs (DESIGN.md, "Many
// GPUs"). A rank is one GPU (or, on the CPU, one thread standing in for one).
//
// Every rank of a group calls the same collectives in the same order, with tensors of one dtype
// and the same trailing width. Tensors live where the rank's backend keeps them; on a GPU the work
// is queued on the backend's stream (stream-ordered after the ops that made the input, before the
// ops that read the output), on the CPU it is done when the call returns. Results are the same bits
// on every rank of the group.
//
// Implementations: LocalCommunicator (ranks as threads of one process, CPU tensors; the tests and
// `--device cpu`) and NcclCommunicator (GPUs, through NCCL).
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "core/tensor.h"

namespace dsinfer::parallel {

class Communicator {
 public:
  virtual ~Communicator() = default;
  virtual int rank() const = 0;  // 0 .. size() - 1 within this group
  virtual int size() const = 0;

  // x (any shape) becomes the elementwise sum over the group, in place.
  virtual void all_reduce_sum(Tensor& x) = 0;
  // Every rank's x [rows[r], D] stacked in rank order -> [sum(rows), D]. rows: every rank's row
  // count, the same on every rank (all_gather_counts gives it).
  virtual Tensor all_gather_rows(const Tensor& x, std::span<const int64_t> rows) = 0;
  // The exchange of expert dispatch and combine: x [sum(send_rows), D] holds send_rows[j] rows for
  // rank j, in rank order; returns [sum(recv_rows), D] with recv_rows[j] rows from rank j, in rank
  // order. recv_rows[j] on this rank equals send_rows[this rank] on rank j.
  virtual Tensor all_to_all_rows(const Tensor& x, std::span<const int64_t> send_rows,
                                 std::span<const int64_t> recv_rows) = 0;
  // Host values: this rank's `values` (the same count on every rank) from every rank, in rank
  // order -> [size() * values.size()]. Waits for the group (row counts before a gather).
  virtual std::vector<int64_t> all_gather_counts(std::span<const int64_t> values) = 0;

  // Fails every collective of this group, on every rank, in progress or to come (a rank whose step
  // failed calls it, so that the others do not wait for it forever).
  virtual void abort() = 0;
};

// x += the other ranks' x, when the group has others (null: one rank).
inline void sum_over(Communicator* group, Tensor& x) {
  if (group && group->size() > 1) group->all_reduce_sum(x);
}

// Every rank's row count for all_gather_rows, from this rank's alone.
inline std::vector<int64_t> gather_row_counts(Communicator& group, int64_t rows) {
  int64_t mine[] = {rows};
  return group.all_gather_counts(mine);
}

}  // namespace dsinfer::parallel
