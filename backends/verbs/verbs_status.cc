#include "backends/verbs/verbs_status.h"

namespace rcxl::verbs {

Status status_from_wc(ibv_wc_status status, std::uint32_t vendor_err) {
  const std::string text = std::string(ibv_wc_status_str(status)) + " (wc status " +
                           std::to_string(static_cast<int>(status)) + ", vendor error " +
                           std::to_string(vendor_err) + ")";
  switch (status) {
    case IBV_WC_SUCCESS:
      return {};
    case IBV_WC_REM_ACCESS_ERR:
    case IBV_WC_REM_INV_REQ_ERR:
    case IBV_WC_REM_OP_ERR:
    case IBV_WC_REM_INV_RD_REQ_ERR:
      return Error(ErrorCode::kRemoteAccess, "remote access error: " + text);
    case IBV_WC_RETRY_EXC_ERR:
    case IBV_WC_RNR_RETRY_EXC_ERR:
    case IBV_WC_REM_ABORT_ERR:
    case IBV_WC_RESP_TIMEOUT_ERR:  // the responder stopped answering: as a retry exceeded
      return Error(ErrorCode::kUnavailable, "RDMA peer unreachable: " + text);
    case IBV_WC_WR_FLUSH_ERR:
      return Error(ErrorCode::kUnavailable,
                   "flushed, the queue pair is in error (it may have run): " + text);
    default:
      return Error(ErrorCode::kIoError, "RDMA failed: " + text);
  }
}

Result<std::string> parse_verbs_nic_spec(const std::string& spec) {
  static const std::string kPrefix = "verbs:";
  if (spec.rfind(kPrefix, 0) != 0 || spec.size() == kPrefix.size()) {
    return Error(ErrorCode::kBadRequest,
                 "bad nic spec '" + spec + "': expected verbs:DEVICE (e.g. verbs:mlx5_0)");
  }
  return spec.substr(kPrefix.size());
}

}  // namespace rcxl::verbs
