// How a step's failure reaches the engine, and what the engine does with it.
//
// Any exception out of StepExecutor::run or StepExecutor::sample (an op's dsinfer::Error, an
// allocation failure, a CUDA error the device survives) fails the requests of that step: each
// gets a last StreamOutput with FinishReason::kError and the message, its pages go back (to the
// pool, or to the prefix cache for pages computed before the step), and the engine serves on.
//
// FatalDeviceError says the device cannot run another step: a sticky CUDA error (illegal address,
// launch failure, ECC error, device lost). Executors throw it; the engine then fails every request
// in flight and waiting, refuses new ones (EngineUnavailable), reports Engine::healthy() false so
// that /health answers 503, and `dsinfer serve` exits with a message.
#pragma once

#include "core/error.h"

namespace dsinfer::runtime {

class FatalDeviceError : public Error {
 public:
  using Error::Error;
};

}  // namespace dsinfer::runtime
