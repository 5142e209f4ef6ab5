#include "scenarios/report/svg_chart.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <limits>
#include <optional>
#include <sstream>
#include <tuple>

namespace rcxl::scenarios {
namespace {

// The plot area; the legend gets its own column right of it, so it never covers data.
constexpr double kPlotWidth = 630, kHeight = 420;
constexpr double kLeft = 70, kGap = 16, kRight = 12, kTop = 40, kBottom = 55;
constexpr double kCharWidth = 7;  // a legend character at font-size 12, generously
constexpr const char* kColors[] = {"#1f77b4", "#d62728", "#2ca02c",
                                   "#ff7f0e", "#9467bd", "#8c564b"};
// Every series but the first is dashed, each its own way: series that coincide
// (identical runs) still show, one through the other's gaps.
constexpr const char* kDashes[] = {"", "7,4", "2,3", "10,3,2,3", "4,4", "1,5"};

std::string escape(const std::string& text) {
  std::string out;
  for (char c : text) {
    switch (c) {
      case '<':
        out += "&lt;";
        break;
      case '>':
        out += "&gt;";
        break;
      case '&':
        out += "&amp;";
        break;
      default:
        out += c;
    }
  }
  return out;
}

// "Nice" tick step for a span, 1/2/5 x 10^k.
double tick_step(double span) {
  if (!(span > 0) || !std::isfinite(span)) return 1;
  const double raw = span / 6;
  const double mag = std::pow(10, std::floor(std::log10(raw)));
  for (double m : {1.0, 2.0, 5.0, 10.0}) {
    if (raw <= m * mag) return m * mag;
  }
  return 10 * mag;
}

// A tick's label: 6 significant digits, or as many as ticks `step` apart
// need to differ (64 GiB and 64 GiB + 4 KiB both read "6.87195e+10").
std::string fmt(double v, double step = 0) {
  if (std::abs(v) < 1e-12) v = 0;
  int digits = 6;
  if (step > 0 && v != 0) {
    digits = std::clamp(static_cast<int>(std::ceil(std::log10(std::abs(v) / step))) + 1, 6, 17);
  }
  char buf[48];
  std::snprintf(buf, sizeof buf, "%.*g", digits, v);
  return buf;
}

// [lo, hi] made drawable: finite, and wide enough that its ticks differ in a
// double (1e16 + 1 == 1e16): one value, or all equal, is padded by a tenth of
// its magnitude on each side.
std::pair<double, double> drawable(double lo, double hi) {
  constexpr double kMax = std::numeric_limits<double>::max() / 4;
  if (!std::isfinite(lo) || !std::isfinite(hi) || lo > hi) return {0, 1};
  lo = std::clamp(lo, -kMax, kMax);
  hi = std::clamp(hi, -kMax, kMax);
  const double size = std::max(std::abs(lo), std::abs(hi));
  if (hi - lo > size * 1e-9) return {lo, hi};
  if (size < 1e-300) return {lo, lo + 1};  // zero (or next to it): a unit axis
  return {lo - size * 0.1, hi + size * 0.1};
}

// Finite values only: NaN and infinity cannot be placed on an axis.
bool drawable_point(double x, double y) {
  return std::isfinite(x) && std::isfinite(y);
}

}  // namespace

std::vector<std::pair<double, std::string>> axis_ticks(double lo, double hi, bool log) {
  std::vector<std::pair<double, std::string>> out;
  if (!std::isfinite(lo) || !std::isfinite(hi) || hi < lo) return out;
  if (!log) {
    const double step = tick_step(hi - lo);
    const double first = std::ceil(lo / step) * step;
    if (!(step > 0) || !std::isfinite(first)) return out;
    // i * step, never t += step: far from 0 a small step stops advancing t.
    for (int i = 0; i < kMaxTicks; ++i) {
      const double t = first + i * step;
      if (t > hi + step * 1e-6 || (!out.empty() && t <= out.back().first)) break;
      out.emplace_back(t, fmt(t, step));
    }
    return out;
  }
  const bool wide = hi - lo > 4;
  // Beyond kMaxTicks decades, every n-th decade; k = first + i * every, as above.
  const double first = std::floor(lo), last = std::ceil(hi);
  const double every = std::max(1.0, std::ceil((last - first + 1) / kMaxTicks));
  for (int i = 0; i <= kMaxTicks; ++i) {
    const double k = first + i * every;
    if (k > last) break;
    for (double m : {1.0, 2.0, 5.0}) {
      if (wide && m != 1.0) continue;
      const double t = k + std::log10(m);
      const double value = m * std::pow(10, k);
      // Past a double's range (10^309, 10^-324) a tick has no label to show.
      if (!std::isfinite(value) || value == 0) continue;
      if (t >= lo - 1e-9 && t <= hi + 1e-9 && out.size() < static_cast<std::size_t>(kMaxTicks)) {
        out.emplace_back(t, fmt(value));
      }
    }
  }
  // Within one 1-2-5 step (loads of 110..190 ms) no tick fell inside: the
  // values' own linear ticks, placed on the log axis.
  if (out.size() < 2 && hi - lo < 1) {
    out.clear();
    const double from = std::pow(10, lo), to = std::pow(10, hi);
    for (const auto& [value, label] : axis_ticks(from, to, false)) {
      if (value > 0) out.emplace_back(std::clamp(std::log10(value), lo, hi), label);
    }
  }
  return out;
}

namespace {

// The series in log10 on the chosen axes; points that cannot be drawn are left out.
std::vector<Series> to_log(const std::vector<Series>& in, bool log_x, bool log_y) {
  std::vector<Series> out;
  for (const auto& s : in) {
    Series t;
    t.label = s.label;
    t.markers = s.markers;
    const bool bars = s.y_low.size() == s.x.size() && s.y_high.size() == s.x.size();
    for (std::size_t k = 0; k < s.x.size(); ++k) {
      if ((log_x && !(s.x[k] > 0)) || (log_y && !(s.y[k] > 0))) continue;
      // A low end at or below 0 has no log: -inf, drawn down to the axis' bottom.
      auto ly = [&](double v) {
        if (!log_y) return v;
        return v > 0 ? std::log10(v) : -std::numeric_limits<double>::infinity();
      };
      t.x.push_back(log_x ? std::log10(s.x[k]) : s.x[k]);
      t.y.push_back(ly(s.y[k]));
      if (bars) {
        t.y_low.push_back(ly(s.y_low[k]));
        t.y_high.push_back(ly(s.y_high[k]));
      }
    }
    out.push_back(std::move(t));
  }
  return out;
}

}  // namespace

Series cdf_series(std::string label, std::vector<double> samples) {
  Series s;
  s.label = std::move(label);
  std::sort(samples.begin(), samples.end());
  for (std::size_t i = 0; i < samples.size(); ++i) {
    s.x.push_back(samples[i]);
    s.y.push_back(static_cast<double>(i + 1) / static_cast<double>(samples.size()));
  }
  return s;
}

std::string render_line_chart(const ChartSpec& spec, const std::vector<Series>& input) {
  const std::vector<Series> series =
      spec.log_x || spec.log_y ? to_log(input, spec.log_x, spec.log_y) : input;
  double xmin = std::numeric_limits<double>::max(), xmax = std::numeric_limits<double>::lowest();
  double ymin = std::numeric_limits<double>::max(), ymax = std::numeric_limits<double>::lowest();
  auto widen_y = [&](double v) {
    if (std::isfinite(v)) ymin = std::min(ymin, v), ymax = std::max(ymax, v);
  };
  for (const auto& s : series) {
    for (std::size_t k = 0; k < s.x.size() && k < s.y.size(); ++k) {
      if (!drawable_point(s.x[k], s.y[k])) continue;
      xmin = std::min(xmin, s.x[k]), xmax = std::max(xmax, s.x[k]);
      widen_y(s.y[k]);
    }
    for (double v : s.y_low) widen_y(v);
    for (double v : s.y_high) widen_y(v);
  }
  // No point to place (every run failed, or none measured this): ticks would be made up.
  const bool no_data = xmin > xmax || ymin > ymax;
  if (!spec.log_y && ymin <= ymax) ymin = std::min(ymin, 0.0);  // a linear y axis starts at 0
  std::tie(xmin, xmax) = drawable(xmin, xmax);
  std::tie(ymin, ymax) = drawable(ymin, ymax);
  // Room above the highest point (and below the lowest on a log axis).
  const double pad = 0.05 * (ymax - ymin);
  if (spec.log_y) ymin -= pad;
  ymax += pad;
  std::size_t longest_label = 0;
  for (const auto& s : series) longest_label = std::max(longest_label, s.label.size());
  const double legend_width =
      series.empty() ? 0 : 44 + kCharWidth * static_cast<double>(longest_label);
  const double width = kLeft + kPlotWidth + kGap + legend_width + kRight;
  const double pw = kPlotWidth, ph = kHeight - kTop - kBottom;
  auto px = [&](double x) { return kLeft + (x - xmin) / (xmax - xmin) * pw; };
  auto py = [&](double y) { return kTop + ph - (y - ymin) / (ymax - ymin) * ph; };

  // A long legend (a sweep's many series) makes the picture taller, never cut off.
  const double height = std::max(kHeight, kTop + 14 + 18 * static_cast<double>(series.size()));
  std::ostringstream o;
  o << "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"" << width << "\" height=\"" << height
    << "\" font-family=\"sans-serif\" font-size=\"12\">\n"
    << "<rect width=\"100%\" height=\"100%\" fill=\"white\"/>\n"
    << "<text x=\"" << kLeft + pw / 2 << "\" y=\"22\" text-anchor=\"middle\" font-size=\"15\">"
    << escape(spec.title) << "</text>\n";
  // Axes and ticks.
  if (no_data) {
    o << "<text x=\"" << kLeft + pw / 2 << "\" y=\"" << kTop + ph / 2
      << "\" text-anchor=\"middle\" fill=\"#666\">no data: every run failed or measured "
         "nothing here</text>\n";
  }
  for (const auto& [t, label] :
       no_data ? decltype(axis_ticks(0, 1, false)){} : axis_ticks(xmin, xmax, spec.log_x)) {
    o << "<line x1=\"" << px(t) << "\" y1=\"" << kTop << "\" x2=\"" << px(t) << "\" y2=\""
      << kTop + ph << "\" stroke=\"#eee\"/>\n<text x=\"" << px(t) << "\" y=\"" << kTop + ph + 16
      << "\" text-anchor=\"middle\">" << label << "</text>\n";
  }
  for (const auto& [t, label] :
       no_data ? decltype(axis_ticks(0, 1, false)){} : axis_ticks(ymin, ymax, spec.log_y)) {
    o << "<line x1=\"" << kLeft << "\" y1=\"" << py(t) << "\" x2=\"" << kLeft + pw << "\" y2=\""
      << py(t) << "\" stroke=\"#eee\"/>\n<text x=\"" << kLeft - 6 << "\" y=\"" << py(t) + 4
      << "\" text-anchor=\"end\">" << label << "</text>\n";
  }
  o << "<rect x=\"" << kLeft << "\" y=\"" << kTop << "\" width=\"" << pw << "\" height=\"" << ph
    << "\" fill=\"none\" stroke=\"#333\"/>\n"
    << "<text x=\"" << kLeft + pw / 2 << "\" y=\"" << kHeight - 12 << "\" text-anchor=\"middle\">"
    << escape(spec.x_label) << "</text>\n"
    << "<text transform=\"translate(16," << kTop + ph / 2
    << ") rotate(-90)\" text-anchor=\"middle\">" << escape(spec.y_label) << "</text>\n";
  // Series and legend.
  for (std::size_t i = 0; i < series.size(); ++i) {
    const auto& s = series[i];
    const char* color = kColors[i % std::size(kColors)];
    // Past the palette, colours repeat with the next dash pattern.
    const char* pattern = kDashes[(i + i / std::size(kColors)) % std::size(kDashes)];
    const std::string dash =
        *pattern ? std::string(" stroke-dasharray=\"") + pattern + "\"" : std::string();
    o << "<polyline fill=\"none\" stroke=\"" << color << "\" stroke-width=\"1.8\"" << dash
      << " points=\"";
    std::optional<double> last_y;  // of the last point drawn
    for (std::size_t k = 0; k < s.x.size() && k < s.y.size(); ++k) {
      if (!drawable_point(s.x[k], s.y[k])) continue;
      if (spec.step && last_y) o << px(s.x[k]) << "," << py(*last_y) << " ";
      o << px(s.x[k]) << "," << py(s.y[k]) << " ";
      last_y = s.y[k];
    }
    o << "\"/>\n";
    const bool bars = s.y_low.size() == s.x.size() && s.y_high.size() == s.x.size();
    for (std::size_t k = 0; bars && k < s.x.size(); ++k) {
      const double low = s.y_low[k] == -std::numeric_limits<double>::infinity() ? ymin : s.y_low[k];
      if (!drawable_point(s.x[k], s.y[k]) || !drawable_point(low, s.y_high[k])) continue;
      o << "<line x1=\"" << px(s.x[k]) << "\" y1=\"" << py(low) << "\" x2=\"" << px(s.x[k])
        << "\" y2=\"" << py(s.y_high[k]) << "\" stroke=\"" << color
        << "\" stroke-width=\"1.2\"/>\n";
    }
    for (std::size_t k = 0; s.markers && k < s.x.size() && k < s.y.size(); ++k) {
      if (!drawable_point(s.x[k], s.y[k])) continue;
      o << "<circle cx=\"" << px(s.x[k]) << "\" cy=\"" << py(s.y[k]) << "\" r=\"3\" fill=\""
        << color << "\"/>\n";
    }
    const double lx = kLeft + pw + kGap, ly = kTop + 14 + 18 * static_cast<double>(i);
    o << "<line x1=\"" << lx << "\" y1=\"" << ly - 4 << "\" x2=\"" << lx + 34 << "\" y2=\""
      << ly - 4 << "\" stroke=\"" << color << "\" stroke-width=\"2\"" << dash << "/>\n"
      << "<text x=\"" << lx + 40 << "\" y=\"" << ly << "\">" << escape(s.label) << "</text>\n";
  }
  o << "</svg>\n";
  return o.str();
}

}  // namespace rcxl::scenarios
