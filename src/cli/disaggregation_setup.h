// What `dsinfer serve --disaggregation-mode prefill|decode` adds to a server (issue 14): the engine's
// DisaggregationConfig (its UCX agent, timeouts, layer-wise threshold, a decode instance's announce
// through server::KvBootstrapClient), and a prefill instance's bootstrap listener
// (server::KvBootstrapServer), bound before the model loads so that /server_info can name its port,
// and handing destinations to the engine once attached.
#pragma once

#include <atomic>
#include <cstdint>
#include <memory>
#include <string>

#include "cli/disaggregation_flags.h"
#include "runtime/engine.h"
#include "server/bootstrap_fields.h"
#include "server/kv_bootstrap.h"

namespace dsinfer::cli {

class DisaggregationSetup {
 public:
  // A prefill instance listens on host:settings.bootstrap_port at once (a destination before
  // attach() gets a 400 saying the instance is loading).
  DisaggregationSetup(const DisaggregationSettings& settings, const std::string& host);
  ~DisaggregationSetup();

  server::InstanceRole role() const;
  uint16_t bootstrap_port() const;  // a prefill instance's bound port; 0 for the others

  // The engine's settings.
  runtime::DisaggregationConfig engine_config() const;

  // Destinations go to `engine` from now on; detach() before the engine goes.
  void attach(runtime::Engine& engine);
  void detach();

 private:
  DisaggregationSettings settings_;
  std::atomic<runtime::Engine*> engine_{nullptr};
  std::unique_ptr<server::KvBootstrapServer> listener_;
  std::shared_ptr<server::KvBootstrapClient> client_;
};

}  // namespace dsinfer::cli
