// KvTransfer over UCX's UCP (pinned libucx-cu13 wheel, tools/setup_ucx.sh): one UCP context and
// worker an agent; memory registered with ucp_mem_map and described by its packed remote key; writes
// are ucp_put_nbx into the peer's memory, then an endpoint flush (these bytes and those of every
// earlier transfer to the peer have landed), then the note as an eager active message. UCX picks the transport (shared memory or TCP on one host,
// CUDA IPC between GPUs, InfiniBand verbs with a system UCX built for it).
#pragma once

#include <chrono>
#include <memory>
#include <string>

#include "transfer/kv_transfer.h"

namespace dsinfer::transfer {

struct UcxOptions {
  // UCX's transport list (its UCX_TLS syntax, e.g. "tcp" or "shm,tcp"); empty: UCX's default or the
  // environment's UCX_TLS.
  std::string transports;
  // A transfer still in flight this long after it was posted fails, and with it its peer: the
  // endpoint is closed (what it had in flight ends), every transfer to the peer fails, and new ones
  // need a new connect(). Zero: no limit.
  std::chrono::milliseconds transfer_timeout{0};
};

std::unique_ptr<KvTransfer> make_ucx_transfer(const UcxOptions& options = {});

}  // namespace dsinfer::transfer
