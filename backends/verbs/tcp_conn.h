// One TCP connection of TcpTransport (internal). ConnState owns the socket and
// lives on the reactor thread; TcpConn is the handle core holds. Strand tasks and
// reactor commands hold the state by shared_ptr, so a handle may die at any time.
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>

#include "backends/verbs/reactor.h"
#include "backends/verbs/thread_strand.h"
#include "core/runtime/transport.h"

namespace rcxl::verbs {

struct TcpConnOptions {
  // How long close() may take to flush and see the peer's end before a reset.
  runtime::Duration close_linger = std::chrono::seconds(5);
  // Bytes still queued for a peer that does not read them: a send while more
  // than this waits resets the connection, rather than growing it without end.
  std::size_t max_unsent_bytes = std::size_t{64} << 20;
  // Bytes read but not yet taken by the data handler (its strand is busy):
  // past this the socket is not read until they fall to half, so a peer that
  // sends faster than it is served is held back by TCP, not by our memory.
  std::size_t max_undelivered_bytes = std::size_t{4} << 20;
  // A peer whose host died (power, crash, a cut cable) sends no FIN, and a
  // server that only answers never writes: after `keepalive_idle` of silence
  // the kernel probes every `keepalive_interval`, and the connection ends
  // (SPEC R6.6: its holds and hints go) once probes or data have gone
  // unanswered for idle + interval x probes (TCP_USER_TIMEOUT).
  runtime::Duration keepalive_idle = std::chrono::seconds(30);
  runtime::Duration keepalive_interval = std::chrono::seconds(10);
  int keepalive_probes = 3;
};

class ConnState final : public Reactor::Handler, public std::enable_shared_from_this<ConnState> {
 public:
  // Reactor thread: takes a connected non-blocking socket and starts reading it.
  static std::shared_ptr<ConnState> Adopt(const std::shared_ptr<Reactor>& reactor, int fd,
                                          TcpConnOptions options);
  ~ConnState() override;

  std::uint64_t id() const { return id_; }
  const runtime::Address& local() const { return local_; }
  const runtime::Address& peer() const { return peer_; }

  // --- any thread (the Conn interface)
  void start(runtime::Strand& strand, runtime::Conn::DataHandler on_data,
             runtime::Conn::CloseHandler on_close);
  void send(std::string bytes);
  void close();
  void abort();
  void set_reading(bool on);
  void set_input_end_handler(runtime::Conn::InputEndHandler on_input_end);
  // The last handle is gone: abort, and never call the handlers.
  void release();

  // --- reactor thread
  void on_events(std::uint32_t events) override;
  void on_stop() override;

 private:
  enum class Phase { kOpen, kFlushing, kLingering, kDone };

  ConnState(const std::shared_ptr<Reactor>& reactor, int fd, TcpConnOptions options);
  void begin_delivery();
  void read_some(bool ending);
  bool reading() const;
  void update_interest();
  void deliver(std::string bytes);
  void post_data(std::string bytes);
  // Strand: the data handler took `n` bytes.
  void delivered(std::size_t n);
  void recheck_undelivered();
  void queue_bytes(const std::string& bytes);
  void flush();
  void begin_close();
  void finish_close();
  void reset(const char* why);
  void end(const Status& why);
  void post_close(const Status& why);
  // The peer's FIN with a half-close handler: tell the strand.
  void input_ended();
  void close_fd();
  void watch_writable(bool on);

  // Immutable after construction.
  std::weak_ptr<Reactor> reactor_;
  Reactor* loop_;  // reactor-thread calls only, while the reactor runs
  const std::uint64_t id_;
  const runtime::Address local_;
  const runtime::Address peer_;
  const TcpConnOptions options_;

  // Any thread.
  std::atomic<bool> user_ended_{false};  // close/abort/release called: sends are ignored
  std::atomic<bool> aborted_{false};     // deliver no more data
  std::atomic<bool> released_{false};    // call no handler
  std::atomic<bool> start_called_{false};
  // Read but not yet taken by the data handler; the reactor adds, the strand subtracts.
  std::atomic<std::size_t> undelivered_{0};
  std::atomic<bool> held_back_{false};      // reading stopped for undelivered_
  std::atomic<bool> recheck_asked_{false};  // a recheck_undelivered is on its way

  // Set by start() before the reactor learns of it; then strand-only.
  StrandPoster post_;
  runtime::Conn::DataHandler on_data_;
  runtime::Conn::CloseHandler on_close_;
  runtime::Conn::InputEndHandler on_input_end_;
  std::atomic<bool> half_close_{false};  // on_input_end_ is set

  // Reactor thread only.
  int fd_;
  std::uint64_t registration_ = 0;
  Phase phase_ = Phase::kOpen;
  bool started_ = false;
  bool ended_ = false;
  bool watching_writable_ = false;
  bool user_reading_ = true;         // set_reading
  bool input_ended_ = false;         // the peer's FIN came, and it may still read
  bool early_input_end_ = false;     // ... before start
  std::string early_;                // bytes read before start
  std::optional<Status> early_end_;  // end seen before start
  std::string out_;                  // bytes queued for the socket
  std::size_t out_sent_ = 0;
  std::optional<Reactor::TimerKey> linger_timer_;
};

class TcpConn final : public runtime::Conn {
 public:
  explicit TcpConn(std::shared_ptr<ConnState> state) : state_(std::move(state)) {}
  ~TcpConn() override { state_->release(); }

  std::uint64_t id() const override { return state_->id(); }
  runtime::Address peer() const override { return state_->peer(); }
  runtime::Address local() const override { return state_->local(); }
  void start(runtime::Strand& strand, DataHandler on_data, CloseHandler on_close) override {
    state_->start(strand, std::move(on_data), std::move(on_close));
  }
  void send(std::string bytes) override { state_->send(std::move(bytes)); }
  void close() override { state_->close(); }
  void abort() override { state_->abort(); }
  void set_reading(bool on) override { state_->set_reading(on); }
  void set_input_end_handler(InputEndHandler h) override {
    state_->set_input_end_handler(std::move(h));
  }

 private:
  std::shared_ptr<ConnState> state_;
};

}  // namespace rcxl::verbs
