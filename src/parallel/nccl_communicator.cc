#include "parallel/nccl_communicator.h"

#include <numeric>

#include "backend/cuda/cuda_backend.h"
#include "backend/cuda/cuda_check.h"
#include "core/error.h"

namespace dsinfer::parallel {
namespace {

void expect_rows_on_gpu(const Tensor& x, const char* op) {
  DSINFER_CHECK(x.defined() && x.device() == Device::kCuda, op,
                ": the NCCL communicator exchanges CUDA tensors only");
  DSINFER_CHECK(x.rank() >= 1, op, ": needs rows, got a tensor of shape ", x.shape().to_string());
}

// Bytes of one row: everything after the first dimension. Rows move as bytes (ncclUint8), so any
// dtype travels, FP8 included.
size_t row_bytes(const Tensor& x) {
  int64_t width = 1;
  for (int axis = 1; axis < x.rank(); ++axis) width *= x.dim(axis);
  return static_cast<size_t>(width) * dtype_size(x.dtype());
}

// [rows, rest...] with x's trailing dims.
Shape with_rows(const Tensor& x, int64_t rows) {
  Shape shape = x.shape();
  shape[0] = rows;
  return shape;
}

int64_t sum(std::span<const int64_t> counts) { return std::accumulate(counts.begin(), counts.end(), int64_t{0}); }

// Opens an NCCL group and always closes it, so that an error between the calls never leaves the
// thread inside a group (NCCL launches nothing of a group in which a call failed).
class NcclGroup {
 public:
  explicit NcclGroup(ncclComm_t comm) : comm_(comm) { DSINFER_NCCL_CHECK(comm_, ncclGroupStart()); }
  ~NcclGroup() {
    if (open_) (void)ncclGroupEnd();
  }
  NcclGroup(const NcclGroup&) = delete;
  NcclGroup& operator=(const NcclGroup&) = delete;

  // Launches the group's operations on their streams.
  void end() {
    open_ = false;
    DSINFER_NCCL_CHECK(comm_, ncclGroupEnd());
  }

 private:
  ncclComm_t comm_;
  bool open_ = true;
};

}  // namespace

void throw_nccl_error(ncclResult_t status, ncclComm_t comm, const char* call, const char* file, int line) {
  const char* detail = ncclGetLastError(comm);  // the last failure NCCL logged, with its reason
  throw Error(str_cat("NCCL error: ", ncclGetErrorString(status), " in ", call, " at ", file, ":", line,
                      detail && *detail ? str_cat(" (", detail, ")") : std::string()));
}

NcclClique::NcclClique(const std::vector<int>& devices) : comms_(devices.size(), nullptr) {
  DSINFER_CHECK(!devices.empty(), "NcclClique: a group needs at least one GPU");
  int current_device = 0;  // ncclCommInitAll visits every GPU; the caller's stays current
  DSINFER_CUDA_CHECK(cudaGetDevice(&current_device));
  DSINFER_NCCL_CHECK(nullptr, ncclCommInitAll(comms_.data(), size(), devices.data()));
  DSINFER_CUDA_CHECK(cudaSetDevice(current_device));
}

// Errors cannot leave a destructor; NCCL prints them itself (NCCL_DEBUG=WARN). Aborted
// communicators are gone already.
NcclClique::~NcclClique() {
  if (aborted_) return;
  for (ncclComm_t comm : comms_) (void)ncclCommDestroy(comm);
}

void NcclClique::abort() {
  std::lock_guard<std::mutex> lock(mutex_);
  if (aborted_.exchange(true)) return;
  for (ncclComm_t comm : comms_) (void)ncclCommAbort(comm);
}

void NcclClique::check_not_aborted(const char* op) const {
  DSINFER_CHECK(!aborted_, op, ": the rank group was aborted: another rank failed its step");
}

NcclCommunicator::NcclCommunicator(std::shared_ptr<NcclClique> clique, int rank, backend::Backend& backend)
    : clique_(std::move(clique)), comm_(clique_->comm(rank)), rank_(rank), backend_(backend),
      stream_(backend::cuda::stream_of(backend)) {
  DSINFER_NCCL_CHECK(comm_, ncclCommCuDevice(comm_, &device_));
  int stream_device = -1;
  DSINFER_CUDA_CHECK(cudaStreamGetDevice(stream_, &stream_device));
  DSINFER_CHECK(stream_device == device_, "NcclCommunicator: group rank ", rank_, "'s NCCL communicator is on GPU ",
                device_, " but its backend is on GPU ", stream_device);
}

void NcclCommunicator::start(const char* op) const {
  clique_->check_not_aborted(op);
  DSINFER_CUDA_CHECK(cudaSetDevice(device_));
}

void NcclCommunicator::all_reduce_sum(Tensor& x) {
  DSINFER_CHECK(x.defined() && x.device() == Device::kCuda,
                "all_reduce_sum: the NCCL communicator sums CUDA tensors only");
  ncclDataType_t type;
  switch (x.dtype()) {
    case DType::kF32: type = ncclFloat32; break;
    case DType::kBF16: type = ncclBfloat16; break;
    default: throw Error(str_cat("all_reduce_sum: sums float32 or bf16 tensors, got ", dtype_name(x.dtype())));
  }
  start("all_reduce_sum");
  if (x.numel() == 0) return;  // the same on every rank: each holds the same shape
  DSINFER_NCCL_CHECK(comm_, ncclAllReduce(x.raw(), x.raw(), static_cast<size_t>(x.numel()), type, ncclSum, comm_,
                                          stream_));
}

// One broadcast per rank that has rows, rooted at that rank and landing in its slice of the output,
// all in one NCCL group (one launch). Unlike send/recv it copies the root's own rows too, and it
// uses NCCL's collective algorithms (ring or tree over NVLink) rather than size - 1 point-to-point
// connections per rank. Every rank knows every count, so every rank skips the same empty slices.
Tensor NcclCommunicator::all_gather_rows(const Tensor& x, std::span<const int64_t> rows) {
  expect_rows_on_gpu(x, "all_gather_rows");
  DSINFER_CHECK(static_cast<int>(rows.size()) == size() && rows[rank_] == x.dim(0), "all_gather_rows: ",
                rows.size(), " row counts for ", size(), " ranks, this rank's ", x.dim(0), " rows");
  const size_t bytes = row_bytes(x);
  start("all_gather_rows");
  Tensor out = backend_.empty(x.dtype(), with_rows(x, sum(rows)));
  char* slice = static_cast<char*>(out.raw());
  NcclGroup group(comm_);
  for (int root = 0; root < size(); ++root) {
    const size_t count = static_cast<size_t>(rows[root]) * bytes;
    if (count > 0) DSINFER_NCCL_CHECK(comm_, ncclBroadcast(x.raw(), slice, count, ncclUint8, root, comm_, stream_));
    slice += count;
  }
  group.end();
  return out;
}

// Point-to-point in one group: a send and a receive per peer with rows either way, and this rank's
// rows to itself as a plain device copy. recv_rows[j] here equals send_rows[this rank] on rank j, so
// both ends skip the same empty transfers.
Tensor NcclCommunicator::all_to_all_rows(const Tensor& x, std::span<const int64_t> send_rows,
                                         std::span<const int64_t> recv_rows) {
  expect_rows_on_gpu(x, "all_to_all_rows");
  DSINFER_CHECK(static_cast<int>(send_rows.size()) == size() && static_cast<int>(recv_rows.size()) == size() &&
                    sum(send_rows) == x.dim(0),
                "all_to_all_rows: send counts do not cover the ", x.dim(0), " rows of ", size(), " ranks");
  DSINFER_CHECK(send_rows[rank_] == recv_rows[rank_], "all_to_all_rows: rank ", rank_, " sends itself ",
                send_rows[rank_], " rows but expects ", recv_rows[rank_]);
  const size_t bytes = row_bytes(x);
  start("all_to_all_rows");
  Tensor out = backend_.empty(x.dtype(), with_rows(x, sum(recv_rows)));
  const char* send = static_cast<const char*>(x.raw());
  char* recv = static_cast<char*>(out.raw());

  // [offset of each peer's rows] in x and in out, in bytes.
  std::vector<size_t> send_at(size()), recv_at(size());
  int64_t sent = 0, received = 0;
  for (int peer = 0; peer < size(); ++peer) {
    send_at[peer] = static_cast<size_t>(sent) * bytes;
    recv_at[peer] = static_cast<size_t>(received) * bytes;
    sent += send_rows[peer];
    received += recv_rows[peer];
  }
  if (const size_t own = static_cast<size_t>(send_rows[rank_]) * bytes; own > 0)
    DSINFER_CUDA_CHECK(
        cudaMemcpyAsync(recv + recv_at[rank_], send + send_at[rank_], own, cudaMemcpyDeviceToDevice, stream_));

  NcclGroup group(comm_);
  for (int peer = 0; peer < size(); ++peer) {
    if (peer == rank_) continue;
    if (const size_t count = static_cast<size_t>(send_rows[peer]) * bytes; count > 0)
      DSINFER_NCCL_CHECK(comm_, ncclSend(send + send_at[peer], count, ncclUint8, peer, comm_, stream_));
    if (const size_t count = static_cast<size_t>(recv_rows[peer]) * bytes; count > 0)
      DSINFER_NCCL_CHECK(comm_, ncclRecv(recv + recv_at[peer], count, ncclUint8, peer, comm_, stream_));
  }
  group.end();
  return out;
}

// Through the device: this rank's values into its slot of a [size, n] buffer, an in-place
// all-gather, and the whole buffer back to the host.
std::vector<int64_t> NcclCommunicator::all_gather_counts(std::span<const int64_t> values) {
  start("all_gather_counts");
  const size_t n = values.size();
  std::vector<int64_t> all(n * static_cast<size_t>(size()));
  if (n == 0) return all;  // the same on every rank: each gives the same count
  Tensor gathered = backend_.empty(DType::kI64, {static_cast<int64_t>(all.size())});  // [size * n] int64
  int64_t* mine = gathered.data<int64_t>() + static_cast<size_t>(rank_) * n;
  DSINFER_CUDA_CHECK(cudaMemcpyAsync(mine, values.data(), n * sizeof(int64_t), cudaMemcpyHostToDevice, stream_));
  DSINFER_NCCL_CHECK(comm_, ncclAllGather(mine, gathered.raw(), n, ncclInt64, comm_, stream_));
  DSINFER_CUDA_CHECK(
      cudaMemcpyAsync(all.data(), gathered.raw(), all.size() * sizeof(int64_t), cudaMemcpyDeviceToHost, stream_));
  DSINFER_CUDA_CHECK(cudaStreamSynchronize(stream_));
  // An abort while waiting let NCCL's kernel return without the others' values.
  clique_->check_not_aborted("all_gather_counts");
  return all;
}

}  // namespace dsinfer::parallel
