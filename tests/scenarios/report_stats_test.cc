// The statistics the reproduce table is built on (PAPER.md "Method").
#include <gtest/gtest.h>

#include <cmath>
#include <limits>

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

// Past the table's 30 degrees of freedom (--pairs and --seeds go to 50) the
// quantile is the exact one to 1e-3, never a band's smallest: a step table
// took 2.000 for df 31..60 (exact 2.040 at 31), intervals ~2% too narrow.
TEST(ReportStats, R8_TQuantilePastThirtyDegreesOfFreedomIsExact) {
  EXPECT_DOUBLE_EQ(t_quantile_975(30), 2.042);
  EXPECT_NEAR(t_quantile_975(31), 2.0395, 1e-3);
  EXPECT_NEAR(t_quantile_975(39), 2.0227, 1e-3);
  EXPECT_NEAR(t_quantile_975(49), 2.0096, 1e-3);
  EXPECT_NEAR(t_quantile_975(61), 1.9996, 1e-3);
  EXPECT_NEAR(t_quantile_975(120), 1.9799, 1e-3);
  EXPECT_NEAR(t_quantile_975(1000000), 1.9600, 1e-3);
  for (std::size_t df = 2; df < 200; ++df) EXPECT_LT(t_quantile_975(df), t_quantile_975(df - 1));
}

// Where the seed gives no interval (P2-P4): 25% of its value; P3's ratio by its
// excess over 1 (1.0041x: 1.0031..1.0051x), not 25% of 1.0041 (0.75..1.26x).
TEST(ReportStats, R8_WithinTheSeedsValueWhereItGivesNoInterval) {
  EXPECT_TRUE(near_seed_value(1.42, 1.24));
  EXPECT_TRUE(near_seed_value(1.54, 1.24));
  EXPECT_FALSE(near_seed_value(1.56, 1.24));
  EXPECT_FALSE(near_seed_value(1.47, 2.04));  // P3's delta, session 10
  EXPECT_TRUE(near_seed_value(1.53, 2.04));
  EXPECT_TRUE(near_seed_ratio(1.0043, 1.0041));
  EXPECT_TRUE(near_seed_ratio(1.0032, 1.0041));
  EXPECT_FALSE(near_seed_ratio(1.0052, 1.0041));
  EXPECT_FALSE(near_seed_ratio(1.0349, 1.0041));  // within 25% of 1.0041, not of its 0.41%
  EXPECT_FALSE(near_seed_ratio(1.0, 1.0041));
}

TEST(ReportStats, SingleValueHasAMeanAndNoInterval) {
  const Interval ci = t_interval_95({2.5});
  EXPECT_EQ(ci.mean, 2.5);
  EXPECT_FALSE(ci.has_interval());
  EXPECT_EQ(ci.low, 2.5);
  EXPECT_EQ(ci.high, 2.5);
  EXPECT_TRUE(t_interval_95({2.5, 2.5}).has_interval());  // zero width, but an interval
}

TEST(ReportStats, QuantileInterpolates) {
  EXPECT_DOUBLE_EQ(quantile({4, 1, 3, 2}, 0.5), 2.5);
  EXPECT_DOUBLE_EQ(quantile({4, 1, 3, 2}, 0.0), 1);
  EXPECT_DOUBLE_EQ(quantile({4, 1, 3, 2}, 1.0), 4);
}

TEST(ReportStats, ChartIsAnSvgWithOneLinePerSeriesAndEscapedText) {
  const std::string svg =
      render_line_chart({"TTFT <reuse turns>", "ms", "fraction", true},
                        {cdf_series("all DRAM", {1, 2, 3}), cdf_series("hints", {1.5, 2.5, 3.5})});
  EXPECT_EQ(svg.rfind("<svg", 0), 0u);
  EXPECT_NE(svg.find("TTFT &lt;reuse turns&gt;"), std::string::npos);
  std::size_t lines = 0;
  for (std::size_t p = svg.find("<polyline"); p != std::string::npos;
       p = svg.find("<polyline", p + 1))
    ++lines;
  EXPECT_EQ(lines, 2u);
}

std::size_t count(const std::string& text, const std::string& what) {
  std::size_t n = 0;
  for (std::size_t p = text.find(what); p != std::string::npos; p = text.find(what, p + 1)) ++n;
  return n;
}

// The sweep's charts: interval bars and dots per point, log axes for wide ranges.
TEST(ReportStats, R8_SweepChartDrawsIntervalsMarkersAndLogAxes) {
  Series s;
  s.label = "hints";
  s.x = {1, 10, 100};
  s.y = {2, 200, 2000};
  s.y_low = {1, 150, 1500};
  s.y_high = {3, 250, 2500};
  s.markers = true;
  ChartSpec linear{"TTFT", "x", "ms", false};
  const std::string plain = render_line_chart(linear, {s});
  EXPECT_EQ(count(plain, "<circle"), 3u);
  EXPECT_EQ(count(plain, "stroke-width=\"1.2\""), 3u) << "one interval bar per point";
  EXPECT_EQ(count(plain, ">2</text>"), 0u) << "linear ticks step by 20 and 500";
  ChartSpec log = linear;
  log.log_x = true;
  log.log_y = true;
  const std::string logged = render_line_chart(log, {s});
  EXPECT_EQ(count(logged, ">2</text>"), 2u) << "1, 2, 5 x 10^k on both log axes";
  EXPECT_EQ(count(logged, ">20</text>"), 2u);
  EXPECT_EQ(count(logged, ">1000</text>"), 1u);
  Series with_zero = s;
  with_zero.x = {0, 10, 100};
  EXPECT_EQ(count(render_line_chart(log, {with_zero}), "<circle"), 2u)
      << "a point at 0 cannot be drawn on a log axis";
}

// SPEC R8 (sweep pictures): a chart with no point to place says so; it drew
// made-up 0..1 axes under a metric's unit (session-31 review: a sweep whose
// every run failed).
TEST(ReportStats, R8_AChartWithNoDataSaysSo) {
  Series empty;
  empty.label = "hints";
  const std::string svg = render_line_chart({"TTFT", "x", "ms", false}, {empty});
  EXPECT_NE(svg.find("no data"), std::string::npos) << svg;
  EXPECT_EQ(count(svg, "stroke=\"#eee\""), 0u) << "no tick lines";
  Series one;
  one.label = "hints";
  one.x = {1};
  one.y = {2};
  EXPECT_EQ(render_line_chart({"TTFT", "x", "ms", false}, {one}).find("no data"),
            std::string::npos);
}

// Review (session 25): on a log y axis an interval whose low end is at or
// below 0 was drawn from the mean up; it goes down to the axis' bottom.
TEST(ReportStats, R8_ALogAxisIntervalBelowZeroReachesTheAxisBottom) {
  Series s;
  s.label = "no_hints";
  s.x = {1, 2};
  s.y = {100, 1000};
  s.y_low = {-50, 900};
  s.y_high = {250, 1100};
  s.markers = true;
  ChartSpec log{"TTFT", "x", "ms", false};
  log.log_y = true;
  const std::string svg = render_line_chart(log, {s});
  auto number_after = [&](const std::string& what, std::size_t from) {
    const std::size_t at = svg.find(what, from);
    EXPECT_NE(at, std::string::npos) << what;
    return at == std::string::npos ? 0.0 : std::stod(svg.substr(at + what.size()));
  };
  const std::size_t frame = svg.rfind("<rect x=\"", svg.find("fill=\"none\" stroke=\"#333\""));
  const double bottom = number_after("y=\"", frame) + number_after("height=\"", frame);
  const std::size_t bar = svg.rfind("<line", svg.find("stroke-width=\"1.2\""));
  const double low_end = number_after("y1=\"", bar);
  const double mean = number_after("cy=\"", svg.find("<circle"));
  EXPECT_NEAR(low_end, bottom, 0.01);
  EXPECT_GT(low_end, mean + 1);
}

// The legend has its own column right of the plot (it never covers a line),
// and a series that coincides with another still shows: it is dashed.
TEST(ReportStats, R8_ChartLegendBesideThePlotAndCoincidingSeriesBothShow) {
  const Series a = cdf_series("CXL-SSD, read hints", {1, 2, 3});
  const Series b = cdf_series("gated", {1, 2, 3});
  const std::string svg = render_line_chart({"TTFT", "ms", "fraction", true}, {a, b});
  std::size_t plot_right = 0;  // the plot frame: <rect x=.. width=..>
  {
    const std::size_t frame = svg.find("fill=\"none\" stroke=\"#333\"");
    ASSERT_NE(frame, std::string::npos);
    const std::size_t x = svg.rfind("<rect x=\"", frame) + 9;
    const std::size_t w = svg.find("width=\"", x) + 7;
    plot_right = std::stoul(svg.substr(x)) + std::stoul(svg.substr(w));
  }
  for (const std::string label : {"CXL-SSD, read hints", "gated"}) {
    const std::size_t at = svg.find(">" + label + "</text>");
    ASSERT_NE(at, std::string::npos) << label;
    const std::size_t x = svg.rfind("<text x=\"", at) + 9;
    EXPECT_GT(std::stod(svg.substr(x)), static_cast<double>(plot_right)) << label;
  }
  const std::size_t second = svg.find("<polyline", svg.find("<polyline") + 1);
  ASSERT_NE(second, std::string::npos);
  const std::string line = svg.substr(second, svg.find("points=", second) - second);
  EXPECT_NE(line.find("stroke-dasharray"), std::string::npos) << line;
  EXPECT_EQ(svg.substr(svg.find("<polyline"), 80).find("stroke-dasharray"), std::string::npos)
      << "the first series is solid";
}

// A sweep makes a series per configuration and point: past 21 the legend
// rows fell below the picture's fixed height (review, session 26).
TEST(ReportStats, R8_EveryLegendRowIsInsideThePicture) {
  std::vector<Series> many;
  for (int i = 0; i < 25; ++i) many.push_back(cdf_series("series " + std::to_string(i), {1, 2}));
  const std::string svg = render_line_chart({"TTFT", "ms", "fraction", true}, many);
  const std::size_t h = svg.find("height=\"") + 8;
  const double height = std::stod(svg.substr(h));
  const std::size_t last = svg.find(">series 24</text>");
  ASSERT_NE(last, std::string::npos);
  const std::size_t y = svg.find("y=\"", svg.rfind("<text x=\"", last)) + 3;
  EXPECT_LE(std::stod(svg.substr(y)), height);
}

// SPEC R8 (bad input never hangs): ticks step as start + i * step, at most
// kMaxTicks. `t += step` stopped advancing once t was far larger than the step
// (a sweep over /control_link/bytes_per_second=1e16 never finished).
TEST(ReportStats, R8_AxisTicksAreBoundedForAnyRange) {
  const double inf = std::numeric_limits<double>::infinity();
  const double nan = std::numeric_limits<double>::quiet_NaN();
  const double big = std::numeric_limits<double>::max();
  const std::vector<std::pair<double, double>> ranges = {
      {1e16, 1e16 + 1}, {1e30, 1e30}, {-1e300, 1e300}, {-big, big},     {0, 1e-320},
      {-5, -5},         {3, 3},       {0, 0},          {1, 0},          {nan, 1},
      {0, nan},         {-inf, inf},  {0, inf},        {1e-300, 2e-300}};
  for (const auto& [lo, hi] : ranges) {
    for (bool log : {false, true}) {
      const auto ticks = axis_ticks(lo, hi, log);
      EXPECT_LE(ticks.size(), static_cast<std::size_t>(kMaxTicks)) << lo << ".." << hi;
      for (const auto& [t, label] : ticks) {
        EXPECT_TRUE(std::isfinite(t)) << lo << ".." << hi;
        EXPECT_GE(t, lo - 1e-9 * std::max(1.0, std::abs(lo))) << lo << ".." << hi;
        EXPECT_LE(t, hi + 1e-9 * std::max(1.0, std::abs(hi))) << lo << ".." << hi;
      }
    }
  }
  EXPECT_EQ(axis_ticks(0, 100, false).size(), 6u) << "0, 20, ..., 100";
  const auto decades = axis_ticks(-300, 300, true);
  EXPECT_GT(decades.size(), 50u) << "600 decades: every n-th";
  EXPECT_LE(decades.size(), static_cast<std::size_t>(kMaxTicks));
  EXPECT_TRUE(axis_ticks(nan, 1, false).empty());
  EXPECT_TRUE(axis_ticks(1, 0, false).empty());
  // A log axis inside one 1-2-5 step had no tick (loads of 110..190 ms), and
  // ticks closer than 6 digits shared one label (session-33 review).
  const auto loads = axis_ticks(std::log10(110), std::log10(190), true);
  EXPECT_GE(loads.size(), 2u);
  for (const auto& [t, label] : loads) {
    EXPECT_GE(t, std::log10(110) - 1e-9);
    EXPECT_LE(t, std::log10(190) + 1e-9);
    EXPECT_DOUBLE_EQ(std::pow(10, t), std::stod(label)) << label;
  }
  const auto close = axis_ticks(68719476736.0, 68719480832.0, false);
  ASSERT_GE(close.size(), 2u);
  for (std::size_t i = 1; i < close.size(); ++i) {
    EXPECT_NE(close[i].second, close[i - 1].second) << close[i].second;
  }
}

// SPEC R8: a chart of one huge, tiny, negative or non-finite value finishes
// with a bounded file; one value gets an axis around it, not a collapsed one.
TEST(ReportStats, R8_ChartOfExtremeValuesIsBounded) {
  const double inf = std::numeric_limits<double>::infinity();
  const double nan = std::numeric_limits<double>::quiet_NaN();
  const std::vector<double> values = {
      1e16, 1e30, 1e300, -1e16, 5e-324, 0, -3, std::numeric_limits<double>::max(), nan, inf, -inf};
  for (double x : values) {
    for (double y : values) {
      Series s;
      s.label = "one";
      s.x = {x, 2};
      s.y = {y, 1};
      s.y_low = {y, 1};
      s.y_high = {y, 1};
      s.markers = true;
      for (bool log : {false, true}) {
        ChartSpec spec{"t", "x", "y", false, log, log};
        const std::string svg = render_line_chart(spec, {s});
        EXPECT_LT(count(svg, "<text"), 2u * kMaxTicks + 10) << x << ", " << y;
        EXPECT_EQ(count(svg, "nan"), 0u) << x << ", " << y;
        EXPECT_EQ(count(svg, "inf"), 0u) << x << ", " << y;
      }
    }
  }
  Series one;
  one.label = "one";
  one.x = {1e16};
  one.y = {5};
  one.markers = true;
  const std::string svg = render_line_chart({"t", "bytes/s", "ms", false}, {one});
  EXPECT_EQ(count(svg, "<circle"), 1u);
  EXPECT_EQ(count(svg, ">1e+16</text>"), 1u) << "a tick at the value, the axis around it";
  EXPECT_GE(count(svg, "e+16</text>"), 3u);
}
}  // namespace
}  // namespace rcxl::scenarios
