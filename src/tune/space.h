// The autotuner's search space: a few dimensions, each an ordered list of
// candidate values, and the distance the Gaussian process measures between two
// points of it. Pure.
//
// A numeric dimension lists byte sizes in increasing order, roughly a factor
// apart (64K, 256K, 1M, ...); its coordinate is the candidate's index scaled to
// [0, 1], i.e. a log scale. A categorical dimension lists labels ("auto", "shm",
// "mpi"); two of its values are equal or not, nothing in between.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

namespace kolo::tune {

struct Dimension {
  std::string name;                 // the knob it sets, e.g. "KOLO_FUSION_THRESHOLD"
  std::vector<int64_t> values;      // numeric: candidates, increasing
  std::vector<std::string> labels;  // categorical: candidates (values is empty)

  bool categorical() const { return values.empty(); }
  size_t size() const { return categorical() ? labels.size() : values.size(); }
  // The candidate at `index` as text: a number, or the label.
  std::string text(int index) const;
};

// One candidate index per dimension.
using Point = std::vector<int>;

class Space {
 public:
  // Every dimension has at least one candidate.
  explicit Space(std::vector<Dimension> dims);

  size_t dims() const { return dims_.size(); }
  const Dimension& dim(size_t i) const { return dims_[i]; }
  // How many points the space has, and the point with flat index `flat` (the
  // last dimension varies fastest), for exhaustive search.
  size_t points() const { return points_; }
  Point point(size_t flat) const;
  size_t flat(const Point& p) const;

  // Squared distance: numeric dimensions contribute the square of the difference
  // of their [0, 1] coordinates, categorical ones `categorical_distance`^2 when
  // the labels differ.
  double distance2(const Point& a, const Point& b, double categorical_distance) const;

  // "KOLO_FUSION_THRESHOLD=65536 KOLO_SHM_SLICE_BYTES=16384 ...": for logs.
  std::string describe(const Point& p) const;

 private:
  std::vector<Dimension> dims_;
  size_t points_ = 1;
};

// A numeric dimension of the `grid` candidates and `start` (the value in use),
// sorted, without duplicates, none above `cap`.
Dimension numeric_dimension(std::string name, std::vector<int64_t> grid, int64_t start, int64_t cap);
// The index of `value` in `dim` (numeric) or of `label` (categorical); -1 if absent.
int index_of(const Dimension& dim, int64_t value);
int index_of(const Dimension& dim, const std::string& label);

}  // namespace kolo::tune
