// Simulated network: ordered byte streams with latency and bandwidth per link,
// and fault hooks (extra delay, dropped connections, partitions).
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <set>
#include <string>

#include "core/runtime/clock.h"
#include "core/runtime/transport.h"

namespace rcxl::sim {

class SimWorld;
class SimConn;
class SimListener;

struct LinkParams {
  runtime::Duration latency = std::chrono::microseconds(5);  // one way
  double bytes_per_second = 12.5e9;                          // 100 Gb/s

  bool operator==(const LinkParams&) const = default;
};

class SimNetwork {
 public:
  explicit SimNetwork(SimWorld& world);
  ~SimNetwork();

  std::unique_ptr<runtime::Transport> make_transport(const std::string& node);
  void set_default_link(LinkParams params) { default_link_ = params; }
  // Link between two nodes, both directions.
  void set_link(const std::string& a, const std::string& b, LinkParams params);
  LinkParams link(const std::string& a, const std::string& b) const;
  // How long a connect to an unreachable node takes to fail.
  void set_connect_timeout(runtime::Duration d) { connect_timeout_ = d; }

  // --- faults (each is recorded in the trace)
  void set_extra_delay(const std::string& node, runtime::Duration extra);
  void drop_connections(const std::string& node);
  void partition(const std::string& node);
  void heal(const std::string& node);
  bool partitioned(const std::string& node) const { return partitioned_.count(node) > 0; }
  std::size_t open_connections() const { return conns_.size(); }

  // --- used by SimTransport / SimConn
  Result<std::unique_ptr<runtime::Listener>> listen(const std::string& node,
                                                    const runtime::Address& address,
                                                    runtime::Strand& strand,
                                                    runtime::Transport::AcceptHandler on_accept);
  void connect(const std::string& node, const runtime::Address& address, runtime::Strand& strand,
               runtime::Transport::ConnectHandler on_connected);
  void unlisten(const std::string& key);
  void forget(std::uint64_t conn_id) { conns_.erase(conn_id); }
  runtime::Duration extra_delay(const std::string& node) const;
  SimWorld& world() { return world_; }

 private:
  std::uint16_t ephemeral_port(const std::string& node);

  SimWorld& world_;
  LinkParams default_link_;
  std::map<std::pair<std::string, std::string>, LinkParams> links_;
  std::map<std::string, runtime::Duration> extra_delay_;
  std::set<std::string> partitioned_;
  std::map<std::string, SimListener*> listeners_;  // "node:port"
  // Listeners bound to a loopback address: other nodes cannot reach them.
  std::set<std::string> loopback_only_;
  std::map<std::uint64_t, std::weak_ptr<SimConn>> conns_;
  std::map<std::string, std::uint16_t> next_port_;
  std::uint64_t next_conn_id_ = 1;
  runtime::Duration connect_timeout_ = std::chrono::seconds(1);
};

}  // namespace rcxl::sim
