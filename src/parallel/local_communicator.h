// Ranks as threads of one process, over CPU tensors: the communicator that stands in for NCCL on the
// CPU backend (tests in CI, `--device cpu --tp N`), behind the same interface.
//
// Each collective is a rendezvous: every rank posts its input, waits for the others, reads what it
// needs straight from their memory, and waits once more before anyone writes (so an in-place sum
// never races a reader). Sums run in rank order, so every rank gets the same bits. abort() wakes
// every waiting rank with an error, so one rank's failed step cannot leave the others hanging.
#pragma once

#include <condition_variable>
#include <cstdint>
#include <memory>
#include <mutex>
#include <vector>

#include "parallel/communicator.h"

namespace dsinfer::parallel {

class LocalGroup {
 public:
  explicit LocalGroup(int size);
  int size() const { return size_; }

  // Fails every collective in progress or to come (their callers throw dsinfer::Error).
  void abort();

  // Rank `rank` posts `item`, waits until every rank has posted, and returns all posts in rank order.
  // The posts stay valid until that rank's matching finish().
  struct Post {
    const void* data = nullptr;
    std::vector<int64_t> counts;
  };
  std::vector<Post> exchange(int rank, Post item);
  // The second barrier of a collective: after it, posted memory may change again.
  void finish();

 private:
  void wait_for_all();  // a reusable barrier that throws once aborted

  const int size_;
  std::mutex mutex_;
  std::condition_variable changed_;
  int arrived_ = 0;
  uint64_t generation_ = 0;
  bool aborted_ = false;
  std::vector<Post> posts_;
};

class LocalCommunicator final : public Communicator {
 public:
  LocalCommunicator(std::shared_ptr<LocalGroup> group, int rank) : group_(std::move(group)), rank_(rank) {}
  int rank() const override { return rank_; }
  int size() const override { return group_->size(); }

  void all_reduce_sum(Tensor& x) override;
  Tensor all_gather_rows(const Tensor& x, std::span<const int64_t> rows) override;
  Tensor all_to_all_rows(const Tensor& x, std::span<const int64_t> send_rows,
                         std::span<const int64_t> recv_rows) override;
  std::vector<int64_t> all_gather_counts(std::span<const int64_t> values) override;
  void abort() override { group_->abort(); }

 private:
  std::shared_ptr<LocalGroup> group_;
  int rank_;
};

// The `size` communicators of one new group, rank r at index r.
std::vector<std::unique_ptr<Communicator>> make_local_group(int size);

}  // namespace dsinfer::parallel
