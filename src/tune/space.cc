#include "tune/space.h"

#include <algorithm>

#include "common/check.h"

namespace kolo::tune {

std::string Dimension::text(int index) const {
  return categorical() ? labels[static_cast<size_t>(index)]
                       : std::to_string(values[static_cast<size_t>(index)]);
}

Space::Space(std::vector<Dimension> dims) : dims_(std::move(dims)) {
  for (const Dimension& d : dims_) {
    KOLO_CHECK_GE(d.size(), size_t{1});
    points_ *= d.size();
  }
}

Point Space::point(size_t flat) const {
  Point p(dims_.size(), 0);
  for (size_t i = dims_.size(); i-- > 0;) {
    p[i] = static_cast<int>(flat % dims_[i].size());
    flat /= dims_[i].size();
  }
  return p;
}

size_t Space::flat(const Point& p) const {
  size_t f = 0;
  for (size_t i = 0; i < dims_.size(); ++i) f = f * dims_[i].size() + static_cast<size_t>(p[i]);
  return f;
}

double Space::distance2(const Point& a, const Point& b, double categorical_distance) const {
  double sum = 0;
  for (size_t i = 0; i < dims_.size(); ++i) {
    if (a[i] == b[i]) continue;
    const Dimension& d = dims_[i];
    if (d.categorical()) {
      sum += categorical_distance * categorical_distance;
      continue;
    }
    const double step = 1.0 / static_cast<double>(d.size() - 1);
    const double diff = (a[i] - b[i]) * step;
    sum += diff * diff;
  }
  return sum;
}

std::string Space::describe(const Point& p) const {
  std::string out;
  for (size_t i = 0; i < dims_.size(); ++i)
    out += (i ? " " : "") + dims_[i].name + "=" + dims_[i].text(p[i]);
  return out;
}

Dimension numeric_dimension(std::string name, std::vector<int64_t> grid, int64_t start, int64_t cap) {
  Dimension d;
  d.name = std::move(name);
  grid.push_back(start);
  std::sort(grid.begin(), grid.end());
  grid.erase(std::unique(grid.begin(), grid.end()), grid.end());
  for (int64_t v : grid)
    if (v <= cap || v == start) d.values.push_back(v);
  return d;
}

int index_of(const Dimension& dim, int64_t value) {
  auto it = std::find(dim.values.begin(), dim.values.end(), value);
  return it == dim.values.end() ? -1 : static_cast<int>(it - dim.values.begin());
}

int index_of(const Dimension& dim, const std::string& label) {
  auto it = std::find(dim.labels.begin(), dim.labels.end(), label);
  return it == dim.labels.end() ? -1 : static_cast<int>(it - dim.labels.begin());
}

}  // namespace kolo::tune
