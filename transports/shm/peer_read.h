// Reading another process's memory on the same node with one copy: Linux's
// cross-memory attach (process_vm_readv), the single copy MPICH (through UCX)
// uses for large intra-node messages.
//
// Whether it works depends on the system: the kernel must have it, and ptrace
// access from this process to the peer must be allowed (same user, and no
// Yama ptrace_scope or seccomp rule against it). Node::create finds out for its
// node (every rank reads a word of every peer, at the address the peer gave in
// the creation's exchange, and the answers are shared), so that every rank of
// the node gets the same answer. Used by ShmCollectives (collectives.h) for
// large calls.
#pragma once

#include <sys/types.h>

#include <cstddef>
#include <cstdint>

#include "common/status.h"

namespace kolo::shm {

// Copies `bytes` from address `remote` of process `pid` to `local`. The caller
// guarantees that the peer keeps that memory valid and unchanged until it is told
// the read is done. An error (the peer gone, access refused) names the call and
// errno.
Status read_peer(pid_t pid, const void* remote, void* local, size_t bytes);

// The address of a word, constant for the life of this process, that
// can_read_peer() expects to find in a peer at the address the peer gave.
uint64_t probe_address();
// Whether read_peer() from process `pid`, at the `address` its probe_address()
// gave, reads back that word.
bool can_read_peer(pid_t pid, uint64_t address);

}  // namespace kolo::shm
