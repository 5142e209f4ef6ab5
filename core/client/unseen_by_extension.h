// Whether a failed agent call shows its message never reached the extension:
// a coded refusal before it (stale_epoch, bad_range, not_advertised...) or no
// connection. Not after a timeout (it may have), extension_failed (it did), or
// an internal error (a reply we could not read). Hints use it to know a
// read_hint opened nothing, waits to know an agent heard nothing of a store.
#pragma once

#include "core/runtime/status.h"

namespace rcxl::client {

inline bool unseen_by_extension(ErrorCode code) {
  return code != ErrorCode::kOk && code != ErrorCode::kTimeout &&
         code != ErrorCode::kExtensionFailed && code != ErrorCode::kInternal;
}

}  // namespace rcxl::client
