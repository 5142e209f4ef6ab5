// The client of DirectoryServer. Thread-safe and shareable (SPEC R3.9): every
// call is posted to the client's own strand, where its one connection lives,
// so callers on any strand never touch the connection concurrently. Replies
// run on `reply_on`'s strand when given (dropped once its owner closed it),
// else on the client's strand.
#pragma once

#include <atomic>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "core/directory/directory.h"
#include "core/directory/location.h"
#include "core/directory/rpc_connection.h"
#include "core/runtime/strand_gate.h"

namespace rcxl::directory {

struct LookupReply {
  std::vector<Location> locations;    // leading hits
  std::vector<std::uint64_t> leases;  // one per request that hit (release each); none: no hit
  // The shortest of those leases' lifetimes, counted from their replies: a
  // READ that ends later than the lookup's start plus this may have met its
  // page written again for another key (reclaim).
  std::optional<runtime::Duration> shortest_lease;
};

// Why a register's entry was or was not registered.
enum class RegisterAnswer {
  kRegistered,
  kAlreadyPresent,  // first writer wins: the key is there
  kBootRetired,     // the location's boot is one the directory saw replaced
  kRefused,         // false, and the directory did not say why (one before session 19)
};

struct ProbeReply {
  std::size_t hits = 0;
  std::vector<Location> locations;  // filled only when asked with_locations
};

// A key the directory takes: at most kMaxKeyBytes and valid UTF-8 (the wire
// replaces invalid bytes, so two such keys would be one); kBadRequest naming
// key `index` and the fix otherwise. Callers that take pages check it first.
Status check_key(const std::string& key, std::size_t index = 0);

class DirectoryClient {
 public:
  template <typename T>
  using Done = std::function<void(Result<T>)>;
  using StatusDone = std::function<void(Status)>;

  DirectoryClient(runtime::Runtime& rt, runtime::Strand& strand, RpcConnection::Options options);
  ~DirectoryClient();

  // One answer per entry, or the call fails. registered[i]: false when the key
  // was already there (first writer wins) or its boot is gone.
  void register_keys(const std::vector<std::pair<std::string, Location>>& entries,
                     Done<std::vector<bool>> done,
                     std::shared_ptr<runtime::StrandGate> reply_on = nullptr);
  // The same, saying why each entry that was not registered was not.
  void register_keys_answered(const std::vector<std::pair<std::string, Location>>& entries,
                              Done<std::vector<RegisterAnswer>> done,
                              std::shared_ptr<runtime::StrandGate> reply_on = nullptr);
  void lookup(const std::vector<std::string>& keys, Done<LookupReply> done,
              std::shared_ptr<runtime::StrandGate> reply_on = nullptr);
  void probe(const std::vector<std::string>& keys, bool with_locations, Done<ProbeReply> done,
             std::shared_ptr<runtime::StrandGate> reply_on = nullptr);
  void release(std::uint64_t lease, StatusDone done = nullptr,
               std::shared_ptr<runtime::StrandGate> reply_on = nullptr);
  void erase(const std::vector<std::string>& keys, Done<std::size_t> done,
             std::shared_ptr<runtime::StrandGate> reply_on = nullptr);
  // `read_handle`: only the keys stored under it (empty: every key of the region).
  void drop_region(std::string agent, std::uint64_t region, std::string read_handle = "",
                   Done<std::size_t> done = nullptr,
                   std::shared_ptr<runtime::StrandGate> reply_on = nullptr);
  // `from`: the boot seen replaced by `boot` (empty: every other boot goes).
  void boot_changed(std::string agent, std::string boot, std::string from = "",
                    Done<std::size_t> done = nullptr,
                    std::shared_ptr<runtime::StrandGate> reply_on = nullptr);

  // Up to `max` locations of keys that left the directory (evicted, or
  // deleted and unleased) in these own regions, each given out once: their
  // pages may be written again. Regions past one request's budget wait for
  // the next call.
  // `late`: the locations of a reply that came after the call timed out (the
  // directory gave them out all the same; dropped, their pages would be lost).
  void reclaim(const std::vector<RegionRef>& regions, std::size_t max,
               Done<std::vector<Location>> done,
               std::shared_ptr<runtime::StrandGate> reply_on = nullptr,
               Done<std::vector<Location>> late = nullptr);

  // Requests sent so far (tests count round trips).
  std::uint64_t calls() const { return *calls_; }

 private:
  using RawDone = std::function<void(const Status&, const Json&)>;
  using Batches = std::vector<std::pair<std::size_t, std::size_t>>;
  template <typename Reply>
  struct Chain;
  void call(Json request, RawDone done, std::shared_ptr<runtime::StrandGate> reply_on,
            RpcConnection::LateReplyHandler late = nullptr);
  Batches key_batches(const std::vector<std::string>& keys, bool answered_with_locations) const;
  template <typename Reply>
  void start_chain(std::shared_ptr<Chain<Reply>> chain);
  // An item no request can carry (the server would refuse the frame and close
  // the connection, failing every call on it, other threads' too): bad_request,
  // and the call sends nothing. Such an item is a batch of its own.
  Status check_items_fit(const Batches& batches,
                         const std::function<std::size_t(std::size_t)>& exact_bytes,
                         const std::string& what) const;
  // `done` gets `status` on the strand (never inside the call that failed), then on `reply_on`.
  template <typename T>
  void fail_later(Done<T> done, Status status, std::shared_ptr<runtime::StrandGate> reply_on);

  // Half the frame limit: a request's envelope and escapes stay well inside it.
  std::size_t request_budget_bytes_;
  std::size_t reply_budget_bytes_;  // the frame limit a reply (or request) must fit
  runtime::Strand& strand_;
  std::shared_ptr<RpcConnection> conn_;
  // Shared with batch chains that run on after a call returned.
  std::shared_ptr<std::atomic<std::uint64_t>> calls_ =
      std::make_shared<std::atomic<std::uint64_t>>(0);
};

}  // namespace rcxl::directory
