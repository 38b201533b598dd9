// How a reduction's arithmetic is decided (once, for every path) and the helpers
// that apply it for host transports whose engines cannot apply all of it.
//
// decide_reduction() is the only place that turns the user's op and factors into
// what runs: the executor calls it for every bucket and reducescatter, and every
// transport applies the Reduction it receives (transport.h) — the NCCL transport
// in its kernels, shm and hierarchical in cache per shard, the others through
// reduce_contiguous() / scaled_reducescatter() below. So the same inputs give
// bit-identical results through every transport.
#pragma once

#include <functional>
#include <memory>
#include <vector>

#include "transport/transport.h"

namespace kolo::transport {

// AVERAGE becomes SUM with the division folded in: 1/size into postscale for
// floating dtypes (one rounding in the output factor), a truncating division by
// size for integers. ADASUM stays ADASUM with its factors as given: prescale
// before the combination, postscale after, no 1/size (Horovod's Adasum does not
// average). `op` must be valid; AVERAGE on bool never gets here. `deterministic`
// (the caller's flag) marks the Reduction only where order matters: a floating
// SUM, AVERAGE, PRODUCT or ADASUM (Note [Deterministic reductions] in transport.h).
Reduction decide_reduction(ReduceOp op, DataType dtype, double prescale, double postscale,
                           int world_size, bool deterministic = false);

// Host memory: applies the output part of `r` (postscale or divide) in place.
void finish_output(const Reduction& r, void* data, int64_t count, DataType dtype);

// An engine that reduces one contiguous buffer of `count` elements from `input`
// into `output` (equal: in place) with `op`, applying no factor.
using ContiguousReduce =
    std::function<std::unique_ptr<Work>(const void* input, void* output, int64_t count)>;

// The shared helper for host transports (see Bucket): runs the bucket through
// `reduce` in the fewest calls — a tensor alone in its bucket, or larger than
// staging, straight from its input into its output; consecutive smaller ones
// packed into `staging` — with the prescale applied on the way in and the output
// factor on the way out. Completes before it returns; allocates nothing.
std::unique_ptr<Work> reduce_contiguous(const Bucket& bucket, const ContiguousReduce& reduce);

// A bucket of one host tensor with `reduction` (tests, benchmarks).
Bucket host_bucket(const void* input, void* output, int64_t count, DataType dtype,
                   Reduction reduction = {});

// `work`, then `finish` once it has completed OK (from test() or wait(), whichever
// sees it first). The finish's status becomes the Work's.
std::unique_ptr<Work> then(std::unique_ptr<Work> work, std::function<Status()> finish);

// The shared helper for host reducescatters: the prescaled input in `scratch`
// (grow-only, the transport's) when the reduction has one, `start` on the view
// with that input, then the output factor on this rank's block.
std::unique_ptr<Work> scaled_reducescatter(
    const CollectiveView& view, int rank, std::vector<char>* scratch,
    const std::function<std::unique_ptr<Work>(const CollectiveView&)>& start);

}  // namespace kolo::transport
