// How a directory call's keys or entries are cut into requests that each fit
// one frame (the server refuses a larger one with bad_frame and closes) and
// hold at most kMaxKeysPerRequest items. The seed sent one request per call;
// a load of thousands of long keys did not fit.
#pragma once

#include <cstddef>
#include <functional>
#include <utility>
#include <vector>

namespace rcxl::directory {

// [begin, end) index ranges over `count` items, in order, none empty (one
// empty range for no items: an empty call is still one request).
// `rough_bytes(i)` is a cheap upper bound of item i's encoded size; only when
// their sum is over `budget_bytes` is `exact_bytes(i)` asked, item by item.
// An item larger than the budget alone is a batch of its own.
std::vector<std::pair<std::size_t, std::size_t>> request_batches(
    std::size_t count, std::size_t budget_bytes, std::size_t max_items,
    const std::function<std::size_t(std::size_t)>& rough_bytes,
    const std::function<std::size_t(std::size_t)>& exact_bytes);

}  // namespace rcxl::directory
