// The statistics the reproduce table is built on (PAPER.md "Method").
#include <gtest/gtest.h>

#include <cmath>

#include "scenarios/report/stats.h"
#include "scenarios/report/svg_chart.h"

namespace rcxl::scenarios {
namespace {

TEST(ReportStats, R8_TIntervalOfFivePairsUsesFourDegreesOfFreedom) {
  const std::vector<double> ratios = {1.00, 1.01, 0.99, 1.02, 1.00};
  const Interval ci = t_interval_95(ratios);
  EXPECT_DOUBLE_EQ(ci.mean, 1.004);
  // s = 0.011402, t(0.975, 4) = 2.776, half width = 2.776 * s / sqrt(5)
  EXPECT_NEAR(ci.high - ci.mean, 2.776 * 0.0114018 / std::sqrt(5.0), 1e-6);
  EXPECT_NEAR(ci.mean - ci.low, ci.high - ci.mean, 1e-12);
  EXPECT_EQ(ci.n, 5u);
}

TEST(ReportStats, SingleValueHasZeroWidth) {
  const Interval ci = t_interval_95({2.5});
  EXPECT_EQ(ci.low, 2.5);
  EXPECT_EQ(ci.high, 2.5);
}

TEST(ReportStats, QuantileInterpolates) {
  EXPECT_DOUBLE_EQ(quantile({4, 1, 3, 2}, 0.5), 2.5);
  EXPECT_DOUBLE_EQ(quantile({4, 1, 3, 2}, 0.0), 1);
  EXPECT_DOUBLE_EQ(quantile({4, 1, 3, 2}, 1.0), 4);
}

TEST(ReportStats, ChartIsAnSvgWithOneLinePerSeriesAndEscapedText) {
  const std::string svg = render_line_chart(
      {"TTFT <reuse turns>", "ms", "fraction", true},
      {cdf_series("all DRAM", {1, 2, 3}), cdf_series("hints", {1.5, 2.5, 3.5})});
  EXPECT_EQ(svg.rfind("<svg", 0), 0u);
  EXPECT_NE(svg.find("TTFT &lt;reuse turns&gt;"), std::string::npos);
  std::size_t lines = 0;
  for (std::size_t p = svg.find("<polyline"); p != std::string::npos; p = svg.find("<polyline", p + 1)) ++lines;
  EXPECT_EQ(lines, 2u);
}

}  // namespace
}  // namespace rcxl::scenarios
