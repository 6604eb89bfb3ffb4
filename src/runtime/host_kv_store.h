// HostKvStore: a KvStore in this process's host memory, bounded by a byte budget, least recently
// used page out first.
//
// The budget becomes slots of page_bytes() bytes in one block allocated at start (page-locked on a
// GPU, through Backend::allocate_host, so that copies to and from the device need not wait), and
// nothing is allocated afterwards. A key maps to its slot; the LRU order is a list of the held keys.
//
// Lending (KvStore::lend) is how the host tier fills it without a second copy: the device's copy
// lands in the slot, queued on the device's stream; the store only hands slots out and takes them
// back, and never reads or writes their bytes itself except in put. So on a GPU a slot's bytes may
// still be in flight while the store counts the page held: every reader is a copy queued after it.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <list>
#include <memory>
#include <unordered_map>
#include <vector>

#include "runtime/kv_store.h"

namespace dsinfer::runtime {

// Host memory of `bytes` bytes (Backend::allocate_host's signature).
using HostAllocator = std::function<std::shared_ptr<std::byte>(size_t bytes)>;

class HostKvStore final : public KvStore {
 public:
  // Room for capacity_bytes / page_bytes pages (possibly none), from `allocate` (plain memory when
  // it is empty).
  HostKvStore(int64_t page_bytes, int64_t capacity_bytes, const HostAllocator& allocate = {});

  int64_t page_bytes() const override { return page_bytes_; }
  int64_t capacity_pages() const { return capacity_pages_; }
  bool put(const PageKey& key, std::span<const std::byte> page) override;
  std::span<const std::byte> get(const PageKey& key) override;
  bool contains(const PageKey& key) const override { return slots_.contains(key); }
  KvStoreUsage usage() const override;
  void clear() override;
  std::span<std::byte> lend(const PageKey& key) override;

 private:
  std::byte* slot_data(int64_t slot) const { return memory_.get() + slot * page_bytes_; }

  int64_t page_bytes_;
  int64_t capacity_bytes_;
  int64_t capacity_pages_;
  std::shared_ptr<std::byte> memory_;  // capacity_pages_ slots
  std::list<PageKey> recent_;          // held keys, most recently used first
  struct Slot {
    int64_t index = 0;
    std::list<PageKey>::iterator in_recent;
  };
  std::unordered_map<PageKey, Slot, PageKeyHash> slots_;
  std::vector<int64_t> free_slots_;
};

}  // namespace dsinfer::runtime
