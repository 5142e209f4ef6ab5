#include "core/directory/directory_server.h"

#include <algorithm>
#include <utility>

#include "core/protocol/auth.h"
#include "core/runtime/printable.h"

namespace rcxl::directory {

using protocol::Json;

DirectoryServer::DirectoryServer(runtime::Runtime& rt, runtime::Strand& strand,
                                 DirectoryServerOptions options)
    : rt_(rt),
      strand_(strand),
      options_(std::move(options)),
      // Lease ids start anywhere in [1, 2^62]: unique to this process in practice.
      directory_([&] {
        DirectoryOptions d = options_.directory;
        d.first_lease = 1 + (rt.random("directory-leases")->next_u64() >> 2);
        return d;
      }()),
      random_(rt.random("directory-challenge")),
      log_(rt.log_sink(), "directory") {}

DirectoryServer::~DirectoryServer() {
  stop();
}

Result<runtime::Address> DirectoryServer::start(const runtime::Address& address) {
  auto listener = rt_.transport().listen(
      address, strand_, [this](std::shared_ptr<runtime::Conn> raw) { on_accept(std::move(raw)); });
  if (!listener.ok()) return listener.status();
  listener_ = std::move(listener).value();
  return listener_->address();
}

void DirectoryServer::stop() {
  if (listener_) listener_->close();
  listener_.reset();
  auto conns = std::move(conns_);
  conns_.clear();
  for (auto& [id, session] : conns) {
    if (session.hello_deadline) strand_.cancel(*session.hello_deadline);
    session.conn->abort();
  }
}

void DirectoryServer::end_session(std::uint64_t conn_id) {
  auto it = conns_.find(conn_id);
  if (it == conns_.end()) return;
  if (it->second.hello_deadline) strand_.cancel(*it->second.hello_deadline);
  conns_.erase(it);
}

void DirectoryServer::on_accept(std::shared_ptr<runtime::Conn> raw) {
  if (options_.max_connections > 0 && conns_.size() >= options_.max_connections) {
    log_.warn("refusing a connection from ", raw->peer().ToString(), ": --max-connections ",
              options_.max_connections, " reached");
    raw->close();
    return;
  }
  auto conn = protocol::FramedConn::Make(std::move(raw), options_.max_frame_bytes);
  conn->limit_first_frame(protocol::kMaxFirstFrameBytes);  // the hello
  const std::uint64_t id = conn->id();
  Session& session = conns_[id];
  session.conn = conn;
  session.challenge = random_->next_hex(256);
  // A client that half-closes after its last request still gets the replies
  // (served in order on this strand before this runs), then the close.
  conn->raw().set_input_end_handler([this, id] {
    auto it = conns_.find(id);
    if (it != conns_.end() && !it->second.closing) close_session(it->second);
  });
  conn->start(
      strand_, [this, id](const Json& message) { on_message(id, message); },
      [this, id](const Status&) { end_session(id); });
  conn->send({{"op", "greeting"}, {"version", 1}, {"challenge", session.challenge}});
  if (options_.hello_timeout > runtime::Duration::zero()) {
    // Silent peers would hold their fds (and slots) for good.
    session.hello_deadline = strand_.post_after(options_.hello_timeout, [this, id] {
      auto it = conns_.find(id);
      if (it == conns_.end() || it->second.authenticated) return;
      it->second.hello_deadline.reset();
      it->second.conn->send(protocol::error_reply(
          Json(), Error(ErrorCode::kUnauthenticated, "no successful hello in time")));
      it->second.closing = true;
      it->second.conn->close();
    });
  }
}

namespace {

Result<std::vector<std::string>> keys_of(const Json& message) {
  if (!message.contains("keys") || !message["keys"].is_array()) {
    return Error(ErrorCode::kBadRequest, "keys must be an array of strings");
  }
  const Json& keys = message["keys"];
  if (keys.size() > kMaxKeysPerRequest) {
    return Error(ErrorCode::kBadRequest, "more than 65536 keys");
  }
  std::vector<std::string> out;
  out.reserve(keys.size());
  for (const auto& key : keys) {
    if (!key.is_string() || key.get_ref<const std::string&>().empty()) {
      return Error(ErrorCode::kBadRequest, "keys must be non-empty strings");
    }
    if (key.get_ref<const std::string&>().size() > kMaxKeyBytes) {
      return Error(ErrorCode::kBadRequest,
                   "a key is at most " + std::to_string(kMaxKeyBytes) + " bytes");
    }
    out.push_back(key.get<std::string>());
  }
  return out;
}

Result<std::string> string_field(const Json& message, const char* name) {
  if (!message.contains(name) || !message[name].is_string() ||
      message[name].get_ref<const std::string&>().empty()) {
    return Error(ErrorCode::kBadRequest, std::string(name) + " must be a non-empty string");
  }
  return message[name].get<std::string>();
}

// An agent or boot no location can name (kMaxLocationJsonBytes) is refused: a
// boot report that stored one would grow the directory without end.
Result<std::string> name_field(const Json& message, const char* name) {
  auto text = string_field(message, name);
  if (text.ok() && text->size() > kMaxLocationJsonBytes) {
    return Error(ErrorCode::kBadRequest, std::string(name) + " is at most " +
                                             std::to_string(kMaxLocationJsonBytes) +
                                             " bytes (no location names a longer one)");
  }
  return text;
}

// An optional field: absent or null (as the agent reads them) is not given.
bool present(const Json& message, const char* name) {
  return message.contains(name) && !message[name].is_null();
}

Json locations_json(const std::vector<Location>& locations) {
  Json out = Json::array();
  for (const auto& l : locations) out.push_back(to_json(l));
  return out;
}

}  // namespace

std::size_t DirectoryServer::keys_whose_hits_fit(const std::vector<std::string>& keys) const {
  // Room for the reply's other fields: id, ok, lease, lease_ms, hits, brackets.
  constexpr std::size_t kReplyOverhead = 256;
  // Never below PROTOCOL.md's default frame, which every client reads: a
  // directory run with a smaller limit does not cut conforming clients' calls.
  const std::size_t frame =
      std::max<std::size_t>(options_.max_frame_bytes, protocol::kDefaultMaxFrameBytes);
  const std::size_t budget = frame - kReplyOverhead;
  // Each location is at most kMaxLocationJsonBytes: most calls fit uncounted.
  if (keys.size() * (kMaxLocationJsonBytes + 1) <= budget) return keys.size();
  // Measured without side effects (find touches nothing): lookup and probe
  // stop at the same first miss, and leases expired before this op.
  std::size_t used = 0;
  for (std::size_t i = 0; i < keys.size(); ++i) {
    const auto location = directory_.find(keys[i]);
    if (!location) return keys.size();  // the hits end here: they all fit
    used += to_json(*location).dump(-1, ' ', false, Json::error_handler_t::replace).size() + 1;
    if (used > budget) return i;
  }
  return keys.size();
}

void DirectoryServer::close_session(Session& session) {
  session.closing = true;
  session.conn->close();
}

void DirectoryServer::on_message(std::uint64_t conn_id, const Json& message) {
  auto it = conns_.find(conn_id);
  if (it == conns_.end()) return;
  Session& session = it->second;
  // Frames of the same read that follow a close are not served (as the agent).
  if (session.closing) return;
  const Json id = message.contains("id") ? message["id"] : Json();
  // SPEC R1.3 (as the agent): before a successful hello every refusal closes,
  // so junk cannot keep an unauthenticated connection open.
  auto refuse = [this, &session](const Json& reply_id, Status status) {
    session.conn->send(protocol::error_reply(reply_id, status));
    if (!session.authenticated) close_session(session);
  };
  if (!id.is_null() && !id.is_number_unsigned()) {
    return refuse(Json(), Error(ErrorCode::kBadRequest, "id must be unsigned"));
  }
  if (!message.contains("op") || !message["op"].is_string()) {
    return refuse(id, Error(ErrorCode::kBadRequest, "op must be a string"));
  }
  const std::string op = message["op"].get<std::string>();
  if (op == "hello") return handle_hello(session, message);
  if (!session.authenticated) {
    session.conn->send(
        protocol::error_reply(id, Error(ErrorCode::kUnauthenticated, "hello first")));
    return close_session(session);
  }
  directory_.expire_leases(rt_.clock().now());
  auto reply = handle_op(op, message);
  if (!reply.ok()) {
    Json error = protocol::error_reply(id, reply.status());
    // PROTOCOL.md: a stale_epoch reply carries the current boot beside the error.
    if (reply.status().code() == ErrorCode::kStaleEpoch && op == "boot_changed" &&
        message.contains("agent") && message["agent"].is_string()) {
      const std::string current = directory_.current_boot(message["agent"].get<std::string>());
      if (!current.empty()) error["boot"] = current;
    }
    return session.conn->send(error);
  }
  Json out = std::move(reply).value();
  if (!id.is_null()) out["id"] = id;
  out["ok"] = true;
  session.conn->send(out);
}

void DirectoryServer::handle_hello(Session& session, const Json& message) {
  const Json id = message.contains("id") ? message["id"] : Json();
  // As the agent (docs/agent.md): `version`, if present and not null, must be 1.
  if (message.contains("version") && !message["version"].is_null() &&
      (!message["version"].is_number_unsigned() || message["version"].get<std::uint64_t>() != 1)) {
    session.conn->send(
        protocol::error_reply(id, Error(ErrorCode::kBadRequest, "version must be 1")));
    if (!session.authenticated) close_session(session);
    return;
  }
  if (message.contains("client") && !message["client"].is_string() &&
      !message["client"].is_null()) {
    session.conn->send(
        protocol::error_reply(id, Error(ErrorCode::kBadRequest, "client must be a string")));
    if (!session.authenticated) close_session(session);
    return;
  }
  if (options_.secret) {
    const bool has_auth = message.contains("auth") && message["auth"].is_string();
    if (!has_auth || !protocol::verify_auth(*options_.secret, session.challenge,
                                            message["auth"].get<std::string>())) {
      log_.warn("a hello from ", session.conn->peer().ToString(),
                " failed auth (its secret is not this directory's --auth-secret-file)");
      session.conn->send(
          protocol::error_reply(id, Error(ErrorCode::kAuthFailed, protocol::kWrongAuth)));
      return close_session(session);
    }
  }
  session.authenticated = true;
  if (session.hello_deadline) strand_.cancel(*std::exchange(session.hello_deadline, std::nullopt));
  Json reply = {{"ok", true}, {"service", "rcxl-directory"}, {"version", 1}};
  if (!id.is_null()) reply["id"] = id;
  session.conn->send(reply);
}

Result<Json> DirectoryServer::handle_op(const std::string& op, const Json& message) {
  const runtime::Instant now = rt_.clock().now();
  if (op == "register") {
    if (!message.contains("entries") || !message["entries"].is_array() ||
        message["entries"].size() > kMaxKeysPerRequest) {
      return Error(ErrorCode::kBadRequest, "entries must be an array of at most 65536");
    }
    std::vector<std::pair<std::string, Location>> entries;
    for (const auto& e : message["entries"]) {
      if (!e.is_object()) return Error(ErrorCode::kBadRequest, "an entry must be an object");
      auto key = string_field(e, "key");
      if (!key.ok()) return key.status();
      if (key->size() > kMaxKeyBytes) {
        return Error(ErrorCode::kBadRequest,
                     "a key is at most " + std::to_string(kMaxKeyBytes) + " bytes");
      }
      auto location = location_from_json(e.value("location", Json()));
      if (!location.ok()) return location.status();
      entries.emplace_back(std::move(key).value(), std::move(location).value());
    }
    // `outcomes` says why each false is false, so a writer need not probe
    // (docs/directory.md); `registered` stays for clients that read only it.
    Json registered = Json::array();
    Json outcomes = Json::array();
    for (const auto& outcome : directory_.register_keys(entries)) {
      registered.push_back(outcome.ok() && *outcome == RegisterOutcome::kRegistered);
      outcomes.push_back(!outcome.ok() ? std::string(error_code_name(outcome.status().code()))
                         : *outcome == RegisterOutcome::kRegistered ? "registered"
                                                                    : "already_present");
    }
    Json reply = {{"registered", registered}};
    if (!options_.booleans_only_register_reply) reply["outcomes"] = std::move(outcomes);
    return reply;
  }
  if (op == "lookup") {
    auto keys = keys_of(message);
    if (!keys.ok()) return keys.status();
    // A reply past the frame limit could not be read (PROTOCOL.md Framing): a
    // client that asks for more than one frame holds (conforming clients ask
    // in batches that fit) gets the leading hits that fit, and only they are
    // touched and leased.
    keys->resize(keys_whose_hits_fit(*keys));
    auto result = directory_.lookup(*keys, now);
    Json reply = {{"locations", locations_json(result.locations)}};
    if (result.lease.id != 0) {
      reply["lease"] = result.lease.id;
      reply["lease_ms"] =
          static_cast<std::uint64_t>(runtime::to_millis(result.lease.expires - now));
    }
    return reply;
  }
  if (op == "probe") {
    auto keys = keys_of(message);
    if (!keys.ok()) return keys.status();
    if (present(message, "with_locations") && !message["with_locations"].is_boolean()) {
      return Error(ErrorCode::kBadRequest, "with_locations must be a boolean");
    }
    const bool with_locations = present(message, "with_locations") && message["with_locations"];
    // Hits past what one reply frame holds are not reported: a shorter prefix.
    if (with_locations) keys->resize(keys_whose_hits_fit(*keys));
    auto locations = directory_.probe(*keys, now);
    Json reply = {{"hits", locations.size()}};
    if (with_locations) reply["locations"] = locations_json(locations);
    return reply;
  }
  if (op == "release") {
    if (!message.contains("lease") || !message["lease"].is_number_unsigned()) {
      return Error(ErrorCode::kBadRequest, "lease must be an unsigned integer");
    }
    Status status = directory_.release(message["lease"].get<std::uint64_t>());
    if (!status.ok()) return status;
    return Json::object();
  }
  if (op == "delete") {
    auto keys = keys_of(message);
    if (!keys.ok()) return keys.status();
    return Json{{"deleted", directory_.erase(*keys)}};
  }
  if (op == "drop_region") {
    auto agent = string_field(message, "agent");
    if (!agent.ok()) return agent.status();
    if (!message.contains("region") || !message["region"].is_number_unsigned()) {
      return Error(ErrorCode::kBadRequest, "region must be an unsigned integer");
    }
    // `read_handle` (optional): only the keys stored under it.
    std::string read_handle;
    if (present(message, "read_handle")) {
      auto h = string_field(message, "read_handle");
      if (!h.ok()) return h.status();
      read_handle = *h;
    }
    return Json{{"dropped", directory_.drop_region(*agent, message["region"].get<std::uint64_t>(),
                                                   read_handle)}};
  }
  if (op == "boot_changed") {
    auto agent = name_field(message, "agent");
    if (!agent.ok()) return agent.status();
    auto boot = name_field(message, "boot");
    if (!boot.ok()) return boot.status();
    // `from` (optional): the boot the reporter saw `boot` replace.
    std::string from;
    if (present(message, "from")) {
      auto f = name_field(message, "from");
      if (!f.ok()) return f.status();
      from = *f;
    }
    auto dropped = directory_.boot_changed(*agent, *boot, from);
    if (!dropped.ok()) return dropped.status();
    return Json{{"dropped", *dropped}};
  }
  if (op == "reclaim") {
    // The owner asks for pages of its regions nobody reads any more
    // (docs/directory.md, Reclaim): each location is given out once.
    if (!message.contains("regions") || !message["regions"].is_array() ||
        message["regions"].size() > kMaxKeysPerRequest) {
      return Error(ErrorCode::kBadRequest, "regions must be an array of at most 65536");
    }
    if (!message.contains("max") || !message["max"].is_number_unsigned() ||
        message["max"].get<std::uint64_t>() == 0 ||
        message["max"].get<std::uint64_t>() > kMaxKeysPerRequest) {
      return Error(ErrorCode::kBadRequest, "max must be an integer from 1 to 65536");
    }
    std::vector<RegionRef> regions;
    for (const auto& r : message["regions"]) {
      if (!r.is_object()) return Error(ErrorCode::kBadRequest, "a region must be an object");
      auto agent = string_field(r, "agent");
      if (!agent.ok()) return agent.status();
      auto read_handle = string_field(r, "read_handle");
      if (!read_handle.ok()) return read_handle.status();
      if (!r.contains("region") || !r["region"].is_number_unsigned()) {
        return Error(ErrorCode::kBadRequest, "region must be an unsigned integer");
      }
      regions.push_back({std::move(agent).value(), r["region"].get<std::uint64_t>(),
                         std::move(read_handle).value()});
    }
    // The reply must fit one frame: each location is at most kMaxLocationJsonBytes.
    const std::size_t fits =
        std::max<std::size_t>(1, options_.max_frame_bytes / (kMaxLocationJsonBytes + 64));
    const std::size_t max = std::min<std::size_t>(message["max"].get<std::uint64_t>(), fits);
    return Json{{"locations", locations_json(directory_.reclaim(regions, max))}};
  }
  if (op == "stats") return stats();
  // Echoed cut and escaped: a 1 MiB op made a reply larger than a frame.
  return Error(ErrorCode::kBadRequest, "unknown op " + runtime::printable(op));
}

Json DirectoryServer::stats() const {
  return Json{{"keys", directory_.live_keys()},
              {"doomed", directory_.doomed_keys()},
              {"leases", directory_.open_leases()},
              {"evictions", directory_.evictions()},
              {"reclaimable", directory_.reclaimable()},
              {"reclaimable_dropped", directory_.reclaimable_dropped()}};
}

}  // namespace rcxl::directory
