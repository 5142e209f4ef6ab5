#include "apps/rcxl-kv/kv_client.h"

#include <future>

namespace rcxl::kv {
namespace {

// Waits for a Handler answer; a Handler that never answers is a timeout.
template <typename T>
Result<T> wait_for(std::future<Result<T>>& future, std::chrono::milliseconds timeout,
                   const char* what) {
  if (future.wait_for(timeout) != std::future_status::ready) {
    return Error(ErrorCode::kTimeout, std::string(what) + " did not finish within " +
                                          std::to_string(timeout.count()) +
                                          " ms (--timeout-s gives it longer)");
  }
  return future.get();
}

}  // namespace

KvClient::KvClient(runtime::Runtime& rt, client::Config config, runtime::Nic& nic,
                   std::chrono::milliseconds timeout)
    : handler_(rt, std::move(config), nic), timeout_(timeout) {}

KvClient::~KvClient() = default;

Result<client::StoreResult> KvClient::store(std::vector<client::StoreItem> items) {
  auto promise = std::make_shared<std::promise<Result<client::StoreResult>>>();
  auto future = promise->get_future();
  handler_.store(std::move(items),
                 [promise](Result<client::StoreResult> r) { promise->set_value(std::move(r)); });
  return wait_for(future, timeout_, "store");
}

Result<client::LoadResult> KvClient::load(std::vector<std::string> keys,
                                          const std::string& request) {
  auto promise = std::make_shared<std::promise<Result<client::LoadResult>>>();
  auto future = promise->get_future();
  const bool hinted = !request.empty() && handler_.config().read_hints;
  if (hinted) handler_.hint_read(request, keys);
  // As the worker connector does: a promote follows --promotes, which follows
  // read hints unless given (Handler::promote_read decides).
  if (!request.empty()) handler_.promote_read(request);
  handler_.load(
      std::move(keys),
      [promise](Result<client::LoadResult> r) { promise->set_value(std::move(r)); }, hinted);
  auto result = wait_for(future, timeout_, "load");
  if (hinted) handler_.end_read_hint(request);
  return result;
}

KvCounts KvClient::counts() {
  // Handler state is strand-confined: read it there.
  auto promise = std::make_shared<std::promise<KvCounts>>();
  auto future = promise->get_future();
  handler_.strand().post([this, promise] {
    KvCounts c;
    c.handler = handler_.stats();
    c.boot_changes = handler_.regions().boot_changes();
    c.fresh_maps = handler_.regions().fresh_maps_sent();
    promise->set_value(c);
  });
  if (future.wait_for(timeout_) != std::future_status::ready) return {};
  KvCounts c = future.get();
  const auto hints = handler_.hints().stats();  // thread-safe
  c.hints_queued = hints.queued;
  c.hints_dropped = hints.dropped;
  for (const auto& [action, n] : hints.messages) {
    c.hint_messages += n;
    c.hint_messages_by_action +=
        (c.hint_messages_by_action.empty() ? "" : ",") + action + ":" + std::to_string(n);
  }
  return c;
}

}  // namespace rcxl::kv
