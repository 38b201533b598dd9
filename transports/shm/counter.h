// Counters in the node's shared segment (node.h): a word that only grows,
// written by one rank and waited for by its peers — the shm engines' posted /
// reduced / done words, the node AND's sequence, the calibration's ping and
// pong. A writer publishes with publish_counter(); a reader waits with
// wait_for_counter(), which spins first and then sleeps in the kernel on the
// counter until publish_counter() wakes it (Note [Waiting for a counter in the
// kernel]).
//
// Layout contract: a counter is the first word of a 64-byte cache line of its
// own; the line's second word (32 bits) counts the readers asleep on it and
// starts at zero, as the segment's memory does. Any thread, any process of the
// node that maps the segment.
#pragma once

#include <cstdint>

#include "common/status.h"
#include "transport/liveness.h"

namespace kolo::shm {

// Stores `value` (release, and ordered before the check for sleepers) and wakes
// every reader asleep on the counter, if any: one load when none is.
void publish_counter(uint64_t* counter, uint64_t value);

// Sleeps until `*counter` has moved from `seen` (its low 32 bits compared), a
// publish_counter() wakes it, or `timeout_us` passes; may return early. Returns at
// once if the counter has moved already.
void sleep_on_counter(const uint64_t* counter, uint64_t seen, int64_t timeout_us);

// Waits until `*counter` is at least `target`: up to `spin_loads` acquire loads
// with a pause between them, then the Backoff's spin and yields, then sleeps on
// the counter in the kernel, consulting `alive` (may be null) between. Returns
// the Liveness's error when a peer has failed. For the shm engines
// (allreduce.h, collectives.h), the node AND (node_and.h) and the calibration
// (core_distance.h).
Status wait_for_counter(const uint64_t* counter, uint64_t target, int spin_loads,
                        transport::Liveness* alive);

// Note [Waiting for a counter in the kernel]
// ~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~
// A rank that waits for a peer's counter spins, then yields (Backoff::kPeer),
// and only then sleeps, in the kernel on the counter itself: it announces itself
// (the sleepers word), re-reads the counter, and waits with FUTEX_WAIT (on a
// shared mapping, so across processes); publish_counter() stores the value, then
// reads the sleepers word and calls FUTEX_WAKE only when someone sleeps. Both
// sides use sequentially consistent operations, so either the reader sees the new
// value or the writer sees the sleeper: no wake-up is lost. The futex compares
// the counter's low 32 bits, which change with every publish (values only grow,
// by far less than 2^32 between two reads). Sleeps are bounded (kSleepSliceUs),
// so a reader still consults liveness regularly. The writer's cost on the fast
// path, where nobody sleeps, is the one load of a word on the line it has just
// written.
//
// The yields come first on every node, crowded ones too: a futex wake-up costs a
// scheduling round trip that yields do not. With 4 processes on 2 cores a
// barrier on one shared word took 2.4 us through sched_yield and 24-31 us
// through FUTEX_WAIT/WAKE; kolo's 8 B allreduce at 4 ranks on 2 cores took
// 102-130 us when crowded nodes skipped the yields and 24-34 us with them
// (2026-11-24, `mpiexec.mpich -n 4 kolo-allreduce-perf -t shm -b 8 -e 8 -n 3000`).

}  // namespace kolo::shm
