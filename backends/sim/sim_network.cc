#include "backends/sim/sim_network.h"

#include <algorithm>
#include <cmath>
#include <deque>
#include <optional>
#include <vector>

#include "backends/sim/sim_strand.h"
#include "backends/sim/sim_world.h"

namespace rcxl::sim {

using runtime::Address;
using runtime::Duration;
using runtime::Instant;

namespace {

Duration transfer_time(std::size_t bytes, double bytes_per_second) {
  return Duration(static_cast<std::int64_t>(std::ceil(bytes * 1e9 / bytes_per_second)));
}

}  // namespace

// One end of a simulated connection.
class SimConn final : public runtime::Conn, public std::enable_shared_from_this<SimConn> {
 public:
  SimConn(SimNetwork& net, std::uint64_t id, std::uint64_t key, Address local, Address peer)
      : net_(net), id_(id), key_(key), local_(std::move(local)), peer_(std::move(peer)) {}

  void pair_with(const std::shared_ptr<SimConn>& other) { other_ = other; }
  std::uint64_t id() const override { return id_; }
  Address peer() const override { return peer_; }
  Address local() const override { return local_; }

  void start(runtime::Strand& strand, DataHandler on_data, CloseHandler on_close) override {
    strand_ = static_cast<SimStrand*>(&strand);
    strand_alive_ = strand_->alive_token();
    on_data_ = std::move(on_data);
    on_close_ = std::move(on_close);
    // Bytes that arrived before start are delivered now, in order.
    auto early = std::move(early_);
    early_.clear();
    for (auto& chunk : early) deliver(std::move(chunk));
    if (early_close_) return finish(*early_close_);
    release_held();  // a FIN that waited behind those bytes
  }

  void send(std::string bytes) override {
    if (ended_ || closing_ || bytes.empty()) return;
    auto other = other_.lock();
    if (!other) return;
    auto& loop = net_.world().loop();
    const LinkParams link = net_.link(local_.host, peer_.host);
    const Instant start = std::max(loop.now(), tx_free_at_);
    tx_free_at_ = start + transfer_time(bytes.size(), link.bytes_per_second);
    Instant arrive = tx_free_at_ + one_way(link);
    arrive = std::max(arrive, last_arrival_);  // in order, even when a delay shrinks
    last_arrival_ = arrive;
    const std::uint64_t epoch = other->epoch_;
    loop.schedule_at(arrive, [other, epoch, bytes = std::move(bytes), from = local_.host,
                              to = peer_.host, id = id_]() mutable {
      if (other->ended_ || other->epoch_ != epoch) return;
      other->net_.world().trace().record(
          other->net_.world().loop().now().count(),
          "net " + std::to_string(id) + " " + from + "->" + to + " " + std::to_string(bytes.size()),
          bytes);
      other->deliver(std::move(bytes));
    });
  }

  void close() override {
    if (ended_ || closing_) return;
    closing_ = true;
    auto& loop = net_.world().loop();
    const LinkParams link = net_.link(local_.host, peer_.host);
    // The FIN follows the data already sent, over the same (maybe delayed) path.
    const Instant fin = std::max(std::max(loop.now(), tx_free_at_) + one_way(link), last_arrival_);
    if (auto other = other_.lock()) {
      const std::uint64_t epoch = other->epoch_;
      loop.schedule_at(fin, [other, epoch] {
        if (other->epoch_ == epoch) {
          other->remote_ended(Error(ErrorCode::kClosed, "peer closed"), /*graceful=*/true);
        }
      });
    }
    auto self = shared_from_this();
    loop.schedule_at(fin, [self] { self->end(Error(ErrorCode::kClosed, "closed")); });
  }

  void abort() override {
    if (ended_) return;
    if (auto other = other_.lock()) {
      const LinkParams link = net_.link(local_.host, peer_.host);
      const std::uint64_t epoch = other->epoch_;
      // A delay fault holds the reset as it holds data: it never overtakes
      // bytes already on the wire, also when the delay shrank since they left.
      auto& loop = net_.world().loop();
      loop.schedule_at(std::max(loop.now() + one_way(link), last_arrival_), [other, epoch] {
        if (other->epoch_ == epoch) {
          other->remote_ended(Error(ErrorCode::kClosed, "peer aborted"), /*graceful=*/false);
        }
      });
    }
    ++epoch_;  // bytes in flight to us are dropped
    end(Error(ErrorCode::kClosed, "aborted"));
  }

  // A sim Conn closes both ways (no half-close), so input never ends alone.
  void set_input_end_handler(InputEndHandler) override {}

  // Bytes that arrive while reading is off wait here, in order, with the
  // peer's end behind them; they are delivered in a later event, never inside
  // this call (the handler may be the caller).
  void set_reading(bool on) override {
    if (on == reading_) return;
    reading_ = on;
    if (!on || (held_.empty() && !held_end_)) return;
    auto self = shared_from_this();
    net_.world().loop().schedule_after(runtime::Duration(0), [self] { self->release_held(); });
  }

  // A fault: both ends see the connection die.
  void sever(const Status& why) {
    if (ended_) return;
    ++epoch_;
    end(why);
  }

 private:
  // Latency plus any delay fault on either end: every packet of the path
  // (data, FIN, RST) takes it, so none overtakes another.
  Duration one_way(const LinkParams& link) const {
    return link.latency + net_.extra_delay(local_.host) + net_.extra_delay(peer_.host);
  }

  void deliver(std::string bytes) {
    if (ended_) return;
    if (!strand_) {
      early_.push_back(std::move(bytes));
      return;
    }
    if (!reading_ || !held_.empty()) {
      held_.push_back(std::move(bytes));
      return;
    }
    auto self = shared_from_this();
    if (!*strand_alive_) return;
    strand_->run_inline([self, bytes = std::move(bytes)] {
      if (!self->ended_ && self->on_data_) self->on_data_(bytes);
    });
  }

  // A FIN waits behind the bytes not yet read; a reset ends the stream at once.
  void remote_ended(const Status& why, bool graceful) {
    if (ended_) return;
    // Also behind bytes that came before start(): they are delivered then.
    if (graceful && (!held_.empty() || !reading_ || (!strand_ && !early_.empty()))) {
      held_end_ = why;
      return;
    }
    end(why);
  }

  void release_held() {
    while (reading_ && !held_.empty() && !ended_) {
      std::string bytes = std::move(held_.front());
      held_.pop_front();
      auto self = shared_from_this();
      if (!*strand_alive_) return;
      strand_->run_inline([self, bytes = std::move(bytes)] {
        if (!self->ended_ && self->on_data_) self->on_data_(bytes);
      });
    }
    if (reading_ && held_.empty() && held_end_) end(*std::exchange(held_end_, std::nullopt));
  }

  void end(const Status& why) {
    if (ended_) return;
    ended_ = true;
    net_.world().trace().record(net_.world().loop().now().count(),
                                "net " + std::to_string(id_) + " end " + local_.host + " " +
                                    std::string(error_code_name(why.code())));
    net_.forget(key_);
    if (!strand_) {
      early_close_ = why;
      return;
    }
    finish(why);
  }

  void finish(const Status& why) {
    auto handler = std::move(on_close_);
    on_close_ = nullptr;
    on_data_ = nullptr;
    if (!handler) return;
    auto self = shared_from_this();
    // Never inline: a close handler must not run inside the caller's abort().
    net_.world().loop().schedule_after(runtime::Duration(0), [self, handler, why] {
      if (*self->strand_alive_) self->strand_->run_inline([handler, why] { handler(why); });
    });
  }

  SimNetwork& net_;
  std::uint64_t id_;
  std::uint64_t key_;  // in SimNetwork::conns_
  Address local_;
  Address peer_;
  std::weak_ptr<SimConn> other_;
  SimStrand* strand_ = nullptr;
  std::shared_ptr<bool> strand_alive_;
  DataHandler on_data_;
  CloseHandler on_close_;
  std::deque<std::string> early_;
  std::optional<Status> early_close_;
  bool reading_ = true;             // set_reading
  std::deque<std::string> held_;    // arrived while reading was off
  std::optional<Status> held_end_;  // the peer's end, behind held_
  Instant tx_free_at_{0};
  Instant last_arrival_{0};
  std::uint64_t epoch_ = 0;
  bool closing_ = false;
  bool ended_ = false;
};

class SimListener final : public runtime::Listener {
 public:
  SimListener(SimNetwork& net, std::string key, Address address, runtime::Strand& strand,
              runtime::Transport::AcceptHandler on_accept)
      : net_(net),
        key_(std::move(key)),
        address_(std::move(address)),
        strand_(strand),
        on_accept_(std::move(on_accept)) {}
  ~SimListener() override { close(); }

  Address address() const override { return address_; }
  void close() override {
    if (open_) net_.unlisten(key_);
    open_ = false;
  }
  void accept(std::shared_ptr<SimConn> conn) {
    static_cast<SimStrand&>(strand_).run_inline(
        [this, conn = std::move(conn)] { on_accept_(conn); });
  }

 private:
  SimNetwork& net_;
  std::string key_;
  Address address_;
  runtime::Strand& strand_;
  runtime::Transport::AcceptHandler on_accept_;
  bool open_ = true;
};

class SimTransport final : public runtime::Transport {
 public:
  SimTransport(SimNetwork& net, std::string node) : net_(net), node_(std::move(node)) {}
  Result<std::unique_ptr<runtime::Listener>> listen(const Address& address, runtime::Strand& strand,
                                                    AcceptHandler on_accept) override {
    return net_.listen(node_, address, strand, std::move(on_accept));
  }
  void connect(const Address& address, runtime::Strand& strand,
               ConnectHandler on_connected) override {
    net_.connect(node_, address, strand, std::move(on_connected));
  }

 private:
  SimNetwork& net_;
  std::string node_;
};

SimNetwork::SimNetwork(SimWorld& world) : world_(world) {}
SimNetwork::~SimNetwork() = default;

std::unique_ptr<runtime::Transport> SimNetwork::make_transport(const std::string& node) {
  return std::make_unique<SimTransport>(*this, node);
}

void SimNetwork::set_link(const std::string& a, const std::string& b, LinkParams params) {
  links_[{std::min(a, b), std::max(a, b)}] = params;
}

LinkParams SimNetwork::link(const std::string& a, const std::string& b) const {
  auto it = links_.find({std::min(a, b), std::max(a, b)});
  return it == links_.end() ? default_link_ : it->second;
}

Duration SimNetwork::extra_delay(const std::string& node) const {
  auto it = extra_delay_.find(node);
  return it == extra_delay_.end() ? Duration(0) : it->second;
}

void SimNetwork::set_extra_delay(const std::string& node, Duration extra) {
  world_.trace().record(world_.loop().now().count(),
                        "fault delay " + node + " " + std::to_string(extra.count()));
  extra_delay_[node] = extra;
}

void SimNetwork::drop_connections(const std::string& node) {
  world_.trace().record(world_.loop().now().count(), "fault drop " + node);
  std::vector<std::shared_ptr<SimConn>> victims;
  for (auto& [id, weak] : conns_) {
    auto conn = weak.lock();
    if (conn && (conn->local().host == node || conn->peer().host == node)) victims.push_back(conn);
  }
  for (auto& conn : victims) conn->sever(Error(ErrorCode::kUnavailable, "connection dropped"));
}

void SimNetwork::partition(const std::string& node) {
  world_.trace().record(world_.loop().now().count(), "fault partition " + node);
  partitioned_.insert(node);
  std::vector<std::shared_ptr<SimConn>> victims;
  for (auto& [id, weak] : conns_) {
    auto conn = weak.lock();
    if (conn && (conn->local().host == node || conn->peer().host == node)) victims.push_back(conn);
  }
  for (auto& conn : victims) conn->sever(Error(ErrorCode::kUnavailable, "network partitioned"));
}

void SimNetwork::heal(const std::string& node) {
  world_.trace().record(world_.loop().now().count(), "fault heal " + node);
  partitioned_.erase(node);
}

std::uint16_t SimNetwork::ephemeral_port(const std::string& node) {
  auto& port = next_port_[node];
  if (port == 0) port = 40000;
  return port++;
}

Result<std::unique_ptr<runtime::Listener>> SimNetwork::listen(
    const std::string& node, const Address& address, runtime::Strand& strand,
    runtime::Transport::AcceptHandler on_accept) {
  Address bound{node, address.port ? address.port : ephemeral_port(node)};
  const std::string key = bound.ToString();
  if (listeners_.count(key)) {
    return Error(ErrorCode::kUnavailable, "address in use: " + key);
  }
  auto listener = std::make_unique<SimListener>(*this, key, bound, strand, std::move(on_accept));
  listeners_[key] = listener.get();
  if (address.is_loopback()) loopback_only_.insert(key);
  return std::unique_ptr<runtime::Listener>(std::move(listener));
}

void SimNetwork::unlisten(const std::string& key) {
  listeners_.erase(key);
  loopback_only_.erase(key);
}

void SimNetwork::connect(const std::string& node, const Address& address, runtime::Strand& strand,
                         runtime::Transport::ConnectHandler on_connected) {
  // Loopback names reach the node itself.
  const std::string target_host =
      (address.is_loopback() || address.host.empty()) ? node : address.host;
  const Address target{target_host, address.port};
  const LinkParams params = link(node, target_host);
  auto& sim_strand = static_cast<SimStrand&>(strand);
  auto alive = sim_strand.alive_token();
  auto fail = [&sim_strand, alive, this](Duration after, std::string why,
                                         runtime::Transport::ConnectHandler done) {
    world_.loop().schedule_after(
        after, [&sim_strand, alive, why = std::move(why), done = std::move(done)] {
          if (*alive)
            sim_strand.run_inline([why, done] { done(Error(ErrorCode::kUnavailable, why)); });
        });
  };
  if (partitioned(node) || partitioned(target_host)) {
    fail(connect_timeout_, "connect to " + target.ToString() + " timed out (partitioned)",
         std::move(on_connected));
    return;
  }
  const Address local{node, ephemeral_port(node)};
  // Each leg of the handshake takes the one-way latency and any delay fault.
  auto one_way = [this, node, target_host, latency = params.latency] {
    return latency + extra_delay(node) + extra_delay(target_host);
  };
  world_.loop().schedule_after(
      one_way(), [this, target, local, &sim_strand, alive, on_connected = std::move(on_connected),
                  fail, one_way]() mutable {
        auto it = listeners_.find(target.ToString());
        // A socket bound to 127.0.0.1 takes no connection from another host.
        const bool from_afar =
            local.host != target.host && loopback_only_.count(target.ToString()) != 0;
        if (it == listeners_.end() || from_afar || partitioned(local.host) ||
            partitioned(target.host)) {
          fail(one_way(), "connection refused by " + target.ToString(), std::move(on_connected));
          return;
        }
        const std::uint64_t id = next_conn_id_++;
        auto client = std::make_shared<SimConn>(*this, id, id * 2, local, target);
        auto server = std::make_shared<SimConn>(*this, id, id * 2 + 1, target, local);
        client->pair_with(server);
        server->pair_with(client);
        conns_[id * 2] = client;
        conns_[id * 2 + 1] = server;
        world_.trace().record(
            world_.loop().now().count(),
            "net " + std::to_string(id) + " open " + local.ToString() + "->" + target.ToString());
        it->second->accept(server);
        world_.loop().schedule_after(one_way(), [client, &sim_strand, alive, on_connected] {
          if (!*alive) return client->abort();
          sim_strand.run_inline(
              [client, on_connected] { on_connected(std::shared_ptr<runtime::Conn>(client)); });
        });
      });
}

}  // namespace rcxl::sim
