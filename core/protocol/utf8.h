// Whether text is valid UTF-8. A string that is not reaches the wire with
// U+FFFD in place of its invalid bytes (FramedConn replaces them), so two keys
// that differ only there would be one key at the directory.
#pragma once

#include <string_view>

namespace rcxl::protocol {

bool is_valid_utf8(std::string_view text);

}  // namespace rcxl::protocol
