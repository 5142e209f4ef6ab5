#include "core/directory/directory_client.h"

#include <algorithm>
#include <cstdint>
#include <optional>

#include "core/directory/directory_server.h"
#include "core/directory/request_batches.h"
#include "core/protocol/reply_fields.h"
#include "core/protocol/utf8.h"

namespace rcxl::directory {

DirectoryClient::DirectoryClient(runtime::Runtime& rt, runtime::Strand& strand,
                                 RpcConnection::Options options)
    : request_budget_bytes_(options.max_frame_bytes / 2),
      reply_budget_bytes_(options.max_frame_bytes),
      strand_(strand),
      conn_(RpcConnection::Make(rt, strand, std::move(options))) {}

DirectoryClient::~DirectoryClient() = default;

void DirectoryClient::call(Json request, RawDone done,
                           std::shared_ptr<runtime::StrandGate> reply_on,
                           RpcConnection::LateReplyHandler late) {
  ++*calls_;
  std::weak_ptr<RpcConnection> weak = conn_;
  // The connection is confined to strand_: every use goes through a post.
  strand_.post([weak, request = std::move(request), done = std::move(done), reply_on,
                late = std::move(late)]() mutable {
    auto conn = weak.lock();
    if (!conn) return;
    RpcConnection::LateReplyHandler late_on_gate;
    if (late) {
      late_on_gate = [late, reply_on](const Json& reply) {
        if (reply_on == nullptr || reply_on->running_here()) return late(reply);
        reply_on->post([late, reply] { late(reply); });
      };
    }
    conn->call(
        std::move(request),
        [done = std::move(done), reply_on](const Status& status, const Json& reply) {
          if (!done) return;
          if (reply_on == nullptr || reply_on->running_here()) return done(status, reply);
          reply_on->post([done, status, reply] { done(status, reply); });
        },
        {}, std::move(late_on_gate));
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

// A reply naming more hits than keys asked (or hits its locations do not
// match) answers nothing: callers index locations by key.
Status more_than_asked(const char* op, const Json& reply) {
  return Error(ErrorCode::kInternal,
               std::string("the directory's ") + op +
                   " reply does not match the keys asked: " + reply.dump().substr(0, 200));
}

std::vector<Json> keys_json(const std::vector<std::string>& keys, std::size_t begin = 0,
                            std::size_t end = SIZE_MAX) {
  end = std::min(end, keys.size());
  return std::vector<Json>(keys.begin() + static_cast<std::ptrdiff_t>(begin),
                           keys.begin() + static_cast<std::ptrdiff_t>(end));
}

// A JSON string is at most 6 bytes per byte (\u00XX) plus quotes and a comma.
std::size_t rough_string_bytes(const std::string& text) {
  return 6 * text.size() + 3;
}

std::size_t exact_bytes(const Json& item) {
  // As FramedConn::send encodes it: invalid UTF-8 is replaced, never thrown.
  return item.dump(-1, ' ', false, Json::error_handler_t::replace).size() + 1;
}

// A lookup (or probe with locations) answers a location per hit, ~180 bytes;
// this leaves room for long agent names and boots, so its reply fits a frame.
constexpr std::size_t kReplyBytesPerLocation = 1024;

// A request around its one item: op, id, field names, with_locations.
constexpr std::size_t kRequestEnvelopeBytes = 256;

template <typename T>
void deliver(const std::shared_ptr<runtime::StrandGate>& reply_on,
             const DirectoryClient::Done<T>& done, Result<T> result) {
  if (!done) return;
  if (reply_on == nullptr || reply_on->running_here()) return done(std::move(result));
  reply_on->post([done, result = std::move(result)]() mutable { done(std::move(result)); });
}

}  // namespace

namespace {

// A string the wire would carry with U+FFFD in place of its invalid bytes:
// two keys that differ only there would be one key at the directory, and a
// reader of one would get the other's bytes.
Status check_utf8(const std::string& text, const std::string& what, std::size_t index) {
  if (protocol::is_valid_utf8(text)) return {};
  return Error(ErrorCode::kBadRequest,
               what + " " + std::to_string(index) +
                   " is not valid UTF-8: the directory's JSON would replace its bytes (two "
                   "such keys would become one); encode it (e.g. hex) first");
}

}  // namespace

Status check_key(const std::string& key, std::size_t index) {
  if (key.size() > kMaxKeyBytes) {
    return Error(ErrorCode::kBadRequest, "key " + std::to_string(index) + " is " +
                                             std::to_string(key.size()) +
                                             " bytes; the directory takes keys of at most " +
                                             std::to_string(kMaxKeyBytes) + " (hash a longer one)");
  }
  return check_utf8(key, "key", index);
}

Status DirectoryClient::check_items_fit(const Batches& batches,
                                        const std::function<std::size_t(std::size_t)>& exact,
                                        const std::string& what) const {
  for (const auto& [begin, end] : batches) {
    if (end - begin != 1) continue;  // an item over the budget is always alone
    if (const std::size_t bytes = exact(begin);
        bytes + kRequestEnvelopeBytes > reply_budget_bytes_) {
      return Error(ErrorCode::kBadRequest,
                   what + " " + std::to_string(begin) + " is " + std::to_string(bytes) +
                       " bytes encoded; a directory request is at most " +
                       std::to_string(reply_budget_bytes_) +
                       " (the frame limit): shorten it (keys are usually short hashes)");
    }
  }
  return {};
}

template <typename T>
void DirectoryClient::fail_later(Done<T> done, Status status,
                                 std::shared_ptr<runtime::StrandGate> reply_on) {
  strand_.post([done = std::move(done), status = std::move(status),
                reply_on = std::move(reply_on)]() mutable {
    deliver<T>(reply_on, done, Result<T>(std::move(status)));
  });
}

DirectoryClient::Batches DirectoryClient::key_batches(const std::vector<std::string>& keys,
                                                      bool answered_with_locations) const {
  const std::size_t max_keys =
      answered_with_locations
          ? std::max<std::size_t>(1, reply_budget_bytes_ / kReplyBytesPerLocation)
          : kMaxKeysPerRequest;
  return request_batches(
      keys.size(), request_budget_bytes_, std::min(max_keys, kMaxKeysPerRequest),
      [&](std::size_t i) { return rough_string_bytes(keys[i]); },
      [&](std::size_t i) { return exact_bytes(Json(keys[i])); });
}

void DirectoryClient::register_keys(const std::vector<std::pair<std::string, Location>>& entries,
                                    Done<std::vector<bool>> done,
                                    std::shared_ptr<runtime::StrandGate> reply_on) {
  register_keys_answered(
      entries,
      [done = std::move(done)](Result<std::vector<RegisterAnswer>> answers) {
        if (!done) return;
        if (!answers.ok()) return done(answers.status());
        std::vector<bool> out;
        out.reserve(answers->size());
        for (RegisterAnswer a : *answers) out.push_back(a == RegisterAnswer::kRegistered);
        done(std::move(out));
      },
      std::move(reply_on));
}

namespace {

// `outcomes[i]` of a register reply, when it agrees with `registered[i]`;
// kRefused for a false it does not explain (absent, unknown or contradictory).
RegisterAnswer answer_of(bool registered, const Json* outcomes, std::size_t i) {
  if (registered) return RegisterAnswer::kRegistered;
  if (outcomes == nullptr || !(*outcomes)[i].is_string()) return RegisterAnswer::kRefused;
  const auto& why = (*outcomes)[i].get_ref<const std::string&>();
  if (why == "already_present") return RegisterAnswer::kAlreadyPresent;
  if (why == "stale_epoch") return RegisterAnswer::kBootRetired;
  return RegisterAnswer::kRefused;
}

}  // namespace

void DirectoryClient::register_keys_answered(
    const std::vector<std::pair<std::string, Location>>& entries,
    Done<std::vector<RegisterAnswer>> done, std::shared_ptr<runtime::StrandGate> reply_on) {
  auto entry_json = [&](std::size_t i) {
    return Json{{"key", entries[i].first}, {"location", to_json(entries[i].second)}};
  };
  const Batches batches = request_batches(
      entries.size(), request_budget_bytes_, kMaxKeysPerRequest,
      [&](std::size_t i) {
        const auto& [key, l] = entries[i];
        return rough_string_bytes(key + l.agent + l.boot + l.read_handle) + 160;
      },
      [&](std::size_t i) { return exact_bytes(entry_json(i)); });
  for (std::size_t i = 0; i < entries.size(); ++i) {
    const auto& [key, l] = entries[i];
    if (Status s = check_key(key, i); !s.ok()) {
      return fail_later(std::move(done), std::move(s), std::move(reply_on));
    }
    for (const std::string* text : {&l.agent, &l.boot, &l.read_handle}) {
      if (Status s = check_utf8(*text, "entry", i); !s.ok()) {
        return fail_later(std::move(done), std::move(s), std::move(reply_on));
      }
    }
  }
  if (Status s = check_items_fit(
          batches, [&](std::size_t i) { return exact_bytes(entry_json(i)); }, "entry");
      !s.ok()) {
    return fail_later(std::move(done), std::move(s), std::move(reply_on));
  }
  // The requests go out together; the answer is theirs in order, or the first error.
  struct Gather {
    std::vector<std::optional<Result<std::vector<RegisterAnswer>>>> parts;
    std::size_t waiting = 0;
    Done<std::vector<RegisterAnswer>> done;
  };
  auto gather = std::make_shared<Gather>();
  gather->parts.resize(batches.size());
  gather->waiting = batches.size();
  gather->done = std::move(done);
  for (std::size_t b = 0; b < batches.size(); ++b) {
    Json list = Json::array();
    for (std::size_t i = batches[b].first; i < batches[b].second; ++i)
      list.push_back(entry_json(i));
    call(
        {{"op", "register"}, {"entries", std::move(list)}},
        [gather, b, asked = batches[b].second - batches[b].first](const Status& status,
                                                                  const Json& reply) {
          if (!status.ok()) {
            gather->parts[b] = status;
          } else {
            // One boolean per entry asked, or the batch fails: answers out of
            // step with the keys would free a registered key's page (its
            // bytes then overwritten under a key readers still find).
            const Json* answers = reply.contains("registered") ? &reply["registered"] : nullptr;
            const Json* outcomes = reply.contains("outcomes") && reply["outcomes"].is_array() &&
                                           reply["outcomes"].size() == asked
                                       ? &reply["outcomes"]
                                       : nullptr;
            std::vector<RegisterAnswer> out;
            if (answers != nullptr && answers->is_array() && answers->size() == asked) {
              for (std::size_t i = 0; i < asked; ++i) {
                if (!(*answers)[i].is_boolean()) break;
                out.push_back(answer_of((*answers)[i].get<bool>(), outcomes, i));
              }
            }
            if (out.size() == asked) {
              gather->parts[b] = std::move(out);
            } else {
              gather->parts[b] = Error(ErrorCode::kInternal,
                                       "register reply does not answer each of its " +
                                           std::to_string(asked) + " entries with true or false");
            }
          }
          if (--gather->waiting > 0 || !gather->done) return;
          std::vector<RegisterAnswer> all;
          for (auto& part : gather->parts) {
            if (!part->ok()) return gather->done(part->status());
            all.insert(all.end(), (*part)->begin(), (*part)->end());
          }
          gather->done(std::move(all));
        },
        reply_on);
  }
}

// A lookup or probe of more keys than one request takes asks batch after batch,
// on the client's strand, while every key so far hit: its answer is the leading
// hits either way. A later batch that fails only shortens them.
template <typename Reply>
struct DirectoryClient::Chain {
  std::weak_ptr<RpcConnection> conn;
  std::shared_ptr<std::atomic<std::uint64_t>> calls;
  std::vector<std::string> keys;
  bool with_locations = false;  // the reply carries a location per hit
  Batches batches;
  std::size_t next = 0;
  Reply out;
  Done<Reply> done;
  std::shared_ptr<runtime::StrandGate> reply_on;
  // Adds one batch's reply to `out`; false when the batch did not all hit.
  std::function<Result<bool>(const Json& reply, std::size_t wanted, Reply& out)> take;
  std::function<Json(std::vector<Json> keys)> request;
  bool leases = false;  // each request may open a lease (lookup)

  static void step(std::shared_ptr<Chain> chain) {
    auto conn = chain->conn.lock();
    if (!conn) return;  // the client is gone: nobody waits
    const auto [begin, end] = chain->batches[chain->next++];
    if (chain->next > 1) ++*chain->calls;
    RpcConnection::LateReplyHandler release;
    if (chain->leases) {
      // A lease whose reply came after the call timed out, or in a reply
      // refused as malformed, is nobody's: it is released now, not left to
      // hold its keys from eviction until its TTL.
      release = [weak = chain->conn, calls = chain->calls](const Json& reply) {
        const auto lease = protocol::u64_field(reply, "lease");
        auto conn = weak.lock();
        if (!conn || !lease || *lease == 0) return;
        ++*calls;
        conn->call({{"op", "release"}, {"lease", *lease}}, [](const Status&, const Json&) {});
      };
    }
    conn->call(
        chain->request(keys_json(chain->keys, begin, end)),
        [chain, wanted = end - begin, release](const Status& status, const Json& reply) {
          Result<bool> all_hit =
              status.ok() ? chain->take(reply, wanted, chain->out) : Result<bool>(status);
          if (status.ok() && !all_hit.ok() && release) release(reply);
          if (!all_hit.ok() && chain->next == 1) {
            return deliver<Reply>(chain->reply_on, chain->done, all_hit.status());
          }
          if (all_hit.ok() && *all_hit && chain->next < chain->batches.size()) {
            return step(chain);
          }
          deliver<Reply>(chain->reply_on, chain->done, std::move(chain->out));
        },
        {}, release);
  }
};

template <typename Reply>
void DirectoryClient::start_chain(std::shared_ptr<Chain<Reply>> chain) {
  chain->conn = conn_;
  chain->calls = calls_;
  chain->batches = key_batches(chain->keys, chain->with_locations);
  for (std::size_t i = 0; i < chain->keys.size(); ++i) {
    if (Status s = check_key(chain->keys[i], i); !s.ok()) {
      return fail_later(std::move(chain->done), std::move(s), std::move(chain->reply_on));
    }
  }
  if (Status s = check_items_fit(
          chain->batches, [&](std::size_t i) { return exact_bytes(Json(chain->keys[i])); }, "key");
      !s.ok()) {
    return fail_later(std::move(chain->done), std::move(s), std::move(chain->reply_on));
  }
  ++*calls_;
  strand_.post([chain] { Chain<Reply>::step(chain); });
}

void DirectoryClient::lookup(const std::vector<std::string>& keys, Done<LookupReply> done,
                             std::shared_ptr<runtime::StrandGate> reply_on) {
  auto chain = std::make_shared<Chain<LookupReply>>();
  chain->keys = keys;
  chain->with_locations = true;
  chain->leases = true;
  chain->done = std::move(done);
  chain->reply_on = std::move(reply_on);
  chain->request = [](std::vector<Json> batch) {
    return Json{{"op", "lookup"}, {"keys", std::move(batch)}};
  };
  chain->take = [](const Json& reply, std::size_t wanted, LookupReply& out) -> Result<bool> {
    auto locations = parse_locations(reply);
    if (!locations.ok()) return locations.status();
    if (locations->size() > wanted) return more_than_asked("lookup", reply);
    const auto lease = protocol::u64_field(reply, "lease");
    if (lease && *lease != 0) out.leases.push_back(*lease);
    if (!locations->empty()) {
      // Hits without a lease or its lease_ms: it may end at once (a
      // conservative reading); a day bounds an absurd lease_ms.
      const std::uint64_t ms =
          (lease && *lease != 0)
              ? std::min<std::uint64_t>(protocol::u64_field(reply, "lease_ms").value_or(0),
                                        24ull * 3600 * 1000)
              : 0;
      const runtime::Duration lasts = std::chrono::milliseconds(ms);
      if (!out.shortest_lease || lasts < *out.shortest_lease) out.shortest_lease = lasts;
    }
    const bool all_hit = locations->size() == wanted;
    for (auto& l : *locations) out.locations.push_back(std::move(l));
    return all_hit;
  };
  start_chain(std::move(chain));
}

void DirectoryClient::probe(const std::vector<std::string>& keys, bool with_locations,
                            Done<ProbeReply> done, std::shared_ptr<runtime::StrandGate> reply_on) {
  auto chain = std::make_shared<Chain<ProbeReply>>();
  chain->keys = keys;
  chain->with_locations = with_locations;
  chain->done = std::move(done);
  chain->reply_on = std::move(reply_on);
  chain->request = [with_locations](std::vector<Json> batch) {
    return Json{{"op", "probe"}, {"keys", std::move(batch)}, {"with_locations", with_locations}};
  };
  chain->take = [with_locations](const Json& reply, std::size_t wanted,
                                 ProbeReply& out) -> Result<bool> {
    const std::size_t hits = protocol::u64_field(reply, "hits").value_or(0);
    if (hits > wanted) return more_than_asked("probe", reply);
    if (with_locations) {
      auto locations = parse_locations(reply);
      if (!locations.ok()) return locations.status();
      if (locations->size() != hits) return more_than_asked("probe", reply);
      for (auto& l : *locations) out.locations.push_back(std::move(l));
    }
    out.hits += hits;
    return hits == wanted;
  };
  start_chain(std::move(chain));
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
  const Batches batches = key_batches(keys, /*answered_with_locations=*/false);
  for (std::size_t i = 0; i < keys.size(); ++i) {
    if (Status s = check_key(keys[i], i); !s.ok()) {
      return fail_later(std::move(done), std::move(s), std::move(reply_on));
    }
  }
  if (Status s = check_items_fit(
          batches, [&](std::size_t i) { return exact_bytes(Json(keys[i])); }, "key");
      !s.ok()) {
    return fail_later(std::move(done), std::move(s), std::move(reply_on));
  }
  // Every request goes out; the answer is their sum, or the first error.
  struct Sum {
    std::size_t waiting = 0;
    std::size_t deleted = 0;
    Status failed;
    Done<std::size_t> done;
  };
  auto sum = std::make_shared<Sum>();
  sum->waiting = batches.size();
  sum->done = std::move(done);
  for (const auto& [begin, end] : batches) {
    call({{"op", "delete"}, {"keys", keys_json(keys, begin, end)}},
         count_reply(
             [sum](Result<std::size_t> part) {
               if (part.ok()) sum->deleted += *part;
               if (!part.ok() && sum->failed.ok()) sum->failed = part.status();
               if (--sum->waiting > 0 || !sum->done) return;
               if (!sum->failed.ok()) return sum->done(sum->failed);
               sum->done(sum->deleted);
             },
             "deleted"),
         reply_on);
  }
}

void DirectoryClient::reclaim(const std::vector<RegionRef>& regions, std::size_t max,
                              Done<std::vector<Location>> done,
                              std::shared_ptr<runtime::StrandGate> reply_on,
                              Done<std::vector<Location>> late) {
  // As many regions as one request takes; the reply as many locations as fit.
  Json list = Json::array();
  std::size_t bytes = 64;
  for (const auto& r : regions) {
    Json item = {{"agent", r.agent}, {"region", r.region}, {"read_handle", r.read_handle}};
    bytes += exact_bytes(item);
    if (bytes > request_budget_bytes_ || list.size() >= kMaxKeysPerRequest) break;
    list.push_back(std::move(item));
  }
  max = std::clamp<std::size_t>(
      max, 1,
      std::min(kMaxKeysPerRequest,
               std::max<std::size_t>(1, reply_budget_bytes_ / kReplyBytesPerLocation)));
  auto answer = [max](const Status& status, const Json& reply) -> Result<std::vector<Location>> {
    if (!status.ok()) return status;
    auto locations = parse_locations(reply);
    if (!locations.ok()) return locations.status();
    if (locations->size() > max) return more_than_asked("reclaim", reply);
    return locations;
  };
  RpcConnection::LateReplyHandler late_reply;
  if (late) {
    late_reply = [late, answer](const Json& reply) {
      auto locations = answer(reply_status(reply), reply);
      if (locations.ok() && !locations->empty()) late(std::move(locations));
    };
  }
  call(
      {{"op", "reclaim"}, {"regions", std::move(list)}, {"max", max}},
      [done = std::move(done), answer](const Status& status, const Json& reply) {
        if (done) done(answer(status, reply));
      },
      reply_on, std::move(late_reply));
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
