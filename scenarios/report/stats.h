// Paired-run statistics as the seed reports them: mean of per-pair ratios (or
// differences) with a 95% confidence interval from Student's t distribution.
#pragma once

#include <cstddef>
#include <vector>

namespace rcxl::scenarios {

struct Interval {
  double mean = 0;
  double low = 0;  // low == high == mean when there is no interval
  double high = 0;
  std::size_t n = 0;
  // A t-interval needs two values (n - 1 degrees of freedom): one value gives a
  // mean and no interval, not an interval of zero width.
  bool has_interval() const { return n >= 2; }
};

double mean(const std::vector<double>& xs);
// Sample standard deviation (n - 1); 0 for fewer than two values.
double stddev(const std::vector<double>& xs);
// Two-sided 97.5% quantile of Student's t with `df` degrees of freedom.
double t_quantile_975(std::size_t df);
// mean ± t * s / sqrt(n); see has_interval() for a single value.
Interval t_interval_95(const std::vector<double>& xs);
// "Within" where the seed gives a value and no interval (our rule,
// docs/reproduce.md): within 25% of the seed's value; a ratio by its excess
// over 1, since 25% of 1.0041 itself would accept 0.75..1.26.
inline constexpr double kNearSeedFraction = 0.25;
bool near_seed_value(double value, double seed);
bool near_seed_ratio(double ratio, double seed_ratio);
// The p-th quantile (0..1) by linear interpolation; xs need not be sorted.
double quantile(std::vector<double> xs, double p);

}  // namespace rcxl::scenarios
