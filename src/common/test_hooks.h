// Test-only fault injection: KOLO_TEST_DIE_AT=<point>[:<n>][@<file>] makes this
// process raise SIGKILL on itself the n-th time (default: the first) it passes
// the named point, after writing CLOCK_MONOTONIC nanoseconds to <file> if given, so that tests can kill a rank inside kolo at a chosen phase. Points:
// init (kolo_init, once the peer monitor runs), negotiate (a negotiation's AND),
// shm (inside the shared-memory allreduce, after posting a slice), ring (inside
// the ring, after the first send of a step), mpi (after MPI_Iallreduce is
// posted), teardown (the coordinator's teardown after the agreed stop).
// Unset (the default) costs one relaxed load per point.
#pragma once

#include <string>

namespace kolo {

// Arms the hook from the knob's value ("" disarms). kolo_init, before anything else.
void set_die_at(const std::string& spec);

// Raises SIGKILL here if armed for `point` and this is its n-th pass. Any thread.
void test_point(const char* point);

}  // namespace kolo
