#include "tune/bayes_search.h"

#include <algorithm>
#include <cmath>

namespace kolo::tune {
namespace {

// The radical inverse of i in base b: the i-th Halton coordinate, in [0, 1).
double radical_inverse(int i, int base) {
  double result = 0, f = 1.0 / base;
  for (; i > 0; i /= base, f /= base) result += f * (i % base);
  return result;
}

constexpr int kPrimes[] = {2, 3, 5, 7, 11, 13, 17, 19, 23, 29, 31, 37};

double normal_pdf(double z) { return std::exp(-0.5 * z * z) / std::sqrt(2 * M_PI); }
double normal_cdf(double z) { return 0.5 * std::erfc(-z / std::sqrt(2.0)); }

}  // namespace

BayesSearch::BayesSearch(Space space, Point start, SearchOptions options)
    : space_(std::move(space)),
      start_(std::move(start)),
      options_(options),
      gp_(space_, options.gp),
      next_(start_) {}

Point BayesSearch::initial_point(int i) const {
  // Numeric dimensions: the Halton sequence (one prime base per dimension), which
  // spreads few points evenly. Categorical ones: label i * (k + 1) mod n for the
  // k-th, so that every label of every one is tried within n points.
  Point p(space_.dims());
  int categorical = 0;
  for (size_t d = 0; d < space_.dims(); ++d) {
    const int n = static_cast<int>(space_.dim(d).size());
    if (space_.dim(d).categorical()) {
      p[d] = (start_[d] + i * (++categorical)) % n;
      continue;
    }
    const int base = kPrimes[d % (sizeof kPrimes / sizeof kPrimes[0])];
    p[d] = std::min(static_cast<int>(radical_inverse(i, base) * n), n - 1);
  }
  return p;
}

void BayesSearch::observe(double score) {
  if (done_) return;
  x_.push_back(next_);
  y_.push_back(score);
  const int n = samples();
  if (n >= options_.max_samples) {
    done_ = true;
    return;
  }
  if (n < options_.initial) {
    next_ = initial_point(n);
    return;
  }
  next_ = choose();
  if (n >= options_.min_samples && last_ei_ < options_.stop_improvement * std::fabs(last_best_mean_))
    done_ = true;
}

Point BayesSearch::choose() {
  gp_.fit(x_, y_);
  double best_mean = -HUGE_VAL;
  for (const Point& p : x_) {
    double m = 0, sd = 0;
    gp_.predict(p, &m, &sd);
    best_mean = std::max(best_mean, m);
  }
  const double xi = options_.exploration * gp_.y_scale();
  double best_ei = -1;
  size_t best_flat = 0;
  for (size_t f = 0; f < space_.points(); ++f) {
    double m = 0, sd = 0;
    gp_.predict(space_.point(f), &m, &sd);
    const double gain = m - best_mean - xi;
    double ei = gain > 0 ? gain : 0.0;
    if (sd > 0) {
      const double z = gain / sd;
      ei = gain * normal_cdf(z) + sd * normal_pdf(z);
    }
    if (ei > best_ei) {
      best_ei = ei;
      best_flat = f;
    }
  }
  last_ei_ = best_ei;
  last_best_mean_ = best_mean;
  return space_.point(best_flat);
}

Point BayesSearch::best() const {
  if (x_.empty()) return start_;
  if (x_.size() == 1) return x_[0];
  GaussianProcess gp(space_, options_.gp);
  gp.fit(x_, y_);
  Point best = x_[0];
  double best_mean = -HUGE_VAL;
  for (const Point& p : x_) {
    double m = 0, sd = 0;
    gp.predict(p, &m, &sd);
    if (m > best_mean) {
      best_mean = m;
      best = p;
    }
  }
  return best;
}

}  // namespace kolo::tune
