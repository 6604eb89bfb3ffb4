// A look at the routed experts' inputs as the model runs, for `dsinfer quantize --awq`: AWQ searches
// each expert's per-input-channel scales on the rows that expert really sees (cli/awq_calibration.h).
// Serving never sets one; the MoE layer's normal path is unchanged but for one null check.
#pragma once

#include <cstdint>

#include "backend/backend.h"

namespace dsinfer::model {

class ExpertObserver {
 public:
  virtual ~ExpertObserver() = default;
  // Called by a MoE layer before its routed experts run (on the path that does not dispatch tokens to
  // other ranks). layer: the checkpoint layer (an MTP module's included); x [T, hidden] in the compute
  // dtype, on the backend's device: the rows the experts take; routing: the router's choices for them
  // (the stack's ids). Must not keep x or routing past the call.
  virtual void observe(int64_t layer, const Tensor& x, const backend::Routing& routing) = 0;
};

}  // namespace dsinfer::model
