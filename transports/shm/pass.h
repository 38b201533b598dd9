// The data movement of the shm allreduce (ShmAllreduce, allreduce.cc), apart
// from its synchronisation so that it can be measured alone
// (bench/shm_pass_bench.cc): a rank's input copied into its slot, and its own
// shard reduced from its input and its peers' slots in one pass.
//
// Pure functions of their arguments, called by the coordinator thread (through the
// engine) or a benchmark; buffers must not partially overlap. Streaming stores
// are not ordered by a later release store: a caller that streamed fences
// (_mm_sfence) before it publishes.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>

#include "common/dtype.h"
#include "common/status.h"

namespace kolo::shm {

// Elements are handled in pieces of this many bytes at a time, so that a piece
// of every operand stays in L1 between the reduction, the stage and the copies.
constexpr size_t kPieceBytes = size_t{16} << 10;

// Copies `bytes` with streaming (non-temporal) stores, or plain ones.
void stream_copy(char* dst, const char* src, size_t bytes);
void copy(char* dst, const char* src, size_t bytes, bool streaming);

// dst = src * prescale (reduce::copy_scaled: 1 copies) for `count` elements of
// `dtype`. Streaming with a factor goes through `piece` (kPieceBytes of scratch).
void put(char* dst, const char* src, int64_t count, DataType dtype, double prescale,
         bool streaming, char* piece);

// How reduce_shard() combines and where it writes.
struct ShardPass {
  DataType dtype = DataType::kFloat32;
  ReduceOp op = ReduceOp::kSum;
  double prescale = 1.0;  // applied to the own input before it is combined
  // Applied to each reduced piece in place (an element-wise output factor); may be null.
  const std::function<Status(void*, int64_t)>* stage = nullptr;
  bool stream_slot = false;    // the slot is written with streaming stores
  bool stream_output = false;  // the output too
};

// Note [One pass over the own shard]
// ~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~
// A rank's reduced shard goes to two places: its slot (the peers copy it from
// there) and its own output. Reducing the whole shard into the slot and copying
// it out afterwards reads the result back from L2 (and for n > 2 ranks reads and
// writes it once more per further peer, and once more for the output factor).
// reduce_shard() instead walks the shard in L1-sized pieces: each piece is
// combined from the input and every peer, finished by the stage, then written to
// the slot and the output while it is in L1. Per byte of shard that is 1 + n - 1
// bytes read and 2 written, whatever n and the stage. The order of the
// combination (own input, then peers in rank order) is that of the whole-shard
// way, so the result is bitwise the same.
//
// Reduces `count` elements: acc = input * prescale, then acc = op(acc, peer) for
// peers[0 .. npeers) (each read at byte `skip` on), then the stage; acc goes to
// `slot` and, unless `output` is null, to `output`. With plain stores acc is
// the slot itself; streaming, it is `piece` (kPieceBytes of scratch). npeers >= 1.
// Fails only when the stage does.
Status reduce_shard(const ShardPass& pass, const char* input, const char* const* peers,
                    int npeers, size_t skip, char* slot, char* output, int64_t count,
                    char* piece);

}  // namespace kolo::shm
