#include "server/disconnect_relay.h"

#include <utility>

namespace dsinfer::server {

DisconnectRelay::DisconnectRelay(std::shared_ptr<HttpResponder> inner) : inner_(std::move(inner)) {
  // The transport keeps this callback, so it holds the state, never the relay (which holds the
  // transport's responder).
  inner_->on_disconnect([state = state_] {
    std::function<void()> callback;
    {
      std::lock_guard lock(state->mutex);
      state->lost = true;
      callback = std::exchange(state->callback, nullptr);
    }
    if (callback) callback();  // outside the lock: it may take locks of its own
  });
}

void DisconnectRelay::on_disconnect(std::function<void()> callback) {
  {
    std::lock_guard lock(state_->mutex);
    if (!state_->lost) {
      state_->callback = std::move(callback);
      return;
    }
  }
  callback();
}

}  // namespace dsinfer::server
