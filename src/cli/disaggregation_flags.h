// The prefill/decode disaggregation flags of `dsinfer serve`, in SGLang's spelling where SGLang has
// one (a launch script written for SGLang's PD mode starts as it is, or is refused with the reason):
//
//   --disaggregation-mode null|prefill|decode     the instance's role (null: both phases, the default)
//   --disaggregation-bootstrap-port PORT          a prefill instance's control plane: decode instances
//                                                 hand it their KV destinations there (8998)
//   --disaggregation-transfer-backend ucx         the transport of KV pages; SGLang's mooncake, nixl
//                                                 and the others are refused with the reason
//   --disaggregation-ib-device DEV[,DEV]          the RDMA devices UCX may use (UCX_NET_DEVICES)
//   ours:
//   --disaggregation-ucx-transports TLS           UCX's transports (UCX_TLS's syntax: "tcp",
//                                                 "cuda_ipc,cuda_copy,tcp"; empty: UCX's own choice)
//   --disaggregation-layerwise-threshold TOKENS   prompts this long or longer are sent layer by layer
//                                                 while later layers compute (8192, seed 001's 8K)
//   --disaggregation-bootstrap-timeout SECONDS    how long a prefill instance waits for a request's
//                                                 destination and a decode instance for its pages (30)
//
// Every refusal is a dsinfer::Error naming the flag, before anything loads.
#pragma once

#include <chrono>
#include <cstdint>
#include <string>
#include <vector>

#include "cli/flags.h"

namespace dsinfer::cli {

void add_disaggregation_flags(Flags& flags);

enum class DisaggregationRole : uint8_t { kNone, kPrefill, kDecode };
const char* disaggregation_role_name(DisaggregationRole role);  // SGLang's words: "null", "prefill", "decode"

struct DisaggregationSettings {
  DisaggregationRole role = DisaggregationRole::kNone;
  uint16_t bootstrap_port = 8998;
  std::vector<std::string> ucx_transports;  // empty: UCX's own choice
  std::string ib_devices;                   // empty: UCX's own choice
  int64_t layerwise_threshold = 8192;
  std::chrono::milliseconds bootstrap_timeout{30'000};
};

// The settings the flags give. Throws dsinfer::Error for an unknown mode or transfer backend, or a
// transfer flag given to an instance that transfers nothing (mode null).
DisaggregationSettings disaggregation_settings(const Flags& flags);

}  // namespace dsinfer::cli
