// BayesSearch: Bayesian optimisation of a score over a discrete Space (Gaussian
// process + expected improvement), as Horovod's autotune does. Pure and
// deterministic: the same scores give the same sequence of points.
//
// Use: measure next(), report its score with observe(), repeat until done(); then
// best() is the point to keep. Higher scores are better.
//
// Order of points: first `start` (the setting in use), then `initial - 1` points
// of a deterministic space-filling design (Halton), then at each step the point
// with the largest expected improvement over the best posterior mean so far,
// found by evaluating every point of the space (ties: the lowest flat index).
//
// Stop rule: after `max_samples` scores, or, once `min_samples` are in, as soon as
// no point's expected improvement reaches `stop_improvement` times the best
// posterior mean (nothing left is expected to gain that much).
// See Note [Why Bayesian optimisation] and Note [A fixed kernel].
#pragma once

#include <vector>

#include "tune/gaussian_process.h"
#include "tune/space.h"

namespace kolo::tune {

struct SearchOptions {
  int initial = 6;                 // start + space-filling points before the model leads
  int min_samples = 12;
  int max_samples = 40;
  double stop_improvement = 0.01;  // of the best posterior mean
  double exploration = 0.01;       // xi, in normalised score units
  GpOptions gp;
};

class BayesSearch {
 public:
  BayesSearch(Space space, Point start, SearchOptions options);

  const Space& space() const { return space_; }
  // The point to measure next (valid until done()).
  const Point& next() const { return next_; }
  // The score of next(); chooses the one after, or finishes.
  void observe(double score);
  bool done() const { return done_; }
  int samples() const { return static_cast<int>(y_.size()); }

  // The sampled point with the highest posterior mean (robust to one lucky
  // measurement); `start` before any score.
  Point best() const;
  // The largest expected improvement the last choice saw (score units); 0 until
  // the model leads.
  double last_improvement() const { return last_ei_; }

 private:
  Point choose();  // expected improvement over the whole space
  Point initial_point(int i) const;  // the space-filling design's i-th

  Space space_;
  Point start_;
  SearchOptions options_;
  GaussianProcess gp_;
  std::vector<Point> x_;
  std::vector<double> y_;
  Point next_;
  bool done_ = false;
  double last_ei_ = 0;
  double last_best_mean_ = 0;
};

// Note [Why Bayesian optimisation]
// Each sample costs real training time (a fraction of a second to seconds of the
// user's job, at a possibly bad setting), so the search must spend few samples;
// the space is small (~10^4 points) but has several dimensions, so a grid or
// coordinate sweep spends hundreds. Successive halving needs many arms measured
// at once, and a training job measures one setting at a time. A Gaussian process
// carries what each sample says about its neighbours (sizes a factor apart
// behave alike), and expected improvement spends the next sample where the
// model is either promising or unsure — Horovod's choice for the same problem.
// The measurements are noisy, so the kept point is the one the model believes
// best, not the luckiest sample.

// Note [A fixed kernel]
// Horovod fits the kernel's hyperparameters to the samples by maximum likelihood
// (a non-convex optimisation with random restarts). kolo fixes them: coordinates
// are already scaled to [0, 1], scores are normalised, and with a few dozen
// samples a fitted length scale is mostly noise. A fixed kernel makes the search
// a pure function of the scores (unit-testable, reproducible from a log).

}  // namespace kolo::tune
