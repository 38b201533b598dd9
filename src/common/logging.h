// Logging: KOLO_LOG(kWarning) << "..."; written to stderr as
// "[kolo <level> rank R] message". The level is set from KOLO_LOG_LEVEL at init;
// the rank once the runtime knows it. Thread-safe (one line per write).
#pragma once

#include <sstream>

#include "common/knobs.h"

namespace kolo::log {

void set_level(LogLevel level);
LogLevel level();
void set_rank(int rank);
bool enabled(LogLevel level);

class Line {
 public:
  explicit Line(LogLevel level) : level_(level) {}
  ~Line();
  template <typename T>
  Line& operator<<(const T& v) {
    os_ << v;
    return *this;
  }

 private:
  LogLevel level_;
  std::ostringstream os_;
};

// Makes `cond ? (void)0 : Voidify() & Line(...) << x` well-typed; & binds looser
// than <<, so the whole line is built first (glog's trick). Safe in an unbraced if.
struct Voidify {
  void operator&(const Line&) {}
};

}  // namespace kolo::log

#define KOLO_LOG(lvl)                                 \
  !::kolo::log::enabled(::kolo::LogLevel::lvl)        \
      ? (void)0                                       \
      : ::kolo::log::Voidify() & ::kolo::log::Line(::kolo::LogLevel::lvl)
