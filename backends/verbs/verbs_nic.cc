#include "backends/verbs/verbs_nic.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <infiniband/verbs.h>
#include <netdb.h>
#include <poll.h>
#include <rdma/rdma_cma.h>
#include <sys/eventfd.h>
#include <sys/resource.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <charconv>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <deque>
#include <map>
#include <mutex>
#include <optional>
#include <thread>
#include <vector>

#include "backends/verbs/bounce_ring.h"
#include "backends/verbs/socket_address.h"
#include "backends/verbs/thread_strand.h"
#include "backends/verbs/verbs_status.h"

namespace rcxl::verbs {

using runtime::RdmaOp;

namespace {

Status os_error(ErrorCode code, const std::string& what, int err = errno) {
  return Error(code, what + ": " + std::strerror(err));
}

// ibv_reg_mr pins the pages: ENOMEM is nearly always RLIMIT_MEMLOCK (8 MiB by
// default), so the error says the limit and how to raise it.
Status reg_mr_error(int err, const std::string& what, std::uint64_t bytes) {
  std::string hint;
  rlimit limit{};
  if (err == ENOMEM && getrlimit(RLIMIT_MEMLOCK, &limit) == 0 && limit.rlim_cur != RLIM_INFINITY) {
    hint = " (" + std::to_string(bytes) + " bytes to pin; the locked-memory limit is " +
           std::to_string(limit.rlim_cur) +
           " bytes: raise it with `ulimit -l unlimited` or systemd's LimitMEMLOCK=infinity)";
  } else if (err == ENOMEM) {
    hint = " (locked memory limit? see ulimit -l)";
  }
  return os_error(ErrorCode::kIoError, "ibv_reg_mr " + what + hint, err);
}

// "HOST", "HOST:PORT", "[IPv6]:PORT" or a bare IPv6 address into a sockaddr.
Result<sockaddr_storage> parse_endpoint(const std::string& text, std::uint16_t default_port,
                                        bool numeric_only) {
  std::string host = text;
  std::string port = std::to_string(default_port);
  const auto colon = text.rfind(':');
  if (!text.empty() && text.front() == '[') {
    const auto close = text.find(']');
    if (close == std::string::npos) return Error(ErrorCode::kBadRequest, "bad address " + text);
    host = text.substr(1, close - 1);
    if (close + 1 < text.size()) {
      if (text[close + 1] != ':') return Error(ErrorCode::kBadRequest, "bad address " + text);
      port = text.substr(close + 2);
    }
  } else if (colon != std::string::npos && text.find(':') == colon) {
    host = text.substr(0, colon);
    port = text.substr(colon + 1);
  }
  // getaddrinfo takes a numeric service past 65535 modulo 2^16 (70000 is 4464).
  unsigned port_value = 0;
  const auto [end, ec] = std::from_chars(port.data(), port.data() + port.size(), port_value);
  if (ec != std::errc() || end != port.data() + port.size() || port_value > 65535) {
    return Error(ErrorCode::kBadRequest,
                 "bad RDMA endpoint '" + text + "': the port must be a whole number 0..65535");
  }
  addrinfo hints{};
  hints.ai_flags = AI_NUMERICSERV | (numeric_only ? AI_NUMERICHOST : 0);
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  addrinfo* info = nullptr;
  if (host.empty() || port.empty()) {
    return Error(ErrorCode::kBadRequest, "bad RDMA endpoint '" + text + "'");
  }
  if (const int err = getaddrinfo(host.c_str(), port.c_str(), &hints, &info); err != 0 || !info) {
    // A name that does not resolve (now) is an unreachable peer, as on the sim;
    // only a malformed address is the caller's mistake.
    const bool lookup_failed = !numeric_only && lookup_may_succeed_later(err);
    if (info) freeaddrinfo(info);
    return Error(lookup_failed ? ErrorCode::kUnavailable : ErrorCode::kBadRequest,
                 "bad RDMA endpoint '" + text + "'" +
                     (err != 0 ? std::string(": ") + gai_strerror(err) : std::string()));
  }
  sockaddr_storage out{};
  std::memcpy(&out, info->ai_addr, info->ai_addrlen);
  freeaddrinfo(info);
  return out;
}

std::string format_ip_port(const sockaddr* addr, std::uint16_t port) {
  char text[INET6_ADDRSTRLEN] = {};
  if (addr->sa_family == AF_INET6) {
    inet_ntop(AF_INET6, &reinterpret_cast<const sockaddr_in6*>(addr)->sin6_addr, text, sizeof text);
    return "[" + std::string(text) + "]:" + std::to_string(port);
  }
  inet_ntop(AF_INET, &reinterpret_cast<const sockaddr_in*>(addr)->sin_addr, text, sizeof text);
  return std::string(text) + ":" + std::to_string(port);
}

// The IPv4 address a RoCE device carries in its GID table (::ffff:a.b.c.d).
std::string device_ipv4(ibv_context* ctx) {
  ibv_port_attr port{};
  if (ibv_query_port(ctx, 1, &port) != 0) return {};
  for (int i = 0; i < port.gid_tbl_len; ++i) {
    ibv_gid gid{};
    if (ibv_query_gid(ctx, 1, i, &gid) != 0) continue;
    const auto* raw = gid.raw;
    const bool mapped = std::all_of(raw, raw + 10, [](std::uint8_t b) { return b == 0; }) &&
                        raw[10] == 0xff && raw[11] == 0xff;
    if (!mapped) continue;
    char text[INET_ADDRSTRLEN] = {};
    inet_ntop(AF_INET, raw + 12, text, sizeof text);
    return text;
  }
  return {};
}

// What a memory side puts in the reject of a connect whose proof it refused.
constexpr char kNoProofReject[] = {'r', 'c', 'x', 'l', '-', 'n', 'o', '-', 'p', 'r', 'o', 'o', 'f'};

unsigned verbs_access(unsigned access) {
  // Remote write needs local write; every registration gets it (the NIC writes READ data).
  unsigned flags = IBV_ACCESS_LOCAL_WRITE;
  if (access & runtime::kAccessRemoteRead) flags |= IBV_ACCESS_REMOTE_READ;
  if (access & runtime::kAccessRemoteWrite) flags |= IBV_ACCESS_REMOTE_WRITE;
  return flags;
}

void set_nonblocking(int fd) {
  fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) | O_NONBLOCK);
}

}  // namespace

namespace internal {

// What an rdma_cm_id's context points at.
struct CmOwner {
  enum class Kind { kListener, kPassive, kActive };
  explicit CmOwner(Kind k) : kind(k) {}
  Kind kind;
};

// Memory side of one accepted queue pair: it only answers one-sided ops.
struct PassiveConn : CmOwner {
  PassiveConn() : CmOwner(Kind::kPassive) {}
  rdma_cm_id* id = nullptr;
};

// One op batch handed to post(): per-op statuses, delivered once all its WRs end.
struct Batch {
  std::vector<Status> statuses;
  std::size_t remaining_wrs = 0;
  runtime::QueuePair::CompletionHandler done;
};

// One work request: an op, or a piece of an op longer than max_wr_bytes.
struct WorkItem {
  std::shared_ptr<Batch> batch;
  std::size_t op_index = 0;
  RdmaOp::Kind kind = RdmaOp::Kind::kRead;
  std::byte* local = nullptr;
  std::uint64_t length = 0;
  std::uint64_t remote_addr = 0;
  std::uint32_t rkey = 0;
  // Filled when posted.
  std::uint64_t seq = 0;
  bool bounced = false;
  std::uint64_t bounce_offset = 0;
  // Batches with no work request posted behind it: reported right after it.
  std::vector<std::shared_ptr<Batch>> then;
};

// Initiator side of one queue pair. Touched only on the event thread.
struct Connection : CmOwner {
  Connection() : CmOwner(Kind::kActive), ring(0) {}
  enum class State { kConnecting, kReady, kBroken };

  std::uint64_t token = 0;
  std::string endpoint;
  sockaddr_storage destination{};
  StrandPoster poster;
  runtime::Nic::ConnectHandler first_connect;  // set until the first connect ends
  std::string proof;                           // the connect's private data (may be empty)
  State state = State::kBroken;
  bool released = false;  // its handle is gone: it closes once its ops have completed

  rdma_cm_id* id = nullptr;
  ibv_cq* cq = nullptr;
  std::byte* bounce = nullptr;
  ibv_mr* bounce_mr = nullptr;
  BounceRing ring;

  std::deque<WorkItem> pending;  // not yet posted
  std::deque<WorkItem> posted;   // in the send queue, in posting order
  std::uint32_t send_queue_free = 0;
  std::uint32_t unsignaled_run = 0;
  std::uint64_t next_seq = 1;
};

class NicCore : public std::enable_shared_from_this<NicCore> {
 public:
  explicit NicCore(VerbsNicOptions options) : options_(std::move(options)) {}
  ~NicCore() { shutdown(); }

  Status start();
  void shutdown();

  // Thread-safe. False (task dropped) once the event thread has stopped.
  bool run_on_event_thread(std::function<void()> task);

  Result<runtime::Registration> register_memory(runtime::MemoryPool& pool, std::uint64_t offset,
                                                std::uint64_t length, unsigned access);
  Status deregister(const runtime::Registration& registration);
  Status register_local(std::span<std::byte> buffer);
  Status deregister_local(std::span<std::byte> buffer);
  void connect(const std::string& endpoint, runtime::Strand& strand, std::string proof,
               const runtime::Nic::ConnectHandler& done);
  // Any thread: connects `check` refuses are rejected from now on.
  void check_connects(runtime::Nic::ConnectCheck check) {
    std::lock_guard lock(check_mu_);
    check_ = std::move(check);
  }

  // Event thread only.
  void submit(std::uint64_t token, std::vector<RdmaOp> ops,
              runtime::QueuePair::CompletionHandler done, const StrandPoster& poster);
  // Its handle is gone: closed now, or once the ops posted on it have completed.
  void close_connection(std::uint64_t token);
  // A released connection with no op left is closed (queued: never under a caller's feet).
  void close_when_drained(const Connection& conn);

  const std::string& endpoint() const { return endpoint_; }
  const std::string& device() const { return options_.device; }

 private:
  Status open_device();
  Status start_listener();
  void event_loop();
  void drain_tasks();
  void on_cm_events();
  void on_cm_event(rdma_cm_event_type type, rdma_cm_id* id, int status,
                   const rdma_conn_param& param, std::string_view private_data);
  void on_connect_request(rdma_cm_id* child, const rdma_conn_param& param,
                          std::string_view private_data);
  void on_passive_event(PassiveConn* passive, rdma_cm_event_type type);
  void on_active_event(Connection& conn, rdma_cm_event_type type, int status,
                       std::string_view private_data);
  void on_completion_events();
  void on_work_completion(Connection& conn, const ibv_wc& wc);

  void start_connect(Connection& conn);
  Status create_queue_pair(Connection& conn);
  void connection_established(Connection& conn);
  void connection_failed(Connection& conn, const Status& why);
  void destroy_queue_pair(Connection& conn);
  void pump(Connection& conn);
  // The lkey of a local registration covering [data, data + length), read
  // under the lock (another thread may deregister the MR right after).
  std::optional<std::uint32_t> find_local_lkey(const std::byte* data, std::uint64_t length);
  void finish_item(Connection& conn, WorkItem& item, const Status& status);
  void fail_all(Connection& conn, const Status& why);
  void destroy_connection(Connection& conn);
  void destroy_passive(PassiveConn* passive);

  VerbsNicOptions options_;
  std::string endpoint_ = "none";
  std::string device_ip_;

  ibv_context** device_list_ = nullptr;
  ibv_context* ctx_ = nullptr;  // librdmacm's context, so cm ids and our PD match
  ibv_device_attr attr_{};
  ibv_pd* pd_ = nullptr;
  ibv_comp_channel* comp_channel_ = nullptr;
  ibv_cq* passive_cq_ = nullptr;
  rdma_event_channel* cm_channel_ = nullptr;
  CmOwner listener_owner_{CmOwner::Kind::kListener};
  rdma_cm_id* listen_id_ = nullptr;
  int wake_fd_ = -1;
  std::thread thread_;

  std::mutex tasks_mu_;
  std::mutex check_mu_;
  runtime::Nic::ConnectCheck check_;  // under check_mu_
  std::deque<std::function<void()>> tasks_;
  bool stopping_ = false;
  bool stopped_ = false;
  bool closing_ = false;  // set after the event thread ended: late tasks only fail

  std::mutex mr_mu_;
  std::map<std::uint32_t, ibv_mr*> remote_mrs_;                            // by rkey
  std::map<std::uintptr_t, std::pair<std::uint64_t, ibv_mr*>> local_mrs_;  // by start

  // Event thread only.
  std::map<std::uint64_t, std::unique_ptr<Connection>> connections_;
  std::map<rdma_cm_id*, std::unique_ptr<PassiveConn>> passive_;
  std::uint64_t next_token_ = 1;
  std::uint32_t qp_depth_ = 0;
  std::uint8_t rd_atomic_ = 0;
};

// The handle a caller holds; the connection lives on the event thread.
class VerbsQueuePair final : public runtime::QueuePair {
 public:
  VerbsQueuePair(std::shared_ptr<NicCore> core, std::uint64_t token, std::string peer,
                 StrandPoster poster)
      : core_(std::move(core)), token_(token), peer_(std::move(peer)), poster_(std::move(poster)) {}

  ~VerbsQueuePair() override {
    NicCore* core = core_.get();
    core_->run_on_event_thread([core, token = token_] { core->close_connection(token); });
  }

  void post(std::vector<RdmaOp> ops, CompletionHandler done) override {
    NicCore* core = core_.get();
    auto shared_done = std::make_shared<CompletionHandler>(std::move(done));
    const std::size_t count = ops.size();
    const bool queued = core_->run_on_event_thread(
        [core, token = token_, ops = std::move(ops), shared_done, poster = poster_]() mutable {
          core->submit(token, std::move(ops), std::move(*shared_done), poster);
        });
    if (!queued) {
      std::vector<Status> failed(count, Error(ErrorCode::kUnavailable, "RDMA NIC is closed"));
      poster_([done = std::move(*shared_done), failed] { done(failed); });
    }
  }

  std::string peer() const override { return peer_; }

 private:
  std::shared_ptr<NicCore> core_;
  std::uint64_t token_;
  std::string peer_;
  StrandPoster poster_;
};

// ------------------------------------------------------------------ setup

Status NicCore::start() {
  if (Status s = open_device(); !s.ok()) return s;
  wake_fd_ = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
  if (wake_fd_ < 0) return os_error(ErrorCode::kInternal, "eventfd");
  if (options_.listen) {
    if (Status s = start_listener(); !s.ok()) return s;
  }
  thread_ = std::thread([this] { event_loop(); });
  return {};
}

Status NicCore::open_device() {
  int count = 0;
  device_list_ = rdma_get_devices(&count);
  for (int i = 0; device_list_ && i < count; ++i) {
    ibv_context* candidate = device_list_[i];  // one load: the check and the keep see the same
    if (options_.device == ibv_get_device_name(candidate->device)) ctx_ = candidate;
  }
  if (!ctx_) {
    std::string known;
    for (int i = 0; device_list_ && i < count; ++i) {
      known +=
          std::string(known.empty() ? "" : ", ") + ibv_get_device_name(device_list_[i]->device);
    }
    return Error(ErrorCode::kUnavailable,
                 "no RDMA device '" + options_.device +
                     "' (have: " + (known.empty() ? "none" : known) +
                     "); pick one from ibv_devices, bring up SoftRoCE (rdma link add rxe0 type "
                     "rxe netdev IFACE), or try it in the VM: ci/rxe-vm (docs/hardware.md)");
  }
  if (ibv_query_device(ctx_, &attr_) != 0) {
    return os_error(ErrorCode::kIoError, "ibv_query_device " + options_.device);
  }
  qp_depth_ = std::min<std::uint32_t>(options_.max_send_wr, attr_.max_qp_wr);
  qp_depth_ = std::min<std::uint32_t>(qp_depth_, attr_.max_cqe - 1);
  rd_atomic_ =
      static_cast<std::uint8_t>(std::min({attr_.max_qp_rd_atom, attr_.max_qp_init_rd_atom, 255}));
  pd_ = ibv_alloc_pd(ctx_);
  if (!pd_) return os_error(ErrorCode::kIoError, "ibv_alloc_pd " + options_.device);
  comp_channel_ = ibv_create_comp_channel(ctx_);
  if (!comp_channel_) return os_error(ErrorCode::kIoError, "ibv_create_comp_channel");
  set_nonblocking(comp_channel_->fd);
  passive_cq_ = ibv_create_cq(ctx_, 16, nullptr, nullptr, 0);
  if (!passive_cq_) return os_error(ErrorCode::kIoError, "ibv_create_cq");
  cm_channel_ = rdma_create_event_channel();
  if (!cm_channel_) return os_error(ErrorCode::kIoError, "rdma_create_event_channel");
  set_nonblocking(cm_channel_->fd);
  device_ip_ = device_ipv4(ctx_);
  return {};
}

Status NicCore::start_listener() {
  std::string where = options_.listen_address.empty() ? device_ip_ : options_.listen_address;
  if (where.empty()) {
    return Error(ErrorCode::kBadRequest,
                 "device " + options_.device + " has no IPv4 RoCE address; give a listen address");
  }
  auto addr = parse_endpoint(where, options_.listen_port, true);
  if (!addr) return addr.status();
  if (rdma_create_id(cm_channel_, &listen_id_, &listener_owner_, RDMA_PS_TCP) != 0) {
    return os_error(ErrorCode::kIoError, "rdma_create_id");
  }
  if (rdma_bind_addr(listen_id_, reinterpret_cast<sockaddr*>(&*addr)) != 0) {
    return os_error(ErrorCode::kUnavailable, "rdma_bind_addr " + where);
  }
  if (listen_id_->verbs != ctx_) {
    return Error(ErrorCode::kBadRequest,
                 where + " is not an address of RDMA device " + options_.device);
  }
  if (rdma_listen(listen_id_, 64) != 0) return os_error(ErrorCode::kIoError, "rdma_listen");
  endpoint_ = format_ip_port(rdma_get_local_addr(listen_id_), ntohs(rdma_get_src_port(listen_id_)));
  return {};
}

// Runs after the event thread is gone (or never started): nothing else touches verbs.
void NicCore::shutdown() {
  {
    std::lock_guard lock(tasks_mu_);
    if (stopped_) return;
    stopping_ = true;
  }
  if (thread_.joinable()) {
    std::uint64_t one = 1;
    (void)!write(wake_fd_, &one, sizeof one);
    thread_.join();
  }
  std::deque<std::function<void()>> late;
  {
    std::lock_guard lock(tasks_mu_);
    stopped_ = true;
    late.swap(tasks_);
  }
  // Tasks queued before the stop still answer their callers (with kUnavailable).
  closing_ = true;
  for (auto& task : late) task();
  while (!connections_.empty()) {
    Connection& conn = *connections_.begin()->second;
    destroy_queue_pair(conn);  // before the ops are reported done (see close_connection)
    fail_all(conn, Error(ErrorCode::kUnavailable, "RDMA NIC is closed"));
    if (conn.first_connect) {
      auto done = std::move(conn.first_connect);
      conn.poster([done] { done(Error(ErrorCode::kUnavailable, "RDMA NIC is closed")); });
    }
    destroy_connection(conn);
  }
  while (!passive_.empty()) destroy_passive(passive_.begin()->second.get());
  if (listen_id_) rdma_destroy_id(listen_id_);
  listen_id_ = nullptr;
  {
    std::lock_guard lock(mr_mu_);
    for (auto& [rkey, mr] : remote_mrs_) ibv_dereg_mr(mr);
    for (auto& [start, local] : local_mrs_) ibv_dereg_mr(local.second);
    remote_mrs_.clear();
    local_mrs_.clear();
  }
  if (passive_cq_) ibv_destroy_cq(passive_cq_);
  if (comp_channel_) ibv_destroy_comp_channel(comp_channel_);
  if (pd_) ibv_dealloc_pd(pd_);
  if (cm_channel_) rdma_destroy_event_channel(cm_channel_);
  if (device_list_) rdma_free_devices(device_list_);
  if (wake_fd_ >= 0) close(wake_fd_);
  passive_cq_ = nullptr;
  comp_channel_ = nullptr;
  pd_ = nullptr;
  cm_channel_ = nullptr;
  device_list_ = nullptr;
  wake_fd_ = -1;
}

bool NicCore::run_on_event_thread(std::function<void()> task) {
  std::lock_guard lock(tasks_mu_);
  if (stopping_ || stopped_) return false;
  tasks_.push_back(std::move(task));
  // Under the lock: shutdown() closes wake_fd_ only after it set stopping_
  // under it, so this never writes to a closed (or reused) descriptor.
  std::uint64_t one = 1;
  (void)!write(wake_fd_, &one, sizeof one);
  return true;
}

// ------------------------------------------------------------- event loop

void NicCore::event_loop() {
  pollfd fds[3] = {
      {wake_fd_, POLLIN, 0}, {cm_channel_->fd, POLLIN, 0}, {comp_channel_->fd, POLLIN, 0}};
  for (;;) {
    if (poll(fds, 3, -1) < 0) {
      // Leaving would strand every queued task unanswered (stopping_ is not
      // set): EINTR goes round at once, anything else (ENOMEM) after a pause.
      if (errno != EINTR) std::this_thread::sleep_for(std::chrono::milliseconds(10));
      std::lock_guard lock(tasks_mu_);
      if (stopping_) break;  // shutdown() joins: it must not wait for poll() to recover
      continue;
    }
    if (fds[0].revents) {
      std::uint64_t value = 0;
      (void)!read(wake_fd_, &value, sizeof value);
    }
    if (fds[1].revents) on_cm_events();
    if (fds[2].revents) on_completion_events();
    drain_tasks();
    std::lock_guard lock(tasks_mu_);
    if (stopping_) break;
  }
}

void NicCore::drain_tasks() {
  for (;;) {
    std::function<void()> task;
    {
      std::lock_guard lock(tasks_mu_);
      if (tasks_.empty()) return;
      task = std::move(tasks_.front());
      tasks_.pop_front();
    }
    task();
  }
}

void NicCore::on_cm_events() {
  rdma_cm_event* event = nullptr;
  while (rdma_get_cm_event(cm_channel_, &event) == 0) {
    // Copy and ack first: destroying an id waits for its events to be acked.
    const rdma_cm_event_type type = event->event;
    rdma_cm_id* id = event->id;
    const int status = event->status;
    const rdma_conn_param param = event->param.conn;
    // The private data lives in the event, which the ack frees.
    std::string private_data;
    if ((type == RDMA_CM_EVENT_CONNECT_REQUEST || type == RDMA_CM_EVENT_REJECTED) &&
        param.private_data) {
      private_data.assign(static_cast<const char*>(param.private_data), param.private_data_len);
    }
    rdma_ack_cm_event(event);
    on_cm_event(type, id, status, param, private_data);
  }
}

void NicCore::on_cm_event(rdma_cm_event_type type, rdma_cm_id* id, int status,
                          const rdma_conn_param& param, std::string_view private_data) {
  auto* owner = static_cast<CmOwner*>(id->context);
  if (!owner) return;
  switch (owner->kind) {
    case CmOwner::Kind::kListener:
      if (type == RDMA_CM_EVENT_CONNECT_REQUEST) on_connect_request(id, param, private_data);
      return;
    case CmOwner::Kind::kPassive:
      return on_passive_event(static_cast<PassiveConn*>(owner), type);
    case CmOwner::Kind::kActive:
      return on_active_event(*static_cast<Connection*>(owner), type, status, private_data);
  }
}

// ------------------------------------------------------------ memory side

void NicCore::on_connect_request(rdma_cm_id* child, const rdma_conn_param& param,
                                 std::string_view private_data) {
  runtime::Nic::ConnectCheck check;
  {
    std::lock_guard lock(check_mu_);
    check = check_;
  }
  if (check && !check(private_data)) {
    // The reason travels back in the reject's private data (consumer defined).
    rdma_reject(child, kNoProofReject, sizeof kNoProofReject);
    rdma_destroy_id(child);
    return;
  }
  auto passive = std::make_unique<PassiveConn>();
  passive->id = child;
  child->context = passive.get();
  ibv_qp_init_attr init{};
  init.send_cq = passive_cq_;
  init.recv_cq = passive_cq_;
  init.qp_type = IBV_QPT_RC;
  init.cap.max_send_wr = 1;
  init.cap.max_recv_wr = 1;
  init.cap.max_send_sge = 1;
  init.cap.max_recv_sge = 1;
  if (child->verbs != ctx_ || rdma_create_qp(child, pd_, &init) != 0) {
    rdma_reject(child, nullptr, 0);
    rdma_destroy_id(child);
    return;
  }
  rdma_conn_param accept{};
  // Inbound READs this side answers at once: what the initiator asked, capped by us.
  accept.responder_resources = std::min(param.initiator_depth, rd_atomic_);
  accept.initiator_depth = std::min(param.responder_resources, rd_atomic_);
  accept.rnr_retry_count = 7;
  if (rdma_accept(child, &accept) != 0) {
    rdma_destroy_qp(child);
    rdma_destroy_id(child);
    return;
  }
  passive_[child] = std::move(passive);
}

void NicCore::on_passive_event(PassiveConn* passive, rdma_cm_event_type type) {
  switch (type) {
    case RDMA_CM_EVENT_DISCONNECTED:
    case RDMA_CM_EVENT_DEVICE_REMOVAL:
    case RDMA_CM_EVENT_CONNECT_ERROR:
    case RDMA_CM_EVENT_UNREACHABLE:
    case RDMA_CM_EVENT_REJECTED:
      destroy_passive(passive);
      return;
    default:
      return;
  }
}

void NicCore::destroy_passive(PassiveConn* passive) {
  rdma_cm_id* id = passive->id;
  rdma_disconnect(id);
  if (id->qp) rdma_destroy_qp(id);
  rdma_destroy_id(id);
  passive_.erase(id);
}

Result<runtime::Registration> NicCore::register_memory(runtime::MemoryPool& pool,
                                                       std::uint64_t offset, std::uint64_t length,
                                                       unsigned access) {
  if (offset > pool.size() || length > pool.size() - offset || length == 0) {
    return Error(ErrorCode::kBadRange, "registration outside the pool");
  }
  std::byte* base = pool.mapped();
  if (!base) return Error(ErrorCode::kBadRequest, "pool " + pool.describe() + " is not mapped");
  ibv_mr* mr = ibv_reg_mr(pd_, base + offset, length, static_cast<int>(verbs_access(access)));
  if (!mr) {
    const int err = errno;  // before anything that allocates
    return reg_mr_error(err, std::to_string(length) + " bytes", length);
  }
  std::lock_guard lock(mr_mu_);
  remote_mrs_[mr->rkey] = mr;
  return runtime::Registration{reinterpret_cast<std::uint64_t>(base + offset), mr->rkey, length};
}

Status NicCore::deregister(const runtime::Registration& registration) {
  ibv_mr* mr = nullptr;
  {
    std::lock_guard lock(mr_mu_);
    auto it = remote_mrs_.find(registration.rkey);
    // rkeys are reused (an index and an 8-bit key): one whose address or
    // length differ is a later registration's, and this one is gone.
    if (it == remote_mrs_.end() ||
        reinterpret_cast<std::uint64_t>(it->second->addr) != registration.addr ||
        it->second->length != registration.length) {
      return Error(ErrorCode::kNotFound, "no registration with rkey " +
                                             std::to_string(registration.rkey) +
                                             " at that address and length");
    }
    mr = it->second;
    remote_mrs_.erase(it);  // taken: a concurrent deregister cannot free it twice
  }
  if (int err = ibv_dereg_mr(mr); err != 0) {
    // Still live on the NIC: keep it known (to retry, and for shutdown), not leaked (R6.3).
    std::lock_guard lock(mr_mu_);
    remote_mrs_.emplace(registration.rkey, mr);
    return os_error(ErrorCode::kIoError, "ibv_dereg_mr", err);
  }
  return {};
}

Status NicCore::register_local(std::span<std::byte> buffer) {
  if (buffer.empty()) return Error(ErrorCode::kBadRequest, "empty local buffer");
  ibv_mr* mr =
      ibv_reg_mr(pd_, buffer.data(), buffer.size(), static_cast<int>(IBV_ACCESS_LOCAL_WRITE));
  if (!mr) {
    const int err = errno;
    return reg_mr_error(err, "(local buffer)", buffer.size());
  }
  std::lock_guard lock(mr_mu_);
  auto& slot = local_mrs_[reinterpret_cast<std::uintptr_t>(buffer.data())];
  if (slot.second) ibv_dereg_mr(slot.second);
  slot = {buffer.size(), mr};
  return {};
}

Status NicCore::deregister_local(std::span<std::byte> buffer) {
  std::lock_guard lock(mr_mu_);
  auto it = local_mrs_.find(reinterpret_cast<std::uintptr_t>(buffer.data()));
  if (it == local_mrs_.end()) return Error(ErrorCode::kNotFound, "local buffer not registered");
  // Posted work may still use it: callers deregister only when their ops are done.
  const int failed = ibv_dereg_mr(it->second.second);
  // Forgotten even then: a later buffer at this address must not be posted
  // through the old MR, which pins the old pages.
  local_mrs_.erase(it);
  if (failed != 0) return os_error(ErrorCode::kIoError, "ibv_dereg_mr (local buffer)", failed);
  return {};
}

std::optional<std::uint32_t> NicCore::find_local_lkey(const std::byte* data, std::uint64_t length) {
  std::lock_guard lock(mr_mu_);
  const auto start = reinterpret_cast<std::uintptr_t>(data);
  auto it = local_mrs_.upper_bound(start);
  if (it == local_mrs_.begin()) return std::nullopt;
  --it;
  const std::uint64_t into = start - it->first;
  if (into > it->second.first || length > it->second.first - into) return std::nullopt;
  return it->second.second->lkey;
}

// --------------------------------------------------------- initiator side

void NicCore::connect(const std::string& endpoint, runtime::Strand& strand, std::string proof,
                      const runtime::Nic::ConnectHandler& done) {
  StrandPoster poster = make_strand_poster(strand);
  if (proof.size() > runtime::Nic::kMaxConnectProofBytes) {
    poster([done] { done(Error(ErrorCode::kBadRequest, "a connect proof is at most 56 bytes")); });
    return;
  }
  auto dest = parse_endpoint(endpoint, kDefaultRdmaCmPort, false);
  if (!dest) {
    poster([done, status = dest.status()] { done(status); });
    return;
  }
  const bool queued =
      run_on_event_thread([this, endpoint, dest = *dest, poster, done, proof = std::move(proof)] {
        if (closing_) {
          poster([done] { done(Error(ErrorCode::kUnavailable, "RDMA NIC is closed")); });
          return;
        }
        auto conn = std::make_unique<Connection>();
        conn->token = next_token_++;
        conn->endpoint = endpoint;
        conn->destination = dest;
        conn->poster = poster;
        conn->first_connect = done;
        conn->proof = proof;
        conn->ring = BounceRing(options_.bounce_bytes_per_qp);
        Connection& ref = *conn;
        connections_[conn->token] = std::move(conn);
        start_connect(ref);
      });
  if (!queued) poster([done] { done(Error(ErrorCode::kUnavailable, "RDMA NIC is closed")); });
}

void NicCore::start_connect(Connection& conn) {
  conn.state = Connection::State::kConnecting;
  if (rdma_create_id(cm_channel_, &conn.id, &conn, RDMA_PS_TCP) != 0) {
    conn.id = nullptr;
    return connection_failed(conn, os_error(ErrorCode::kIoError, "rdma_create_id"));
  }
  // Leave from our own device's address so the route goes through it.
  sockaddr_storage source{};
  sockaddr* src = nullptr;
  if (!device_ip_.empty() && conn.destination.ss_family == AF_INET) {
    if (auto parsed = parse_endpoint(device_ip_, 0, true)) {
      source = *parsed;
      src = reinterpret_cast<sockaddr*>(&source);
    }
  }
  if (rdma_resolve_addr(conn.id, src, reinterpret_cast<sockaddr*>(&conn.destination),
                        options_.resolve_timeout_ms) != 0) {
    return connection_failed(
        conn, os_error(ErrorCode::kUnavailable, "rdma_resolve_addr " + conn.endpoint));
  }
}

void NicCore::on_active_event(Connection& conn, rdma_cm_event_type type, int status,
                              std::string_view private_data) {
  const std::string where = " (" + conn.endpoint + ")";
  switch (type) {
    case RDMA_CM_EVENT_ADDR_RESOLVED:
      if (conn.id->verbs != ctx_) {
        return connection_failed(
            conn, Error(ErrorCode::kUnavailable,
                        conn.endpoint + " is not reachable through " + options_.device));
      }
      if (rdma_resolve_route(conn.id, options_.resolve_timeout_ms) != 0) {
        return connection_failed(conn, os_error(ErrorCode::kUnavailable, "rdma_resolve_route"));
      }
      return;
    case RDMA_CM_EVENT_ROUTE_RESOLVED: {
      if (Status s = create_queue_pair(conn); !s.ok()) return connection_failed(conn, s);
      rdma_conn_param param{};
      param.initiator_depth = rd_atomic_;
      param.responder_resources = rd_atomic_;
      param.retry_count = 7;
      param.rnr_retry_count = 7;
      param.private_data = conn.proof.empty() ? nullptr : conn.proof.data();
      param.private_data_len = static_cast<std::uint8_t>(conn.proof.size());
      if (rdma_connect(conn.id, &param) != 0) {
        return connection_failed(conn, os_error(ErrorCode::kUnavailable, "rdma_connect"));
      }
      return;
    }
    case RDMA_CM_EVENT_ESTABLISHED:
      return connection_established(conn);
    case RDMA_CM_EVENT_REJECTED:
      if (private_data.substr(0, sizeof kNoProofReject) ==
          std::string_view(kNoProofReject, sizeof kNoProofReject)) {
        return connection_failed(
            conn, Error(ErrorCode::kUnauthenticated,
                        "the RDMA peer rejected the connect: an agent started with --rdma-auth "
                        "proof found no proof of a live control connection in it" +
                            where));
      }
      return connection_failed(
          conn, Error(ErrorCode::kUnavailable, "the RDMA peer rejected the connect (status " +
                                                   std::to_string(status) + ")" + where));
    case RDMA_CM_EVENT_ADDR_ERROR:
    case RDMA_CM_EVENT_ROUTE_ERROR:
    case RDMA_CM_EVENT_CONNECT_ERROR:
    case RDMA_CM_EVENT_UNREACHABLE:
      return connection_failed(
          conn, Error(ErrorCode::kUnavailable, std::string("no RDMA peer reachable: ") +
                                                   rdma_event_str(type) + " status " +
                                                   std::to_string(status) + where));
    case RDMA_CM_EVENT_DISCONNECTED:
    case RDMA_CM_EVENT_DEVICE_REMOVAL:
      return connection_failed(
          conn, Error(ErrorCode::kUnavailable,
                      std::string("RDMA connection lost: ") + rdma_event_str(type) + where));
    default:
      return;
  }
}

Status NicCore::create_queue_pair(Connection& conn) {
  if (!conn.bounce) {
    std::uint64_t bytes = std::max<std::uint64_t>(conn.ring.capacity(), 4096);
    // Under the locked-memory limit (8 MiB for a user by default, hardware.md)
    // a smaller buffer still works, with fewer WRITEs in flight: halve it down
    // to one work request's worth before failing.
    const std::uint64_t least = std::max<std::uint64_t>(options_.max_wr_bytes, 4096);
    for (;;) {
      conn.bounce = static_cast<std::byte*>(std::aligned_alloc(4096, (bytes + 4095) / 4096 * 4096));
      if (!conn.bounce) return Error(ErrorCode::kNoSpace, "staging buffer");
      conn.bounce_mr =
          ibv_reg_mr(pd_, conn.bounce, bytes, static_cast<int>(IBV_ACCESS_LOCAL_WRITE));
      if (conn.bounce_mr) break;
      const int err = errno;
      std::free(conn.bounce);
      conn.bounce = nullptr;
      if (err != ENOMEM || bytes / 2 < least) return reg_mr_error(err, "(staging buffer)", bytes);
      bytes /= 2;
    }
    if (bytes != conn.ring.capacity()) conn.ring = BounceRing(bytes);
  }
  // A CQ per QP sized to its send queue: it can never overflow.
  conn.cq = ibv_create_cq(ctx_, static_cast<int>(qp_depth_ + 1),
                          // The CQ's context is an opaque word: the token, not a pointer.
                          // NOLINTNEXTLINE(performance-no-int-to-ptr)
                          reinterpret_cast<void*>(static_cast<std::uintptr_t>(conn.token)),
                          comp_channel_, 0);
  if (!conn.cq) return os_error(ErrorCode::kIoError, "ibv_create_cq");
  if (ibv_req_notify_cq(conn.cq, 0) != 0) return os_error(ErrorCode::kIoError, "ibv_req_notify_cq");
  ibv_qp_init_attr init{};
  init.send_cq = conn.cq;
  init.recv_cq = conn.cq;
  init.qp_type = IBV_QPT_RC;
  init.sq_sig_all = 0;
  init.cap.max_send_wr = qp_depth_;
  init.cap.max_recv_wr = 1;
  init.cap.max_send_sge = 1;
  init.cap.max_recv_sge = 1;
  if (rdma_create_qp(conn.id, pd_, &init) != 0)
    return os_error(ErrorCode::kIoError, "rdma_create_qp");
  conn.send_queue_free = std::min(qp_depth_, init.cap.max_send_wr);
  return {};
}

void NicCore::connection_established(Connection& conn) {
  conn.state = Connection::State::kReady;
  conn.unsignaled_run = 0;
  if (conn.first_connect) {
    auto done = std::move(conn.first_connect);
    conn.first_connect = nullptr;
    auto qp = std::make_shared<VerbsQueuePair>(shared_from_this(), conn.token, conn.endpoint,
                                               conn.poster);
    conn.poster([done, qp] { done(std::shared_ptr<runtime::QueuePair>(qp)); });
  }
  pump(conn);
}

void NicCore::connection_failed(Connection& conn, const Status& why) {
  destroy_queue_pair(conn);
  conn.state = Connection::State::kBroken;
  fail_all(conn, why);
  close_when_drained(conn);
  if (conn.first_connect) {
    auto done = std::move(conn.first_connect);
    conn.poster([done, why] { done(why); });
    destroy_connection(conn);  // nobody holds a handle to it
  }
}

void NicCore::destroy_queue_pair(Connection& conn) {
  if (conn.id) {
    if (conn.state == Connection::State::kReady) rdma_disconnect(conn.id);
    if (conn.id->qp) rdma_destroy_qp(conn.id);
  }
  // Its completions will never be polled now; the token stays, the CQ goes.
  if (conn.cq) ibv_destroy_cq(conn.cq);
  if (conn.id) rdma_destroy_id(conn.id);
  conn.cq = nullptr;
  conn.id = nullptr;
}

void NicCore::destroy_connection(Connection& conn) {
  destroy_queue_pair(conn);
  if (conn.bounce_mr) ibv_dereg_mr(conn.bounce_mr);
  std::free(conn.bounce);
  connections_.erase(conn.token);
}

void NicCore::close_when_drained(const Connection& conn) {
  if (!conn.released || !conn.posted.empty() || !conn.pending.empty()) return;
  (void)run_on_event_thread([this, token = conn.token] {
    auto it = connections_.find(token);
    if (it != connections_.end() && it->second->posted.empty() && it->second->pending.empty()) {
      destroy_connection(*it->second);
    }
  });
}

void NicCore::close_connection(std::uint64_t token) {
  auto it = connections_.find(token);
  if (it == connections_.end()) return;
  // Ops the caller posted before letting go still run and report, as on the
  // sim: a QP dropped by one job must not fail another job's ops (`closed`).
  if (!it->second->posted.empty() || !it->second->pending.empty()) {
    it->second->released = true;
    return;
  }
  // The QP goes first: once ops are reported done their buffers may be freed,
  // and a live QP could still DMA into them (as connection_failed does it).
  Connection& conn = *it->second;
  destroy_queue_pair(conn);
  fail_all(conn, Error(ErrorCode::kClosed, "queue pair closed"));
  destroy_connection(conn);
}

// --------------------------------------------------------------- data path

void NicCore::submit(std::uint64_t token, std::vector<RdmaOp> ops,
                     runtime::QueuePair::CompletionHandler done, const StrandPoster& poster) {
  auto batch = std::make_shared<Batch>();
  batch->statuses.resize(ops.size());
  batch->done = std::move(done);
  auto it = connections_.find(token);
  if (closing_ || it == connections_.end()) {
    std::fill(batch->statuses.begin(), batch->statuses.end(),
              Error(ErrorCode::kUnavailable, "RDMA NIC is closed"));
    poster([batch] { batch->done(batch->statuses); });
    return;
  }
  Connection& conn = *it->second;
  std::vector<WorkItem> items;
  for (std::size_t i = 0; i < ops.size(); ++i) {
    const RdmaOp& op = ops[i];
    if (op.length != 0 && op.length != op.local.size()) {
      // Payload-sampled ops exist only in the simulator.
      batch->statuses[i] =
          Error(ErrorCode::kBadRequest, "RDMA op length must equal its local buffer on verbs");
      continue;
    }
    if (op.local.empty()) {  // no work request would check its rkey (core/runtime/nic.h)
      batch->statuses[i] = Error(ErrorCode::kBadRequest, "RDMA op of zero bytes");
      continue;
    }
    for (std::uint64_t at = 0; at < op.local.size(); at += options_.max_wr_bytes) {
      WorkItem item;
      item.batch = batch;
      item.op_index = i;
      item.kind = op.kind;
      item.local = op.local.data() + at;
      item.length = std::min<std::uint64_t>(options_.max_wr_bytes, op.local.size() - at);
      item.remote_addr = op.remote_addr + at;
      item.rkey = op.rkey;
      items.push_back(std::move(item));
    }
  }
  batch->remaining_wrs = items.size();
  if (items.empty()) {
    // Reported in its turn, after the ops posted before it (as on the sim).
    WorkItem* last = !conn.pending.empty()  ? &conn.pending.back()
                     : !conn.posted.empty() ? &conn.posted.back()
                                            : nullptr;
    if (last) {
      last->then.push_back(std::move(batch));
    } else {
      conn.poster([batch] { batch->done(batch->statuses); });
    }
    return;
  }
  for (auto& item : items) conn.pending.push_back(std::move(item));
  if (conn.state == Connection::State::kBroken) start_connect(conn);  // reconnect after an error
  if (conn.state == Connection::State::kReady) pump(conn);
}

void NicCore::pump(Connection& conn) {
  std::vector<ibv_send_wr> wrs;
  std::vector<ibv_sge> sges;
  const std::size_t room = std::min<std::size_t>(conn.send_queue_free, conn.pending.size());
  wrs.reserve(room);
  sges.reserve(room);
  const std::uint32_t signal_every = std::max<std::uint32_t>(1, qp_depth_ / 4);
  while (conn.send_queue_free > 0 && !conn.pending.empty()) {
    WorkItem& item = conn.pending.front();
    std::uint32_t lkey = 0;
    std::byte* local = item.local;
    if (auto registered = find_local_lkey(item.local, item.length)) {
      lkey = *registered;
      item.bounced = false;
    } else {
      auto offset = conn.ring.allocate(item.length);
      if (!offset) break;  // staging full: completions of posted WRs free it
      item.bounced = true;
      item.bounce_offset = *offset;
      local = conn.bounce + *offset;
      lkey = conn.bounce_mr->lkey;
      if (item.kind == RdmaOp::Kind::kWrite) std::memcpy(local, item.local, item.length);
    }
    item.seq = conn.next_seq++;
    sges.push_back(
        {reinterpret_cast<std::uint64_t>(local), static_cast<std::uint32_t>(item.length), lkey});
    ibv_send_wr wr{};
    wr.wr_id = item.seq;
    wr.sg_list = &sges.back();
    wr.num_sge = 1;
    wr.opcode = item.kind == RdmaOp::Kind::kWrite ? IBV_WR_RDMA_WRITE : IBV_WR_RDMA_READ;
    wr.wr.rdma.remote_addr = item.remote_addr;
    wr.wr.rdma.rkey = item.rkey;
    // Selective signaling: a completion every signal_every WRs frees their slots.
    if (++conn.unsignaled_run >= signal_every) {
      wr.send_flags = IBV_SEND_SIGNALED;
      conn.unsignaled_run = 0;
    }
    wrs.push_back(wr);
    conn.posted.push_back(std::move(item));
    conn.pending.pop_front();
    --conn.send_queue_free;
  }
  if (wrs.empty()) return;
  // The last WR of every post is signaled, so the queue never stalls on unsignaled work.
  if (!(wrs.back().send_flags & IBV_SEND_SIGNALED)) {
    wrs.back().send_flags = IBV_SEND_SIGNALED;
    conn.unsignaled_run = 0;
  }
  for (std::size_t i = 0; i + 1 < wrs.size(); ++i) wrs[i].next = &wrs[i + 1];
  ibv_send_wr* bad = nullptr;
  if (int err = ibv_post_send(conn.id->qp, wrs.data(), &bad); err != 0) {
    connection_failed(conn, os_error(ErrorCode::kIoError, "ibv_post_send", err));
  }
}

void NicCore::on_completion_events() {
  ibv_cq* cq = nullptr;
  void* context = nullptr;
  while (ibv_get_cq_event(comp_channel_, &cq, &context) == 0) {
    ibv_ack_cq_events(cq, 1);
    auto it =
        connections_.find(static_cast<std::uint64_t>(reinterpret_cast<std::uintptr_t>(context)));
    if (it == connections_.end() || it->second->cq != cq) continue;
    Connection& conn = *it->second;
    // Unarmed, the CQ would never wake us again and this connection's ops would hang.
    if (ibv_req_notify_cq(cq, 0) != 0) {
      connection_failed(conn, os_error(ErrorCode::kIoError, "ibv_req_notify_cq"));
      continue;
    }
    ibv_wc wcs[32];
    int n = 0;
    // Stop when the connection broke: its CQ is gone.
    while (conn.cq == cq && (n = ibv_poll_cq(cq, 32, wcs)) > 0) {
      for (int i = 0; i < n && conn.cq == cq; ++i) on_work_completion(conn, wcs[i]);
    }
    if (conn.state == Connection::State::kReady) pump(conn);
    close_when_drained(conn);
  }
}

void NicCore::on_work_completion(Connection& conn, const ibv_wc& wc) {
  // RC completes in order: a completion covers every unsignaled WR before it.
  while (!conn.posted.empty() && conn.posted.front().seq < wc.wr_id) {
    WorkItem item = std::move(conn.posted.front());
    conn.posted.pop_front();
    ++conn.send_queue_free;
    finish_item(conn, item, Status());
  }
  if (conn.posted.empty() || conn.posted.front().seq != wc.wr_id) return;
  WorkItem item = std::move(conn.posted.front());
  conn.posted.pop_front();
  ++conn.send_queue_free;
  const Status status = status_from_wc(wc.status, wc.vendor_err);
  finish_item(conn, item, status);
  if (!status.ok()) {
    // The QP is in the error state now: what was behind this WR completes
    // flushed (one already sent may have run; one still waiting never does).
    const Status why = Error(ErrorCode::kUnavailable,
                             "flushed: an earlier RDMA op failed (" + status.message() +
                                 "); it may have run; the queue pair reconnects on the next post");
    destroy_queue_pair(conn);
    conn.state = Connection::State::kBroken;
    // Every op posted so far is behind it (the sim flushes the same): ops
    // waiting for send-queue or staging room never run, and an op split into
    // work requests is never half-run. The next post reconnects.
    fail_all(conn, why);
  }
}

void NicCore::finish_item(Connection& conn, WorkItem& item, const Status& status) {
  if (item.bounced) {
    if (status.ok() && item.kind == RdmaOp::Kind::kRead) {
      std::memcpy(item.local, conn.bounce + item.bounce_offset, item.length);
    }
    conn.ring.release_oldest();
  }
  Batch& batch = *item.batch;
  if (!status.ok() && batch.statuses[item.op_index].ok()) batch.statuses[item.op_index] = status;
  if (--batch.remaining_wrs == 0) {
    conn.poster([batch = item.batch] { batch->done(batch->statuses); });
  }
  for (auto& empty : item.then) conn.poster([empty] { empty->done(empty->statuses); });
  item.then.clear();
}

void NicCore::fail_all(Connection& conn, const Status& why) {
  while (!conn.posted.empty()) {
    WorkItem item = std::move(conn.posted.front());
    conn.posted.pop_front();
    finish_item(conn, item, why);
  }
  while (!conn.pending.empty()) {
    WorkItem item = std::move(conn.pending.front());
    conn.pending.pop_front();
    item.bounced = false;
    finish_item(conn, item, why);
  }
  conn.ring.clear();
}

}  // namespace internal

// ------------------------------------------------------------------ facade

Result<std::unique_ptr<VerbsNic>> VerbsNic::open(VerbsNicOptions options) {
  if (options.max_wr_bytes == 0 || options.max_wr_bytes > (1u << 30) ||
      options.max_wr_bytes > options.bounce_bytes_per_qp || options.max_send_wr == 0) {
    return Error(ErrorCode::kBadRequest, "bad verbs NIC options");
  }
  auto core = std::make_shared<internal::NicCore>(std::move(options));
  if (Status s = core->start(); !s.ok()) {
    core->shutdown();
    return s;
  }
  return std::unique_ptr<VerbsNic>(new VerbsNic(std::move(core)));
}

VerbsNic::~VerbsNic() {
  core_->shutdown();
}

Result<runtime::Registration> VerbsNic::register_memory(runtime::MemoryPool& pool,
                                                        std::uint64_t offset, std::uint64_t length,
                                                        unsigned access) {
  return core_->register_memory(pool, offset, length, access);
}

Status VerbsNic::deregister(const runtime::Registration& registration) {
  return core_->deregister(registration);
}

std::string VerbsNic::endpoint() const {
  return core_->endpoint();
}

void VerbsNic::connect(const std::string& endpoint, runtime::Strand& strand, ConnectHandler done) {
  core_->connect(endpoint, strand, std::string(), done);
}

void VerbsNic::connect_with_proof(const std::string& endpoint, runtime::Strand& strand,
                                  std::string proof, ConnectHandler done) {
  core_->connect(endpoint, strand, std::move(proof), done);
}

bool VerbsNic::check_connects(ConnectCheck check) {
  core_->check_connects(std::move(check));
  return true;
}

Status VerbsNic::register_local(std::span<std::byte> buffer) {
  return core_->register_local(buffer);
}

Status VerbsNic::deregister_local(std::span<std::byte> buffer) {
  return core_->deregister_local(buffer);
}

const std::string& VerbsNic::device() const {
  return core_->device();
}

std::vector<std::string> rdma_device_names() {
  std::vector<std::string> names;
  int count = 0;
  ibv_device** list = ibv_get_device_list(&count);
  for (int i = 0; list && i < count; ++i) names.emplace_back(ibv_get_device_name(list[i]));
  if (list) ibv_free_device_list(list);
  return names;
}

}  // namespace rcxl::verbs
