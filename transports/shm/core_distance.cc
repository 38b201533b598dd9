#include "transports/shm/core_distance.h"

#include <algorithm>
#include <chrono>
#include <vector>

#include "common/check.h"
#include "transports/shm/counter.h"

namespace kolo::shm {
namespace {

// Note [Measuring again by bytes]
// ~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~
// The engines first measured again every 64 calls that could stream. A 128 MiB
// allreduce takes about 20 ms, so a run of such calls was measured once, at its
// start; when the VM moved the vCPUs apart during the run, the ranks went on
// with plain stores between far cores, and kolo ran 3-4x slower while MPI in
// the same run showed its far speed: the outliers of issue 15's sweeps.
// kolo-allreduce-perf -b 32M -e 128M -f 4 -n 20 -r mpi, 2 ranks, 40 runs each
// way alternating, a throw-away switch for the count and a print of every
// verdict. Every 64 calls (one verdict per run): 6 of 40 runs had a 128 MiB row
// of 64-72 ms against 18-26, all six with the verdict "near" and MPI at its far
// speed (72-78 ms), one also 32 MiB at 16.8 ms against 4.7-6.3. Every 4 calls
// (13 verdicts per run): the verdict changed during 6 of the 40 runs, and no
// row was slow (128 MiB 17.5-25.1 ms, 32 MiB 4.8-6.7). A measurement is 17
// round trips through one cache line, a few to ten microseconds, nothing next
// to 256 MiB of calls; calls of under 4 MiB keep measuring every 64.

constexpr int kPingPongs = 16;
constexpr double kFarRoundTripNs = 250;

}  // namespace

Status cores_far_apart(const CoreProbe& probe, uint64_t round, int local_rank,
                       const CounterWait& wait, bool* far) {
  const uint64_t base = (round - 1) * (kPingPongs + 1);
  if (local_rank == 0) {
    std::vector<double> ns;
    for (uint64_t i = 1; i <= kPingPongs + 1; ++i) {  // the first exchange only meets rank 1
      const auto start = std::chrono::steady_clock::now();
      publish_counter(probe.ping, base + i);
      KOLO_RETURN_IF_ERROR_AS_IS(wait(probe.pong, base + i, 1));
      const std::chrono::duration<double, std::nano> took = std::chrono::steady_clock::now() - start;
      if (i > 1) ns.push_back(took.count());
    }
    std::nth_element(ns.begin(), ns.begin() + ns.size() / 2, ns.end());
    *far = ns[ns.size() / 2] > kFarRoundTripNs;
    publish_counter(probe.decision, 2 * round + (*far ? 1 : 0));
    return Status::OK();
  }
  if (local_rank == 1) {
    for (uint64_t i = 1; i <= kPingPongs + 1; ++i) {
      KOLO_RETURN_IF_ERROR_AS_IS(wait(probe.ping, base + i, 0));
      publish_counter(probe.pong, base + i);
    }
  }
  KOLO_RETURN_IF_ERROR_AS_IS(wait(probe.decision, 2 * round, 0));
  *far = (__atomic_load_n(probe.decision, __ATOMIC_ACQUIRE) & 1) != 0;
  return Status::OK();
}

Status CoreDistance::far(uint64_t bytes, const CounterWait& wait, bool* far) {
  if (local_size_ > 1 && clock_.due(bytes)) {
    bool measured = false;
    KOLO_RETURN_IF_ERROR_AS_IS(cores_far_apart(probe_, rounds_ + 1, local_rank_, wait, &measured));
    ++rounds_;
    far_ = measured;
  }
  *far = far_;
  return Status::OK();
}

}  // namespace kolo::shm
