// A request's cache pages from a "prefill" cache into a "decode" cache, both CPU latent caches, over
// UCX's TCP transport in one process.
#include "runtime/kv_page_transfer.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <cstring>
#include <memory>
#include <utility>
#include <vector>

#include "backend/backend.h"
#include "core/error.h"
#include "transfer/ucx_transfer.h"

namespace dsinfer::runtime {
namespace {

constexpr int64_t kLayers = 3, kPages = 16, kWidth = 576;
constexpr float kSentinel = -7.5f;

float* page(model::LatentCache& cache, int64_t layer, int64_t p) {
  return cache.layer(layer).data<float>() + p * model::kPageSize * kWidth;
}

struct Instances {
  std::unique_ptr<backend::Backend> backend = backend::make_cpu_backend();
  model::LatentCache prefill_cache{*backend, kLayers, kPages, kWidth, DType::kF32};
  model::LatentCache decode_cache{*backend, kLayers, kPages, kWidth, DType::kF32};
  std::unique_ptr<transfer::KvTransfer> prefill = transfer::make_ucx_transfer({"tcp"});
  std::unique_ptr<transfer::KvTransfer> decode = transfer::make_ucx_transfer({"tcp"});
  std::unique_ptr<CacheRegions> prefill_regions, decode_regions;
  std::unique_ptr<RemoteCache> remote;

  Instances() {
    for (int64_t layer = 0; layer < kLayers; ++layer) {
      float* source = prefill_cache.layer(layer).data<float>();
      float* target = decode_cache.layer(layer).data<float>();
      for (int64_t i = 0; i < kPages * model::kPageSize * kWidth; ++i) {
        source[i] = static_cast<float>(layer * 1000003 + i);
        target[i] = kSentinel;
      }
    }
    prefill_regions = std::make_unique<CacheRegions>(*prefill, prefill_cache);
    decode_regions = std::make_unique<CacheRegions>(*decode, decode_cache);
    // Through the control plane: the decode instance's address and its cache's description.
    remote = std::make_unique<RemoteCache>(*prefill, prefill->connect(decode->address()), decode_regions->describe());
  }

  // Polls both until every transfer is done and `want` notes have arrived (20 s at most).
  std::vector<transfer::Blob> finish(const std::vector<uint64_t>& transfers, size_t want) {
    std::vector<transfer::Blob> notes;
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(20);
    while (std::chrono::steady_clock::now() < deadline) {
      bool done = true;
      for (uint64_t t : transfers) {
        const transfer::TransferState state = prefill->poll(t);
        EXPECT_NE(state, transfer::TransferState::kFailed) << prefill->error(t);
        done = done && state == transfer::TransferState::kDone;
      }
      for (transfer::Blob& note : decode->take_notes()) notes.push_back(std::move(note));
      if (done && notes.size() >= want) break;
    }
    return notes;
  }

  bool same_page(int64_t layer, int64_t from, int64_t to) {
    return std::memcmp(page(prefill_cache, layer, from), page(decode_cache, layer, to),
                       model::kPageSize * kWidth * sizeof(float)) == 0;
  }
  bool untouched(int64_t layer, int64_t p) {
    const float* values = page(decode_cache, layer, p);
    for (int64_t i = 0; i < model::kPageSize * kWidth; ++i)
      if (values[i] != kSentinel) return false;
    return true;
  }
};

TEST(KvPageTransfer, MovesARequestsPagesIntoTheGivenPagesOfEveryLayerThenNotes) {
  Instances x;
  const std::vector<int32_t> from = {1, 2, 3, 7}, to = {10, 11, 12, 0};
  const std::vector<uint64_t> transfers =
      post_pages(*x.prefill, *x.prefill_regions, *x.remote, from, to, 0, kLayers, "request 5");
  EXPECT_EQ(transfers.size(), static_cast<size_t>(kLayers));
  const std::vector<transfer::Blob> notes = x.finish(transfers, 1);
  ASSERT_EQ(notes.size(), 1u) << "one note, on the last layer's transfer";
  EXPECT_EQ(notes[0], "request 5");
  for (int64_t layer = 0; layer < kLayers; ++layer)
    for (int64_t p = 0; p < kPages; ++p) {
      const auto it = std::find(to.begin(), to.end(), p);
      if (it == to.end())
        EXPECT_TRUE(x.untouched(layer, p)) << "layer " << layer << " page " << p;
      else
        EXPECT_TRUE(x.same_page(layer, from[it - to.begin()], p)) << "layer " << layer << " page " << p;
    }
}

TEST(KvPageTransfer, LayerWiseSendsNoteEachPart) {
  Instances x;
  const std::vector<int32_t> from = {4, 5}, to = {8, 9};
  std::vector<uint64_t> transfers = post_pages(*x.prefill, *x.prefill_regions, *x.remote, from, to, 0, 1, "layer 0");
  const std::vector<uint64_t> rest = post_pages(*x.prefill, *x.prefill_regions, *x.remote, from, to, 1, kLayers, "rest");
  transfers.insert(transfers.end(), rest.begin(), rest.end());
  const std::vector<transfer::Blob> notes = x.finish(transfers, 2);
  EXPECT_EQ(notes, (std::vector<transfer::Blob>{"layer 0", "rest"}));
  for (int64_t layer = 0; layer < kLayers; ++layer) EXPECT_TRUE(x.same_page(layer, 5, 9));
}

TEST(KvPageTransfer, RefusesBadPagesAndLayersWithNothingPosted) {
  Instances x;
  const std::vector<int32_t> one = {1};
  EXPECT_THROW(post_pages(*x.prefill, *x.prefill_regions, *x.remote, one, std::vector<int32_t>{kPages}, 0, kLayers, ""),
               Error);  // past the peer's pool
  EXPECT_THROW(post_pages(*x.prefill, *x.prefill_regions, *x.remote, std::vector<int32_t>{kPages}, one, 0, kLayers, ""),
               Error);  // past this cache
  EXPECT_THROW(post_pages(*x.prefill, *x.prefill_regions, *x.remote, one, std::vector<int32_t>{-1}, 0, kLayers, ""),
               Error);
  EXPECT_THROW(post_pages(*x.prefill, *x.prefill_regions, *x.remote, one, std::vector<int32_t>{2, 3}, 0, kLayers, ""),
               Error);  // counts differ
  EXPECT_THROW(post_pages(*x.prefill, *x.prefill_regions, *x.remote, one, one, 2, 2, ""), Error);
  EXPECT_THROW(post_pages(*x.prefill, *x.prefill_regions, *x.remote, one, one, 0, kLayers + 1, ""), Error);
  EXPECT_THROW(RemoteCache(*x.prefill, 0, x.decode_regions->describe().substr(0, 20)), Error);
  for (int i = 0; i < 50; ++i) EXPECT_TRUE(x.decode->take_notes().empty());
  for (int64_t layer = 0; layer < kLayers; ++layer)
    for (int64_t p = 0; p < kPages; ++p) EXPECT_TRUE(x.untouched(layer, p));
}

}  // namespace
}  // namespace dsinfer::runtime
