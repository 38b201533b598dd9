// Timeline: a Chrome-trace (chrome://tracing, Perfetto) record of what this
// rank's coordinator did. Started by KOLO_TIMELINE at init or by
// kolo_timeline_start at run time, per rank; see Note [Timeline files] for which
// ranks write which file.
//
// One process per rank (pid = rank), one row per tensor name and a "buckets" row:
//   - per tensor, NEGOTIATE spans from this rank's submit to the name being ready
//     on every rank; its args name the rank that submitted last (the straggler)
//     and how long the first rank waited for it (see Note [Who came last]);
//   - per bucket (or lone collective), one event on the buckets row with its
//     bytes, tensors, transport, time and achieved GB/s, and a PROCESS event on
//     each of its tensors' rows;
//   - with mark_cycles, an instant event per negotiation cycle.
// A "kolo_clock" metadata event gives the wall-clock time of ts 0, so that
// tools/kolo_timeline.py can put every rank's file on one time axis.
//
// Threads: start/stop/close from any thread (the user's, or the coordinator's at
// init and shutdown); the event calls from the coordinator thread. A mutex guards
// the file; recording() is one relaxed atomic load, all a cycle pays when off.
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <mutex>
#include <string>
#include <unordered_map>
#include <vector>

#include "common/status.h"

namespace kolo::core {

// Where `rank` writes for a timeline path, or "" when it writes nothing. See
// Note [Timeline files].
std::string timeline_file_for(const std::string& path, int rank);

class Timeline {
 public:
  using Clock = std::chrono::steady_clock;

  explicit Timeline(int rank = 0) : rank_(rank) {}
  ~Timeline();
  Timeline(const Timeline&) = delete;
  Timeline& operator=(const Timeline&) = delete;

  // Starts the timeline. Errors (kInvalidArgument, naming the path): already
  // started, an empty path, or a file that cannot be opened. A rank that writes
  // nothing for `path` (Note [Timeline files]) is started all the same.
  Status start(const std::string& path, bool mark_cycles);
  // Ends the file (valid JSON from then on) and closes it. kInvalidArgument when
  // not started.
  Status stop();
  // stop() if started; for shutdown.
  void close();

  // True while this rank writes a file.
  bool recording() const { return recording_.load(std::memory_order_relaxed); }

  // The straggler of one name, as the cycle's exchange found it.
  struct Straggler {
    int rank = -1;          // the rank that submitted last; -1: unknown
    double lag_us = 0;      // how long the first submitter waited for it
  };
  // This rank's NEGOTIATE span for `name`: from submit to ready everywhere.
  void negotiated(const std::string& name, const char* collective, Clock::time_point submitted,
                  Clock::time_point ready, const Straggler& straggler);

  struct BucketInfo {
    uint64_t sequence = 0;
    size_t bytes = 0;
    const char* collective = "";
    const char* transport = "";
    Clock::time_point start;
    Clock::time_point end;
    bool deterministic = false;  // reduced in rank order: the name says "deterministic"
  };
  void bucket(const std::vector<const std::string*>& names, const BucketInfo& info);

  // With mark_cycles: an instant event for negotiation cycle `cycle`.
  void cycle(uint64_t cycle, size_t ready, Clock::time_point at);

 private:
  int row(const std::string& name);  // the tid of the tensor's row
  void event(const std::string& json);
  void flush();
  std::string micros(Clock::time_point t) const;
  void close_locked();

  const int rank_;
  std::mutex mu_;
  std::atomic<bool> recording_{false};
  bool started_ = false;       // guarded by mu_
  std::string path_;           // as started
  bool mark_cycles_ = false;
  std::FILE* file_ = nullptr;
  std::string buffer_;
  bool first_ = true;
  Clock::time_point origin_;
  std::unordered_map<std::string, int> rows_;
};

// Note [Timeline files]
// A path with "%r" in it is every rank's, with its rank number in place of %r; a
// path that ends in '/' or names an existing directory gets one file per rank in
// it, kolo-timeline-rank<r>.json. Any other path is rank 0's alone, as with
// Horovod's HOROVOD_TIMELINE: two ranks writing one file would garble it, and a
// program written for Horovod passes the same path on every rank. Start and stop
// are per rank, not collective: a rank records from its own start to its own
// stop, and the others are not asked (Note [Who came last] says how the cycle
// learns that someone records).

// Note [Who came last]
// A rank knows when it submitted a name, not when the others did. In a cycle
// where some rank records (a flag in the AND vector the fast path sends anyway),
// every rank allgathers how long ago it submitted each ready name (-1: not
// submitted, a joined rank). The ranks leave the cycle's collective step within
// microseconds of each other, so these ages share one reference: the smallest
// age is the straggler, and the largest minus the smallest is how long the first
// rank waited for it. This works for the response cache's fast path, where rank 0
// never sees the requests, as well as the slow path; it costs one allgather per
// cycle while recording and nothing otherwise.

}  // namespace kolo::core
