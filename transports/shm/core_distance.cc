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
// The node measures the cores' distance again after 64 calls that could stream
// or after 256 MiB of them, whichever comes first. By calls alone a run of large
// calls (a 128 MiB allreduce takes about 20 ms) was measured once, at its start,
// and when the VM moved the vCPUs apart during the run the ranks went on with
// plain stores between far cores, 3-4x slower. A measurement is 17 round trips
// through one cache line, a few to ten microseconds, nothing next to 256 MiB of
// calls. The runs: docs/perf/shm-calibration.md.

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
