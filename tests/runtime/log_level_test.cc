// The --log-level words every binary takes (core/runtime/log.h).
#include <gtest/gtest.h>

#include "core/runtime/log.h"

namespace rcxl::runtime {
namespace {

TEST(LogLevel, R7_EveryLevelParses) {
  EXPECT_EQ(parse_log_level("trace").value(), LogLevel::kTrace);
  EXPECT_EQ(parse_log_level("debug").value(), LogLevel::kDebug);
  EXPECT_EQ(parse_log_level("info").value(), LogLevel::kInfo);
  EXPECT_EQ(parse_log_level("warn").value(), LogLevel::kWarn);
  EXPECT_EQ(parse_log_level("error").value(), LogLevel::kError);
}

TEST(LogLevel, R7_OtherWordsAreBadRequestNamingTheChoices) {
  for (const char* bad : {"", "INFO", "warning", "info ", "3"}) {
    auto r = parse_log_level(bad);
    ASSERT_FALSE(r.ok()) << bad;
    EXPECT_EQ(r.status().code(), ErrorCode::kBadRequest);
    EXPECT_NE(r.status().message().find("trace, debug, info, warn or error"), std::string::npos);
  }
}

}  // namespace
}  // namespace rcxl::runtime
