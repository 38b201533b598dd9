// Autotuner: turns the coordinator's cycles into scored samples for a
// BayesSearch, and says when the setting must change. Pure (the caller passes
// the clock), used on rank 0 only; the coordinator announces what it decides to
// every rank (Note [Announcements] in core/negotiator.h).
//
// A sample is a run of whole cycles measured at one setting: it ends at the end
// of the first cycle after which the rank is at rest (nothing of its own in
// flight: in a data-parallel job, the end of a step's gradients) and at which
// `sample_seconds` have passed since it began and some bytes were reduced — or,
// if the rank is never at rest, once 4 x `sample_seconds` have passed. It scores
// bytes reduced / seconds elapsed, idle time between cycles included: samples
// that start and end at rest cover whole steps and the gaps between them, so the
// score is proportional to steps per second (Note [Samples end at rest]). After a
// change, the cycles up to the first rest after a cycle that reduced anything are
// not measured (they pay for the switch: buffers warming, a step half done at the
// old setting), and the sample starts there. The first `warmup_samples`
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
  // epoch, non-decreasing), whether the rank is `at_rest` after it. True when
  // current() changed (or froze) and must be applied from the next cycle on.
  bool cycle_done(uint64_t bytes, double now, bool at_rest = true);

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
  bool settling_ = false;     // after a change: not measured until rest after some bytes
  bool settled_bytes_ = false;  // settling has seen a cycle with bytes
  bool started_ = false;      // the first cycle_done() sets the clock
  int sample_ = 0;
  double began_ = 0;
  uint64_t bytes_ = 0;
  uint64_t cycles_ = 0;
  std::vector<SampleRow> rows_;
};

// Note [Samples end at rest]
// A sample ends at the first cycle at rest after sample_seconds, never in the
// middle of a step: a window cut by the clock holds a varying number of steps'
// bytes, and the scores of one setting scatter. Ending at rest makes each
// sample whole steps plus the gaps between them, so the score is bytes per step
// x steps per second, which is what a setting changes. The run behind the rule:
// docs/perf/autotune.md.

}  // namespace kolo::tune
