#include "transports/mpi/core_distance.h"

#include <algorithm>
#include <chrono>
#include <vector>

#include "common/check.h"
#include "transports/mpi/node_counter.h"

namespace kolo::mpi {
namespace {

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

}  // namespace kolo::mpi
