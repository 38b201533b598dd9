#include "tune/gaussian_process.h"

#include <algorithm>
#include <cmath>

#include "common/check.h"

namespace kolo::tune {
namespace {

// Solves L z = b in place (L lower triangular, row-major n x n).
void forward(const std::vector<double>& l, size_t n, std::vector<double>* b) {
  for (size_t i = 0; i < n; ++i) {
    double s = (*b)[i];
    for (size_t k = 0; k < i; ++k) s -= l[i * n + k] * (*b)[k];
    (*b)[i] = s / l[i * n + i];
  }
}

// Solves L^T z = b in place.
void backward(const std::vector<double>& l, size_t n, std::vector<double>* b) {
  for (size_t i = n; i-- > 0;) {
    double s = (*b)[i];
    for (size_t k = i + 1; k < n; ++k) s -= l[k * n + i] * (*b)[k];
    (*b)[i] = s / l[i * n + i];
  }
}

}  // namespace

double GaussianProcess::kernel(const Point& a, const Point& b) const {
  const double d2 = space_.distance2(a, b, options_.categorical_distance);
  return std::exp(-d2 / (2 * options_.length_scale * options_.length_scale));
}

void GaussianProcess::fit(const std::vector<Point>& x, const std::vector<double>& y) {
  KOLO_CHECK_EQ(x.size(), y.size());
  KOLO_CHECK(!x.empty());
  const size_t n = x.size();
  x_ = x;
  double mean = 0;
  for (double v : y) mean += v;
  mean /= static_cast<double>(n);
  double var = 0;
  for (double v : y) var += (v - mean) * (v - mean);
  var /= static_cast<double>(n);
  offset_ = mean;
  // Scores that barely differ are not taken as a scale: a spread under 1% of the
  // scores is measurement noise, and the prior may not promise more than that.
  scale_ = std::max(std::sqrt(var), 0.01 * std::fabs(mean));
  if (scale_ == 0) scale_ = 1;

  // Cholesky of K + noise I (Cholesky-Banachiewicz). The noise keeps it positive
  // definite even when points repeat.
  chol_.assign(n * n, 0.0);
  for (size_t i = 0; i < n; ++i) {
    for (size_t j = 0; j <= i; ++j) {
      double s = kernel(x[i], x[j]) + (i == j ? options_.noise : 0.0);
      for (size_t k = 0; k < j; ++k) s -= chol_[i * n + k] * chol_[j * n + k];
      chol_[i * n + j] = i == j ? std::sqrt(std::max(s, 1e-12)) : s / chol_[j * n + j];
    }
  }
  alpha_.resize(n);
  for (size_t i = 0; i < n; ++i) alpha_[i] = (y[i] - offset_) / scale_;
  forward(chol_, n, &alpha_);
  backward(chol_, n, &alpha_);
}

void GaussianProcess::predict(const Point& p, double* mean, double* sd) const {
  const size_t n = x_.size();
  std::vector<double> k(n);
  double m = 0;
  for (size_t i = 0; i < n; ++i) {
    k[i] = kernel(p, x_[i]);
    m += k[i] * alpha_[i];
  }
  forward(chol_, n, &k);  // v = L^-1 k; variance = k(p, p) - v.v
  double var = 1.0;
  for (double v : k) var -= v * v;
  *mean = offset_ + scale_ * m;
  *sd = scale_ * std::sqrt(std::max(var, 0.0));
}

}  // namespace kolo::tune
