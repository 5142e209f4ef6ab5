#include "core/protocol/utf8.h"

#include <simdjson.h>

namespace rcxl::protocol {

bool is_valid_utf8(std::string_view text) {
  return simdjson::validate_utf8(text.data(), text.size());
}

}  // namespace rcxl::protocol
