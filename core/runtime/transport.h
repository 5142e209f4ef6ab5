// Transport port: reliable, ordered byte streams (TCP; simulated links in sim).
// Framing lives in core/protocol so both runtimes share it byte for byte.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <string_view>

#include "core/runtime/status.h"
#include "core/runtime/strand.h"

namespace rcxl::runtime {

// host is an IP/name (thread runtime) or a node name (sim).
struct Address {
  std::string host;
  std::uint16_t port = 0;

  // "HOST:PORT", IPv6 as "[::1]:PORT" (what Parse reads back).
  std::string ToString() const {
    const std::string port_text = ":" + std::to_string(port);
    return host.find(':') == std::string::npos ? host + port_text : "[" + host + "]" + port_text;
  }
  bool operator==(const Address&) const = default;
  // "HOST:PORT" (IPv6 as "[::1]:PORT").
  static Result<Address> Parse(std::string_view text);
  // 127.0.0.0/8, ::1 and "localhost".
  bool is_loopback() const;
};

class Conn {
 public:
  using DataHandler = std::function<void(std::string_view bytes)>;
  // Called once, when the stream ends for any reason (peer close, abort, error).
  using CloseHandler = std::function<void(const Status& reason)>;
  // The peer ended its sending (a half-close: TCP FIN) while it may still read.
  using InputEndHandler = std::function<void()>;

  virtual ~Conn() = default;
  // Unique among this transport's connections.
  virtual std::uint64_t id() const = 0;
  virtual Address peer() const = 0;
  virtual Address local() const = 0;
  // Starts delivery: handlers run on `strand`. Call once.
  virtual void start(Strand& strand, DataHandler on_data, CloseHandler on_close) = 0;
  // Optional, before start(): when the peer ends its sending, `on_input_end`
  // runs on the strand after the bytes it sent, and the stream stays open for
  // send() until close()/abort() or an error; without it the peer's end ends
  // the stream (CloseHandler). A transport without half-close (the sim's:
  // its Conn can only close both ways) never calls it.
  virtual void set_input_end_handler(InputEndHandler on_input_end) = 0;
  // Thread-safe; bytes arrive in order. Ignored after close/abort.
  virtual void send(std::string bytes) = 0;
  // Delivers what was sent, then ends the stream both ways.
  virtual void close() = 0;
  // Ends the stream now; unsent bytes are dropped.
  virtual void abort() = 0;
  // Stops (false) or resumes (true) reading; on by default. While off the peer
  // is held back by the stream's own flow control and its FIN waits behind
  // the bytes not read; bytes the transport had already read may still be
  // delivered, and a reset still ends the stream. Deliveries resume later,
  // never inside this call. Reading goes on while close() flushes. Call on
  // the connection's strand.
  virtual void set_reading(bool on) = 0;
};

class Listener {
 public:
  virtual ~Listener() = default;
  virtual Address address() const = 0;
  // Stops accepting; established connections stay.
  virtual void close() = 0;
};

class Transport {
 public:
  using AcceptHandler = std::function<void(std::shared_ptr<Conn> conn)>;
  using ConnectHandler = std::function<void(Result<std::shared_ptr<Conn>> conn)>;

  virtual ~Transport() = default;
  // New connections are handed to `on_accept` on `strand`. Port 0 picks a free port.
  // A failure's message names the address.
  virtual Result<std::unique_ptr<Listener>> listen(const Address& address, Strand& strand,
                                                   AcceptHandler on_accept) = 0;
  // `on_connected` runs on `strand` with the connection or the reason it failed.
  virtual void connect(const Address& address, Strand& strand, ConnectHandler on_connected) = 0;
};

}  // namespace rcxl::runtime
