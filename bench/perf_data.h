// Inputs whose reductions are exact, and the results they must give.
//
// Note [Exact inputs]
// Every element is a small integer, the same function of (rank, element index) on
// every run, so a correct allreduce gives one bit pattern and the check is a
// memcmp against a precomputed expected buffer:
//   sum, avg, min, max : x(r, i) = 1 + (i + 3r) mod 5        (1..5)
//   prod               : x(r, i) = 2 if (i + r) mod 3 == 0, else 1
//   bool (every op)    : x(r, i) = 1 if (i + r) mod 3 == 0, else 0
// Sums stay below 5n and products below 2^ceil(n/3), exact in every floating type
// at the world sizes this tool is run at (bfloat16 holds integers up to 256 exactly:
// n <= 51 for sums); integer types wrap as kolo documents, and the expected value
// wraps the same way. AVERAGE is what kolo.h defines it to be: the sum, then a
// scale by 1/n for floating types (rounded as kolo::reduce::scale rounds) and a
// division truncating toward zero for integers, so it too is compared bit for bit.
// Both patterns repeat every 15 elements; buffers are filled by tiling one period.
//
// Note [Exact sequences for data movement]
// Allgather, broadcast and alltoall move data without combining it, so their check
// must catch an element delivered from the wrong rank or the wrong offset. They use
// one sequence: element k of the sequence is 1 + k mod 101 (bool: (k mod 101) mod 2),
// exact in every dtype (int8 holds 101, bfloat16 every integer up to 256). Rank r's
// input is the sequence from 7r on, so block boundaries and ranks are told apart
// (7r mod 101 differs for every r < 101, and power-of-two block sizes are never a
// multiple of the prime period). Expected outputs are pieces of the same sequence.
#pragma once

#include <cstddef>
#include <cstdint>

#include "common/dtype.h"

namespace kolo::bench {

// This rank's input for `op`, elements [0, count) of the pattern.
void fill_input(void* data, int64_t count, DataType dtype, ReduceOp op, int rank);

// The allreduce of every rank's fill_input over `world_size` ranks.
void fill_expected(void* data, int64_t count, DataType dtype, ReduceOp op, int world_size);

// Elements [0, count) of the sequence of Note [Exact sequences for data movement]
// that starts at element `start` (>= 0).
void fill_sequence(void* data, int64_t count, DataType dtype, int64_t start);

// Where rank r's data-movement input starts in that sequence: 7r.
inline int64_t sequence_start(int rank) { return 7 * static_cast<int64_t>(rank); }

// Elements of `got` that differ bitwise from `expected`.
int64_t count_wrong(const void* got, const void* expected, int64_t count, DataType dtype);

// Overwrites a result buffer with a pattern no correct result has (all bits set),
// so a result that was never written is counted as wrong.
void poison(void* data, int64_t count, DataType dtype);

}  // namespace kolo::bench
