// A responder whose on_disconnect takes effect in the order it is called, whatever the thread.
//
// The transport's HttpResponder::on_disconnect posts each registration to the event loop, and the
// last one to arrive replaces the others. Two registrations from different threads can arrive in
// either order: one made on the loop itself waits in Asio's queue for that thread until the
// running handler returns, while one from a request thread goes straight into the shared queue.
// So the request thread's callback (abort the engine requests) could be replaced by the loop's
// earlier one (skip the preparation), and a client that left was never aborted. The relay registers
// one callback with the transport, once, and later registrations only replace the callback it
// relays to, under a lock: the last call wins, as written.
#pragma once

#include <functional>
#include <memory>
#include <mutex>
#include <string>

#include "http/http.h"

namespace dsinfer::server {

class DisconnectRelay final : public HttpResponder {
 public:
  explicit DisconnectRelay(std::shared_ptr<HttpResponder> inner);

  void respond(int status, std::string content_type, std::string body, Headers headers) override {
    inner_->respond(status, std::move(content_type), std::move(body), std::move(headers));
  }
  void start_stream(int status, std::string content_type, Headers headers) override {
    inner_->start_stream(status, std::move(content_type), std::move(headers));
  }
  void send_chunk(std::string data) override { inner_->send_chunk(std::move(data)); }
  void finish_stream() override { inner_->finish_stream(); }
  // Replaces the callback. If the client has left already, `callback` runs at once, on the calling
  // thread (else once, on the event loop, when it leaves).
  void on_disconnect(std::function<void()> callback) override;

 private:
  struct State {
    std::mutex mutex;
    bool lost = false;
    std::function<void()> callback;
  };

  std::shared_ptr<HttpResponder> inner_;
  std::shared_ptr<State> state_ = std::make_shared<State>();
};

}  // namespace dsinfer::server
