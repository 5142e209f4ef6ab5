#include "backends/verbs/tcp_conn.h"

#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>

#include "backends/verbs/socket_address.h"

namespace rcxl::verbs {
namespace {

constexpr std::size_t kReadChunk = std::size_t{64} * 1024;
// Reads per readiness event, so one busy peer cannot starve the others.
constexpr int kReadsPerEvent = 16;
constexpr std::uint32_t kReadEvents = EPOLLIN | EPOLLRDHUP;

std::atomic<std::uint64_t> next_conn_id{1};

Status status_from_errno(int error) {
  if (error == ECONNRESET || error == EPIPE) {
    return Error(ErrorCode::kClosed, "connection reset by peer");
  }
  return Error(ErrorCode::kIoError, std::string("socket error: ") + std::strerror(error));
}

// Linux takes 1..32767 s for the keepalive times.
int keepalive_seconds(runtime::Duration d) {
  return static_cast<int>(std::clamp<std::int64_t>(
      std::chrono::duration_cast<std::chrono::seconds>(d).count(), 1, 32767));
}

// Keepalive probes and a bound on unacknowledged bytes (TcpConnOptions).
void detect_dead_peers(int fd, const TcpConnOptions& options) {
  const int on = 1;
  const int idle = keepalive_seconds(options.keepalive_idle);
  const int interval = keepalive_seconds(options.keepalive_interval);
  const int probes = std::clamp(options.keepalive_probes, 1, 127);
  // Also ends keepalive's wait (Linux then ignores KEEPCNT); 127 x 32767 s fits.
  const auto user_timeout_ms =
      static_cast<unsigned>((std::int64_t{idle} + std::int64_t{interval} * probes) * 1000);
  setsockopt(fd, SOL_SOCKET, SO_KEEPALIVE, &on, sizeof on);
  setsockopt(fd, IPPROTO_TCP, TCP_KEEPIDLE, &idle, sizeof idle);
  setsockopt(fd, IPPROTO_TCP, TCP_KEEPINTVL, &interval, sizeof interval);
  setsockopt(fd, IPPROTO_TCP, TCP_KEEPCNT, &probes, sizeof probes);
  setsockopt(fd, IPPROTO_TCP, TCP_USER_TIMEOUT, &user_timeout_ms, sizeof user_timeout_ms);
}

}  // namespace

std::shared_ptr<ConnState> ConnState::Adopt(const std::shared_ptr<Reactor>& reactor, int fd,
                                            TcpConnOptions options) {
  const int one = 1;
  setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);  // frames are small requests
  detect_dead_peers(fd, options);
  std::shared_ptr<ConnState> state(new ConnState(reactor, fd, options));
  state->registration_ = reactor->add(fd, kReadEvents, state);
  if (state->registration_ == 0) {
    state->end(Error(ErrorCode::kIoError, "cannot watch socket"));
    state->close_fd();
  }
  return state;
}

ConnState::ConnState(const std::shared_ptr<Reactor>& reactor, int fd, TcpConnOptions options)
    : reactor_(reactor),
      loop_(reactor.get()),
      id_(next_conn_id++),
      local_(local_address(fd)),
      peer_(peer_address(fd)),
      options_(options),
      fd_(fd) {}

ConnState::~ConnState() {
  if (fd_ >= 0) ::close(fd_);
}

void ConnState::start(runtime::Strand& strand, runtime::Conn::DataHandler on_data,
                      runtime::Conn::CloseHandler on_close) {
  if (start_called_.exchange(true)) return;
  post_ = make_strand_poster(strand);
  on_data_ = std::move(on_data);
  on_close_ = std::move(on_close);
  auto reactor = reactor_.lock();
  if (reactor && reactor->run([self = shared_from_this()] { self->begin_delivery(); })) return;
  // The transport is gone: nothing will ever arrive.
  post_([self = shared_from_this()] {
    auto handler = std::move(self->on_close_);
    self->on_close_ = nullptr;
    self->on_data_ = nullptr;
    if (handler && !self->released_) handler(Error(ErrorCode::kClosed, "transport stopped"));
  });
}

void ConnState::send(std::string bytes) {
  if (user_ended_ || bytes.empty()) return;
  if (auto reactor = reactor_.lock()) {
    reactor->run(
        [self = shared_from_this(), bytes = std::move(bytes)] { self->queue_bytes(bytes); });
  }
}

void ConnState::close() {
  if (user_ended_.exchange(true)) return;
  if (auto reactor = reactor_.lock()) {
    reactor->run([self = shared_from_this()] { self->begin_close(); });
  }
}

void ConnState::abort() {
  aborted_ = true;
  user_ended_ = true;
  if (auto reactor = reactor_.lock()) {
    reactor->run([self = shared_from_this()] { self->reset("aborted"); });
  }
}

void ConnState::set_input_end_handler(runtime::Conn::InputEndHandler on_input_end) {
  // Before start() only: a FIN read before start waits for begin_delivery,
  // which runs on the reactor after start() and sees the flag.
  if (start_called_) return;
  on_input_end_ = std::move(on_input_end);
  half_close_ = static_cast<bool>(on_input_end_);
}

void ConnState::set_reading(bool on) {
  if (auto reactor = reactor_.lock()) {
    reactor->run([self = shared_from_this(), on] {
      self->user_reading_ = on;
      self->update_interest();
    });
  }
}

void ConnState::release() {
  released_ = true;
  // A close() already asked for keeps flushing; otherwise nobody can end it.
  if (user_ended_.exchange(true)) return;
  aborted_ = true;
  if (auto reactor = reactor_.lock()) {
    reactor->run([self = shared_from_this()] { self->reset("connection released"); });
  }
}

void ConnState::on_events(std::uint32_t events) {
  // HUP and ERR come even while reading is off: read to the end, or they spin.
  if (events & (EPOLLIN | EPOLLRDHUP | EPOLLHUP | EPOLLERR)) {
    read_some((events & (EPOLLHUP | EPOLLERR)) != 0);
  }
  if (fd_ >= 0 && (events & EPOLLOUT)) flush();
}

void ConnState::on_stop() {
  registration_ = 0;  // the reactor has already forgotten us
  linger_timer_.reset();
  end(Error(ErrorCode::kClosed, "transport stopped"));
  close_fd();
}

void ConnState::begin_delivery() {
  started_ = true;
  if (!early_.empty()) post_data(std::exchange(early_, {}));
  if (std::exchange(early_input_end_, false) && phase_ == Phase::kOpen) {
    if (half_close_) {
      input_ended();
    } else {
      end(Error(ErrorCode::kClosed, "peer closed"));
      close_fd();
    }
  }
  if (early_end_) post_close(*std::exchange(early_end_, std::nullopt));
}

void ConnState::read_some(bool ending) {
  char buffer[kReadChunk];
  for (int i = 0; i < kReadsPerEvent && fd_ >= 0 && (ending || reading()); ++i) {
    const ssize_t n = ::recv(fd_, buffer, sizeof buffer, 0);
    if (n > 0) {
      // Once we close, the peer's bytes have nowhere to go: read only to drop them.
      if (phase_ == Phase::kOpen) deliver(std::string(buffer, static_cast<std::size_t>(n)));
      if (static_cast<std::size_t>(n) < sizeof buffer) return;
      continue;
    }
    if (n < 0 && errno == EINTR) continue;
    if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) return;
    // A FIN while the peer may still read: before start() the owner may yet
    // ask for half-close (begin_delivery decides), with a handler it is a
    // notice, and while our close() flushes the replies still go out.
    if (n == 0 && !input_ended_ &&
        (!started_ || phase_ == Phase::kFlushing || (phase_ == Phase::kOpen && half_close_))) {
      input_ended_ = true;
      update_interest();
      if (!started_) {
        early_input_end_ = true;
      } else if (phase_ == Phase::kOpen) {
        input_ended();
      }
      return;
    }
    end(n == 0 ? Error(ErrorCode::kClosed, "peer closed") : status_from_errno(errno));
    close_fd();
    return;
  }
}

bool ConnState::reading() const {
  // Nothing more comes after the peer's FIN. Closing, the peer must be able to
  // finish its send while we flush (else both wait for the linger timeout);
  // after our FIN its bytes are dropped.
  if (input_ended_) return false;
  return phase_ != Phase::kOpen || (user_reading_ && !held_back_);
}

void ConnState::input_ended() {
  post_([self = shared_from_this()] {
    if (self->aborted_ || self->released_ || !self->on_input_end_) return;
    self->on_input_end_();
  });
}

void ConnState::update_interest() {
  if (registration_ == 0 || fd_ < 0) return;
  loop_->modify(registration_, fd_,
                (reading() ? kReadEvents : 0u) | (watching_writable_ ? EPOLLOUT : 0u));
}

void ConnState::deliver(std::string bytes) {
  undelivered_ += bytes.size();
  if (undelivered_ > options_.max_undelivered_bytes && !held_back_) {
    held_back_ = true;
    update_interest();
    // The strand may have taken them all before it could see held_back_.
    recheck_undelivered();
  }
  if (!started_) {
    early_.append(bytes);
    return;
  }
  post_data(std::move(bytes));
}

void ConnState::post_data(std::string bytes) {
  post_([self = shared_from_this(), bytes = std::move(bytes)] {
    if (!self->aborted_ && !self->released_ && self->on_data_) self->on_data_(bytes);
    self->delivered(bytes.size());
  });
}

void ConnState::delivered(std::size_t n) {
  const std::size_t left = undelivered_ -= n;
  if (left > options_.max_undelivered_bytes / 2 || !held_back_) return;
  if (recheck_asked_.exchange(true)) return;
  auto reactor = reactor_.lock();
  if (!reactor || !reactor->run([self = shared_from_this()] {
        self->recheck_asked_ = false;
        self->recheck_undelivered();
      })) {
    recheck_asked_ = false;
  }
}

void ConnState::recheck_undelivered() {
  if (!held_back_ || undelivered_ > options_.max_undelivered_bytes / 2) return;
  held_back_ = false;
  update_interest();
}

void ConnState::queue_bytes(const std::string& bytes) {
  if (phase_ != Phase::kOpen || fd_ < 0) return;
  // Only what is already waiting counts: one large message to a reader is fine.
  if (out_.size() - out_sent_ > options_.max_unsent_bytes) {
    // A peer that sends requests but never reads the replies.
    return reset("the peer does not read: too many unsent bytes");
  }
  out_.append(bytes);
  if (!watching_writable_) flush();
}

void ConnState::flush() {
  while (out_sent_ < out_.size()) {
    const ssize_t n = ::send(fd_, out_.data() + out_sent_, out_.size() - out_sent_, MSG_NOSIGNAL);
    if (n > 0) {
      out_sent_ += static_cast<std::size_t>(n);
      continue;
    }
    if (n < 0 && errno == EINTR) continue;
    if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) {
      if (out_sent_ * 2 > out_.size()) out_.erase(0, std::exchange(out_sent_, 0));
      watch_writable(true);
      return;
    }
    end(status_from_errno(errno));
    close_fd();
    return;
  }
  out_.clear();
  out_sent_ = 0;
  watch_writable(false);
  if (phase_ == Phase::kFlushing) finish_close();
}

void ConnState::begin_close() {
  if (phase_ != Phase::kOpen || fd_ < 0) return;
  phase_ = Phase::kFlushing;
  update_interest();
  std::weak_ptr<ConnState> weak = shared_from_this();
  linger_timer_ = loop_->call_after(options_.close_linger, [weak] {
    auto self = weak.lock();
    if (!self) return;
    self->linger_timer_.reset();
    if (self->phase_ == Phase::kFlushing) return self->reset("close timed out");
    self->close_fd();
  });
  flush();
}

void ConnState::finish_close() {
  // FIN after the last byte; keep reading until the peer's FIN so that our
  // close never turns into a reset that could destroy bytes the peer has not read.
  ::shutdown(fd_, SHUT_WR);
  phase_ = Phase::kLingering;
  end(Error(ErrorCode::kClosed, "closed"));
}

void ConnState::reset(const char* why) {
  if (fd_ >= 0) {
    const linger hard{1, 0};  // RST: unsent bytes are dropped
    setsockopt(fd_, SOL_SOCKET, SO_LINGER, &hard, sizeof hard);
    close_fd();
  }
  end(Error(ErrorCode::kClosed, why));
}

void ConnState::end(const Status& why) {
  if (ended_) return;
  ended_ = true;
  if (!started_) {
    early_end_ = why;
    return;
  }
  post_close(why);
}

void ConnState::post_close(const Status& why) {
  // Posted, never inline: the close handler must not run inside close()/abort().
  post_([self = shared_from_this(), why] {
    auto handler = std::move(self->on_close_);
    self->on_close_ = nullptr;
    self->on_data_ = nullptr;  // also breaks cycles through captured handles
    self->on_input_end_ = nullptr;
    if (handler && !self->released_) handler(why);
  });
}

void ConnState::close_fd() {
  if (fd_ < 0) return;
  if (linger_timer_) loop_->cancel_timer(*std::exchange(linger_timer_, std::nullopt));
  if (registration_ != 0) loop_->remove(std::exchange(registration_, 0), fd_);
  ::close(fd_);
  fd_ = -1;
  phase_ = Phase::kDone;
  out_.clear();
  out_sent_ = 0;
}

void ConnState::watch_writable(bool on) {
  if (on == watching_writable_ || registration_ == 0) return;
  watching_writable_ = on;
  update_interest();
}

}  // namespace rcxl::verbs
