// The search on synthetic cost surfaces with a known optimum: it must find the
// optimum within a stated number of samples, with and without (seeded) noise,
// and be a pure function of the scores it is given.
#include "tune/bayes_search.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <random>

namespace kolo::tune {
namespace {

// A space shaped like kolo's on one node: four byte sizes and two transport
// choices (tune/space.h).
Space kolo_like_space() {
  std::vector<Dimension> dims;
  dims.push_back(numeric_dimension("FUSION", {64 << 10, 256 << 10, 1 << 20, 4 << 20, 16 << 20,
                                              32 << 20, 64 << 20},
                                   64 << 10, 64 << 20));
  dims.push_back(numeric_dimension("LARGE", {256 << 10, 1 << 20, 4 << 20, 16 << 20}, 1 << 20, 1 << 30));
  dims.push_back(numeric_dimension("SLICE", {16 << 10, 64 << 10, 128 << 10, 256 << 10, 512 << 10,
                                             1 << 20, 2 << 20},
                                   16 << 10, 2 << 20));
  dims.push_back(numeric_dimension("SEGMENT", {64 << 10, 256 << 10, 1 << 20}, 256 << 10, 1 << 30));
  Dimension small{"SMALL", {}, {"mpi", "ring", "shm"}};
  Dimension large{"LARGE_T", {}, {"mpi", "ring", "shm"}};
  dims.push_back(small);
  dims.push_back(large);
  return Space(std::move(dims));
}

// Bytes per second: 100 at the optimum, falling off quadratically in each
// numeric coordinate (weights differ: the fusion threshold and the slice matter
// most, as on the real workload) and by a fixed amount for a wrong transport.
struct Surface {
  Point optimum;
  double operator()(const Space& s, const Point& p) const {
    const double weights[] = {60, 8, 40, 4};
    double score = 100;
    for (int d = 0; d < 4; ++d) {
      const double step = 1.0 / static_cast<double>(s.dim(d).size() - 1);
      const double diff = (p[d] - optimum[d]) * step;
      score -= weights[d] * diff * diff;
    }
    if (p[4] != optimum[4]) score -= 3;
    if (p[5] != optimum[5]) score -= 15;
    return score;
  }
};

// Runs a search from `start` to the end; `noise` is the standard deviation of
// the measurement, as a fraction of the optimum. Returns the number of samples.
int run(BayesSearch* search, const Surface& surface, double noise, uint32_t seed) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<double> uniform(1e-12, 1.0);
  while (!search->done()) {
    // Box-Muller: the same numbers under every standard library.
    const double z = std::sqrt(-2 * std::log(uniform(rng))) * std::cos(2 * M_PI * uniform(rng));
    search->observe(surface(search->space(), search->next()) * (1 + noise * z));
  }
  return search->samples();
}

TEST(BayesSearchTest, FindsTheOptimumWithoutNoise) {
  const Space space = kolo_like_space();
  // Fusion 32M, large 4M, slice 512K, segment 256K, small mpi, large shm; the
  // search starts from the deliberately bad fusion 64K / slice 16K.
  const Surface surface{{5, 2, 4, 1, 0, 2}};
  BayesSearch search(space, {0, 1, 0, 1, 0, 0}, SearchOptions{});
  const int samples = run(&search, surface, 0.0, 1);
  EXPECT_LE(samples, 40);
  EXPECT_EQ(search.best(), surface.optimum) << space.describe(search.best());
}

// With 2% noise per measurement (a quiet machine; the shared VM is noisier) the
// kept point scores within 3% of the optimum for every seed, and within 1.5% on
// average, within 40 samples, starting from a point at 25% of it.
TEST(BayesSearchTest, FindsTheOptimumThroughNoise) {
  const Space space = kolo_like_space();
  const Surface surface{{5, 2, 4, 1, 0, 2}};
  double sum = 0;
  for (uint32_t seed = 1; seed <= 8; ++seed) {
    BayesSearch search(space, {0, 1, 0, 1, 0, 0}, SearchOptions{});
    const int samples = run(&search, surface, 0.02, seed);
    EXPECT_LE(samples, 40);
    const double found = surface(space, search.best());
    EXPECT_GE(found, 97.0) << "seed " << seed << ": " << space.describe(search.best());
    std::printf("seed %u: %d samples, kept %.2f\n", seed, samples, found);
    sum += found;
  }
  EXPECT_GE(sum / 8, 98.5);
}

TEST(BayesSearchTest, SameScoresSamePoints) {
  const Space space = kolo_like_space();
  const Surface surface{{3, 0, 5, 2, 1, 2}};
  std::vector<Point> a, b;
  for (std::vector<Point>* seen : {&a, &b}) {
    BayesSearch search(space, {0, 1, 0, 1, 0, 0}, SearchOptions{});
    std::mt19937 rng(7);
    std::uniform_real_distribution<double> jitter(0.97, 1.03);
    while (!search.done()) {
      seen->push_back(search.next());
      search.observe(surface(space, search.next()) * jitter(rng));
    }
    seen->push_back(search.best());
  }
  EXPECT_EQ(a, b);
}

TEST(BayesSearchTest, StartsAtTheStartAndStopsOnAFlatSurface) {
  const Space space = kolo_like_space();
  const Point start{2, 1, 4, 1, 0, 0};
  SearchOptions options;
  BayesSearch search(space, start, options);
  EXPECT_EQ(search.next(), start);
  while (!search.done()) search.observe(50.0);  // nothing to gain anywhere
  EXPECT_EQ(search.samples(), options.min_samples);
}

TEST(BayesSearchTest, SpaceEnumeratesEveryPointOnce) {
  const Space space = kolo_like_space();
  EXPECT_EQ(space.points(), size_t{7 * 4 * 7 * 3 * 3 * 3});
  for (size_t f : {size_t{0}, size_t{1}, size_t{977}, space.points() - 1})
    EXPECT_EQ(space.flat(space.point(f)), f);
  EXPECT_EQ(index_of(space.dim(0), int64_t{64} << 20), 6);
  EXPECT_EQ(index_of(space.dim(4), std::string("ring")), 1);
  EXPECT_EQ(space.dim(3).text(1), "262144");
}

}  // namespace
}  // namespace kolo::tune
