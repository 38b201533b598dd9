#include "train_demo_data.h"

#include <cmath>
#include <cstddef>
#include <numeric>
#include <random>

namespace kolo::tools {
namespace {

constexpr double kPi = 3.14159265358979323846;

// Uniform in [0, 1) from the top 53 bits: the same on every platform, unlike
// std::uniform_real_distribution.
double uniform01(std::mt19937_64& rng) { return static_cast<double>(rng() >> 11) * 0x1.0p-53; }

// A seed for one (seed, a, b) stream (splitmix64 finaliser over the mix).
uint64_t mix_seed(uint64_t seed, uint64_t a, uint64_t b) {
  uint64_t z = seed + 0x9E3779B97F4A7C15ull * (a + 1) + 0xBF58476D1CE4E5B9ull * (b + 1);
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}

}  // namespace

Dataset make_ring_dataset(int count, uint64_t seed) {
  std::mt19937_64 rng(seed);
  Dataset data;
  data.x.resize(2 * static_cast<size_t>(count));
  data.y.resize(count);
  for (int i = 0; i < count; ++i) {
    const int label = i % 2;
    // r^2 uniform in [0, 1) for the disk, in [1, 3) for the ring.
    const double r = label == 0 ? std::sqrt(uniform01(rng)) : std::sqrt(1.0 + 2.0 * uniform01(rng));
    const double angle = 2.0 * kPi * uniform01(rng);
    data.x[2 * i] = r * std::cos(angle);
    data.x[2 * i + 1] = r * std::sin(angle);
    data.y[i] = label;
  }
  return data;
}

Sharding::Sharding(int train_size, int global_batch, int world_size, uint64_t seed)
    : world_size_(world_size), steps_(train_size / global_batch), seed_(seed) {
  int start = 0;
  for (int r = 0; r < world_size; ++r) {
    parts_.push_back(global_batch / world_size + (r < global_batch % world_size ? 1 : 0));
    starts_.push_back(start);
    start += steps_ * parts_.back();
  }
}

std::vector<int> Sharding::epoch_order(int rank, int epoch) const {
  std::vector<int> order(static_cast<size_t>(steps_) * parts_[rank]);
  std::iota(order.begin(), order.end(), starts_[rank]);
  // Fisher-Yates with our own index draw, for the same order everywhere.
  std::mt19937_64 rng(mix_seed(seed_, static_cast<uint64_t>(epoch), static_cast<uint64_t>(rank)));
  for (size_t i = order.size(); i > 1; --i) {
    const size_t j = static_cast<size_t>(uniform01(rng) * static_cast<double>(i));
    std::swap(order[i - 1], order[j]);
  }
  return order;
}

std::vector<int> Sharding::batch(const std::vector<int>& order, int rank, int step) const {
  const auto first = order.begin() + static_cast<std::ptrdiff_t>(step) * parts_[rank];
  return std::vector<int>(first, first + parts_[rank]);
}

void gather(const Dataset& data, const std::vector<int>& indices, Dataset* batch) {
  batch->x.clear();
  batch->y.clear();
  for (int i : indices) {
    batch->x.push_back(data.x[2 * i]);
    batch->x.push_back(data.x[2 * i + 1]);
    batch->y.push_back(data.y[i]);
  }
}

}  // namespace kolo::tools
