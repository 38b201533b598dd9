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

// Note [Timing round trips in batches]
// ~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~
// kFarRoundTripNs is on the scale of memory_ceiling_bench's BM_CoreRoundTrip
// (near 75-145 ns, far 355-430 on the development VM): two threads passing one
// word back and forth, loads alone in between. The probe once timed each round
// trip alone (two clock reads of 30-50 ns around it), through two counters (a
// line each way, so twice the transfers) and waits that pause between loads
// (40-50 ns a pause on these cores): near cores read 315-400 ns, far by the
// line, and the engines streamed between near cores, where plain stores were
// faster (2 ranks, heap, MPI/kolo medians of 3: allreduce 2 MiB 1.13 -> 1.40, 8
// MiB 1.00 -> 1.34, 32 MiB 1.95 -> 2.73; docs/perf/shm-calibration.md, "One word,
// timed in batches"). So the probe passes one word (rank 0 writes odd values,
// rank 1 even ones), spins on plain loads, and rank 0 times kBatches batches of
// kPerBatch round trips, two clock reads a batch, and takes the median batch's
// mean: 140-144 ns where BM_CoreRoundTrip read 121.
constexpr int kBatches = 5;
constexpr int kPerBatch = 8;
constexpr int kPingPongs = kBatches * kPerBatch;
constexpr double kFarRoundTripNs = 250;
constexpr int kSpinLoads = 1 << 12;  // a few microseconds, ten or more round trips

// Waits until `*c` reaches `target`: loads alone for a while (no pause, whose
// 40-50 ns on this machine's cores would be timed too), then `wait` (which
// yields, sleeps and watches the peer's liveness: a peer that shares this
// rank's core runs only then).
Status spin_then_wait(uint64_t* c, uint64_t target, int who, const CounterWait& wait) {
  for (int i = 0; i < kSpinLoads; ++i) {
    if (__atomic_load_n(c, __ATOMIC_ACQUIRE) >= target) return Status::OK();
  }
  return wait(c, target, who);
}

}  // namespace

Status cores_far_apart(const CoreProbe& probe, uint64_t round, int local_rank,
                       const CounterWait& wait, bool* far) {
  // One word passed back and forth: rank 0 writes base + 2i - 1, rank 1 answers
  // base + 2i (Note [Timing round trips in batches]).
  const uint64_t base = (round - 1) * 2 * (kPingPongs + 1);
  uint64_t* ball = probe.ping;
  auto exchange = [&](uint64_t i) {
    publish_counter(ball, base + 2 * i - 1);
    return spin_then_wait(ball, base + 2 * i, 1, wait);
  };
  if (local_rank == 0) {
    KOLO_RETURN_IF_ERROR_AS_IS(exchange(1));  // the first exchange only meets rank 1
    std::vector<double> ns;
    for (int b = 0; b < kBatches; ++b) {
      const auto start = std::chrono::steady_clock::now();
      for (int k = 0; k < kPerBatch; ++k)
        KOLO_RETURN_IF_ERROR_AS_IS(exchange(2 + static_cast<uint64_t>(b * kPerBatch + k)));
      const std::chrono::duration<double, std::nano> took = std::chrono::steady_clock::now() - start;
      ns.push_back(took.count() / kPerBatch);
    }
    std::nth_element(ns.begin(), ns.begin() + ns.size() / 2, ns.end());
    *far = ns[ns.size() / 2] > kFarRoundTripNs;
    publish_counter(probe.decision, 2 * round + (*far ? 1 : 0));
    return Status::OK();
  }
  if (local_rank == 1) {
    for (uint64_t i = 1; i <= kPingPongs + 1; ++i) {
      KOLO_RETURN_IF_ERROR_AS_IS(spin_then_wait(ball, base + 2 * i - 1, 0, wait));
      publish_counter(ball, base + 2 * i);
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
