// Text from users (flags, file names, JSON keys) as an error message may show
// it: one line, no terminal controls, not without end.
#pragma once

#include <cstddef>
#include <string>
#include <string_view>

namespace rcxl::runtime {

// `text` with control characters escaped (\n, \x01; C1 controls and bytes that
// are not UTF-8 too) so a message stays one line and cannot drive a terminal,
// and cut after `max_chars` with its length.
std::string printable(std::string_view text, std::size_t max_chars = 60);

}  // namespace rcxl::runtime
