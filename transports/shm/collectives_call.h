// The shm collectives engine's private pieces, shared by collectives.cc
// (the rounds) and collectives_choices.cc (its measured choices): the
// control block's and the headers' layout, and one call as a rank runs it.
// Include from those two files only.
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <vector>

#include "transports/shm/collectives.h"

namespace kolo::shm {
namespace collectives_layout {

// Counters, each on its own cache line of the control block.
enum Counter { kPosted = 0, kDone = 1 };
constexpr size_t kCacheLine = 64;
constexpr size_t kControlBytes = 4096;  // the counters, one per cache line; pages after
// Acquire loads between pauses before the counter wait (as allreduce.cc).
constexpr int kSpinLoads = 64;
// Header words before the counts: op, dtype, root, count, reduce op (compared),
// then where this rank's data is for single-copy reads: pid, address; then, when
// that data lies in kolo_alloc memory, its SharedSpan (fd, epoch, the
// allocation's bytes, the data's offset in it; kFd is -1 otherwise: Note [The
// peers' sources in kolo memory]; kNoSource when the rank has nothing for its
// peers); then the same for its output, where peers may write it (a broadcast
// receiver's, an allgather rank's: Note [The root writes a share], Note [An
// allgather pushes its block]; kOutFd < 0 otherwise).
enum Field {
  kOp = 0, kDtype, kRoot, kCount, kReduceOp, kPid, kAddress,
  kFd, kEpoch, kMapBytes, kMapOffset,
  kOutFd, kOutEpoch, kOutMapBytes, kOutMapOffset, kFields = 16
};
constexpr int64_t kNoSource = -2;

// memcpy, for copies that may be empty (an empty block's buffer may be null).
inline void copy_bytes(void* dst, const void* src, size_t bytes) {
  if (bytes > 0) std::memcpy(dst, src, bytes);
}

}  // namespace collectives_layout

// One call as this rank runs it.
struct ShmCollectives::Call {
  Collective op = Collective::kAllgather;
  const transport::CollectiveView* view = nullptr;
  const char* in = nullptr;  // the view's input, or staging_ when it overlaps the output
  size_t in_bytes = 0;       // of `in` (broadcast: 0)
  size_t out_bytes = 0;      // of `out` (broadcast: 0)
  char* out = nullptr;
  // Broadcast: what the root publishes (its output, or its input when that is
  // elsewhere: Note [One pass over the own block]).
  const char* bcast_src = nullptr;
  bool stream = false;       // the output is written with streaming stores
  bool stream_slot = false;  // so is this rank's slot
  // The peers' blocks are read straight from their inputs, with no slot round
  // (Note [One pass from the peers' inputs]); decided from the view alone.
  bool one_pass = false;
  // The first round carries this rank's header alone, its source being read
  // mapped (Note [A mapped source skips the slot]).
  bool header_only = false;
  // An allgather whose ranks write their blocks into the mapped peers' outputs
  // (Note [An allgather pushes its block]); decided from the headers.
  bool push = false;
  int64_t own_done = 0;     // elements of this rank's own block already in its output
  size_t elem = 4;
  int n = 1, me = 0;
  uint64_t first = 0;       // the call's first round
  int64_t rounds = 1;
  int64_t piece = 0;        // elements per slot region and round
  size_t region_bytes = 0;  // alltoall, reducescatter: a peer's region of a slot
  const std::vector<int64_t>* displs_in = nullptr;   // of the input's blocks
  const std::vector<int64_t>* displs_out = nullptr;  // of the output's blocks

  // Elements of this rank's own block (of m) in its output before the direct
  // copy: all of it after a one pass, none after a header alone, else round
  // 0's piece (post_own(), copy_own()).
  int64_t own_already(int64_t m) const { return one_pass ? own_done : header_only ? 0 : len(m, 0); }
  // [lo, lo + m) of `count`: round k's piece; m == 0 when past the end.
  int64_t lo(int64_t k) const { return k * piece; }
  int64_t len(int64_t count, int64_t k) const {
    return std::max<int64_t>(0, std::min(piece, count - k * piece));
  }
  // Writer w's slot region for reader d (no region for itself).
  size_t region(int w, int d) const { return static_cast<size_t>(d < w ? d : d - 1) * region_bytes; }
  size_t bytes(int64_t elements) const { return static_cast<size_t>(elements) * elem; }
};

}  // namespace kolo::shm
