#include "core/directory/directory_client.h"

#include "core/protocol/reply_fields.h"

namespace rcxl::directory {

DirectoryClient::DirectoryClient(runtime::Runtime& rt, runtime::Strand& strand,
                                 RpcConnection::Options options)
    : strand_(strand), conn_(RpcConnection::Make(rt, strand, std::move(options))) {}

DirectoryClient::~DirectoryClient() = default;

void DirectoryClient::call(Json request, RawDone done,
                           std::shared_ptr<runtime::StrandGate> reply_on) {
  ++calls_;
  std::weak_ptr<RpcConnection> weak = conn_;
  // The connection is confined to strand_: every use goes through a post.
  strand_.post([weak, request = std::move(request), done = std::move(done),
                reply_on = std::move(reply_on)]() mutable {
    auto conn = weak.lock();
    if (!conn) return;
    conn->call(std::move(request),
               [done = std::move(done), reply_on](const Status& status, const Json& reply) {
                 if (!done) return;
                 if (reply_on == nullptr || reply_on->running_here()) return done(status, reply);
                 reply_on->post([done, status, reply] { done(status, reply); });
               });
  });
}

namespace {

Result<std::vector<Location>> parse_locations(const Json& reply) {
  std::vector<Location> out;
  if (!reply.contains("locations") || !reply["locations"].is_array()) {
    return Error(ErrorCode::kInternal, "reply without locations");
  }
  for (const auto& j : reply["locations"]) {
    auto l = location_from_json(j);
    if (!l.ok())
      return Error(ErrorCode::kInternal, "bad location in reply: " + l.status().message());
    out.push_back(std::move(l).value());
  }
  return out;
}

std::vector<Json> keys_json(const std::vector<std::string>& keys) {
  return std::vector<Json>(keys.begin(), keys.end());
}

}  // namespace

void DirectoryClient::register_keys(const std::vector<std::pair<std::string, Location>>& entries,
                                    Done<std::vector<bool>> done,
                                    std::shared_ptr<runtime::StrandGate> reply_on) {
  Json list = Json::array();
  for (const auto& [key, location] : entries) {
    list.push_back({{"key", key}, {"location", to_json(location)}});
  }
  call(
      {{"op", "register"}, {"entries", list}},
      [done = std::move(done)](const Status& status, const Json& reply) {
        if (!done) return;
        if (!status.ok()) return done(status);
        std::vector<bool> out;
        if (reply.contains("registered") && reply["registered"].is_array()) {
          for (const auto& r : reply["registered"]) out.push_back(r.is_boolean() && r.get<bool>());
        }
        done(std::move(out));
      },
      reply_on);
}

void DirectoryClient::lookup(const std::vector<std::string>& keys, Done<LookupReply> done,
                             std::shared_ptr<runtime::StrandGate> reply_on) {
  call(
      {{"op", "lookup"}, {"keys", keys_json(keys)}},
      [done = std::move(done)](const Status& status, const Json& reply) {
        if (!status.ok()) return done(status);
        auto locations = parse_locations(reply);
        if (!locations.ok()) return done(locations.status());
        LookupReply out{std::move(locations).value(),
                        protocol::u64_field(reply, "lease").value_or(0)};
        done(std::move(out));
      },
      reply_on);
}

void DirectoryClient::probe(const std::vector<std::string>& keys, bool with_locations,
                            Done<ProbeReply> done, std::shared_ptr<runtime::StrandGate> reply_on) {
  call(
      {{"op", "probe"}, {"keys", keys_json(keys)}, {"with_locations", with_locations}},
      [done = std::move(done), with_locations](const Status& status, const Json& reply) {
        if (!status.ok()) return done(status);
        ProbeReply out;
        out.hits = protocol::u64_field(reply, "hits").value_or(0);
        if (with_locations) {
          auto locations = parse_locations(reply);
          if (!locations.ok()) return done(locations.status());
          out.locations = std::move(locations).value();
        }
        done(std::move(out));
      },
      reply_on);
}

void DirectoryClient::release(std::uint64_t lease, StatusDone done,
                              std::shared_ptr<runtime::StrandGate> reply_on) {
  call(
      {{"op", "release"}, {"lease", lease}},
      [done = std::move(done)](const Status& status, const Json&) {
        if (done) done(status);
      },
      reply_on);
}

namespace {
std::function<void(const Status&, const Json&)> count_reply(DirectoryClient::Done<std::size_t> done,
                                                            const char* field) {
  return [done = std::move(done), field](const Status& status, const Json& reply) {
    if (!done) return;
    if (!status.ok()) return done(status);
    done(protocol::u64_field(reply, field).value_or(0));
  };
}
}  // namespace

void DirectoryClient::erase(const std::vector<std::string>& keys, Done<std::size_t> done,
                            std::shared_ptr<runtime::StrandGate> reply_on) {
  call({{"op", "delete"}, {"keys", keys_json(keys)}}, count_reply(std::move(done), "deleted"),
       reply_on);
}

void DirectoryClient::drop_region(std::string agent, std::uint64_t region, std::string read_handle,
                                  Done<std::size_t> done,
                                  std::shared_ptr<runtime::StrandGate> reply_on) {
  Json request = {{"op", "drop_region"}, {"agent", agent}, {"region", region}};
  if (!read_handle.empty()) request["read_handle"] = read_handle;
  call(std::move(request), count_reply(std::move(done), "dropped"), reply_on);
}

void DirectoryClient::boot_changed(std::string agent, std::string boot, std::string from,
                                   Done<std::size_t> done,
                                   std::shared_ptr<runtime::StrandGate> reply_on) {
  Json request = {{"op", "boot_changed"}, {"agent", agent}, {"boot", boot}};
  if (!from.empty()) request["from"] = from;
  call(std::move(request), count_reply(std::move(done), "dropped"), reply_on);
}

}  // namespace rcxl::directory
