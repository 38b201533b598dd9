// Memory that kolo hands out (kolo_alloc, kolo_free) and that the other ranks of
// a node can map: each allocation is a memfd of its own, mapped shared, so a
// peer opens it through /proc/<pid>/fd/<fd> and reads the owner's buffer in
// place, with no copy into the node's slots (Note [Reading a peer's buffer in
// place] in allreduce.cc).
//
// Contract:
// - shared_alloc/shared_free/find_shared: any thread, before or after kolo_init
//   (the allocations belong to the process, not to a world). Freeing memory that
//   a collective still uses is the caller's error, as with any buffer.
// - A SharedSpan names bytes of one allocation as a peer process can find them:
//   the owner's pid and fd, and the owner's free count (`epoch`), which changes
//   whenever an allocation of that process goes, so a peer that cached a mapping
//   of a freed allocation drops it before an fd number can be reused.
// - PeerMappings: one per engine, its thread only.
// - Opening a peer's fd needs the same access as reading its memory
//   (peer_read.h); Node::single_copy() says whether the node has it.
// - A forked child's allocations become private to it (Note [kolo_alloc memory
//   across fork] in shared_alloc.cc): its writes never reach the parent.
#pragma once

#include <sys/types.h>

#include <cstddef>
#include <cstdint>
#include <map>
#include <utility>

#include "common/status.h"

namespace kolo::shm {

struct SharedSpan {
  int64_t pid = 0;
  int64_t fd = -1;
  uint64_t epoch = 0;
  uint64_t bytes = 0;   // the whole allocation's mapping
  uint64_t offset = 0;  // of the span's first byte in it
};

// A fresh allocation of at least `bytes` (> 0), page-aligned and zeroed.
// Errors: a zero size; memfd_create, ftruncate or mmap failing (named, with errno).
Status shared_alloc(size_t bytes, void** out);
// Frees an allocation by the address shared_alloc gave; null is a no-op.
// Errors: an address that shared_alloc did not give, or already freed.
Status shared_free(void* p);
// Whether [p, p + bytes) lies inside one live allocation of this process; if so
// fills *span (offset: p's). bytes may be 0.
bool find_shared(const void* p, size_t bytes, SharedSpan* span);

// The peers' allocations that this process has mapped (read and write: a rank
// writes its reduced shard into its peers' outputs), by owner.
// Unmaps everything when destroyed.
class PeerMappings {
 public:
  PeerMappings() = default;
  PeerMappings(const PeerMappings&) = delete;
  PeerMappings& operator=(const PeerMappings&) = delete;
  ~PeerMappings();

  // The address of `span`'s first byte in this process. Maps the allocation on
  // first use; drops every mapping of span.pid first when its epoch moved.
  // Errors: the peer's fd cannot be opened or mapped (named, with errno).
  Status map(const SharedSpan& span, char** out);

 private:
  struct Mapping {
    char* base = nullptr;
    size_t bytes = 0;
  };
  struct Owner {
    uint64_t epoch = 0;
    std::map<int64_t, Mapping> by_fd;
  };
  void drop(Owner* owner);
  std::map<int64_t, Owner> owners_;  // by pid
};

}  // namespace kolo::shm
