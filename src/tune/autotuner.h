// Autotuner: turns the coordinator's cycles into scored samples for a
// BayesSearch, and says when the setting must change. Pure (the caller passes
// the clock), used on rank 0 only; the coordinator announces what it decides to
// every rank (Note [Announcements] in core/negotiator.h).
//
// A sample is a run of whole cycles measured at one setting: it ends at the end
// of the first cycle at which `sample_seconds` have passed since it began and
// some bytes were reduced, and it scores bytes reduced / seconds elapsed (idle
// time between cycles included: a setting that makes steps slower shows as
// fewer bytes per second). After a change, the first cycle that reduces
// anything is not measured (it pays for the switch: buffers warming, a new
// pipeline depth), and the sample starts at its end. The first `warmup_samples`
// samples of the job are discarded (caches, page faults, the user's own
// warm-up). When the search is done, the tuner freezes at the search's best.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "tune/bayes_search.h"

namespace kolo::tune {

struct AutotuneOptions {
  int warmup_samples = 3;
  double sample_seconds = 0.5;
  SearchOptions search;
};

// One line of the autotune log.
struct SampleRow {
  int sample = 0;        // 1, 2, ... over the whole run (warm-up included)
  std::string phase;     // "warmup", "sample" or "frozen"
  Point point;
  uint64_t bytes = 0;
  uint64_t cycles = 0;
  double seconds = 0;
  double score = 0;      // bytes / second
};

class Autotuner {
 public:
  Autotuner(Space space, Point start, AutotuneOptions options);
  // A tuner that does not search: it is frozen at `point` from the start.
  static Autotuner frozen_at(Space space, Point point);

  // After every cycle: `bytes` reduced in it, `now` its end in seconds (any
  // epoch, non-decreasing). True when current() changed (or froze) and must be
  // applied from the next cycle on.
  bool cycle_done(uint64_t bytes, double now);

  const Point& current() const { return current_; }
  bool frozen() const { return frozen_; }
  const Space& space() const { return search_.space(); }
  const BayesSearch& search() const { return search_; }
  // Rows since the last call (for the log).
  std::vector<SampleRow> take_rows();

 private:
  void finish_sample(double now);

  BayesSearch search_;
  AutotuneOptions options_;
  Point current_;
  bool frozen_ = false;
  bool settling_ = false;     // the first cycle after a change is not measured
  bool started_ = false;      // the first cycle_done() sets the clock
  int sample_ = 0;
  double began_ = 0;
  uint64_t bytes_ = 0;
  uint64_t cycles_ = 0;
  std::vector<SampleRow> rows_;
};

}  // namespace kolo::tune
