#include "scenarios/report/stats.h"

#include <algorithm>
#include <array>
#include <cmath>
#include <numeric>

namespace rcxl::scenarios {

double mean(const std::vector<double>& xs) {
  if (xs.empty()) return 0;
  return std::accumulate(xs.begin(), xs.end(), 0.0) / static_cast<double>(xs.size());
}

double stddev(const std::vector<double>& xs) {
  if (xs.size() < 2) return 0;
  const double m = mean(xs);
  double sum = 0;
  for (double x : xs) sum += (x - m) * (x - m);
  return std::sqrt(sum / static_cast<double>(xs.size() - 1));
}

double t_quantile_975(std::size_t df) {
  // Standard table values of t(0.975, df), df = 1..30; beyond, the normal 1.96.
  static constexpr std::array<double, 30> kTable = {
      12.706, 4.303, 3.182, 2.776, 2.571, 2.447, 2.365, 2.306, 2.262, 2.228,
      2.201,  2.179, 2.160, 2.145, 2.131, 2.120, 2.110, 2.101, 2.093, 2.086,
      2.080,  2.074, 2.069, 2.064, 2.060, 2.056, 2.052, 2.048, 2.045, 2.042};
  if (df == 0) return 0;
  if (df <= kTable.size()) return kTable[df - 1];
  // Beyond the table, Cornish-Fisher from the normal quantile (Abramowitz &
  // Stegun 26.7.5): within 1e-4 of the exact value for df > 30, where a step
  // table's band ends would understate it (2.000 at df 31, exact 2.040).
  const double z = 1.959963984540054;
  const double v = static_cast<double>(df);
  const double z2 = z * z;
  const double g1 = (z2 + 1) * z / 4;
  const double g2 = ((5 * z2 + 16) * z2 + 3) * z / 96;
  const double g3 = (((3 * z2 + 19) * z2 + 17) * z2 - 15) * z / 384;
  const double g4 = ((((79 * z2 + 776) * z2 + 1482) * z2 - 1920) * z2 - 945) * z / 92160;
  return z + g1 / v + g2 / (v * v) + g3 / (v * v * v) + g4 / (v * v * v * v);
}

Interval t_interval_95(const std::vector<double>& xs) {
  Interval out;
  out.n = xs.size();
  out.mean = mean(xs);
  const double half =
      xs.size() < 2 ? 0 : t_quantile_975(xs.size() - 1) * stddev(xs) / std::sqrt(xs.size());
  out.low = out.mean - half;
  out.high = out.mean + half;
  return out;
}

double quantile(std::vector<double> xs, double p) {
  if (xs.empty()) return 0;
  std::sort(xs.begin(), xs.end());
  const double pos = std::clamp(p, 0.0, 1.0) * static_cast<double>(xs.size() - 1);
  const auto lo = static_cast<std::size_t>(std::floor(pos));
  const auto hi = std::min(lo + 1, xs.size() - 1);
  return xs[lo] + (xs[hi] - xs[lo]) * (pos - static_cast<double>(lo));
}

bool near_seed_value(double value, double seed) {
  return std::abs(value - seed) <= kNearSeedFraction * std::abs(seed);
}

bool near_seed_ratio(double ratio, double seed_ratio) {
  return near_seed_value(ratio - 1, seed_ratio - 1);
}

}  // namespace rcxl::scenarios
