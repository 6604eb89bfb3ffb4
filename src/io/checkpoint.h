// A checkpoint directory: one model.safetensors, or shards listed by model.safetensors.index.json
// (its "weight_map" maps each tensor name to a shard file).
#pragma once

#include <map>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "io/safetensors.h"

namespace dsinfer::io {

class Checkpoint {
 public:
  // Opens DIR/model.safetensors.index.json when present, else DIR/model.safetensors, else every
  // DIR/*.safetensors. Throws dsinfer::Error naming the file at fault: a missing shard, a tensor the
  // index names but the shard lacks, a tensor present in two shards, or a malformed file.
  static Checkpoint open(const std::string& dir);

  const std::string& dir() const { return dir_; }
  std::vector<std::string> names() const;  // sorted
  bool contains(std::string_view name) const { return find(name) != nullptr; }
  const TensorInfo* find(std::string_view name) const;
  // Throws "DIR: tensor NAME is missing from the checkpoint".
  const TensorInfo& info(std::string_view name) const;
  // A CPU view of the stored bytes, in the stored dtype.
  Tensor tensor(std::string_view name) const;

 private:
  struct Entry {
    const TensorInfo* info;
    const SafetensorsFile* file;
  };
  const Entry* entry(std::string_view name) const;

  std::string dir_;
  std::vector<std::unique_ptr<SafetensorsFile>> files_;
  std::map<std::string, Entry, std::less<>> entries_;
};

}  // namespace dsinfer::io
