// safetensors: an 8-byte little-endian header length, a JSON header, then the tensor bytes.
//
// The header is untrusted input: parse_safetensors_header checks every field (dtype names, shapes,
// offsets inside the data region, no two tensors overlapping, element count matching the byte
// count) and throws dsinfer::Error naming the file and the tensor. It is the libFuzzer target.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "core/dtype.h"
#include "core/file.h"
#include "core/tensor.h"

namespace dsinfer::io {

struct TensorInfo {
  std::string name;
  DType dtype = DType::kF32;
  Shape shape;
  size_t offset = 0;  // bytes from the start of the data region
  size_t nbytes = 0;
};

struct SafetensorsHeader {
  std::vector<TensorInfo> tensors;             // in header order
  std::map<std::string, std::string> metadata;  // the optional "__metadata__" object
  size_t data_start = 0;                        // file offset of the data region
};

// Parses and validates the header of a whole safetensors file held in memory (file_size bytes at
// data). `source` names the file in error messages.
SafetensorsHeader parse_safetensors_header(const unsigned char* data, size_t file_size,
                                           std::string_view source);

// One mmap'd safetensors file.
class SafetensorsFile {
 public:
  explicit SafetensorsFile(const std::string& path);  // throws dsinfer::Error naming the path

  const std::string& path() const { return file_->path(); }
  const std::vector<TensorInfo>& tensors() const { return header_.tensors; }
  const std::map<std::string, std::string>& metadata() const { return header_.metadata; }
  const TensorInfo* find(std::string_view name) const;
  // A CPU tensor viewing the mapped bytes (kept alive by the tensor). The mapping is read-only:
  // writing through the view faults. Views are aligned for their dtype: the format does not require
  // it, so a tensor the file stores at a misaligned offset (no published checkpoint does) comes back
  // as an aligned copy instead of a view.
  Tensor tensor(const TensorInfo& info) const;

 private:
  std::shared_ptr<MappedFile> file_;
  SafetensorsHeader header_;
  std::map<std::string, size_t, std::less<>> index_;  // name -> position in header_.tensors
};

}  // namespace dsinfer::io
