#include "parallel/expert_dispatch.h"

#include <algorithm>

#include "core/error.h"

namespace dsinfer::parallel {

ExpertDispatch::ExpertDispatch(backend::Backend& backend, Communicator& world, const Tensor& x,
                               const backend::Routing& routing, int64_t slots_per_rank)
    : backend_(backend), world_(world), tokens_here_(x.dim(0)) {
  const int ranks = world.size();
  DSINFER_CHECK(slots_per_rank >= 1, "expert dispatch: ", slots_per_rank, " experts a rank");
  Tensor ids = backend.to_host(routing.expert_ids), weights = backend.to_host(routing.weights);  // [T, k]
  const int64_t T = tokens_here_, k = ids.dim(1);

  // The rows for each rank in rank order: the tokens with a choice it holds, in token order.
  std::vector<std::vector<int32_t>> rows_for(ranks);
  for (int64_t t = 0; t < T; ++t) {
    std::vector<bool> sent(ranks, false);
    for (int64_t j = 0; j < k; ++j) {
      const int64_t id = ids.data<int32_t>()[t * k + j];
      DSINFER_CHECK(id >= 0 && id < slots_per_rank * ranks, "expert dispatch: expert ", id, " of token ", t,
                    " is held by no rank (", ranks, " ranks of ", slots_per_rank, ")");
      const auto owner = static_cast<int>(id / slots_per_rank);
      if (!sent[owner]) rows_for[owner].push_back(static_cast<int32_t>(t));
      sent[owner] = true;
    }
  }
  for (const auto& rows : rows_for) {
    send_rows_.push_back(static_cast<int64_t>(rows.size()));
    sent_token_.insert(sent_token_.end(), rows.begin(), rows.end());
  }
  // Row counts go round first: rank j receives from rank i what i sends to j.
  const std::vector<int64_t> counts = world.all_gather_counts(send_rows_);  // [ranks x ranks], by sender
  for (int i = 0; i < ranks; ++i) recv_rows_.push_back(counts[static_cast<size_t>(i) * ranks + world.rank()]);

  // Each row sent carries its token's whole routing: the receiver's stack skips what it does not hold.
  const auto sent = static_cast<int64_t>(sent_token_.size());
  Tensor sent_ids = Tensor::empty(DType::kI32, {sent, k}), sent_weights = Tensor::empty(DType::kF32, {sent, k});
  for (int64_t r = 0; r < sent; ++r) {
    std::copy_n(ids.data<int32_t>() + sent_token_[r] * k, k, sent_ids.data<int32_t>() + r * k);
    std::copy_n(weights.data<float>() + sent_token_[r] * k, k, sent_weights.data<float>() + r * k);
  }
  tokens_ = world.all_to_all_rows(backend.gather_rows(x, sent_token_), send_rows_, recv_rows_);
  routing_.expert_ids = world.all_to_all_rows(backend.to_device(sent_ids), send_rows_, recv_rows_);
  routing_.weights = world.all_to_all_rows(backend.to_device(sent_weights), send_rows_, recv_rows_);
}

Tensor ExpertDispatch::combine(const Tensor& expert_out) const {
  DSINFER_CHECK(expert_out.rank() == 2 && expert_out.dim(0) == tokens_.dim(0), "expert combine: ",
                expert_out.shape().to_string(), " for ", tokens_.dim(0), " received rows");
  const int64_t hidden = expert_out.dim(1);
  Tensor back = world_.all_to_all_rows(expert_out, recv_rows_, send_rows_);  // [sum send_rows, hidden]
  // Rank j's rows hold distinct tokens: scatter them through a trailing zero row, one rank at a time.
  Tensor padded = backend_.concat_rows(back, backend_.empty(back.dtype(), {1, hidden}));
  const auto zero_row = static_cast<int32_t>(back.dim(0));
  Tensor out;
  int64_t first = 0;
  for (size_t j = 0; j < send_rows_.size(); ++j) {
    if (send_rows_[j] == 0) continue;
    std::vector<int32_t> source(static_cast<size_t>(tokens_here_), zero_row);
    for (int64_t r = first; r < first + send_rows_[j]; ++r) source[sent_token_[r]] = static_cast<int32_t>(r);
    Tensor part = backend_.gather_rows(padded, source);  // [T, hidden]
    if (out.defined()) {
      backend_.add_inplace(out, part);
    } else {
      out = part;
    }
    first += send_rows_[j];
  }
  return out.defined() ? out : backend_.empty(expert_out.dtype(), {tokens_here_, hidden});
}

}  // namespace dsinfer::parallel
