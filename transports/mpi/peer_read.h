// Reading another process's memory on the same node with one copy: Linux's
// cross-memory attach (process_vm_readv), the single copy MPICH (through UCX)
// uses for large intra-node messages.
//
// Whether it works depends on the system: the kernel must have it, and ptrace
// access from this process to the peer must be allowed (same user, and no
// Yama ptrace_scope or seccomp rule against it). probe_peer_reads() finds out,
// collectively over the node, so that every rank of the node gets the same
// answer. Used by ShmCollectives (shm_collectives.h) for large calls.
#pragma once

#include <mpi.h>
#include <sys/types.h>

#include <cstddef>

#include "common/status.h"
#include "transports/mpi/mpi_wait.h"
#include "transports/mpi/shm_window.h"

namespace kolo::mpi {

// Copies `bytes` from address `remote` of process `pid` to `local`. The caller
// guarantees that the peer keeps that memory valid and unchanged until it is told
// the read is done. An error (the peer gone, access refused) names the call and
// errno.
Status read_peer(pid_t pid, const void* remote, void* local, size_t bytes);

// Collective over `local` (the node communicator): true on every rank iff every
// rank of the node could read a word of every other rank with read_peer().
// `window` is a node window whose segments have at least 3 free cache lines at
// byte `offset` (pid, address, verdict); `alive` bounds the waits.
Status probe_peer_reads(MPI_Comm local, const ShmWindow& window, size_t offset, Liveness* alive,
                        bool* works);

}  // namespace kolo::mpi
