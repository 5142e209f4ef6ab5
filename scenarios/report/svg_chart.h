// Small SVG charts for the reproduce report: CDFs of latency per configuration
// and bandwidth over time. Self-contained files a browser opens directly.
#pragma once

#include <string>
#include <vector>

namespace rcxl::scenarios {

struct Series {
  std::string label;
  std::vector<double> x;
  std::vector<double> y;
};

struct ChartSpec {
  std::string title;
  std::string x_label;
  std::string y_label;
  bool step = false;  // CDF-style steps instead of straight segments
};

// A line chart of several series with axes, ticks and a legend.
std::string render_line_chart(const ChartSpec& spec, const std::vector<Series>& series);
// Empirical CDF series of `samples` (x = value, y = fraction <= value).
Series cdf_series(std::string label, std::vector<double> samples);

}  // namespace rcxl::scenarios
