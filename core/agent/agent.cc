#include "core/agent/agent.h"

#include <algorithm>
#include <condition_variable>
#include <deque>
#include <exception>
#include <limits>
#include <tuple>
#include <utility>

#include "core/protocol/auth.h"
#include "core/protocol/parsed_size.h"

namespace rcxl::agent {

using protocol::Action;
using protocol::Json;

struct Agent::Region {
  ext::RegionInfo info;
  std::string owner_handle;
  std::string read_handle;
  std::string alloc_token;  // empty: its alloc had none
  // In the --state-file (always, without one): only then may an alloc's answer name it.
  bool recorded = false;
  std::optional<runtime::Registration> reg;       // remote READ and WRITE: owner-handle maps
  std::optional<runtime::Registration> read_reg;  // remote READ only: read-handle maps
  std::set<std::uint64_t> holders;
  // A map reply went out since start: later maps are never fresh (SPEC R5.2).
  bool ever_mapped = false;
  bool map_in_flight = false;
  // Maps of this region that arrived while another was registering it.
  std::vector<std::function<void()>> map_waiters;

  bool registered() const { return reg || read_reg; }
  bool handle_matches(const std::string& handle) const {
    return protocol::constant_time_equal(handle, owner_handle) ||
           protocol::constant_time_equal(handle, read_handle);
  }
};

struct Agent::ConnRecord {
  std::set<std::uint64_t> holds;
  std::set<std::string> open_requests;  // read_hint names (per connection)
};

// One control connection; touched only on its own strand.
class Agent::Session {
 public:
  Session(std::uint64_t id, std::unique_ptr<runtime::Strand> strand,
          std::shared_ptr<protocol::FramedConn> conn, std::string challenge)
      : id(id), strand(std::move(strand)), conn(std::move(conn)), challenge(std::move(challenge)) {}

  const std::uint64_t id;
  std::unique_ptr<runtime::Strand> strand;
  std::shared_ptr<protocol::FramedConn> conn;
  const std::string challenge;
  std::deque<Incoming> queue;    // requests behind the one being served
  std::size_t queued_bytes = 0;  // what they hold parsed, and their queue slots
  std::size_t frame_bytes = 0;   // the size of the frame being decoded now
  bool reading_paused = false;   // the queue grew past kPauseReadingAt(Bytes)
  bool busy = false;
  bool pumping = false;
  bool closing = false;
  bool input_ended = false;  // the client half-closed: close once all is answered
  // Atomic: the NIC's connect check reads it on its own thread.
  std::atomic<bool> authenticated{false};
  std::optional<runtime::TimerId> hello_deadline;  // pending until the first good hello
};

class Agent::Activity {
 public:
  // Held while agent code runs; false once the agent is going away.
  class Scope {
   public:
    explicit Scope(const std::shared_ptr<Activity>& activity)
        : activity_(activity), entered_(activity->enter()) {}
    ~Scope() {
      if (entered_) activity_->leave();
    }
    Scope(const Scope&) = delete;
    Scope& operator=(const Scope&) = delete;
    explicit operator bool() const { return entered_; }

   private:
    std::shared_ptr<Activity> activity_;
    bool entered_;
  };

  // Waits for running agent code (as destroying a strand joins its thread).
  void close_and_wait() {
    std::unique_lock lock(mu_);
    closed_ = true;
    idle_.wait(lock, [this] { return running_ == 0; });
  }

 private:
  bool enter() {
    std::lock_guard lock(mu_);
    if (closed_) return false;
    ++running_;
    return true;
  }
  void leave() {
    std::lock_guard lock(mu_);
    if (--running_ == 0) idle_.notify_all();
  }

  std::mutex mu_;
  std::condition_variable idle_;
  int running_ = 0;
  bool closed_ = false;
};

namespace {

// More would only hold memory: as many as requests decode at once is enough.
constexpr std::size_t kSpareDecoders = 8;
// A connection's queued requests: past the first the socket is not read (the
// transport still takes what it has read, at most ~4 MiB); below the second,
// reading resumes. Hysteresis keeps a busy pipeline from toggling per frame.
constexpr std::size_t kPauseReadingAt = 256;
constexpr std::size_t kResumeReadingAt = 64;
// The same in bytes, since a frame may be up to --max-frame-bytes (1 MiB).
constexpr std::size_t kPauseReadingAtBytes = std::size_t{8} << 20;
constexpr std::size_t kResumeReadingAtBytes = std::size_t{2} << 20;

Json error_reply(const Json& id, const Status& status) {
  return protocol::error_reply(id, status);
}

Status bad_range(std::string message) {
  return Error(ErrorCode::kBadRange, std::move(message));
}

}  // namespace

Agent::Agent(runtime::Runtime& runtime, runtime::MemoryPool& pool, runtime::Nic& nic,
             std::unique_ptr<ext::RegionExtension> extension, AgentConfig config)
    : rt_(runtime),
      pool_(pool),
      nic_(nic),
      ext_(std::move(extension)),
      config_(std::move(config)),
      log_(runtime.log_sink(), "agent"),
      accept_strand_(runtime.make_strand("agent-accept")),
      poll_strand_(runtime.make_strand("agent-generation")),
      sweep_strand_(runtime.make_strand("agent-sweep")),
      reap_strand_(runtime.make_strand("agent-reap")),
      boot_(config_.boot_id, ext_ && ext_->has_memory_generation(), config_.generation_grace),
      allocator_(pool.size()),
      handle_random_(runtime.random("agent/handles")),
      challenge_random_(runtime.random("agent/challenges")),
      activity_(std::make_shared<Activity>()) {}

Agent::~Agent() {
  stop();
  // A connection task (a map inside mapped(), a write_wait answer) may still be
  // running on its own thread: let it finish; nothing starts after this.
  activity_->close_and_wait();
  std::map<std::uint64_t, SessionPtr> sessions;
  std::vector<SessionPtr> closed;
  {
    std::lock_guard lock(mu_);
    sessions.swap(sessions_);
    closed.swap(closed_sessions_);
  }
  for (auto& [id, s] : sessions) s->conn->abort();
  sessions.clear();
  closed.clear();
  // End the agent's own strands (threads) before the state their tasks touch goes.
  reap_strand_.reset();
  sweep_strand_.reset();
  poll_strand_.reset();
  accept_strand_.reset();
}

Status Agent::start() {
  if (started_.exchange(true)) return Error(ErrorCode::kInternal, "agent already started");
  if (config_.listen.empty()) return Error(ErrorCode::kBadRequest, "no listen address");
  if (!config_.auth_secret) {
    for (const auto& address : config_.listen) {
      if (!address.is_loopback()) {
        return Error(ErrorCode::kBadRequest,
                     "--auth none needs loopback listeners only, not " + address.ToString() +
                         "; listen on 127.0.0.1 or [::1], or give --auth-secret-file PATH");
      }
    }
  }
  if (config_.rdma_connect_proofs && !config_.auth_secret) {
    return Error(ErrorCode::kBadRequest,
                 "--rdma-auth proof needs --auth-secret-file: the proof is keyed by the secret");
  }
  // A connect check left by an agent before this one on the NIC goes too.
  const bool checking = nic_.check_connects(
      config_.rdma_connect_proofs
          ? runtime::Nic::ConnectCheck([this, activity = activity_](std::string_view proof) {
              Activity::Scope scope(activity);
              return scope && accept_connect_proof(proof);
            })
          : nullptr);
  if (config_.rdma_connect_proofs && !checking) {
    return Error(ErrorCode::kBadRequest,
                 "--rdma-auth proof: this NIC cannot check RDMA connects; use --nic verbs:DEVICE");
  }
  if (Status st = load_regions(); !st.ok()) return st;
  if (ext_) {
    for (const auto& action : ext_->hint_actions()) {
      if (!protocol::action_from_name(action)) {
        log_.warn("extension lists unknown action '", action, "'; not advertised");
        continue;
      }
      if (advertised_.insert(action).second) advertised_list_.push_back(action);
    }
  }
  if (ext_ && ext_->has_memory_generation()) {
    std::optional<std::string> generation;
    Status st = call_extension("memory_generation", [&] {
      generation = ext_->memory_generation();
      return Status();
    });
    if (!st.ok()) {
      return Error(st.code(), "the region extension cannot tell the memory generation at start: " +
                                  st.message());
    }
    if (!generation || generation->empty()) {
      return Error(ErrorCode::kGenerationUnknown,
                   "the region extension cannot tell the memory generation at start (an unknown "
                   "period); start the agent once the memory can tell it");
    }
    if (const std::string why = unusable_generation(*generation); !why.empty()) {
      return Error(
          ErrorCode::kGenerationUnknown,
          "the region extension's memory generation cannot be part of the boot: " + why +
              "; a generation is 1 to 64 characters 0x21..0x7e (no space) without ':' or '~', "
              "not 'unknown' (fix the extension or its generation source)");
    }
    std::lock_guard lock(mu_);
    boot_.start(*generation);
  }
  for (const auto& address : config_.listen) {
    auto listener = rt_.transport().listen(
        address, *accept_strand_, [this, activity = activity_](std::shared_ptr<runtime::Conn> raw) {
          Activity::Scope scope(activity);
          if (!scope) return raw->abort();
          accept(std::move(raw));
        });
    if (!listener.ok()) {
      for (auto& l : listeners_) l->close();
      listeners_.clear();
      return listener.status();  // the transport's message names the address
    }
    listeners_.push_back(std::move(listener).value());
  }
  log_.info("agent up: boot ", boot(), ", pool ", pool_.describe(), ", extension ",
            ext_ ? ext_->name() : std::string("none"));
  up_ = true;
  if (ext_ && ext_->has_memory_generation()) schedule_poll(*poll_strand_);
  schedule_sweep(*sweep_strand_);
  return {};
}

bool Agent::accept_connect_proof(std::string_view proof) const {
  if (proof.size() < protocol::kConnectProofChallengeChars) return false;
  const std::string_view prefix = proof.substr(0, protocol::kConnectProofChallengeChars);
  std::lock_guard lock(mu_);
  for (const auto& [id, session] : sessions_) {
    if (!session->authenticated || session->challenge.compare(0, prefix.size(), prefix) != 0)
      continue;
    if (protocol::verify_connect_proof(*config_.auth_secret, session->challenge, proof)) {
      return true;
    }
  }
  return false;
}

void Agent::stop() {
  if (!started_ || stopped_.exchange(true)) return;
  // Nothing connects through a stopped agent's proofs.
  if (config_.rdma_connect_proofs) nic_.check_connects([](std::string_view) { return false; });
  for (auto& listener : listeners_) listener->close();
  std::vector<SessionPtr> sessions;
  {
    std::lock_guard lock(mu_);
    for (auto& [id, region] : regions_) {
      deregister_locked(*region);
      region->holders.clear();
    }
    for (auto& [id, record] : conns_) {
      record.holds.clear();
      // Closed with their connections (the extension is closed, not told).
      metrics_.hint_requests_closed_by_disconnect += record.open_requests.size();
      record.open_requests.clear();
    }
    for (auto& [id, s] : sessions_) sessions.push_back(s);
  }
  for (auto& s : sessions) {
    std::weak_ptr<Session> weak = s;
    s->strand->post([weak] {
      if (auto live = weak.lock()) {
        live->closing = true;
        live->conn->close();
      }
    });
  }
  // No hook may run during or after close() (c_abi.h: close once, destroy
  // last): wait for agent code inside one now; none starts after this.
  activity_->close_and_wait();
  {
    // Their close handlers no longer run: the connections are gone all the same.
    std::lock_guard lock(mu_);
    metrics_.connections_closed += conns_.size();
    conns_.clear();
  }
  queued_requests_ = 0;  // their queues went with them
  queued_request_bytes_ = 0;
  if (ext_)
    (void)call_extension("close", [&] {
      ext_->close();
      return Status();
    });
  if (up_) log_.info("agent stopped");  // not after a start that failed
}

std::vector<runtime::Address> Agent::listen_addresses() const {
  std::vector<runtime::Address> out;
  for (const auto& l : listeners_) out.push_back(l->address());
  return out;
}

std::string Agent::boot() const {
  std::lock_guard lock(mu_);
  return boot_.boot();
}

std::vector<std::string> Agent::advertised_actions() const {
  return advertised_list_;
}

AgentMetrics Agent::metrics() const {
  std::lock_guard lock(mu_);
  AgentMetrics m = metrics_;
  m.open_hint_requests = 0;
  for (const auto& [id, record] : conns_) m.open_hint_requests += record.open_requests.size();
  m.registrations = 0;
  for (const auto& [id, region] : regions_) {
    m.registrations += (region->reg ? 1 : 0) + (region->read_reg ? 1 : 0);
  }
  m.lingering_registrations = lingering_.size();
  m.registrations += lingering_.size();
  m.connections = conns_.size();
  m.regions = regions_.size();
  m.retiring_regions = retiring_.size();
  m.unknown_periods = boot_.unknown_periods();
  m.queued_requests = queued_requests_.load(std::memory_order_relaxed);
  m.queued_request_bytes = queued_request_bytes_.load(std::memory_order_relaxed);
  return m;
}

std::string Agent::metrics_text() const {
  return agent::metrics_text(metrics());
}

std::size_t Agent::open_hint_requests(std::uint64_t conn) const {
  std::lock_guard lock(mu_);
  auto it = conns_.find(conn);
  return it == conns_.end() ? 0 : it->second.open_requests.size();
}

bool Agent::holds(std::uint64_t conn, std::uint64_t region) const {
  std::lock_guard lock(mu_);
  auto it = conns_.find(conn);
  return it != conns_.end() && it->second.holds.count(region) > 0;
}

std::optional<runtime::Registration> Agent::registration(std::uint64_t region) const {
  std::lock_guard lock(mu_);
  auto it = regions_.find(region);
  if (it == regions_.end()) return std::nullopt;
  return it->second->reg;
}

std::optional<runtime::Registration> Agent::read_registration(std::uint64_t region) const {
  std::lock_guard lock(mu_);
  auto it = regions_.find(region);
  if (it == regions_.end()) return std::nullopt;
  return it->second->read_reg;
}

std::uint64_t Agent::free_bytes() const {
  std::lock_guard lock(mu_);
  return allocator_.free_bytes();
}

std::size_t Agent::retiring_regions() const {
  std::lock_guard lock(mu_);
  return retiring_.size();
}

// ---------------------------------------------------------------- connections

void Agent::accept(std::shared_ptr<runtime::Conn> raw) {
  if (stopped_) return raw->abort();
  std::uint64_t id = 0;
  std::string challenge;
  {
    std::lock_guard lock(mu_);
    // A closed connection counts until its strand (a thread) has ended.
    if (config_.max_connections > 0 &&
        conns_.size() + closed_sessions_.size() + reaping_ >= config_.max_connections) {
      log_.warn("refusing a connection from ", raw->peer().ToString(), ": --max-connections ",
                config_.max_connections, " reached");
      raw->close();
      return;
    }
    id = next_conn_++;
    challenge = challenge_random_->next_hex(256);
    conns_[id];
  }
  std::unique_ptr<runtime::Strand> strand;
  try {
    strand = rt_.make_strand("agent-conn-" + std::to_string(id));
  } catch (const std::exception& e) {
    // Out of threads (thread runtime): refuse this connection, keep serving the rest.
    log_.warn("refusing a connection from ", raw->peer().ToString(),
              ": cannot start its strand: ", e.what());
    std::lock_guard lock(mu_);
    conns_.erase(id);
    raw->abort();
    return;
  }
  auto framed = protocol::FramedConn::Make(std::move(raw), config_.max_frame_bytes);
  framed->limit_first_frame(protocol::kMaxFirstFrameBytes);  // the hello
  auto session = std::make_shared<Session>(id, std::move(strand), framed, challenge);
  bool added = false;
  {
    std::lock_guard lock(mu_);
    // stop() sets stopped_ before it takes the sessions to close under this
    // lock: a session added after that would stay open, so it is not added.
    if (!stopped_) added = sessions_.emplace(id, session).second;
  }
  if (!added) return framed->raw().abort();
  std::weak_ptr<Session> weak = session;
  framed->set_frame_filter([this, weak, activity = activity_](std::string& frame) {
    Activity::Scope scope(activity);
    if (!scope) return true;  // the agent is going away: drop it
    auto s = weak.lock();
    if (!s) return false;
    if (decode_fast(s, frame)) return true;  // counted as decoded there
    // nlohmann parses it next: its tree, not its text, is what a queue holds.
    s->frame_bytes = protocol::parsed_size_bound(frame);
    return false;
  });
  framed->set_bad_frame_handler([this, weak, activity = activity_](const Status& status) {
    Activity::Scope scope(activity);
    if (!scope) return;
    if (auto s = weak.lock()) on_message(s, Incoming{Json(), std::nullopt, status});
  });
  // A client that half-closes after its last request still gets the replies.
  framed->raw().set_input_end_handler([this, weak, activity = activity_] {
    Activity::Scope scope(activity);
    if (!scope) return;
    if (auto s = weak.lock()) {
      s->input_ended = true;
      pump(s);
    }
  });
  // The greeting goes first (PROTOCOL.md: the first frame): sent after start(),
  // a hello pipelined behind the connect could be answered before it.
  framed->send(
      {{"op", "greeting"}, {"version", protocol::kProtocolVersion}, {"challenge", challenge}});
  framed->start(
      *session->strand,
      [this, weak, activity = activity_](Json message) {
        Activity::Scope scope(activity);
        if (!scope) return;
        if (auto s = weak.lock()) {
          on_message(s, Incoming{std::move(message), std::nullopt, std::nullopt});
        }
      },
      [this, weak, activity = activity_](const Status&) {
        Activity::Scope scope(activity);
        if (!scope) return;
        if (auto s = weak.lock()) on_closed(s);
      });
  if (config_.hello_timeout > runtime::Duration::zero()) {
    session->strand->post([this, weak, activity = activity_] {
      Activity::Scope scope(activity);
      auto s = weak.lock();
      if (!scope || !s || s->authenticated) return;
      s->hello_deadline =
          s->strand->post_after(config_.hello_timeout, [this, weak, activity = activity_] {
            Activity::Scope scope(activity);
            auto s = weak.lock();
            if (!scope || !s || s->authenticated || s->closing) return;
            log_.info("connection ", s->id, " from ", s->conn->peer().ToString(),
                      ": no successful hello within the hello timeout; closed");
            s->conn->send(error_reply(
                Json(), Error(ErrorCode::kUnauthenticated, "no successful hello in time")));
            s->closing = true;
            s->conn->close();
          });
    });
  }
}

bool Agent::decode_fast(const SessionPtr& s, std::string& frame) {
  std::unique_ptr<protocol::FastRequestDecoder> decoder;
  {
    std::lock_guard lock(decoders_mu_);
    if (!decoders_.empty()) {
      decoder = std::move(decoders_.back());
      decoders_.pop_back();
    }
  }
  if (!decoder) decoder = std::make_unique<protocol::FastRequestDecoder>();
  auto decoded = decoder->try_decode(frame);
  {
    std::lock_guard lock(decoders_mu_);
    if (decoders_.size() < kSpareDecoders) decoders_.push_back(std::move(decoder));
  }
  if (!decoded) return false;
  {
    std::lock_guard lock(mu_);
    ++metrics_.fast_decoded;
  }
  s->frame_bytes = protocol::held_bytes(*decoded);  // what the queue holds, not the text
  on_message(s, Incoming{Json(), std::move(decoded), std::nullopt});
  return true;
}

void Agent::on_message(const SessionPtr& s, Incoming message) {
  if (s->closing) return;
  // What it holds parsed, and its own slot in the queue.
  message.bytes = std::exchange(s->frame_bytes, 0) + sizeof(Incoming);
  s->queued_bytes += message.bytes;
  queued_requests_.fetch_add(1, std::memory_order_relaxed);
  queued_request_bytes_.fetch_add(message.bytes, std::memory_order_relaxed);
  s->queue.push_back(std::move(message));
  // A peer that pipelines faster than it is served (behind a long write_wait,
  // a map waiting for another) is held back by TCP, not queued here for good.
  if (!s->reading_paused &&
      (s->queue.size() >= kPauseReadingAt || s->queued_bytes >= kPauseReadingAtBytes)) {
    s->reading_paused = true;
    s->conn->set_paused(true);
  }
  pump(s);
}

void Agent::pump(const SessionPtr& s) {
  if (s->pumping) return;
  s->pumping = true;
  while (!s->busy && !s->closing && !s->queue.empty()) {
    Incoming message = std::move(s->queue.front());
    s->queue.pop_front();
    s->queued_bytes -= message.bytes;
    queued_requests_.fetch_sub(1, std::memory_order_relaxed);
    queued_request_bytes_.fetch_sub(message.bytes, std::memory_order_relaxed);
    s->busy = true;
    handle(s, message);
  }
  s->pumping = false;
  // Resumed first: frames read before the pause are requests to answer, also
  // when the peer's input already ended behind them.
  if (s->reading_paused && !s->closing && s->queue.size() <= kResumeReadingAt &&
      s->queued_bytes <= kResumeReadingAtBytes) {
    s->reading_paused = false;
    s->conn->set_paused(false);
  }
  if (s->input_ended && !s->busy && !s->closing && s->queue.empty() && !s->conn->holds_a_frame()) {
    s->closing = true;
    s->conn->close();
  }
}

void Agent::complete(const SessionPtr& s, const Json& reply, bool close_after) {
  if (!s->closing) s->conn->send(reply);
  s->busy = false;
  if (close_after && !s->closing) {
    s->closing = true;
    s->conn->close();
  }
  pump(s);
}

void Agent::on_closed(const SessionPtr& s) {
  s->closing = true;
  queued_requests_.fetch_sub(s->queue.size(), std::memory_order_relaxed);
  queued_request_bytes_.fetch_sub(s->queued_bytes, std::memory_order_relaxed);
  s->queue.clear();
  s->queued_bytes = 0;
  bool reap = false;
  {
    std::lock_guard lock(mu_);
    auto it = conns_.find(s->id);
    if (it != conns_.end()) {
      ++metrics_.connections_closed;
      metrics_.hint_requests_closed_by_disconnect += it->second.open_requests.size();
      for (std::uint64_t region : std::set<std::uint64_t>(it->second.holds)) {
        auto r = regions_.find(region);
        if (r != regions_.end()) drop_hold_locked(*r->second, s->id);
      }
      conns_.erase(it);
    }
    auto session = sessions_.find(s->id);
    if (session != sessions_.end()) {
      closed_sessions_.push_back(std::move(session->second));
      sessions_.erase(session);
      reap = !std::exchange(reap_posted_, true);
    }
  }
  if (reap) post_reap(runtime::Duration(0));
  // SPEC R6.6 / R2.4: after the holds went, outside the lock; a failure is only logged.
  if (ext_ && !stopped_) {
    (void)call_extension("connection_closed", [&] { return ext_->connection_closed(s->id); });
  }
}

Status Agent::call_extension(const char* hook, const std::function<Status()>& call) {
  Status st;
  try {
    st = call();
  } catch (const std::exception& e) {
    st = Error(ErrorCode::kExtensionFailed, std::string(hook) + " raised: " + e.what());
  } catch (...) {
    st = Error(ErrorCode::kExtensionFailed, std::string(hook) + " raised");
  }
  if (!st.ok()) {
    log_.warn("region extension ", hook, " failed: ", st.message());
    std::lock_guard lock(mu_);
    ++metrics_.extension_errors;
  }
  return st;
}

// ---------------------------------------------------------------- requests

void Agent::handle(const SessionPtr& s, Incoming& message) {
  if (message.bad_frame) {
    return complete(s, protocol::error_reply(Json(), *message.bad_frame), /*close_after=*/true);
  }
  Result<Json> id = Json();
  Result<protocol::Request> request = protocol::Request();
  if (message.decoded) {
    // The fast path only takes valid requests (fast_request_decoder.h).
    id = std::move(message.decoded->id);
    request = std::move(message.decoded->request);
  } else {
    // SPEC R1.3: before a successful hello every refusal closes the connection
    // (the check order of PROTOCOL.md still picks the code).
    const bool close_after = !s->authenticated;
    id = protocol::parse_request_id(message.message);
    if (!id.ok()) return complete(s, error_reply(Json(), id.status()), close_after);
    request = protocol::parse_request(message.message);
    if (!request.ok()) return complete(s, error_reply(*id, request.status()), close_after);
  }
  const bool is_hello = std::holds_alternative<protocol::HelloRequest>(*request);
  if (!is_hello && !s->authenticated) {
    return complete(s, error_reply(*id, Error(ErrorCode::kUnauthenticated, "say hello first")),
                    /*close_after=*/true);
  }
  std::visit(
      [&](const auto& r) {
        using T = std::decay_t<decltype(r)>;
        if constexpr (std::is_same_v<T, protocol::HelloRequest>) handle_hello(s, *id, r);
        if constexpr (std::is_same_v<T, protocol::AllocRequest>) handle_alloc(s, *id, r);
        if constexpr (std::is_same_v<T, protocol::MapRequest>) handle_map(s, *id, r);
        if constexpr (std::is_same_v<T, protocol::ReleaseRequest>) handle_release(s, *id, r);
        if constexpr (std::is_same_v<T, protocol::FreeRequest>) handle_free(s, *id, r);
        if constexpr (std::is_same_v<T, protocol::ExtensionRequest>) handle_extension(s, *id, r);
      },
      *request);
}

void Agent::handle_hello(const SessionPtr& s, const Json& id, const protocol::HelloRequest& r) {
  if (config_.auth_secret &&
      (!r.auth || !protocol::verify_auth(*config_.auth_secret, s->challenge, *r.auth))) {
    log_.warn("connection ", s->id, " from ", s->conn->peer().ToString(),
              ": auth failed (its secret is not this agent's --auth-secret-file)");
    return complete(s, error_reply(id, Error(ErrorCode::kAuthFailed, protocol::kWrongAuth)), true);
  }
  s->authenticated = true;
  if (s->hello_deadline) s->strand->cancel(*std::exchange(s->hello_deadline, std::nullopt));
  read_generation();
  // An optional field added to v1: this agent takes alloc tokens (docs/agent.md).
  Json fields = {{"boot", boot()}, {"conn", s->id}, {"alloc_tokens", true}};
  // And with --rdma-auth proof: a queue pair must prove a live control connection.
  if (config_.rdma_connect_proofs) fields["rdma_connect_proof"] = true;
  if (ext_) {
    fields["region_extension"] = {{"version", 1}, {"actions", advertised_list_}};
  }
  complete(s, protocol::ok_reply(id, std::move(fields)));
}

void Agent::handle_alloc(const SessionPtr& s, const Json& id, const protocol::AllocRequest& r) {
  Json reply;
  std::optional<std::uint64_t> made;        // a region this alloc made
  std::optional<std::uint64_t> unrecorded;  // the token's region, not in the state file yet
  {
    std::lock_guard lock(mu_);
    if (auto answer = answer_token_locked(id, r, unrecorded)) {
      reply = std::move(*answer);
    } else if (next_region_ == std::numeric_limits<std::uint64_t>::max()) {
      // The next id would wrap to 0 and then onto live regions (a state file
      // may carry any next_region; session 30 review).
      reply = error_reply(id, Error(ErrorCode::kNoSpace,
                                    "region ids are used up (next_region 2^64-1, from the state "
                                    "file): start on a fresh state file"));
    } else if (auto offset = allocator_.allocate(r.size); !offset) {
      reply = error_reply(id, Error(ErrorCode::kNoSpace, "the pool has no free extent of " +
                                                             std::to_string(r.size) + " bytes"));
    } else {
      auto region = std::make_unique<Region>();
      region->info = {next_region_++, *offset, r.size};
      region->owner_handle = handle_random_->next_hex(128);
      region->read_handle = handle_random_->next_hex(128);
      region->recorded = config_.state_file.empty();
      if (r.token) {
        region->alloc_token = *r.token;
        alloc_tokens_[token_key(*r.token)] = region->info.region;
      }
      reply = allocated_reply(id, *region);
      made = region->info.region;
      regions_[region->info.region] = std::move(region);
    }
  }
  if (made || unrecorded) {
    // A region the file does not have could be handed out twice after a restart:
    // its id and extent are answered only once they are recorded. The check and
    // the undo hold state_mu_, so no other write takes the region in between.
    const std::uint64_t region_id = made ? *made : *unrecorded;
    std::lock_guard writing(state_mu_);
    bool write = false;
    {
      std::lock_guard lock(mu_);
      auto it = regions_.find(region_id);
      write = it != regions_.end() && !it->second->recorded;  // else another write did it
    }
    if (write) (void)write_regions_locked();
    std::lock_guard lock(mu_);
    auto it = regions_.find(region_id);
    if (it != regions_.end() && it->second->recorded) {
      if (unrecorded) reply = allocated_reply(id, *it->second);
    } else {
      // Not recorded by this write nor by another since: undone (a retry that
      // found it waits for the same answer), and nothing changed.
      if (it != regions_.end()) {
        allocator_.release(it->second->info.pool_offset, it->second->info.size);
        alloc_tokens_.erase(token_key(it->second->alloc_token));
        regions_.erase(it);
      }
      // PROTOCOL.md has no code for the agent's own failures: the alloc cannot
      // be satisfied.
      reply = error_reply(id, Error(ErrorCode::kNoSpace,
                                    "cannot record the region in the --state-file (disk full or "
                                    "not writable?); the alloc was undone"));
    }
  }
  complete(s, reply);
}

std::optional<Json> Agent::answer_token_locked(const Json& id, const protocol::AllocRequest& r,
                                               std::optional<std::uint64_t>& unrecorded) {
  if (!r.token) return std::nullopt;
  const std::string& token = *r.token;
  // Kept by digest: a lookup's time tells nothing of how close a guess came.
  const std::string key = token_key(token);
  auto known = alloc_tokens_.find(key);
  if (known == alloc_tokens_.end()) {
    if (!r.made_only && !withdrawn_tokens_.count(key)) return std::nullopt;
    // The first alloc may still come (it waits on another connection): it
    // must not make a region nobody will ask about again.
    if (r.made_only) withdraw_token_locked(token);
    return error_reply(
        id, Error(ErrorCode::kNotFound, "no region was made for this token, or it was freed"));
  }
  // A retry of an alloc whose reply the client never got: the same region again.
  const Region& region = *regions_.at(known->second);
  if (region.info.size != r.size) {
    return error_reply(
        id, Error(ErrorCode::kBadRequest, "this token's alloc made region " +
                                              std::to_string(region.info.region) + " of " +
                                              std::to_string(region.info.size) + " bytes, not " +
                                              std::to_string(r.size) + "; use a new token"));
  }
  ++metrics_.allocs_answered_again;
  if (!region.recorded) unrecorded = region.info.region;
  return allocated_reply(id, region);
}

std::string Agent::token_key(const std::string& token) {
  // An alloc token is a capability like a handle (docs/agent.md, *Alloc tokens*).
  if (token.empty()) return {};
  std::string digest = protocol::sha256_hex(token);
  // Without SHA-256 (a crypto provider missing) every token would share the
  // key "": the token itself, marked, keeps them apart (only the timing is lost).
  return digest.empty() ? "raw:" + token : digest;
}

void Agent::withdraw_token_locked(const std::string& token) {
  const std::string key = token_key(token);
  if (key.empty() || !withdrawn_tokens_.insert(key).second) return;
  withdrawn_order_.push_back(key);
  if (withdrawn_order_.size() <= kMaxWithdrawnTokens) return;
  withdrawn_tokens_.erase(withdrawn_order_.front());
  withdrawn_order_.pop_front();
}

Json Agent::allocated_reply(const Json& id, const Region& region) {
  return protocol::ok_reply(id, {{"region", region.info.region},
                                 {"size", region.info.size},
                                 {"handle", region.owner_handle},
                                 {"read_handle", region.read_handle}});
}

Result<runtime::Registration> Agent::register_and_announce(const ext::RegionInfo& info, bool fresh,
                                                           unsigned access, bool announce) {
  if (ext_ && announce) {
    Status st = call_extension("validate_access", [&] { return ext_->validate_access(info); });
    // A hook that threw or failed is extension_failed (retryable), not a "no".
    if (st.code() == ErrorCode::kExtensionFailed) return st;
    if (!st.ok()) return Error(ErrorCode::kRefused, st.message());
  }
  auto reg = nic_.register_memory(pool_, info.pool_offset, info.size, access);
  if (!reg.ok()) {
    // The RNIC's registration resources (or the locked-memory limit) ran out.
    const bool read_only = !(access & runtime::kAccessRemoteWrite);
    return Error(
        ErrorCode::kNoSpace,
        std::string(read_only ? "the NIC could not register the region READ only, for a "
                                "read handle's map (agent flag --reader-rkeys shared "
                                "keeps one registration per region; "
                              : "the NIC could not register the region (") +
            "memory registrations or RLIMIT_MEMLOCK exhausted?): " + reg.status().message());
  }
  {
    std::lock_guard lock(mu_);
    ++metrics_.registrations_total;
  }
  if (ext_ && announce) {
    // SPEC R5.2: before the reply leaves, so a device can drop stale contents.
    Status st = call_extension("mapped", [&] { return ext_->mapped(info, fresh); });
    if (!st.ok()) {
      // Unlocked, as before the lingering list: an ibv_dereg_mr of a large
      // region takes a while, and every connection waits on mu_.
      if (Status dropped = nic_.deregister(*reg); !dropped.ok() && still_live(dropped)) {
        std::lock_guard lock(mu_);
        linger_locked(*reg, info.region, dropped);
      }
      return Error(ErrorCode::kExtensionFailed, st.message());
    }
  }
  return reg;
}

void Agent::handle_map(const SessionPtr& s, const Json& id, const protocol::MapRequest& r) {
  read_generation();
  ext::RegionInfo info;
  bool fresh = false;
  bool writable = true;  // this map's rkey takes WRITEs: the owner's registration
  bool announce = false;
  std::uint64_t sequence = 0;
  // Decided under the lock; the reply leaves after it is released.
  std::optional<Json> early = [&]() -> std::optional<Json> {
    std::lock_guard lock(mu_);
    auto refuse = [&](const Status& st) {
      ++metrics_.maps_refused;
      Json reply = error_reply(id, st);
      if (st.code() == ErrorCode::kStaleEpoch) reply["boot"] = boot_.boot();
      return reply;
    };
    // A map that waited behind another connection's may come back after its own
    // connection closed: it must not hold the region for a connection that is gone.
    if (!conns_.count(s->id)) return refuse(Error(ErrorCode::kClosed, "connection closed"));
    if (r.epoch != boot_.boot()) {
      return refuse(Error(ErrorCode::kStaleEpoch,
                          "epoch " + protocol::quote_client_text(r.epoch) + " is not the boot"));
    }
    if (boot_.unknown()) {
      return refuse(Error(ErrorCode::kGenerationUnknown, "the memory generation is unknown"));
    }
    auto it = regions_.find(r.region);
    if (it == regions_.end()) {
      return refuse(Error(ErrorCode::kNotFound, "no region " + std::to_string(r.region)));
    }
    Region& region = *it->second;
    if (!region.handle_matches(r.handle)) {
      return refuse(bad_range("the handle is not region " + std::to_string(r.region) + "'s"));
    }
    // A reader's rkey must not take WRITEs: read-handle maps get a READ-only one.
    writable = !config_.read_only_reader_rkeys ||
               protocol::constant_time_equal(r.handle, region.owner_handle);
    // Its registration is there (another map may be making the other kind).
    if (const auto& reg = writable ? region.reg : region.read_reg) {
      region.holders.insert(s->id);
      conns_[s->id].holds.insert(r.region);
      ++metrics_.maps;
      return protocol::ok_reply(id, {{"boot", boot_.boot()},
                                     {"addr", reg->addr},
                                     {"rkey", reg->rkey},
                                     {"size", region.info.size}});
    }
    if (region.map_in_flight) {
      // Another connection is registering it: retry once that map is done.
      std::weak_ptr<Session> weak = s;
      region.map_waiters.push_back([this, weak, id, r] {
        auto live = weak.lock();
        if (!live) return;
        live->strand->post([this, weak, id, r, activity = activity_] {
          Activity::Scope scope(activity);
          if (!scope) return;
          if (auto again = weak.lock()) handle_map(again, id, r);
        });
      });
      return Json();  // no reply yet
    }
    region.map_in_flight = true;
    announce = !region.registered();
    info = region.info;
    fresh = r.fresh && protocol::constant_time_equal(r.handle, region.owner_handle) &&
            !region.ever_mapped;
    sequence = boot_.sequence();
    return std::nullopt;
  }();
  if (early) {
    if (!early->is_null()) complete(s, *early);
    return;
  }
  const unsigned access =
      runtime::kAccessRemoteRead | (writable ? runtime::kAccessRemoteWrite : 0u);
  auto reg = register_and_announce(info, fresh, access, announce);
  // SPEC R6.5: a boot change while the map ran (mapped() included) fails it.
  read_generation();
  std::vector<std::function<void()>> waiters;
  Json reply;
  bool first_map = false;
  bool close_unanswered = false;
  bool again = false;
  {
    std::lock_guard lock(mu_);
    auto it = regions_.find(r.region);
    Region* region = it == regions_.end() ? nullptr : it->second.get();
    if (region) {
      region->map_in_flight = false;
      waiters.swap(region->map_waiters);
    }
    Status failure;
    if (!reg.ok()) {
      failure = reg.status();
    } else if (!region) {
      failure = Error(ErrorCode::kNotFound, "region " + std::to_string(r.region) +
                                                " was freed while it was being mapped");
    } else if (boot_.sequence() != sequence) {
      failure = Error(ErrorCode::kBootChanged,
                      "the boot changed to '" + boot_.boot() + "' while the map ran");
    } else if (!conns_.count(s->id)) {
      failure = Error(ErrorCode::kClosed, "connection closed");
    } else if (stopped_) {
      // stop() already deregistered everything: nothing registers after it; the
      // connection closes unanswered, as every other stopping one does.
      failure = Error(ErrorCode::kClosed, "the agent is stopping");
      close_unanswered = true;
    } else if (!announce && !region->registered()) {
      // Its other registration went while this one was made (the last holder
      // let go): the extension must be asked and told again, as for a first map.
      again = true;
    }
    if (again) {
      drop_registration_locked(*reg, r.region);
    } else if (!failure.ok()) {
      if (reg.ok()) drop_registration_locked(*reg, r.region);
      if (!region) freed_while_mapping_.erase(r.region);  // the sweep may retire it now
      ++metrics_.maps_refused;
      reply = error_reply(id, failure);
    } else {
      (writable ? region->reg : region->read_reg) = *reg;
      first_map = !region->ever_mapped;
      region->ever_mapped = true;
      region->holders.insert(s->id);
      conns_[s->id].holds.insert(r.region);
      ++metrics_.maps;
      reply = protocol::ok_reply(id, {{"boot", boot_.boot()},
                                      {"addr", reg->addr},
                                      {"rkey", reg->rkey},
                                      {"size", region->info.size}});
    }
  }
  for (auto& waiter : waiters) waiter();
  if (again) return handle_map(s, id, r);  // the region is unregistered now: start over
  // "Mapped before" survives a restart: no fresh=true for it afterwards (R5.2).
  if (first_map) (void)persist_regions();
  if (close_unanswered && !s->closing) {
    s->closing = true;  // kClosed is no PROTOCOL.md code: no reply goes out
    s->conn->close();
  }
  complete(s, reply);
}

void Agent::handle_release(const SessionPtr& s, const Json& id, const protocol::ReleaseRequest& r) {
  Json reply = [&] {
    std::lock_guard lock(mu_);
    auto it = regions_.find(r.region);
    if (it == regions_.end()) {
      return error_reply(id, Error(ErrorCode::kNotFound, "no region " + std::to_string(r.region)));
    }
    if (!it->second->handle_matches(r.handle)) {
      return error_reply(id,
                         bad_range("the handle is not region " + std::to_string(r.region) + "'s"));
    }
    drop_hold_locked(*it->second, s->id);
    return protocol::ok_reply(id);
  }();
  complete(s, reply);
}

void Agent::handle_free(const SessionPtr& s, const Json& id, const protocol::FreeRequest& r) {
  ext::RegionInfo info;
  std::optional<Json> refusal = [&]() -> std::optional<Json> {
    std::lock_guard lock(mu_);
    auto it = regions_.find(r.region);
    if (it == regions_.end()) {
      return error_reply(id, Error(ErrorCode::kNotFound, "no region " + std::to_string(r.region)));
    }
    Region& region = *it->second;
    if (!protocol::constant_time_equal(r.handle, region.owner_handle)) {
      return error_reply(
          id, bad_range("free needs region " + std::to_string(r.region) + "'s owner handle"));
    }
    for (std::uint64_t holder : region.holders) {
      auto c = conns_.find(holder);
      if (c != conns_.end()) c->second.holds.erase(r.region);
    }
    region.holders.clear();
    deregister_locked(region);
    info = region.info;
    // An in-flight map finds the region gone and drops its own registration;
    // retire() waits for that (the extension must not see mapped() after retire()).
    if (region.map_in_flight) freed_while_mapping_.insert(info.region);
    for (auto& waiter : region.map_waiters) sweep_strand_->post(waiter);
    retiring_[info.region] = info;
    // A first alloc of this token that comes after the free makes nothing.
    alloc_tokens_.erase(token_key(region.alloc_token));
    withdraw_token_locked(region.alloc_token);
    regions_.erase(it);
    return std::nullopt;
  }();
  if (refusal) return complete(s, *refusal);
  (void)persist_regions();
  retire_outside_lock({info});
  complete(s, protocol::ok_reply(id));
}

void Agent::retire_outside_lock(const std::vector<ext::RegionInfo>& candidates) {
  bool released = false;
  for (const auto& info : candidates) {
    {
      std::lock_guard lock(mu_);
      if (freed_while_mapping_.count(info.region) || lingers_locked(info.region)) continue;
      // SPEC R2.2: retire() is asked about a region still on the node, by one
      // caller at a time. A sweep's list may be stale: the free that raced it
      // may have returned the region, whose bytes may be mapped anew since.
      if (!retiring_.count(info.region) || !retire_asked_.insert(info.region).second) continue;
    }
    bool agreed = true;
    if (ext_) {
      Status st = call_extension("retire", [&] {
        agreed = ext_->retire(info);
        return Status();
      });
      if (!st.ok()) agreed = false;
    }
    std::lock_guard lock(mu_);
    retire_asked_.erase(info.region);
    if (agreed && retiring_.erase(info.region)) {
      allocator_.release(info.pool_offset, info.size);
      released = true;
    }
  }
  if (released) (void)persist_regions();
}

Status Agent::load_regions() {
  if (config_.state_file.empty()) return {};
  const std::string& path = config_.state_file;
  auto text = rt_.file_system().read_file(path);
  if (!text.ok() && text.status().code() != ErrorCode::kNotFound) {
    return Error(ErrorCode::kIoError, "cannot read the region table --state-file " + path + ": " +
                                          text.status().message());
  }
  if (text.ok()) {
    auto table = decode_region_table(*text);
    if (!table.ok()) {
      return Error(ErrorCode::kBadRequest, "the region table --state-file " + path +
                                               " is corrupt (" + table.status().message() +
                                               "); not starting: its regions' memory would be "
                                               "handed out again");
    }
    std::lock_guard lock(mu_);
    next_region_ = std::max(next_region_, table->next_region);
    if (table->boot_id != config_.boot_id) {
      // The node rebooted: clients see a new boot and give their regions back.
      // Checked first: a table never loaded does not need the pool's old size.
      log_.warn("region table ", path, " is from boot ", table->boot_id,
                "; the node rebooted, starting with an empty pool");
    } else if (table->pool_size != pool_.size()) {
      return Error(ErrorCode::kBadRequest,
                   "the region table --state-file " + path + " is for a pool of " +
                       std::to_string(table->pool_size) + " bytes, not " +
                       std::to_string(pool_.size()) +
                       "; give --memory its old size, or remove the state file to start with "
                       "an empty pool");
    } else if (config_.pool_is_new) {
      // Restoring would hand out zeros as the regions' bytes under the same boot.
      log_.warn("region table ", path, " lists ", table->regions.size(),
                " regions, but the pool was created or grown at this start: their bytes are "
                "gone, starting with an empty pool");
      boot_.restore_unknown_periods(table->unknown_periods);  // the ~n still never repeats
      recorded_unknown_periods_ = table->unknown_periods;
    } else {
      for (const auto& r : table->regions) {
        if (!allocator_.reserve(r.pool_offset, r.size)) {
          return Error(ErrorCode::kBadRequest, "the region table --state-file " + path +
                                                   " is corrupt (region " +
                                                   std::to_string(r.region) + " overlaps another)");
        }
        ext::RegionInfo info{r.region, r.pool_offset, r.size};
        if (r.retiring) {
          retiring_[r.region] = info;
          continue;
        }
        auto region = std::make_unique<Region>();
        region->info = info;
        region->owner_handle = r.owner_handle;
        region->read_handle = r.read_handle;
        region->ever_mapped = r.mapped_before;
        region->alloc_token = r.alloc_token;
        region->recorded = true;
        if (!r.alloc_token.empty()) alloc_tokens_[token_key(r.alloc_token)] = r.region;
        regions_[r.region] = std::move(region);
      }
      boot_.restore_unknown_periods(table->unknown_periods);  // SPEC R6.4
      recorded_unknown_periods_ = table->unknown_periods;
      log_.info("region table ", path, ": ", regions_.size(), " regions, ", retiring_.size(),
                " retiring");
    }
  }
  // Written at once: an unwritable path fails the start, not the first alloc.
  if (Status st = persist_regions(); !st.ok()) return st;
  return {};
}

RegionTable Agent::snapshot_locked() const {
  RegionTable table{config_.boot_id, pool_.size(), next_region_, {}, boot_.unknown_periods()};
  for (const auto& [id, region] : regions_) {
    table.regions.push_back({id, region->info.pool_offset, region->info.size, region->owner_handle,
                             region->read_handle, region->ever_mapped, false, region->alloc_token});
  }
  for (const auto& [id, info] : retiring_) {
    // The handles no longer matter: the region is not_found for clients.
    table.regions.push_back({id, info.pool_offset, info.size, "-", "-", true, true, ""});
  }
  return table;
}

Status Agent::persist_regions() {
  if (config_.state_file.empty()) return {};
  std::lock_guard writing(state_mu_);
  return write_regions_locked();
}

void Agent::rewrite_unwritten_table() {
  if (config_.state_file.empty()) return;
  std::lock_guard writing(state_mu_);
  if (table_unwritten_) (void)write_regions_locked();
}

Status Agent::write_regions_locked() {
  if (config_.state_file.empty()) return {};
  std::vector<std::uint64_t> written;
  RegionTable table;
  {
    std::lock_guard lock(mu_);
    table = snapshot_locked();
  }
  // Encoded outside mu_: with thousands of regions the JSON took the agent's
  // lock from every other connection for milliseconds (session 30 review).
  // state_mu_ keeps the writes in snapshot order.
  const std::uint64_t unknown_periods = table.unknown_periods;
  for (const auto& r : table.regions) {
    if (!r.retiring) written.push_back(r.region);
  }
  const std::string text = encode_region_table(table);
  Status st = rt_.file_system().write_file(config_.state_file, text);
  table_unwritten_ = !st.ok();
  if (!st.ok()) {
    log_.error("cannot write the region table ", config_.state_file, ": ", st.message());
    return Error(ErrorCode::kIoError, "cannot write the region table --state-file " +
                                          config_.state_file + ": " + st.message());
  }
  std::lock_guard lock(mu_);
  for (std::uint64_t id : written) {
    if (auto it = regions_.find(id); it != regions_.end()) it->second->recorded = true;
  }
  recorded_unknown_periods_ = std::max(recorded_unknown_periods_, unknown_periods);
  return {};
}

Status Agent::check_ranges_locked(const protocol::ExtensionRequest& r,
                                  std::vector<ext::Range>& out) const {
  out.reserve(r.ranges.size());
  // Consecutive ranges mostly share a region: look it up and check its handle once.
  const Region* last = nullptr;
  for (const auto& range : r.ranges) {
    if (!last || last->info.region != range.region) {
      auto it = regions_.find(range.region);
      if (it == regions_.end() || !it->second->registered() || it->second->holders.empty()) {
        return bad_range("region " + std::to_string(range.region) + " is not mapped and held here");
      }
      if (!it->second->handle_matches(r.handles.at(range.region))) {
        return bad_range("the handle is not region " + std::to_string(range.region) + "'s");
      }
      last = it->second.get();
    }
    const Region& region = *last;
    if (range.offset > region.info.size || range.length > region.info.size - range.offset) {
      return bad_range("range [" + std::to_string(range.region) + ", " +
                       std::to_string(range.offset) + ", " + std::to_string(range.length) +
                       "] runs past the region's " + std::to_string(region.info.size) + " bytes");
    }
    out.push_back(
        {range.region, range.offset, range.length, region.info.pool_offset + range.offset});
  }
  return {};
}

Json Agent::refuse_hint_locked(const Json& id, const Status& status, bool with_boot) {
  ++metrics_.hints_refused[std::string(error_code_name(status.code()))];
  Json reply = error_reply(id, status);
  if (with_boot) reply["boot"] = boot_.boot();
  return reply;
}

void Agent::handle_extension(const SessionPtr& s, const Json& id,
                             const protocol::ExtensionRequest& r) {
  const std::string action(protocol::action_name(r.action));
  std::vector<ext::Range> ranges;
  bool opened_here = false;  // this read_hint opened its request (not a later piece of it)
  std::optional<Json> early = [&]() -> std::optional<Json> {
    std::lock_guard lock(mu_);
    // SPEC R3.1 / PROTOCOL.md check order: epoch, action, ranges, limit.
    if (protocol::action_has_ranges(r.action) && *r.epoch != boot_.boot()) {
      return refuse_hint_locked(
          id,
          Error(ErrorCode::kStaleEpoch,
                "epoch " + protocol::quote_client_text(*r.epoch) + " is not the boot"),
          true);
    }
    if (!advertised_.count(action)) {
      return refuse_hint_locked(
          id, Error(ErrorCode::kNotAdvertised, "action '" + action + "' not advertised"), false);
    }
    if (Status st = check_ranges_locked(r, ranges); !st.ok()) {
      return refuse_hint_locked(id, st, false);
    }
    ConnRecord& record = conns_[s->id];
    if (r.action == Action::kReadHint && !record.open_requests.count(r.name)) {
      if (record.open_requests.size() >= config_.max_hint_requests) {
        return refuse_hint_locked(
            id,
            Error(ErrorCode::kTooManyHintRequests, "this connection already has " +
                                                       std::to_string(config_.max_hint_requests) +
                                                       " hint requests open (--max-hint-requests)"),
            false);
      }
      record.open_requests.insert(r.name);
      opened_here = true;
    }
    if (r.action == Action::kReadHintEnd && record.open_requests.erase(r.name) == 0) {
      // Not open: answers {} and changes nothing (PROTOCOL.md).
      return protocol::ok_reply(id);
    }
    if (r.action == Action::kWriteWait) ++metrics_.write_waits;
    return std::nullopt;
  }();
  if (early) return complete(s, *early);
  if (r.action == Action::kWriteWait) {
    ext::WriteWait wait{s->id, r.name, std::move(ranges), r.timeout_ms};
    std::weak_ptr<Session> weak = s;
    // One reply, whichever comes first: the extension's answer, its failure,
    // or extension_failed once timeout_ms and a grace have passed without an
    // answer (a connection must not wait for ever on its extension).
    auto once = std::make_shared<WaitReply>();
    auto done = [this, weak, id, action, once, activity = activity_](Result<ext::Json> answer) {
      Activity::Scope scope(activity);  // the extension may answer from any thread, late
      if (!scope) return;
      if (once->answered.exchange(true)) return;
      auto live = weak.lock();
      if (!live) return;
      Json reply;
      {
        std::lock_guard lock(mu_);
        if (answer.ok() && (answer->is_object() || answer->is_null())) {
          ++metrics_.hints_accepted[action];
          reply = protocol::ok_reply(id, {{"result", *answer}});
        } else {
          reply = refuse_hint_locked(
              id,
              answer.ok() ? Error(ErrorCode::kExtensionFailed, "write_wait answer is not an object")
                          : Error(ErrorCode::kExtensionFailed, answer.status().message()),
              false);
        }
      }
      live->strand->post([this, weak, once, activity, reply = std::move(reply)] {
        Activity::Scope scope(activity);
        if (!scope) return;
        auto live = weak.lock();
        if (!live) return;
        if (once->timer) live->strand->cancel(*once->timer);  // set before this ran
        complete(live, reply);
      });
    };
    Status st = call_extension("write_wait", [&] {
      ext_->write_wait(wait, done);
      return Status();
    });
    if (!st.ok()) {
      if (once->answered.exchange(true)) return;  // it answered, then raised
      Json reply;
      {
        std::lock_guard lock(mu_);
        reply = refuse_hint_locked(id, Error(ErrorCode::kExtensionFailed, st.message()), false);
      }
      complete(s, reply);
      return;
    }
    if (once->answered.load()) return;  // answered at once
    once->timer = s->strand->post_after(
        std::chrono::milliseconds(r.timeout_ms) + kWriteWaitGrace,
        [this, weak, id, once, activity = activity_] {
          Activity::Scope scope(activity);
          if (!scope || once->answered.exchange(true)) return;
          auto live = weak.lock();
          if (!live) return;
          Json reply;
          {
            std::lock_guard lock(mu_);
            reply = refuse_hint_locked(
                id,
                Error(ErrorCode::kExtensionFailed,
                      "the extension did not answer the write_wait within its timeout_ms"),
                false);
          }
          complete(live, reply);
        });
    return;
  }
  ext::Hint hint{s->id, action, r.name, std::move(ranges)};
  Status st = call_extension("hint", [&] { return ext_->hint(hint); });
  Json reply;
  {
    std::lock_guard lock(mu_);
    if (st.ok()) {
      ++metrics_.hints_accepted[action];
      reply = protocol::ok_reply(id);
    } else {
      // A failed hint leaves nothing open (SPEC R3.3, PROTOCOL extension_failed),
      // also when it was a later piece of a request the extension took before.
      if (r.action == Action::kReadHint) {
        auto it = conns_.find(s->id);
        if (it != conns_.end()) it->second.open_requests.erase(r.name);
      }
      reply = refuse_hint_locked(id, Error(ErrorCode::kExtensionFailed, st.message()), false);
    }
  }
  if (!st.ok() && r.action == Action::kReadHint && !opened_here &&
      advertised_.count("read_hint_end")) {
    // The extension holds the earlier pieces: end them as the closed request's
    // end would have (outside the lock, as every extension call; only an
    // extension that takes ends is given one).
    (void)call_extension("hint", [&] {
      return ext_->hint(ext::Hint{s->id, "read_hint_end", r.name, {}});
    });
  }
  complete(s, reply);
}

// ---------------------------------------------------------------- state

void Agent::deregister_locked(Region& region) {
  for (auto* reg : {&region.reg, &region.read_reg}) {
    if (!*reg) continue;
    drop_registration_locked(**reg, region.info.region);
    reg->reset();
  }
}

// not_found: the NIC no longer knows the rkey, so nothing is left to drop.
bool Agent::still_live(const Status& deregistered) {
  return !deregistered.ok() && deregistered.code() != ErrorCode::kNotFound;
}

void Agent::drop_registration_locked(const runtime::Registration& reg, std::uint64_t region) {
  Status st = nic_.deregister(reg);
  if (still_live(st)) linger_locked(reg, region, st);
}

void Agent::linger_locked(const runtime::Registration& reg, std::uint64_t region,
                          const Status& why) {
  log_.warn("deregistering region ", region, " failed: ", why.message(),
            "; its rkey stays live, so the registration is tried again at each sweep and the "
            "region's memory is not given out again until it goes");
  lingering_.emplace_back(reg, region);
}

void Agent::retry_lingering() {
  std::vector<std::pair<runtime::Registration, std::uint64_t>> tries;
  {
    std::lock_guard lock(mu_);
    tries = lingering_;
  }
  // Outside mu_: each is an ibv_dereg_mr (only the sweep's strand retries).
  std::set<std::tuple<std::uint32_t, std::uint64_t, std::uint64_t>> gone;  // rkey, addr, region
  for (const auto& [reg, region] : tries) {
    if (still_live(nic_.deregister(reg))) continue;
    log_.info("region ", region, "'s lingering registration is gone");
    gone.emplace(reg.rkey, reg.addr, region);
  }
  std::lock_guard lock(mu_);
  std::erase_if(lingering_, [&gone](const auto& l) {
    return gone.count({l.first.rkey, l.first.addr, l.second}) != 0;
  });
}

bool Agent::lingers_locked(std::uint64_t region) const {
  return std::any_of(lingering_.begin(), lingering_.end(),
                     [region](const auto& lingering) { return lingering.second == region; });
}

void Agent::drop_hold_locked(Region& region, std::uint64_t conn) {
  region.holders.erase(conn);
  auto c = conns_.find(conn);
  if (c != conns_.end()) c->second.holds.erase(region.info.region);
  // Unheld memory is not exposed: the next map registers it again.
  if (region.holders.empty()) deregister_locked(region);
}

std::vector<std::pair<std::uint64_t, std::string>> Agent::drop_everything_locked() {
  for (auto& [id, region] : regions_) {
    deregister_locked(*region);
    region->holders.clear();
  }
  std::vector<std::pair<std::uint64_t, std::string>> closed;
  for (auto& [id, record] : conns_) {
    record.holds.clear();
    for (auto& name : record.open_requests) closed.emplace_back(id, name);
    record.open_requests.clear();
  }
  metrics_.hint_requests_closed_by_boot_change += closed.size();
  return closed;
}

void Agent::end_closed_requests(const std::vector<std::pair<std::uint64_t, std::string>>& closed) {
  // Only an extension that takes ends is given one (R4.2); without, nothing it
  // holds outlives a request.
  if (!advertised_.count("read_hint_end")) return;
  std::vector<std::pair<std::weak_ptr<Session>, std::string>> ends;
  {
    std::lock_guard lock(mu_);
    for (const auto& [conn, name] : closed) {
      auto it = sessions_.find(conn);
      if (it != sessions_.end()) ends.emplace_back(it->second, name);
    }
  }
  for (auto& [weak, name] : ends) {
    auto s = weak.lock();
    if (!s) continue;
    // On the connection's strand: after a hint of it the extension is still
    // in (c_abi.h: one connection's calls never overlap), before its later ones.
    s->strand->post([this, weak, name, activity = activity_] {
      Activity::Scope scope(activity);
      auto live = weak.lock();
      // A closing connection's connection_closed ends everything it had.
      if (!scope || !live || live->closing || stopped_) return;
      {
        // Open again (a read_hint under the new boot came in before this ran,
        // on threads): this end would close the new request at the extension.
        std::lock_guard lock(mu_);
        auto record = conns_.find(live->id);
        if (record != conns_.end() && record->second.open_requests.count(name)) return;
      }
      (void)call_extension("hint", [&] {
        return ext_->hint(ext::Hint{live->id, "read_hint_end", name, {}});
      });
    });
  }
}

void Agent::read_generation() {
  if (!ext_ || !ext_->has_memory_generation()) return;
  // One reader at a time: a caller that read earlier never sets an older value.
  std::lock_guard reading(generation_mu_);
  std::optional<std::string> generation;
  Status st = call_extension("memory_generation", [&] {
    generation = ext_->memory_generation();
    return Status();
  });
  if (!st.ok() || (generation && generation->empty())) generation.reset();
  // Cannot be part of a boot: as good as cannot tell (logged when the value changes).
  if (const std::string why = generation ? unusable_generation(*generation) : std::string();
      !why.empty()) {
    if (generation != unusable_logged_) {
      unusable_logged_ = generation;
      log_.warn("the memory generation the extension tells is not usable (", why,
                "): taken as cannot tell");
    }
    generation.reset();
  }
  if (generation && !unknown_count_recorded()) generation = keep_unknown_until_recorded(generation);
  std::string after;
  bool persist = false;
  std::vector<std::pair<std::uint64_t, std::string>> closed;
  {
    std::lock_guard lock(mu_);
    const std::string before = boot_.boot();
    const auto change = boot_.observe(generation, rt_.clock().now());
    if (change == BootTracker::Change::kNone) return;
    ++metrics_.boot_changes;
    closed = drop_everything_locked();
    after = boot_.boot();
    log_.warn("boot changed from '", before, "' to '", after,
              "': every mapping, hold and open hint request dropped");
    persist = change == BootTracker::Change::kUnknown;
  }
  // PROTOCOL (Boot): the change closed them; the extension holds what they asked for.
  end_closed_requests(closed);
  // A restarted agent continues the `~n` count (R6.4); a failed write is logged.
  if (persist) (void)persist_regions();
  // Outside mu_, under generation_mu_: observers see changes one at a time, in order.
  if (config_.on_boot_change) config_.on_boot_change(after);
}

bool Agent::unknown_count_recorded() const {
  if (config_.state_file.empty()) return true;  // nothing survives a restart (docs/agent.md)
  std::lock_guard lock(mu_);
  return !boot_.unknown() || recorded_unknown_periods_ >= boot_.unknown_periods();
}

std::optional<std::string> Agent::keep_unknown_until_recorded(
    std::optional<std::string> generation) {
  const runtime::Instant now = rt_.clock().now();
  // A failed write is tried again once per grace, not on every poll (each logs).
  if (!next_record_try_ || now >= *next_record_try_) {
    next_record_try_ = now + config_.generation_grace;
    (void)persist_regions();
    if (unknown_count_recorded()) {
      next_record_try_.reset();
      return generation;
    }
    log_.warn(
        "the generation can be read again, but the unknown period's count cannot be "
        "written to --state-file ",
        config_.state_file,
        ": the boot stays unknown until it can (a restart would advertise the boot the "
        "period left); make the state file writable");
  }
  return std::nullopt;
}

// The timers re-arm on the strand they were given, never reading the member
// that owns it: ~Agent resets that member while a task may still run (TSan).
void Agent::schedule_poll(runtime::Strand& strand) {
  if (stopped_) return;
  strand.post_after(config_.generation_poll, [this, &strand, activity = activity_] {
    Activity::Scope scope(activity);
    if (!scope || stopped_) return;
    read_generation();
    schedule_poll(strand);
  });
}

void Agent::schedule_sweep(runtime::Strand& strand) {
  if (stopped_) return;
  strand.post_after(config_.sweep_interval, [this, &strand, activity = activity_] {
    Activity::Scope scope(activity);
    if (!scope || stopped_) return;
    sweep();
    schedule_sweep(strand);
  });
}

void Agent::sweep() {
  read_generation();
  std::vector<ext::RegionInfo> candidates;
  std::vector<SessionPtr> closed;
  retry_lingering();
  {
    std::lock_guard lock(mu_);
    for (const auto& [id, info] : retiring_) candidates.push_back(info);
    closed = take_reapable_locked();
  }
  retire_outside_lock(candidates);
  rewrite_unwritten_table();
  const std::size_t ending = closed.size();
  closed.clear();  // their strands end here, never on themselves
  std::lock_guard lock(mu_);
  reaping_ -= ending;
}

void Agent::reap_closed_sessions() {
  std::vector<SessionPtr> closed;
  {
    std::lock_guard lock(mu_);
    closed = take_reapable_locked();
    reap_posted_ = false;
  }
  const std::size_t ending = closed.size();
  closed.clear();  // joins each one's thread: off its own strand
  bool again = false;
  {
    std::lock_guard lock(mu_);
    reaping_ -= ending;
    // Sessions still held elsewhere: look again soon, not only at the sweep.
    again = !closed_sessions_.empty() && !std::exchange(reap_posted_, true);
  }
  if (again) post_reap(std::chrono::milliseconds(10));
}

void Agent::post_reap(runtime::Duration delay) {
  auto reap = [this, activity = activity_] {
    Activity::Scope scope(activity);
    if (scope) reap_closed_sessions();
  };
  if (delay == runtime::Duration(0)) return reap_strand_->post(std::move(reap));
  reap_strand_->post_after(delay, std::move(reap));
}

std::vector<Agent::SessionPtr> Agent::take_reapable_locked() {
  // A session another thread still holds (its close handler, a late
  // write_wait answer) would end on that thread, perhaps its own strand,
  // which cannot join itself: the next reap or sweep takes it.
  std::vector<SessionPtr> reapable;
  std::vector<SessionPtr> held;
  for (auto& s : closed_sessions_) (s.use_count() == 1 ? reapable : held).push_back(std::move(s));
  closed_sessions_ = std::move(held);
  reaping_ += reapable.size();  // the sweep and the reaper may both be joining
  return reapable;
}

}  // namespace rcxl::agent
