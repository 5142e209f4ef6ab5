// How verbs completion statuses become rcxl Status codes (docs/hardware.md).
#pragma once

#include <infiniband/verbs.h>

#include <string>

#include "core/runtime/status.h"

namespace rcxl::verbs {

// Remote key/range/permission failures are kRemoteAccess (the registration is
// gone, as on the sim RNIC); a peer that stopped answering is kUnavailable; a
// work request flushed by an earlier failure is kUnavailable (it never ran);
// anything else is kIoError with the verbs status text.
Status status_from_wc(ibv_wc_status status, std::uint32_t vendor_err = 0);

// "rxe0" from "verbs:rxe0"; bad_request for anything else.
Result<std::string> parse_verbs_nic_spec(const std::string& spec);

}  // namespace rcxl::verbs
