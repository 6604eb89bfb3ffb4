#include "runtime/host_kv_store.h"

#include <cstring>

#include "core/error.h"

namespace dsinfer::runtime {

HostKvStore::HostKvStore(int64_t page_bytes, int64_t capacity_bytes, const HostAllocator& allocate)
    : page_bytes_(page_bytes),
      capacity_bytes_(capacity_bytes),
      capacity_pages_(page_bytes > 0 ? capacity_bytes / page_bytes : 0) {
  DSINFER_CHECK(page_bytes > 0 && capacity_bytes >= 0, "host KV store: pages of ", page_bytes, " bytes within ",
                capacity_bytes, " bytes");
  const int64_t slots = capacity_pages_;
  if (slots > 0) {
    const auto bytes = static_cast<size_t>(slots * page_bytes);
    // Not zeroed: a slot is read only after a page was written into it.
    memory_ = allocate ? allocate(bytes)
                       : std::shared_ptr<std::byte>(new std::byte[bytes], std::default_delete<std::byte[]>());
    DSINFER_CHECK(memory_ != nullptr, "host KV store: no host memory for ", bytes, " bytes");
  }
  free_slots_.reserve(static_cast<size_t>(slots));
  for (int64_t slot = slots - 1; slot >= 0; --slot) free_slots_.push_back(slot);
}

std::span<std::byte> HostKvStore::lend(const PageKey& key) {
  if (auto it = slots_.find(key); it != slots_.end()) {
    recent_.splice(recent_.begin(), recent_, it->second.in_recent);
    return {slot_data(it->second.index), static_cast<size_t>(page_bytes_)};
  }
  if (capacity_pages_ == 0) return {};
  int64_t slot = 0;
  if (!free_slots_.empty()) {
    slot = free_slots_.back();
    free_slots_.pop_back();
  } else {  // the least recently used page makes room
    auto oldest = slots_.find(recent_.back());
    slot = oldest->second.index;
    slots_.erase(oldest);
    recent_.pop_back();
  }
  recent_.push_front(key);
  slots_.emplace(key, Slot{slot, recent_.begin()});
  return {slot_data(slot), static_cast<size_t>(page_bytes_)};
}

bool HostKvStore::put(const PageKey& key, std::span<const std::byte> page) {
  DSINFER_CHECK(static_cast<int64_t>(page.size()) == page_bytes_, "host KV store: a page of ", page.size(),
                " bytes, not ", page_bytes_);
  const bool held = contains(key);
  std::span<std::byte> room = lend(key);
  if (room.empty()) return false;
  if (!held) std::memcpy(room.data(), page.data(), page.size());
  return true;
}

std::span<const std::byte> HostKvStore::get(const PageKey& key) {
  auto it = slots_.find(key);
  if (it == slots_.end()) return {};
  recent_.splice(recent_.begin(), recent_, it->second.in_recent);
  return {slot_data(it->second.index), static_cast<size_t>(page_bytes_)};
}

KvStoreUsage HostKvStore::usage() const {
  const auto pages = static_cast<int64_t>(slots_.size());
  return {pages, pages * page_bytes_, capacity_bytes_};
}

void HostKvStore::clear() {
  for (const auto& [key, slot] : slots_) free_slots_.push_back(slot.index);
  slots_.clear();
  recent_.clear();
}

}  // namespace dsinfer::runtime
