// The arithmetic of Adasum, pure (no I/O, no state): the combination of two
// vectors and the index math of recursive vector halving. The algorithm that
// uses them is explained at the top of adasum.cc.
//
// Adasum (adaptive summation, Maleki et al.; Horovod's op=Adasum) combines two
// gradients a and b of one tensor as
//
//     adasum(a, b) = (1 - a.b / (2 |a|^2)) a + (1 - a.b / (2 |b|^2)) b
//
// Orthogonal gradients add up (a.b = 0); equal ones are averaged (a.b = |a|^2 =
// |b|^2 gives a); a zero gradient leaves the other unchanged. A coefficient is
// 1 where its squared norm is below kMinNormSq (Horovod's guard against
// dividing by zero).
#pragma once

#include <cstdint>

#include "common/dtype.h"

namespace kolo::algorithms::adasum {

constexpr double kMinNormSq = 1e-8;

// Sums over a piece of a tensor, in float64 (products too): a.b, |a|^2, |b|^2.
struct DotNorms {
  double dot = 0;
  double a = 0;
  double b = 0;
};

// Over `count` elements of a and b; dtype must be floating (float16, bfloat16,
// float32, float64).
DotNorms dot_and_norms(const void* a, const void* b, int64_t count, DataType dtype);

// The coefficients of a and of b, from the whole tensor's sums.
struct Coefficients {
  double a = 1;
  double b = 1;
};
Coefficients coefficients(double dot, double a_norm_sq, double b_norm_sq);

// a[i] = c.a * a[i] + c.b * b[i], computed in float64 and rounded once to dtype.
void scaled_add(void* a, const void* b, int64_t count, DataType dtype, Coefficients c);

// A range of elements of the fused buffer.
struct Segment {
  int64_t begin = 0;
  int64_t count = 0;
  int64_t end() const { return begin + count; }
};

// One level of vector halving: the two ranks of a pair hold the same segment;
// the lower rank (rank & level == 0) keeps its first count/2 elements (rounded
// down), the upper rank the rest. *keep is what this side keeps, *give what it
// sends to the other side (and the other side keeps).
void halve(Segment s, bool lower, Segment* keep, Segment* give);

// The part of `tensor` that lies inside `s` (count 0 when they do not meet; its
// begin is then unspecified).
Segment overlap(Segment s, Segment tensor);

bool is_power_of_two(int n);

}  // namespace kolo::algorithms::adasum
