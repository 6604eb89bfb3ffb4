// GrammarCache: compiled grammars by spec, least recently used first out, within a byte budget.
//
// An entry is a shared future, so that a spec asked for twice while it compiles is compiled once:
// the first caller gets a promise to fulfil (a miss), later callers the same future (a hit). Only
// finished entries count against the budget and may be evicted; a failed compile is forgotten,
// so a bad spec is not remembered as bad. Thread-safe.
#pragma once

#include <cstddef>
#include <cstdint>
#include <future>
#include <list>
#include <memory>
#include <mutex>
#include <string>
#include <unordered_map>

#include "structured/compiled_grammar.h"

namespace dsinfer::structured {

struct GrammarCacheStats {
  int64_t hits = 0;
  int64_t misses = 0;
  int64_t evictions = 0;
  size_t entries = 0;  // finished and in flight
  size_t bytes = 0;    // of the finished ones
};

class GrammarCache {
 public:
  using Future = std::shared_future<CompiledGrammarPtr>;
  using Promise = std::promise<CompiledGrammarPtr>;

  struct Lookup {
    Future future;
    std::shared_ptr<Promise> promise;  // set on a miss: the caller compiles and fulfils it
  };

  explicit GrammarCache(size_t capacity_bytes) : capacity_bytes_(capacity_bytes) {}

  Lookup find_or_reserve(const std::string& key);
  // After a miss's promise got its value: counts its bytes and evicts the least recently used
  // finished entries beyond the budget (never the newest one: a grammar larger than the budget
  // still serves its requests).
  void finished(const std::string& key, size_t bytes);
  // After a miss's promise got an exception.
  void forget(const std::string& key);

  GrammarCacheStats stats() const;

 private:
  struct Entry {
    Future future;
    size_t bytes = 0;
    bool done = false;
    std::list<std::string>::iterator recency;  // position in recency_
  };

  const size_t capacity_bytes_;
  mutable std::mutex mutex_;
  std::unordered_map<std::string, Entry> entries_;
  std::list<std::string> recency_;  // most recently used first
  GrammarCacheStats stats_;
};

}  // namespace dsinfer::structured
