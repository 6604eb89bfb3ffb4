// SGLang's prefill/decode fields of a request (what `dsinfer router`, SGLang Model Gateway and the
// routers written for SGLang workers add to the body they send to both instances):
//
//   bootstrap_host  the prefill instance's host          (string)
//   bootstrap_port  its bootstrap port (kv_bootstrap.h)  (integer, 1..65535)
//   bootstrap_room  the id shared by the request's two halves (integer >= 0, or a string of digits)
//
// A prefill instance computes the prompt and pushes its pages to the decode instance that names the
// same room; the decode instance posts its destination to host:port, then generates. A server that
// runs both phases refuses the fields (a router that thinks it is a prefill or decode instance must
// hear that it is not), and every server refuses vLLM's kv_transfer_params (its NIXL connector's
// protocol, not spoken here). Null reads as absent, as for every other field.
#pragma once

#include <cstdint>
#include <optional>
#include <string>

#include "core/json.h"
#include "runtime/request.h"

namespace dsinfer::server {

enum class InstanceRole : uint8_t { kBoth, kPrefill, kDecode };

struct BootstrapFields {
  std::string host;
  uint16_t port = 0;
  std::string room;  // decimal
  bool operator==(const BootstrapFields&) const = default;
};

// The request's fields, or none (an ordinary request: any instance may serve one). Throws a 400
// ProtocolError naming the field for fields on a server of both phases, a part of the three
// missing or malformed, or kv_transfer_params. `body` is the parsed request; anything but an
// object passes (the parser refuses it).
std::optional<BootstrapFields> bootstrap_fields(const Json& body, InstanceRole role);

// What the engine is asked: a prefill instance sends the room's pages, a decode instance receives
// them, announcing its destination to host:port.
runtime::KvHandoff kv_handoff(const BootstrapFields& fields, InstanceRole role);

// The refusal of a request with the fields that asks for more than one answer (n > 1, a batch of
// prompts): a room names one sequence.
void refuse_bootstrap_fanout(int64_t choices);

}  // namespace dsinfer::server
