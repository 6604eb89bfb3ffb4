// One request out of bytes through Beast's parser (see http_parse.h).
#include "http/http_parse.h"

#include <optional>
#include <string>

#include <boost/asio/buffer.hpp>
#include <boost/beast/core/string.hpp>
#include <boost/beast/http/error.hpp>
#include <boost/beast/http/parser.hpp>
#include <boost/beast/http/string_body.hpp>

#include "core/error.h"

namespace dsinfer::server {

namespace http = boost::beast::http;

struct RequestParser::Beast {
  http::request_parser<http::string_body> parser;
  size_t max_body_bytes;
};

RequestParser::RequestParser(size_t max_body_bytes) : beast_(std::make_unique<Beast>()) {
  beast_->parser.body_limit(max_body_bytes);
  beast_->max_body_bytes = max_body_bytes;
}

RequestParser::~RequestParser() = default;

RequestParser::Step RequestParser::parse(std::string_view bytes) {
  DSINFER_CHECK(!spent_, "RequestParser::parse called after the request was complete or refused");
  auto& parser = beast_->parser;
  size_t used = 0;
  const auto refuse = [&](int status, std::string message) {
    spent_ = true;
    problem_ = HeadProblem{status, std::move(message)};
    return Step{Event::kRefused, used};
  };
  for (;;) {
    // A request without a body is done with its head: its kRequest comes on the next call.
    if (head_done_ && parser.is_done()) {
      spent_ = true;
      request_.body = std::move(parser.get().body());
      return Step{Event::kRequest, used};
    }
    if (used == bytes.size()) return Step{Event::kNeedMore, used};
    boost::beast::error_code ec;
    const size_t taken = parser.put(boost::asio::const_buffer(bytes.data() + used, bytes.size() - used), ec);
    used += taken;
    if (ec == http::error::need_more) return Step{Event::kNeedMore, used};
    if (ec == http::error::body_limit) {
      return refuse(413, str_cat("the request body is larger than the limit of ", beast_->max_body_bytes, " bytes"));
    }
    if (ec == http::error::header_limit) return refuse(431, "the request headers are too large");
    if (ec) return refuse(400, str_cat("malformed HTTP request: ", ec.message()));
    if (!head_done_ && parser.is_header_done()) {
      head_done_ = true;
      const auto& message = parser.get();
      request_.method = std::string(message.method_string());
      request_.target = std::string(message.target());
      request_.version = static_cast<int>(message.version());
      for (const auto& field : message) {
        request_.headers.emplace_back(std::string(field.name_string()), std::string(field.value()));
      }
      if (std::optional<HeadProblem> problem = check_request_head(request_)) {
        return refuse(problem->status, std::move(problem->message));
      }
      return Step{Event::kHead, used};
    }
    if (taken == 0 && !parser.is_done()) return Step{Event::kNeedMore, used};
  }
}

bool RequestParser::keep_alive() const { return beast_->parser.keep_alive(); }

bool RequestParser::expects_continue() const {
  const auto& parser = beast_->parser;
  return head_done_ && !parser.is_done() && request_.version >= 11 &&
         boost::beast::iequals(parser.get()[http::field::expect], "100-continue");
}

}  // namespace dsinfer::server
