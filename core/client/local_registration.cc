#include "core/client/local_registration.h"

namespace rcxl::client {

LocalRegistration::LocalRegistration(runtime::Nic& nic, const std::vector<runtime::RdmaOp>& ops,
                                     std::shared_ptr<const void> owner)
    : nic_(nic), owner_(std::move(owner)) {
  for (const auto& op : ops) {
    if (!op.local.empty() && nic_.register_local(op.local).ok()) buffers_.push_back(op.local);
  }
}

void LocalRegistration::release() {
  for (const auto& b : buffers_) (void)nic_.deregister_local(b);
  buffers_.clear();
}

}  // namespace rcxl::client
