#include "cli/disaggregation_flags.h"

#include <limits>

#include "core/error.h"
#include "core/strings.h"

namespace dsinfer::cli {

void add_disaggregation_flags(Flags& flags) {
  flags.add_string("disaggregation-mode", "MODE", "prefill/decode disaggregation: this instance's role, null (both "
                   "phases), prefill or decode (behind `dsinfer router` or a PD gateway)", false, "null");
  flags.add_int("disaggregation-bootstrap-port", "a prefill instance's control-plane port, where decode instances "
                "hand over the pages they allocated for a request (0: any free port, shown in /server_info)", 8998);
  flags.add_string("disaggregation-transfer-backend", "NAME", "how KV pages move between instances: ucx (CUDA IPC, "
                   "RDMA, TCP and shared memory, as UCX finds them)", false, "ucx");
  flags.add_string("disaggregation-ib-device", "DEVICES", "the RDMA devices the KV transfer may use, comma-separated "
                   "(UCX_NET_DEVICES; default: UCX's choice)");
  flags.add_string("disaggregation-ucx-transports", "TLS", "UCX's transports for KV pages, UCX_TLS's syntax (e.g. "
                   "tcp, or cuda_ipc,cuda_copy,tcp; default: UCX's choice)");
  flags.add_count("disaggregation-layerwise-threshold", "prompt tokens from which a prefill instance sends the KV "
                  "layer by layer while the later layers compute (shorter prompts: whole, after the prefill)", 8192);
  flags.add_int("disaggregation-bootstrap-timeout", "seconds a prefill instance waits for a request's destination, "
                "and a decode instance for its pages, before failing the request", 30);
  constexpr double kNoMax = std::numeric_limits<double>::infinity();
  flags.set_range("disaggregation-bootstrap-port", 0, 65535);
  flags.set_range("disaggregation-layerwise-threshold", 1, kNoMax);
  flags.set_range("disaggregation-bootstrap-timeout", 1, 86400);
}

const char* disaggregation_role_name(DisaggregationRole role) {
  switch (role) {
    case DisaggregationRole::kPrefill: return "prefill";
    case DisaggregationRole::kDecode: return "decode";
    case DisaggregationRole::kNone: break;
  }
  return "null";
}

DisaggregationSettings disaggregation_settings(const Flags& flags) {
  DisaggregationSettings settings;
  const std::string mode = flags.get_string("disaggregation-mode");
  if (mode == "prefill") {
    settings.role = DisaggregationRole::kPrefill;
  } else if (mode == "decode") {
    settings.role = DisaggregationRole::kDecode;
  } else {
    DSINFER_CHECK(mode == "null" || mode.empty(), "--disaggregation-mode '", mode,
                  "' is not known: null (both phases), prefill or decode");
  }
  const std::string backend = flags.get_string("disaggregation-transfer-backend");
  DSINFER_CHECK(backend == "ucx", "--disaggregation-transfer-backend ", backend, " is not available: dsinfer moves KV "
                "pages with UCX (ucx), whose transports cover CUDA IPC, RDMA (verbs), TCP and shared memory");
  settings.bootstrap_port = static_cast<uint16_t>(flags.get_int("disaggregation-bootstrap-port"));
  settings.ib_devices = flags.get_string("disaggregation-ib-device");
  for (const std::string& transport : split(flags.get_string("disaggregation-ucx-transports"), ','))
    if (!trim(transport).empty()) settings.ucx_transports.emplace_back(trim(transport));
  settings.layerwise_threshold = flags.get_int("disaggregation-layerwise-threshold");
  settings.bootstrap_timeout = std::chrono::milliseconds(flags.get_int("disaggregation-bootstrap-timeout") * 1000);
  if (settings.role == DisaggregationRole::kNone) {
    for (const char* name : {"disaggregation-bootstrap-port", "disaggregation-ib-device", "disaggregation-ucx-transports",
                             "disaggregation-layerwise-threshold", "disaggregation-bootstrap-timeout"})
      DSINFER_CHECK(!flags.given(name), "--", name, " is given, but this instance runs both phases: give "
                    "--disaggregation-mode prefill or decode, or leave it out");
  }
  return settings;
}

}  // namespace dsinfer::cli
