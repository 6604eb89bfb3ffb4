// The communicator over NCCL: one rank per GPU, all of them in one process, each driven by a thread
// of its own (DESIGN.md, "Many GPUs"). Code that does not know about NCCL makes these through
// nccl_rank_groups.h; only the parallel layer's nccl_*.cc include this header, and with it nccl.h.
//
// Every collective is queued on the rank's backend stream (stream_of), so it runs after the ops
// that made its input and before the ops that read its output, and returns without waiting, except
// all_gather_counts, which brings host values back and so waits for the stream. Outputs come from
// the rank's backend (backend.empty). Rows move as bytes, so gathers and exchanges take any dtype;
// all_reduce_sum adds float32 or bf16. Everything but all_gather_counts may be captured in a CUDA
// graph.
#pragma once

#include <cuda_runtime_api.h>
#include <nccl.h>

#include <atomic>
#include <memory>
#include <mutex>
#include <vector>

#include "backend/backend.h"
#include "parallel/communicator.h"

namespace dsinfer::parallel {

// The error path of DSINFER_NCCL_CHECK: a dsinfer::Error naming the call, NCCL's error string and
// its last message for `comm` (null where there is none).
[[noreturn]] void throw_nccl_error(ncclResult_t status, ncclComm_t comm, const char* call, const char* file,
                                   int line);

// The NCCL communicators of one group, made together by ncclCommInitAll (group rank i on
// devices[i]) and shared by the group's NcclCommunicators: destroyed with the last of them, and
// aborted together, since a rank's kernels stop waiting only when its own communicator is aborted.
class NcclClique {
 public:
  explicit NcclClique(const std::vector<int>& devices);
  ~NcclClique();
  NcclClique(const NcclClique&) = delete;
  NcclClique& operator=(const NcclClique&) = delete;

  int size() const { return static_cast<int>(comms_.size()); }
  ncclComm_t comm(int rank) const { return comms_[rank]; }

  // Aborts every member (ncclCommAbort: kernels waiting for a rank that will not come return) and
  // makes every later collective throw. A rank thread inside an NCCL call at that moment gets an
  // error from it at best: abort is for a failed step, after which the group is not used again.
  void abort();
  // Throws a dsinfer::Error once the clique is aborted.
  void check_not_aborted(const char* op) const;

 private:
  std::vector<ncclComm_t> comms_;
  std::mutex mutex_;  // one abort at a time
  std::atomic<bool> aborted_{false};
};

class NcclCommunicator final : public Communicator {
 public:
  // Group rank `rank` of `clique`, whose CUDA backend is `backend` (on that member's GPU); the
  // backend must outlive this.
  NcclCommunicator(std::shared_ptr<NcclClique> clique, int rank, backend::Backend& backend);

  int rank() const override { return rank_; }
  int size() const override { return clique_->size(); }

  void all_reduce_sum(Tensor& x) override;
  Tensor all_gather_rows(const Tensor& x, std::span<const int64_t> rows) override;
  Tensor all_to_all_rows(const Tensor& x, std::span<const int64_t> send_rows,
                         std::span<const int64_t> recv_rows) override;
  std::vector<int64_t> all_gather_counts(std::span<const int64_t> values) override;
  void abort() override { clique_->abort(); }

 private:
  // Throws if the group was aborted, then makes the rank's GPU current on the calling thread
  // (outputs are allocated on it).
  void start(const char* op) const;

  std::shared_ptr<NcclClique> clique_;
  ncclComm_t comm_;
  int rank_;
  backend::Backend& backend_;
  cudaStream_t stream_;
  int device_ = 0;
};

}  // namespace dsinfer::parallel

#define DSINFER_NCCL_CHECK(comm, call)                                                          \
  do {                                                                                          \
    ncclResult_t dsinfer_nccl_status_ = (call);                                                 \
    if (dsinfer_nccl_status_ != ncclSuccess)                                                    \
      ::dsinfer::parallel::throw_nccl_error(dsinfer_nccl_status_, comm, #call, __FILE__, __LINE__); \
  } while (0)
