// The Transport port over TCP (IPv4 and IPv6), on one epoll reactor thread.
// Semantics are exactly those of core/runtime/transport.h:
// - bytes are delivered on the strand given to Conn::start(), in order;
// - send() is thread-safe and ignored after close()/abort();
// - close() flushes queued bytes, then ends both ways; abort() drops them;
// - the CloseHandler runs exactly once, always posted (never inside close()/abort()).
// Dropping the last reference to a Conn without close() aborts it; its handlers
// are then released without being called (their owner is gone).
// Host names other than IP literals are resolved synchronously in connect()/listen().
#pragma once

#include <chrono>
#include <memory>

#include "backends/verbs/tcp_conn.h"
#include "core/runtime/transport.h"

namespace rcxl::verbs {

class Reactor;

class TcpTransport final : public runtime::Transport {
 public:
  struct Options {
    // A connect that has not completed by then fails with kTimeout.
    runtime::Duration connect_timeout = std::chrono::seconds(10);
    // How each connection closes and how much it queues for a slow reader.
    TcpConnOptions conn;
  };

  TcpTransport() : TcpTransport(Options{}) {}
  explicit TcpTransport(Options options);
  // Ends every connection (their close handlers are posted) and joins the thread.
  ~TcpTransport() override;

  Result<std::unique_ptr<runtime::Listener>> listen(const runtime::Address& address,
                                                    runtime::Strand& strand,
                                                    AcceptHandler on_accept) override;
  void connect(const runtime::Address& address, runtime::Strand& strand,
               ConnectHandler on_connected) override;

 private:
  Options options_;
  std::shared_ptr<Reactor> reactor_;
};

}  // namespace rcxl::verbs
