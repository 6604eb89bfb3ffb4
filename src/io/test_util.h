// Helpers shared by the io tests: scratch directories, hand-made safetensors bytes, small tensors.
#pragma once

#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <string>
#include <string_view>
#include <vector>

#include "core/dtype.h"
#include "core/file.h"
#include "core/tensor.h"

namespace dsinfer::io::test_util {

// A fresh directory named after the running test, removed with its contents at the end.
class ScratchDir {
 public:
  ScratchDir() {
    const auto* test = ::testing::UnitTest::GetInstance()->current_test_info();
    std::string name = std::string(test->test_suite_name()) + "." + test->name();
    for (char& c : name)
      if (c == '/') c = '_';
    path_ = ::testing::TempDir() + "dsinfer_io_" + name + "_" + std::to_string(::getpid());
    std::filesystem::remove_all(path_);
    std::filesystem::create_directories(path_);
  }
  ~ScratchDir() { std::filesystem::remove_all(path_); }
  ScratchDir(const ScratchDir&) = delete;
  ScratchDir& operator=(const ScratchDir&) = delete;

  const std::string& path() const { return path_; }
  std::string file(std::string_view name) const { return path_ + "/" + std::string(name); }

 private:
  std::string path_;
};

// A whole safetensors file: the 8-byte little-endian length, `header` as given, data_size zero bytes.
inline std::string safetensors_bytes(std::string_view header, size_t data_size) {
  std::string bytes(8, '\0');
  for (int i = 0; i < 8; ++i) bytes[i] = static_cast<char>(static_cast<uint64_t>(header.size()) >> (8 * i));
  bytes += header;
  bytes.append(data_size, '\0');
  return bytes;
}

// A CPU tensor of `dtype` holding `values` (rounded to the dtype).
inline Tensor make_tensor(DType dtype, Shape shape, const std::vector<float>& values) {
  Tensor tensor = Tensor::empty(dtype, shape);
  for (size_t i = 0; i < values.size(); ++i) {
    switch (dtype) {
      case DType::kF32: tensor.data<float>()[i] = values[i]; break;
      case DType::kBF16: tensor.data<uint16_t>()[i] = f32_to_bf16(values[i]); break;
      case DType::kF16: tensor.data<uint16_t>()[i] = f32_to_f16(values[i]); break;
      case DType::kF8E4M3: tensor.data<uint8_t>()[i] = f32_to_fp8e4m3(values[i]); break;
      default: ADD_FAILURE() << "make_tensor: unsupported dtype"; return tensor;
    }
  }
  return tensor;
}

}  // namespace dsinfer::io::test_util
