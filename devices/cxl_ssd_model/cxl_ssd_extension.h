// The `cxl_ssd` region extension: turns hints into device preparation. Read
// hints are filled in hint order and stay pinned until their end; promotes
// move a request to the front; write hints and write waits prepare pages for
// writing; fresh maps drop stale contents; the generation is the device's.
// Every hook answers from local state (SPEC R2.3); write_wait uses a timer.
#pragma once

#include <map>
#include <memory>
#include <set>
#include <string>
#include <utility>

#include "core/extension/region_extension.h"
#include "devices/cxl_ssd_model/cxl_ssd_device.h"

namespace rcxl::device {

struct CxlSsdExtensionConfig {
  // How often a write wait looks again while some of its pages have no fill yet.
  runtime::Duration write_wait_poll = std::chrono::microseconds(20);
};

// Config keys: "write_wait_poll_us" (number, 1..1e6). Anything else is refused.
Result<CxlSsdExtensionConfig> parse_cxl_ssd_extension_config(const ext::Json& config);

class CxlSsdExtension final : public ext::RegionExtension {
 public:
  // `runtime` gives the strand of write-wait timers; without one a wait answers at once.
  CxlSsdExtension(CxlSsdDevice& device, runtime::Runtime* runtime,
                  CxlSsdExtensionConfig config = {});
  ~CxlSsdExtension() override;

  std::string name() const override { return "cxl_ssd"; }
  Status validate_access(const ext::RegionInfo& region) override;
  Status mapped(const ext::RegionInfo& region, bool fresh) override;
  Status hint(const ext::Hint& hint) override;
  void close() override;
  bool has_memory_generation() const override { return true; }
  std::optional<std::string> memory_generation() override;
  Status connection_closed(std::uint64_t conn) override;
  std::vector<std::string> hint_actions() const override;
  void write_wait(const ext::WriteWait& wait, WriteWaitDone done) override;

  // Open read hints (tests, logs).
  std::size_t open_hints() const { return tags_.size(); }

 private:
  using Tag = CxlSsdDevice::Tag;
  using Key = std::pair<std::uint64_t, std::string>;  // (conn, request)
  // A hint trails its promote by a directory probe and the hint queue:
  // microseconds to milliseconds. Names are one engine request's: kept 1 s.
  static constexpr runtime::Duration kEarlyPromoteKept = std::chrono::seconds(1);
  static constexpr std::size_t kMaxEarlyPromotes = 4096;
  // A wait prepares its pages again at most this often (they left DRAM).
  static constexpr int kMaxPreparesAgain = 3;
  struct PendingWait;

  void forget_if_reset();
  Status check_ranges(const std::vector<ext::Range>& ranges) const;
  void end_hint(std::map<Key, Tag>::iterator it);
  void poll_wait(std::shared_ptr<PendingWait> wait);
  // A promote that came before its request's hint (the worker's goes straight
  // to the agent, the scheduler's hint after a directory probe) is kept a
  // while: the hint, when it comes, is promoted at once.
  void remember_early_promote(const std::string& request);
  bool take_early_promote(const std::string& request);

  CxlSsdDevice& device_;
  runtime::Runtime* runtime_;
  CxlSsdExtensionConfig config_;
  std::unique_ptr<runtime::Strand> strand_;
  std::map<Key, Tag> tags_;
  std::map<std::string, std::set<Tag>> by_request_;  // promotes name a request alone
  std::set<std::string> promoted_;  // requests promoted while hinted: later hints join them
  std::map<std::string, Instant> early_promotes_;          // request -> forgotten at
  std::set<std::pair<Instant, std::string>> early_order_;  // by when they are forgotten
  std::uint64_t seen_generation_;
};

// ExtensionFactory for the name "cxl_ssd": context.device must point to the
// CxlSsdDevice that is the agent's pool (the simulator sets it).
Result<std::unique_ptr<ext::RegionExtension>> make_cxl_ssd_extension(
    const ext::ExtensionContext& context, const ext::Json& config);

}  // namespace rcxl::device
