// The hot decode path for `extension` requests (read_hint & co., up to 4096
// ranges): simdjson on-demand straight from the frame text, no DOM.
//
// It only ever *accepts*: a frame it decodes is one that nlohmann + messages.cc
// accept with the same result (tests/agent/fast_decoder_test.cc checks this
// differentially). Anything else — another op, a bad field, bad JSON, a
// duplicate key, an escape it does not trust — answers nullopt and the caller
// takes the nlohmann path, which gives the error codes and messages. Errors are
// rare; valid hints are the hot path.
#pragma once

#include <cstddef>
#include <memory>
#include <optional>
#include <string>

#include "core/protocol/messages.h"

namespace rcxl::protocol {

// A request with its id, as parse_request_id + parse_request give them.
struct DecodedRequest {
  Json id;  // null or an unsigned integer
  Request request;
};

class FastRequestDecoder {
 public:
  FastRequestDecoder();
  ~FastRequestDecoder();
  FastRequestDecoder(const FastRequestDecoder&) = delete;
  FastRequestDecoder& operator=(const FastRequestDecoder&) = delete;

  // `frame` may grow capacity (simdjson reads padding past the end).
  std::optional<DecodedRequest> try_decode(std::string& frame);

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

// What a decoded request holds in memory (its ranges' capacity, handles and
// strings, with allocator overhead), for the agent's queue bound.
std::size_t held_bytes(const DecodedRequest& decoded);

// The reference decode the agent used before: nlohmann DOM, then
// parse_request_id + parse_request. A frame that is not a JSON object is the
// `bad_frame` status FramedConn answers. For tests and benchmarks.
Result<DecodedRequest> reference_decode(const std::string& frame);

}  // namespace rcxl::protocol
