#include "parallel/local_communicator.h"

#include <cstring>
#include <numeric>

#include "core/error.h"

namespace dsinfer::parallel {
namespace {


int64_t row_bytes(const Tensor& x) {
  int64_t width = 1;
  for (int axis = 1; axis < x.rank(); ++axis) width *= x.dim(axis);
  return width * static_cast<int64_t>(dtype_size(x.dtype()));
}

// [rows, rest...] with x's trailing dims.
Shape with_rows(const Tensor& x, int64_t rows) {
  Shape shape = x.shape();
  shape[0] = rows;
  return shape;
}

// A refusal inside a collective: the other ranks would wait for this one at the next barrier, so the
// group is aborted before the error is thrown.
template <typename... Args>
void agree(LocalGroup& group, bool ok, Args&&... message) {
  if (ok) return;
  group.abort();
  throw Error(str_cat(std::forward<Args>(message)...));
}

}  // namespace

LocalGroup::LocalGroup(int size) : size_(size), posts_(size) {
  DSINFER_CHECK(size >= 1, "a group needs at least one rank, got ", size);
}

void LocalGroup::abort() {
  std::lock_guard<std::mutex> lock(mutex_);
  aborted_ = true;
  changed_.notify_all();
}

void LocalGroup::wait_for_all() {
  std::unique_lock<std::mutex> lock(mutex_);
  DSINFER_CHECK(!aborted_, "the rank group was aborted: another rank failed its step");
  uint64_t generation = generation_;
  if (++arrived_ == size_) {
    arrived_ = 0;
    ++generation_;
    changed_.notify_all();
    return;
  }
  changed_.wait(lock, [&] { return aborted_ || generation_ != generation; });
  DSINFER_CHECK(generation_ != generation, "the rank group was aborted: another rank failed its step");
}

std::vector<LocalGroup::Post> LocalGroup::exchange(int rank, Post item) {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    posts_[rank] = std::move(item);
  }
  wait_for_all();
  std::lock_guard<std::mutex> lock(mutex_);
  return posts_;
}

void LocalGroup::finish() { wait_for_all(); }

void LocalCommunicator::all_reduce_sum(Tensor& x) {
  agree(*group_, x.device() == Device::kCpu, "all_reduce_sum: the local communicator exchanges CPU tensors only");
  agree(*group_, x.dtype() == DType::kF32, "all_reduce_sum: the local communicator sums float32 tensors, got ",
                dtype_name(x.dtype()));
  auto posts = group_->exchange(rank_, {x.raw(), {x.numel()}});
  for (const auto& post : posts)
    agree(*group_, post.counts[0] == x.numel(), "all_reduce_sum: ranks hold ", post.counts[0], " and ", x.numel(),
          " elements");
  // Every rank adds in rank order into its own buffer, then waits for the others to finish reading.
  std::vector<float> sum(static_cast<size_t>(x.numel()), 0.0f);
  for (const auto& post : posts) {
    const float* part = static_cast<const float*>(post.data);
    for (size_t i = 0; i < sum.size(); ++i) sum[i] += part[i];
  }
  group_->finish();
  std::memcpy(x.raw(), sum.data(), x.nbytes());
}

Tensor LocalCommunicator::all_gather_rows(const Tensor& x, std::span<const int64_t> rows) {
  agree(*group_, x.device() == Device::kCpu, "all_gather_rows: the local communicator exchanges CPU tensors only");
  agree(*group_, static_cast<int>(rows.size()) == size() && rows[rank_] == x.dim(0), "all_gather_rows: ",
                rows.size(), " row counts for ", size(), " ranks, this rank's ", x.dim(0), " rows");
  auto posts = group_->exchange(rank_, {x.raw(), {x.dim(0)}});
  for (int r = 0; r < size(); ++r)
    agree(*group_, posts[r].counts[0] == rows[r], "all_gather_rows: rank ", r, " holds ", posts[r].counts[0],
          " rows, not ", rows[r]);
  Tensor out = Tensor::empty(x.dtype(), with_rows(x, std::accumulate(rows.begin(), rows.end(), int64_t{0})));
  const int64_t bytes = row_bytes(x);
  char* cursor = static_cast<char*>(out.raw());
  for (int r = 0; r < size(); ++r) {
    if (rows[r] > 0) std::memcpy(cursor, posts[r].data, static_cast<size_t>(rows[r] * bytes));
    cursor += rows[r] * bytes;
  }
  group_->finish();
  return out;
}

Tensor LocalCommunicator::all_to_all_rows(const Tensor& x, std::span<const int64_t> send_rows,
                                          std::span<const int64_t> recv_rows) {
  agree(*group_, x.device() == Device::kCpu, "all_to_all_rows: the local communicator exchanges CPU tensors only");
  agree(*group_, static_cast<int>(send_rows.size()) == size() && static_cast<int>(recv_rows.size()) == size() &&
                    std::accumulate(send_rows.begin(), send_rows.end(), int64_t{0}) == x.dim(0),
                "all_to_all_rows: send counts do not cover the ", x.dim(0), " rows of ", size(), " ranks");
  auto posts = group_->exchange(rank_, {x.raw(), {send_rows.begin(), send_rows.end()}});
  Tensor out = Tensor::empty(x.dtype(), with_rows(x, std::accumulate(recv_rows.begin(), recv_rows.end(), int64_t{0})));
  const int64_t bytes = row_bytes(x);
  char* cursor = static_cast<char*>(out.raw());
  for (int r = 0; r < size(); ++r) {
    const std::vector<int64_t>& sent = posts[r].counts;  // rank r's rows for each rank
    agree(*group_, sent[rank_] == recv_rows[r], "all_to_all_rows: rank ", r, " sends ", sent[rank_], " rows to rank ",
          rank_, ", which expects ", recv_rows[r]);
    int64_t offset = std::accumulate(sent.begin(), sent.begin() + rank_, int64_t{0});
    if (sent[rank_] > 0)
      std::memcpy(cursor, static_cast<const char*>(posts[r].data) + offset * bytes,
                  static_cast<size_t>(sent[rank_] * bytes));
    cursor += sent[rank_] * bytes;
  }
  group_->finish();
  return out;
}

std::vector<int64_t> LocalCommunicator::all_gather_counts(std::span<const int64_t> values) {
  auto posts = group_->exchange(rank_, {nullptr, {values.begin(), values.end()}});
  std::vector<int64_t> all;
  for (const auto& post : posts) {
    agree(*group_, post.counts.size() == values.size(), "all_gather_counts: ranks give ", post.counts.size(), " and ",
          values.size(), " values");
    all.insert(all.end(), post.counts.begin(), post.counts.end());
  }
  group_->finish();
  return all;
}

std::vector<std::unique_ptr<Communicator>> make_local_group(int size) {
  auto group = std::make_shared<LocalGroup>(size);
  std::vector<std::unique_ptr<Communicator>> ranks;
  for (int r = 0; r < size; ++r) ranks.push_back(std::make_unique<LocalCommunicator>(group, r));
  return ranks;
}

}  // namespace dsinfer::parallel
