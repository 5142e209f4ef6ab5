// A region extension that passes every hook to the real one and shows each
// call and its answer to the InvariantMonitor (fresh, hint bounds, open hints).
#pragma once

#include <memory>

#include "core/extension/region_extension.h"
#include "scenarios/invariant_monitor.h"

namespace rcxl::scenarios {

class CheckedExtension final : public ext::RegionExtension {
 public:
  CheckedExtension(std::unique_ptr<ext::RegionExtension> inner, InvariantMonitor& monitor)
      : inner_(std::move(inner)), monitor_(monitor) {}

  std::string name() const override { return inner_->name(); }
  Status validate_access(const ext::RegionInfo& region) override {
    return inner_->validate_access(region);
  }
  Status mapped(const ext::RegionInfo& region, bool fresh) override {
    Status s = inner_->mapped(region, fresh);
    monitor_.on_mapped(region, fresh, s.ok());
    return s;
  }
  bool retire(const ext::RegionInfo& region) override { return inner_->retire(region); }
  Status hint(const ext::Hint& hint) override {
    Status s = inner_->hint(hint);
    monitor_.on_hint(hint, s.ok());
    return s;
  }
  void close() override {
    inner_->close();
    monitor_.on_extension_closed();
  }
  bool has_memory_generation() const override { return inner_->has_memory_generation(); }
  std::optional<std::string> memory_generation() override { return inner_->memory_generation(); }
  Status connection_closed(std::uint64_t conn) override {
    monitor_.on_connection_closed(conn);
    return inner_->connection_closed(conn);
  }
  std::vector<std::string> hint_actions() const override { return inner_->hint_actions(); }
  void write_wait(const ext::WriteWait& wait, WriteWaitDone done) override {
    monitor_.on_write_wait(wait);
    inner_->write_wait(wait, std::move(done));
  }

 private:
  std::unique_ptr<ext::RegionExtension> inner_;
  InvariantMonitor& monitor_;
};

}  // namespace rcxl::scenarios
