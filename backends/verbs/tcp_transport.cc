#include "backends/verbs/tcp_transport.h"

#include <netinet/in.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstring>
#include <optional>
#include <vector>

#include "backends/verbs/reactor.h"
#include "backends/verbs/socket_address.h"
#include "backends/verbs/tcp_conn.h"
#include "backends/verbs/thread_strand.h"

namespace rcxl::verbs {
namespace {

using runtime::Address;

// How long accepting pauses when the process is out of fds (instead of spinning).
constexpr auto kAcceptBackoff = std::chrono::milliseconds(100);
constexpr int kAcceptsPerEvent = 64;

std::string errno_text(int error) {
  return std::strerror(error);
}

// The listening socket, on the reactor thread.
class ListenerState final : public Reactor::Handler,
                            public std::enable_shared_from_this<ListenerState> {
 public:
  ListenerState(const std::shared_ptr<Reactor>& reactor, int fd, runtime::Strand& strand,
                runtime::Transport::AcceptHandler on_accept, TcpConnOptions conn_options)
      : reactor_(reactor),
        loop_(reactor.get()),
        fd_(fd),
        post_(make_strand_poster(strand)),
        on_accept_(std::move(on_accept)),
        conn_options_(conn_options) {}
  ~ListenerState() override {
    if (fd_ >= 0) ::close(fd_);
  }

  // Any thread: no accept handler is called once this returns.
  bool mark_closed() { return !closed_.exchange(true); }

  // --- reactor thread
  void watch() {
    if (fd_ >= 0) registration_ = loop_->add(fd_, EPOLLIN, shared_from_this());
  }
  void close_fd() {
    if (fd_ < 0) return;
    if (registration_ != 0) loop_->remove(std::exchange(registration_, 0), fd_);
    ::close(fd_);
    fd_ = -1;
  }
  void on_events(std::uint32_t) override {
    auto reactor = reactor_.lock();
    for (int i = 0; i < kAcceptsPerEvent && fd_ >= 0 && reactor; ++i) {
      const int fd = ::accept4(fd_, nullptr, nullptr, SOCK_NONBLOCK | SOCK_CLOEXEC);
      if (fd < 0) {
        if (errno == EINTR || errno == ECONNABORTED) continue;
        if (errno != EAGAIN && errno != EWOULDBLOCK) pause();
        return;
      }
      auto conn = std::make_shared<TcpConn>(ConnState::Adopt(reactor, fd, conn_options_));
      post_([self = shared_from_this(), conn] {
        if (!self->closed_) self->on_accept_(conn);
      });
    }
  }
  void on_stop() override {
    registration_ = 0;
    close_fd();
  }

 private:
  // Out of fds or memory: stop watching for a moment instead of spinning.
  void pause() {
    loop_->modify(registration_, fd_, 0);
    std::weak_ptr<ListenerState> weak = shared_from_this();
    loop_->call_after(kAcceptBackoff, [weak] {
      auto self = weak.lock();
      if (self && self->fd_ >= 0) self->loop_->modify(self->registration_, self->fd_, EPOLLIN);
    });
  }

  std::weak_ptr<Reactor> reactor_;
  Reactor* loop_;
  int fd_;
  std::uint64_t registration_ = 0;
  StrandPoster post_;
  runtime::Transport::AcceptHandler on_accept_;
  TcpConnOptions conn_options_;
  std::atomic<bool> closed_{false};
};

class TcpListener final : public runtime::Listener {
 public:
  TcpListener(Address address, std::shared_ptr<ListenerState> state, std::weak_ptr<Reactor> reactor)
      : address_(std::move(address)), state_(std::move(state)), reactor_(std::move(reactor)) {}
  ~TcpListener() override { close(); }

  Address address() const override { return address_; }
  void close() override {
    if (!state_->mark_closed()) return;
    if (auto reactor = reactor_.lock()) reactor->run([state = state_] { state->close_fd(); });
  }

 private:
  Address address_;
  std::shared_ptr<ListenerState> state_;
  std::weak_ptr<Reactor> reactor_;
};

// A connect in progress, trying each resolved address in turn.
class Connector final : public Reactor::Handler, public std::enable_shared_from_this<Connector> {
 public:
  Connector(const std::shared_ptr<Reactor>& reactor, Address target,
            std::vector<SocketAddress> candidates, StrandPoster post,
            runtime::Transport::ConnectHandler done, const TcpTransport::Options& options)
      : reactor_(reactor),
        loop_(reactor.get()),
        target_(std::move(target)),
        candidates_(std::move(candidates)),
        post_(std::move(post)),
        done_(std::move(done)),
        options_(options) {}
  ~Connector() override {
    if (fd_ >= 0) ::close(fd_);
    // Never begun (the transport stopped first): the caller still gets an answer.
    if (done_)
      post_([done = std::move(done_)] { done(Error(ErrorCode::kClosed, "transport stopped")); });
  }

  // --- reactor thread
  void begin() {
    std::weak_ptr<Connector> weak = shared_from_this();
    timer_ = loop_->call_after(options_.connect_timeout, [weak] {
      if (auto self = weak.lock()) self->time_out();
    });
    try_next();
  }
  void on_events(std::uint32_t) override {
    int error = 0;
    socklen_t length = sizeof error;
    if (getsockopt(fd_, SOL_SOCKET, SO_ERROR, &error, &length) != 0) error = errno;
    loop_->remove(std::exchange(registration_, 0), fd_);
    if (error != 0) {
      last_error_ = error;
      close_socket();
      return try_next();
    }
    auto reactor = reactor_.lock();
    const int fd = std::exchange(fd_, -1);
    finish(std::shared_ptr<runtime::Conn>(
        std::make_shared<TcpConn>(ConnState::Adopt(reactor, fd, options_.conn))));
  }
  void on_stop() override {
    registration_ = 0;
    close_socket();
    finish(Error(ErrorCode::kClosed, "transport stopped"));
  }

 private:
  void try_next() {
    while (next_ < candidates_.size()) {
      const SocketAddress& candidate = candidates_[next_++];
      fd_ = ::socket(candidate.family(), SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
      if (fd_ < 0) {
        last_error_ = errno;
        continue;
      }
      if (::connect(fd_, candidate.get(), candidate.length) == 0 || errno == EINPROGRESS) {
        registration_ = loop_->add(fd_, EPOLLOUT, shared_from_this());
        if (registration_ != 0) return;
      }
      last_error_ = errno;
      close_socket();
    }
    finish(Error(ErrorCode::kUnavailable,
                 "connect to " + target_.ToString() + ": " + errno_text(last_error_)));
  }
  void time_out() {
    timer_.reset();
    if (registration_ != 0) loop_->remove(std::exchange(registration_, 0), fd_);
    close_socket();
    finish(Error(ErrorCode::kTimeout, "connect to " + target_.ToString() + " timed out"));
  }
  void close_socket() {
    if (fd_ >= 0) ::close(std::exchange(fd_, -1));
  }
  void finish(Result<std::shared_ptr<runtime::Conn>> result) {
    if (timer_) loop_->cancel_timer(*std::exchange(timer_, std::nullopt));
    if (!done_) return;
    post_([done = std::exchange(done_, nullptr), result = std::move(result)] { done(result); });
  }

  std::weak_ptr<Reactor> reactor_;
  Reactor* loop_;
  Address target_;
  std::vector<SocketAddress> candidates_;
  std::size_t next_ = 0;
  StrandPoster post_;
  runtime::Transport::ConnectHandler done_;
  TcpTransport::Options options_;
  int fd_ = -1;
  int last_error_ = ECONNREFUSED;
  std::uint64_t registration_ = 0;
  std::optional<Reactor::TimerKey> timer_;
};

// A bound, listening, non-blocking socket for the first usable address.
Result<int> open_listening_socket(const Address& address) {
  auto candidates = resolve(address, /*passive=*/true);
  if (!candidates.ok()) return candidates.status();
  int last_error = 0;
  for (const SocketAddress& candidate : *candidates) {
    const int fd = ::socket(candidate.family(), SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    if (fd < 0) {
      last_error = errno;
      continue;
    }
    const int one = 1;
    setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);  // restart without TIME_WAIT
    if (::bind(fd, candidate.get(), candidate.length) == 0 && ::listen(fd, SOMAXCONN) == 0) {
      return fd;
    }
    last_error = errno;
    ::close(fd);
  }
  std::string fix;
  if (last_error == EADDRINUSE) {
    fix = "; another process holds that port (`ss -ltnp` names it): stop it or pick another port";
  } else if (last_error == EADDRNOTAVAIL) {
    fix = "; no interface of this host has that address (`ip addr` lists them)";
  } else if (last_error == EACCES) {
    fix = "; ports below 1024 need root or CAP_NET_BIND_SERVICE";
  }
  return Error(ErrorCode::kUnavailable,
               "cannot listen on " + address.ToString() + ": " + errno_text(last_error) + fix);
}

}  // namespace

TcpTransport::TcpTransport(Options options)
    : options_(options), reactor_(std::make_shared<Reactor>()) {}

TcpTransport::~TcpTransport() {
  reactor_->stop();
}

Result<std::unique_ptr<runtime::Listener>> TcpTransport::listen(const Address& address,
                                                                runtime::Strand& strand,
                                                                AcceptHandler on_accept) {
  auto fd = open_listening_socket(address);
  if (!fd.ok()) return fd.status();
  Address bound = local_address(*fd);
  auto state =
      std::make_shared<ListenerState>(reactor_, *fd, strand, std::move(on_accept), options_.conn);
  if (!reactor_->run([state] { state->watch(); })) {
    return Error(ErrorCode::kUnavailable,
                 "cannot listen on " + address.ToString() + ": transport stopped");
  }
  return std::unique_ptr<runtime::Listener>(
      std::make_unique<TcpListener>(std::move(bound), std::move(state), reactor_));
}

void TcpTransport::connect(const Address& address, runtime::Strand& strand,
                           ConnectHandler on_connected) {
  StrandPoster post = make_strand_poster(strand);
  auto candidates = resolve(address, /*passive=*/false);
  if (!candidates.ok()) {
    post([done = std::move(on_connected), status = candidates.status()] { done(status); });
    return;
  }
  auto connector = std::make_shared<Connector>(reactor_, address, std::move(candidates).value(),
                                               post, std::move(on_connected), options_);
  if (!reactor_->run([connector] { connector->begin(); })) {
    // Nobody will run the connector: answer from here.
    connector->on_stop();
  }
}

}  // namespace rcxl::verbs
