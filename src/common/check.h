// Check macros.
//
// Two kinds of failure, kept apart (docs/design.md, Errors):
// - what a caller or the environment can cause travels up as a Status;
//   KOLO_RETURN_IF_ERROR adds the file:line of each hop to its where(), never to
//   its message (see Note [Messages and locations] in status.h);
// - a broken invariant inside kolo is a bug: KOLO_CHECK* print the condition (and
//   both operands) with file:line and abort.
#pragma once

#include <cstdio>
#include <cstdlib>
#include <sstream>
#include <string>

#include "common/status.h"

namespace kolo::detail {

[[noreturn]] inline void check_failed(const char* file, int line, const std::string& what) {
  std::fprintf(stderr, "kolo: internal invariant violated at %s:%d: %s\n", file, line,
               what.c_str());
  std::fflush(stderr);
  std::abort();
}

template <typename A, typename B>
std::string binary_operands(const char* expr, const A& a, const B& b) {
  std::ostringstream os;
  os << expr << " (" << a << " vs " << b << ")";
  return os.str();
}

}  // namespace kolo::detail

#define KOLO_CHECK(cond)                                                  \
  do {                                                                    \
    if (!(cond)) ::kolo::detail::check_failed(__FILE__, __LINE__, #cond); \
  } while (0)

#define KOLO_CHECK_OP_(a, b, op)                                                  \
  do {                                                                            \
    const auto& kolo_a_ = (a);                                                    \
    const auto& kolo_b_ = (b);                                                    \
    if (!(kolo_a_ op kolo_b_))                                                    \
      ::kolo::detail::check_failed(                                               \
          __FILE__, __LINE__,                                                     \
          ::kolo::detail::binary_operands(#a " " #op " " #b, kolo_a_, kolo_b_)); \
  } while (0)

// A branch kolo never takes (a switch's default over values that earlier checks
// turned away): prints `what` with file:line and aborts.
#define KOLO_UNREACHABLE(what) ::kolo::detail::check_failed(__FILE__, __LINE__, (what))

#define KOLO_CHECK_EQ(a, b) KOLO_CHECK_OP_(a, b, ==)
#define KOLO_CHECK_NE(a, b) KOLO_CHECK_OP_(a, b, !=)
#define KOLO_CHECK_LT(a, b) KOLO_CHECK_OP_(a, b, <)
#define KOLO_CHECK_LE(a, b) KOLO_CHECK_OP_(a, b, <=)
#define KOLO_CHECK_GE(a, b) KOLO_CHECK_OP_(a, b, >=)

// Returns the status of `expr` from the enclosing function if it is not OK, with
// this file:line added to its where().
#define KOLO_RETURN_IF_ERROR(expr)                                    \
  do {                                                                \
    ::kolo::Status kolo_s_ = (expr);                                  \
    if (!kolo_s_.ok()) return kolo_s_.with_location(__FILE__, __LINE__); \
  } while (0)

// As KOLO_RETURN_IF_ERROR, but passes the status up unchanged: for errors whose
// whole story is in the message (argument checks).
#define KOLO_RETURN_IF_ERROR_AS_IS(expr)    \
  do {                                      \
    ::kolo::Status kolo_s_ = (expr);        \
    if (!kolo_s_.ok()) return kolo_s_;      \
  } while (0)
