// The training demo's data: a synthetic 2-D task and how it is split across ranks.
//
// Class 0: points uniform in the unit disk. Class 1: points uniform in the ring
// 1 < r < sqrt(3) (which has twice the disk's area). Labels alternate, so the two
// classes are balanced; radius is drawn as sqrt of a uniform variate, which makes
// the density uniform in area.
//
// Sharding. The global batch B is split into per-rank parts B_r (B / n, the first
// B % n ranks one more). An epoch has S = train_size / B steps. Rank r owns the
// contiguous slice of S * B_r samples starting at S * (B_0 + ... + B_{r-1}), shuffles
// it each epoch with a seed derived from (seed, epoch, rank), and at step s takes
// the B_r samples [s * B_r, (s + 1) * B_r) of that order. The global batch at step s
// is the union of the ranks' parts, so a single process can replay it exactly.
#pragma once

#include <cstdint>
#include <vector>

namespace kolo::tools {

struct Dataset {
  std::vector<double> x;  // two coordinates per sample
  std::vector<int> y;     // label, 0 or 1
  int size() const { return static_cast<int>(y.size()); }
};

// count samples drawn from the stream `seed`; the same on every machine.
Dataset make_ring_dataset(int count, uint64_t seed);

class Sharding {
 public:
  // Requires 1 <= world_size <= global_batch <= train_size.
  Sharding(int train_size, int global_batch, int world_size, uint64_t seed);

  int world_size() const { return world_size_; }
  int steps_per_epoch() const { return steps_; }
  int part_size(int rank) const { return parts_[rank]; }

  // The order in which rank visits its shard in epoch (global sample indices).
  std::vector<int> epoch_order(int rank, int epoch) const;

  // Rank's part of the global batch at step, given that rank's epoch_order.
  std::vector<int> batch(const std::vector<int>& order, int rank, int step) const;

 private:
  int world_size_;
  int steps_;
  uint64_t seed_;
  std::vector<int> parts_;   // B_r
  std::vector<int> starts_;  // first global index of rank r's shard
};

// Gathers the samples at indices into a contiguous batch.
void gather(const Dataset& data, const std::vector<int>& indices, Dataset* batch);

}  // namespace kolo::tools
