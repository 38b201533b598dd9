// The loopback world: ranks as threads in one process, for fast tests of the
// coordinator and of kolo's own algorithms (Gloo's BaseTest::spawn is the model).
#pragma once

#include <vector>

#include "transport/world.h"

namespace kolo::loopback {

// `size` worlds that talk to each other through shared memory in this process;
// world i is rank i. Each must be used by its own thread (as a coordinator
// thread would). Offers a control plane, point-to-point verbs, and the transports
// "loopback" (a straightforward reference allreduce: every rank reads every
// peer's input and reduces in rank order; also allgather, broadcast, alltoall and
// reducescatter, see loopback_collectives.h) and "ring" (src/algorithms over the
// loopback point-to-point verbs). `node_size` > 0 splits ranks into pretend nodes
// of that many ranks for the topology; 0 = one node.
std::vector<transport::World> create_worlds(int size, int node_size = 0);

}  // namespace kolo::loopback
