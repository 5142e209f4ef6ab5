#include "core/directory/request_batches.h"

#include <algorithm>

namespace rcxl::directory {

std::vector<std::pair<std::size_t, std::size_t>> request_batches(
    std::size_t count, std::size_t budget_bytes, std::size_t max_items,
    const std::function<std::size_t(std::size_t)>& rough_bytes,
    const std::function<std::size_t(std::size_t)>& exact_bytes) {
  std::vector<std::pair<std::size_t, std::size_t>> out;
  if (count == 0) return {{0, 0}};  // an empty call still asks once, as before
  max_items = std::max<std::size_t>(max_items, 1);
  std::size_t rough = 0;
  for (std::size_t i = 0; i < count && rough <= budget_bytes; ++i) rough += rough_bytes(i);
  if (count <= max_items && rough <= budget_bytes) return {{0, count}};  // the usual call
  std::size_t begin = 0;
  std::size_t bytes = 0;
  for (std::size_t i = 0; i < count; ++i) {
    const std::size_t item = exact_bytes(i);
    const bool full = i > begin && (bytes + item > budget_bytes || i - begin == max_items);
    if (full) {
      out.emplace_back(begin, i);
      begin = i;
      bytes = 0;
    }
    bytes += item;
  }
  out.emplace_back(begin, count);
  return out;
}

}  // namespace rcxl::directory
