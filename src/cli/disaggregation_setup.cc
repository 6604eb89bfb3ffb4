#include "cli/disaggregation_setup.h"

#include <cstdlib>
#include <utility>

#include "core/error.h"
#include "core/log.h"
#include "core/strings.h"
#include "runtime/disaggregation.h"
#include "transfer/ucx_transfer.h"

namespace dsinfer::cli {
namespace {

// "host:port" of a KvHandoff's peer.
std::pair<std::string, uint16_t> split_peer(const std::string& peer) {
  const size_t colon = peer.rfind(':');
  DSINFER_CHECK(colon != std::string::npos && colon > 0, "a prefill instance's bootstrap address '", peer,
                "' is not host:port");
  const int port = std::stoi(peer.substr(colon + 1));
  return {peer.substr(0, colon), static_cast<uint16_t>(port)};
}

}  // namespace

DisaggregationSetup::DisaggregationSetup(const DisaggregationSettings& settings, const std::string& host)
    : settings_(settings) {
  // UCX reads its device list from the environment, before any agent exists.
  if (!settings.ib_devices.empty()) setenv("UCX_NET_DEVICES", settings.ib_devices.c_str(), 1);
  if (settings.role == DisaggregationRole::kPrefill) {
    listener_ = std::make_unique<server::KvBootstrapServer>(host, settings.bootstrap_port, [this](std::string_view body) {
      runtime::Engine* engine = engine_.load();
      DSINFER_CHECK(engine != nullptr, "this prefill instance is still loading its model");
      engine->add_kv_destination(runtime::KvDestination::from_string(body));
    });
    listener_->start();
    log_info("prefill instance: KV destinations at ", host, ":", listener_->port(), " (bootstrap)");
  }
  if (settings.role == DisaggregationRole::kDecode) client_ = std::make_shared<server::KvBootstrapClient>();
}

DisaggregationSetup::~DisaggregationSetup() { detach(); }

server::InstanceRole DisaggregationSetup::role() const {
  switch (settings_.role) {
    case DisaggregationRole::kPrefill: return server::InstanceRole::kPrefill;
    case DisaggregationRole::kDecode: return server::InstanceRole::kDecode;
    case DisaggregationRole::kNone: break;
  }
  return server::InstanceRole::kBoth;
}

uint16_t DisaggregationSetup::bootstrap_port() const { return listener_ ? listener_->port() : 0; }

runtime::DisaggregationConfig DisaggregationSetup::engine_config() const {
  runtime::DisaggregationConfig config;
  switch (settings_.role) {
    case DisaggregationRole::kPrefill: config.mode = runtime::DisaggregationMode::kPrefill; break;
    case DisaggregationRole::kDecode: config.mode = runtime::DisaggregationMode::kDecode; break;
    case DisaggregationRole::kNone: return config;
  }
  config.bootstrap_timeout = settings_.bootstrap_timeout;
  // A stalled peer fails a push well before the request's own deadline.
  transfer::UcxOptions ucx;
  ucx.transports = join(settings_.ucx_transports, ",");
  ucx.transfer_timeout = settings_.bootstrap_timeout / 2;
  config.make_transfer = [ucx] { return transfer::make_ucx_transfer(ucx); };
  config.layerwise_threshold = settings_.layerwise_threshold;
  if (client_) {
    config.announce = [client = client_](const std::string& peer, const runtime::KvDestination& destination,
                                         std::function<void(std::string)> done) {
      std::pair<std::string, uint16_t> where;
      try {
        where = split_peer(peer);
      } catch (const Error& error) {
        return done(error.what());
      }
      client->post_destination(where.first, where.second, destination.to_string(), std::move(done));
    };
  }
  return config;
}

void DisaggregationSetup::attach(runtime::Engine& engine) { engine_.store(&engine); }

void DisaggregationSetup::detach() {
  engine_.store(nullptr);
  listener_.reset();  // joins its loop: no destination reaches the engine after this
}

}  // namespace dsinfer::cli
