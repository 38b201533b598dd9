// A Gaussian process regression over a Space: fit to scored points, predict the
// mean and standard deviation of the score anywhere. Pure and deterministic.
//
// Kernel: k(a, b) = exp(-distance2(a, b) / (2 l^2)) (squared exponential in the
// Space's coordinates), plus `noise` on the diagonal: measurements on a busy
// machine scatter, and the noise term lets the mean pass between them instead of
// through them. Scores are normalised to mean 0 and standard deviation 1 before
// fitting, so the options need not know the scores' units; predictions come back
// in the scores' units. The hyperparameters are fixed (see Note [A fixed kernel]
// in bayes_search.h).
#pragma once

#include <utility>
#include <vector>

#include "tune/space.h"

namespace kolo::tune {

struct GpOptions {
  double length_scale = 0.35;         // in [0, 1] coordinates
  double categorical_distance = 0.6;  // a label change counts as this far
  double noise = 0.1;                 // variance, in normalised score units
};

class GaussianProcess {
 public:
  GaussianProcess(Space space, GpOptions options) : space_(std::move(space)), options_(options) {}

  // Fits to `x` (at least one point) and their `y`. Points may repeat.
  void fit(const std::vector<Point>& x, const std::vector<double>& y);

  // Posterior mean and standard deviation at `p`, in the scores' units.
  void predict(const Point& p, double* mean, double* sd) const;

  double y_scale() const { return scale_; }

 private:
  double kernel(const Point& a, const Point& b) const;

  Space space_;  // a copy: the process may outlive or move apart from its owner
  GpOptions options_;
  std::vector<Point> x_;
  std::vector<double> chol_;   // lower Cholesky factor of K + noise I, row-major n x n
  std::vector<double> alpha_;  // (K + noise I)^-1 y, normalised y
  double offset_ = 0;
  double scale_ = 1;
};

}  // namespace kolo::tune
