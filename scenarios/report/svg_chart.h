// Small SVG charts for the reproduce and sweep reports: CDFs of latency per
// configuration, bandwidth over time, a metric over a parameter grid.
// Self-contained files a browser opens directly.
#pragma once

#include <string>
#include <utility>
#include <vector>

namespace rcxl::scenarios {

struct Series {
  std::string label;
  std::vector<double> x;
  std::vector<double> y;
  // Optional 95% intervals: a vertical bar from y_low[k] to y_high[k] at x[k].
  std::vector<double> y_low;
  std::vector<double> y_high;
  bool markers = false;  // a dot on every point (grids with few points)
};

struct ChartSpec {
  std::string title;
  std::string x_label;
  std::string y_label;
  bool step = false;  // CDF-style steps instead of straight segments
  // Logarithmic axes (ticks at 1, 2, 5 x 10^k); points <= 0 are left out.
  bool log_x = false;
  bool log_y = false;
};

// An axis's ticks over [lo, hi]: (position, label) at 1/2/5 x 10^k steps, or on
// a log axis (positions in log10) at 1, 2, 5 x 10^k (only 10^k beyond four
// decades). At most kMaxTicks; none for a non-finite or reversed range.
inline constexpr int kMaxTicks = 100;
std::vector<std::pair<double, std::string>> axis_ticks(double lo, double hi, bool log);
// A line chart of several series with axes, ticks and a legend. Points with a
// NaN or infinite coordinate are left out; one value, or all equal, still gets
// an axis around it.

std::string render_line_chart(const ChartSpec& spec, const std::vector<Series>& series);
// Empirical CDF series of `samples` (x = value, y = fraction <= value).
Series cdf_series(std::string label, std::vector<double> samples);

}  // namespace rcxl::scenarios
