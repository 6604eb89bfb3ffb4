// Reads a model's weights out of a checkpoint in the form the backend computes with.
//
// Linear weights stay in their stored dtype when the backend takes it directly (bf16 and f32 are
// used straight from the mmap on the CPU, no copy); FP8 blocks and f16 become float32. Small
// vectors (norm weights, router bias) are always float32.
#pragma once

#include <string>
#include <string_view>

#include "backend/backend.h"
#include "io/checkpoint.h"
#include "io/model_config.h"

namespace dsinfer::model {

class WeightLoader {
 public:
  WeightLoader(const io::Checkpoint& checkpoint, const io::ModelConfig& config, backend::Backend& backend)
      : checkpoint_(checkpoint), config_(config), backend_(backend) {}

  // [N, K] weight of a linear layer, bf16 or f32, on the backend's device.
  Tensor linear(const std::string& name) const;
  // Two linear weights stacked along N: [N_a + N_b, K] (the gate and up projections of an MLP).
  Tensor stacked(const std::string& first, const std::string& second) const;
  // Any tensor as float32 on the device.
  Tensor f32(const std::string& name) const;
  // Any tensor as float32 on the host, for load-time rearrangement.
  Tensor host_f32(const std::string& name) const;
  bool contains(const std::string& name) const { return checkpoint_.contains(name); }
  // Throws unless the tensor has the expected shape: "CHECKPOINT: NAME has shape [..], expected [..]".
  void expect_shape(const std::string& name, Shape expected) const;

  backend::Backend& backend() const { return backend_; }
  const io::ModelConfig& config() const { return config_; }

 private:
  const io::Checkpoint& checkpoint_;
  const io::ModelConfig& config_;
  backend::Backend& backend_;
};

}  // namespace dsinfer::model
