#include "runtime/kv_page_transfer.h"

#include <cstring>

#include "core/error.h"

namespace dsinfer::runtime {
namespace {

// A description: the page bytes, the layer count, then each layer's descriptor as its length and bytes.
void append_u64(transfer::Blob& blob, uint64_t value) { blob.append(reinterpret_cast<const char*>(&value), 8); }

uint64_t read_u64(const transfer::Blob& blob, size_t& at) {
  DSINFER_CHECK(at + 8 <= blob.size(), "KV pages: a cache description cut short (", blob.size(), " bytes)");
  uint64_t value = 0;
  std::memcpy(&value, blob.data() + at, 8);
  at += 8;
  return value;
}

}  // namespace

CacheRegions::CacheRegions(transfer::KvTransfer& agent, model::LatentCache& cache)
    : agent_(agent), pages_(cache.num_pages()) {
  DSINFER_CHECK(cache.num_layers() > 0 && pages_ > 0, "KV pages: an empty cache (", cache.num_layers(), " layers, ",
                pages_, " pages)");
  page_bytes_ = cache.layer(0).nbytes() / static_cast<uint64_t>(pages_);
  for (int64_t layer = 0; layer < cache.num_layers(); ++layer) {
    Tensor& tensor = cache.layer(layer);
    DSINFER_CHECK(tensor.nbytes() == page_bytes_ * static_cast<uint64_t>(pages_), "KV pages: layer ", layer, " holds ",
                  tensor.nbytes(), " bytes, not ", pages_, " pages of ", page_bytes_);
    // A GPU's cache is registered as device memory: between GPUs of one host it moves by CUDA IPC.
    const transfer::MemoryKind kind =
        tensor.device() == Device::kCpu ? transfer::MemoryKind::kHost : transfer::MemoryKind::kDevice;
    regions_.push_back(agent_.register_memory(tensor.raw(), tensor.nbytes(), kind));
  }
}

transfer::Blob CacheRegions::describe() const {
  transfer::Blob blob;
  append_u64(blob, page_bytes_);
  append_u64(blob, regions_.size());
  for (int region : regions_) {
    const transfer::Blob descriptor = agent_.describe(region);
    append_u64(blob, descriptor.size());
    blob += descriptor;
  }
  return blob;
}

RemoteCache::RemoteCache(transfer::KvTransfer& agent, int peer, const transfer::Blob& description) {
  size_t at = 0;
  page_bytes_ = read_u64(description, at);
  const uint64_t layers = read_u64(description, at);
  DSINFER_CHECK(page_bytes_ > 0 && layers > 0 && layers <= description.size(), "KV pages: a cache description of ",
                layers, " layers of ", page_bytes_, "-byte pages");
  for (uint64_t layer = 0; layer < layers; ++layer) {
    const uint64_t bytes = read_u64(description, at);
    DSINFER_CHECK(bytes <= description.size() - at, "KV pages: a cache description cut short in layer ", layer);
    regions_.push_back(agent.import(peer, description.substr(at, bytes)));
    at += bytes;
  }
  DSINFER_CHECK(at == description.size(), "KV pages: ", description.size() - at,
                " bytes after the cache description's last layer");
}

std::vector<uint64_t> post_pages(transfer::KvTransfer& agent, const CacheRegions& local, const RemoteCache& remote,
                                 std::span<const int32_t> from, std::span<const int32_t> to, int64_t first_layer,
                                 int64_t last_layer, const transfer::Blob& note) {
  DSINFER_CHECK(local.num_layers() == remote.num_layers() && local.page_bytes() == remote.page_bytes(),
                "KV pages: this cache has ", local.num_layers(), " layers of ", local.page_bytes(),
                "-byte pages, the peer's ", remote.num_layers(), " of ", remote.page_bytes());
  DSINFER_CHECK(0 <= first_layer && first_layer < last_layer && last_layer <= local.num_layers(), "KV pages: layers [",
                first_layer, ", ", last_layer, ") of ", local.num_layers());
  DSINFER_CHECK(from.size() == to.size(), "KV pages: ", from.size(), " pages to write into ", to.size());
  const uint64_t bytes = local.page_bytes();
  std::vector<transfer::Write> writes;
  for (size_t i = 0; i < from.size(); ++i) {
    DSINFER_CHECK(from[i] >= 0 && from[i] < local.num_pages(), "KV pages: page ", from[i], " is not in this cache of ",
                  local.num_pages(), " pages");
    DSINFER_CHECK(to[i] >= 0, "KV pages: the peer's page ", to[i]);  // its upper end: the region's bounds
    writes.push_back({static_cast<uint64_t>(from[i]) * bytes, static_cast<uint64_t>(to[i]) * bytes, bytes});
  }
  std::vector<uint64_t> transfers;
  for (int64_t layer = first_layer; layer < last_layer; ++layer)
    transfers.push_back(agent.post(local.region(layer), remote.region(layer), writes,
                                   layer + 1 == last_layer ? note : transfer::Blob()));
  return transfers;
}

uint64_t post_note(transfer::KvTransfer& agent, const CacheRegions& local, const RemoteCache& remote,
                   const transfer::Blob& note) {
  DSINFER_CHECK(!note.empty(), "KV pages: an empty note");
  return agent.post(local.region(0), remote.region(0), {}, note);
}

}  // namespace dsinfer::runtime
