// Negotiator: the per-cycle agreement on which names are ready on every rank.
//
// Each cycle is one collective step that every rank runs in the same order (see
// the doorbell in control_plane.h for how idle ranks join):
//
//   1. Fast path, always: one bitwise AND over a bit vector
//        [ flags | ready bits | invalid bits | held bits ]
//      A set "ready" bit b means: this rank has a request pending whose name and
//      parameters equal cache entry b. After the AND, a bit set on every rank is
//      ready everywhere and executes, in bit order, with no message to rank 0.
//      Flags and invalid bits are sent inverted, so the AND computes their OR:
//      "someone has uncached requests", "someone asks to shut down", "someone
//      found cache entry b stale (its name was resubmitted with other parameters,
//      or it has waited too long)". Invalid entries are evicted on every rank and
//      their pending requests take the slow path. "Held" bits (also inverted, so
//      OR-ed) say that some rank really has the request: a rank that has joined
//      marks every cached allreduce ready (it contributes zeros, Note [Join]), and
//      an entry is ready only if also held somewhere.
//   2. Slow path, only when some rank has uncached requests (or rank 0 has stall
//      failures to announce): every rank gathers its new requests to rank 0, rank 0
//      records them in its MessageTable, validates every name that all ranks have
//      now asked for, and broadcasts the responses. OK responses enter the cache,
//      on every rank, in broadcast order.
//
// The ready list of a cycle is: cached-ready responses (bit order), then the
// broadcast responses (rank 0's order) — identical on every rank.
// A cycle may also carry a stall report: see Note [Stall reports].
// Coordinator thread only.
#pragma once

#include <chrono>
#include <functional>
#include <map>
#include <memory>
#include <set>
#include <string>
#include <vector>

#include "common/knobs.h"
#include "common/status.h"
#include "core/message_table.h"
#include "core/request.h"
#include "core/response_cache.h"
#include "core/spare_nodes.h"
#include "core/stall_report.h"
#include "transport/control_plane.h"

namespace kolo::core {

class Negotiator {
 public:
  using Clock = std::chrono::steady_clock;

  Negotiator(transport::ControlPlane& control, const Config& config);

  // A request this rank has just submitted (at `enqueued`).
  void add(const Request& request, Clock::time_point enqueued);

  // True when this rank has something the others must hear, so it should start
  // (ring for) a cycle rather than wait for a peer to.
  bool has_news(Clock::time_point now) const;

  // The next moment has_news() may become true by the clock alone (stall timers).
  Clock::time_point next_deadline(Clock::time_point now) const;

  // Runs one cycle that starts at `now` (the caller's clock read: stalls and
  // stale waits are judged against it). `shutdown`: this rank asks every rank to
  // stop. On return, `ready` holds the cycle's responses (OK or error) in the
  // common order and *stop says whether any rank asked to stop. An error means
  // the control plane failed; the world is then unusable, and `ready` is empty.
  // *carried (may be null): the cycle's ready list is exactly the one offered
  // to the packer, every rank packed it, and control.carried(r) holds rank r's
  // packed bucket (Note [Data rides with the AND]).
  Status cycle(bool shutdown, Clock::time_point now, std::vector<Response>* ready, bool* stop,
               bool* carried = nullptr);

  // Note [Data rides with the AND]: offered, in cycles with nothing but cached
  // requests to say, this rank's cached requests in bit order (the ready list
  // if every rank has the same) and the control plane's carry slot with its
  // capacity; returns whether it packed them there. Set before the first cycle;
  // none: nothing rides.
  using Packer = std::function<bool(const std::vector<const Response*>& ahead, char* slot,
                                    size_t capacity)>;
  void set_packer(Packer packer) { packer_ = std::move(packer); }

  // Note [A call alone]: whether this rank's next cycle would say nothing but
  // that `request` is ready, as cache entry *bit: nothing else waits or is to
  // send, no flag to raise, and the request hits the cache.
  bool alone(const Request& request, uint32_t* bit) const;
  // Writes the call's part at the carry slot (at most `capacity` bytes) and
  // returns true, or false where it does not ride.
  using AlonePacker = std::function<bool(char* slot, size_t capacity)>;
  // The cycle of a request that alone() accepted (submitted at `since`; the
  // epoch: read the clock if it is needed): this
  // rank's vector says `bit` ready, and `pack` offered the carry slot. *done:
  // every rank said exactly that and packed, so the cycle is over and the
  // call completes from the carried parts. Otherwise the request waits on
  // `bit` as add() would have put it, and the AND's answer is this cycle's, as
  // cycle() returns it in `ready` and *stop (never carried).
  Status cycle_alone(const Request& request, uint32_t bit, Clock::time_point since,
                     const AlonePacker& pack, bool* done, std::vector<Response>* ready,
                     bool* stop);

  // The response cached at `bit` (alone() found it there).
  const Response& cached(uint32_t bit) const { return cache_.at(bit); }

  uint64_t cycles() const { return cycle_; }
  bool joined() const { return joined_; }

  // Whether this rank records a timeline: the next cycles tell every rank so.
  void set_recording(bool recording) { recording_ = recording; }
  // True when some rank recorded during the last cycle: every rank then takes
  // part in the timeline's exchange (Note [Who came last] in timeline.h).
  bool someone_recording() const { return someone_recording_; }

  // Rank 0: if names have waited longer than the check time and the last warning
  // is older than that, asks for a stall report in the next cycle (has_news()
  // becomes true), which writes the warning. Cheap; call when idle.
  void warn_stalls(Clock::time_point now);

  // Rank 0: sends `message` to every rank with the next cycle (Note
  // [Announcements]); a later call before that cycle replaces it.
  void announce(std::string message) { announcement_ = std::move(message); }
  // True once after the cycle that carried an announcement, on every rank, with
  // the message in *message.
  bool take_announcement(std::string* message) {
    if (!announced_) return false;
    announced_ = false;
    *message = std::move(received_);
    return true;
  }

  // What this rank tells rank 0 when a stall is reported. Set before the first cycle.
  void set_reporter(std::function<RankReport()> reporter) { reporter_ = std::move(reporter); }
  // True once after each cycle that carried a stall report (on every rank).
  bool take_stall_report() {
    const bool made = report_made_;
    report_made_ = false;
    return made;
  }

 private:
  // Whether a cycle's one carried tensor with `params` rides in the vector's
  // line (a vector of `words` words): Note [The carry shares the vector's line]
  // in transports/shm/node_and.h. The same answer on every rank for the same
  // tensor, alone or not.
  bool rides_in_line(const TensorParams& params, size_t words) const;
  struct Waiting {
    Request request;
    Clock::time_point since;
  };

  // Layout of the AND vector (Note [An AND as long as the cache in use]):
  // cache_words_ is set at the start of each cycle.
  size_t cache_words() const { return cache_words_; }
  size_t ready_word(size_t bit) const { return 1 + bit / 64; }
  size_t invalid_word(size_t bit) const { return 1 + cache_words() + bit / 64; }
  size_t held_word(size_t bit) const { return 1 + 2 * cache_words() + bit / 64; }

  // Fills `bits` (resized to the AND's length; its storage is reused).
  void build_bits(bool shutdown, bool slow_path, std::vector<uint64_t>* bits) const;
  // build_bits()'s parts: the flags word and nothing ready, invalid or held; then
  // `bit` ready and held here.
  void empty_bits(bool shutdown, bool slow_path, std::vector<uint64_t>* bits) const;
  void mark_ready(uint32_t bit, std::vector<uint64_t>* bits) const;
  void collect_stale_waits(Clock::time_point now);
  void evict(uint32_t bit);            // drop cache entry `bit` on this rank
  void requeue_waiting(uint32_t bit);  // a local request waiting on `bit` takes the slow path
  // A hit: `request` waits on `bit` (which nothing waits on yet).
  void wait_on(uint32_t bit, const Request& request, Clock::time_point since);
  void stop_waiting(uint32_t bit);  // `bit` was ready everywhere
  Status negotiate(bool shutdown, Clock::time_point now, std::vector<Response>* ready, bool* stop,
                   bool* carried);  // cycle(), but `ready` may hold leftovers on failure
  // The rest of a cycle once the AND has answered `bits`: the ready list, the
  // evictions, the slow path and what the flags ask for.
  Status absorb(const std::vector<uint64_t>& bits, std::vector<Response>* ready, bool* stop);
  Status slow_path(std::vector<Response>* ready);
  Status gather_report();  // Note [Stall reports]

  transport::ControlPlane& control_;
  const Config config_;
  const int rank_;
  const int size_;
  ResponseCache cache_;
  MessageTable table_;  // used on rank 0 only

  std::map<uint32_t, Waiting> waiting_;       // cache bit -> local request waiting on it
  SpareNodes<std::map<uint32_t, Waiting>> spare_waits_;  // ended waits, for wait_on()
  std::vector<Request> to_send_;              // local requests for the slow path
  std::vector<uint64_t> bits_;  // cycle()'s AND vector, kept for its storage
  Packer packer_;
  std::vector<const Response*> ahead_;  // what cycle() offers the packer (storage kept)
  size_t cache_words_ = 0;  // this cycle's, from the cache's high water
  // Requests with per-rank sizes sent to rank 0 and not yet answered: what this
  // rank's cache entry compares with (Note [Caching per-rank sizes]).
  std::map<std::string, TensorParams> sent_own_;
  std::set<uint32_t> invalid_;                // bits to announce as invalid
  std::vector<Response> stall_failures_;      // rank 0: kStalled responses to announce
  uint64_t cycle_ = 0;
  bool joined_ = false;                       // this rank has joined (Note [Join])
  bool recording_ = false;                    // this rank records a timeline
  bool someone_recording_ = false;            // some rank did, in the last cycle
  double cache_stall_seconds_;                // waits longer than this leave the cache
  Clock::time_point last_stall_warning_;

  std::function<RankReport()> reporter_;
  bool report_made_ = false;  // a cycle carried a stall report since take_stall_report()
  // Rank 0: the next cycle carries a stall report; about report_stalls_ when it
  // is failing them, else about what has waited past the check time by then.
  bool report_due_ = false;
  bool report_failing_ = false;
  std::vector<MessageTable::Stall> report_stalls_;
  std::string announcement_;  // rank 0: to send with the next cycle
  std::string received_;      // the last cycle's announcement
  bool announced_ = false;
};

// Note [Reading the AND a word at a time]
// The AND vector has a ready, an invalid and a held bit for every cache entry
// (1024 by default), and a cycle of the fast path usually has one or two set.
// Testing every entry's bits cost about as much as the shared-memory AND itself
// (kolo-allreduce-perf --breakdown, "negotiate"); a cycle instead visits only the
// set bits of each word (count-trailing-zeros), in the same bit order.

// Note [An AND as long as the cache in use]
// The AND vector used to have words for the cache's whole capacity (1 + 3 * 16
// words at the default 1024 entries, seven cache lines) whatever the cache held,
// and on one node each rank wrote all of them and read all of every peer's,
// every cycle. It now covers only the bits below the cache's high water mark
// (ResponseCache::high_water()): one word per kind for the first 64 tensors
// cached. The mark only grows, and only through put(), which every rank calls
// alike, so every rank computes the same length at the start of every cycle.
// As a check, the length rides in the flags word's upper half: the AND gives
// its OR, and a rank whose length is not that OR stops with an internal error.

// Note [Data rides with the AND]
// ~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~
// On one node a cycle of the fast path is a shared-memory round trip (the AND),
// and a small operation it makes ready is a second one (the shm engine's own
// rendezvous), each a large share of a small allreduce's time. When this rank
// has nothing but cached requests to say, it knows what the cycle will make
// ready if every rank says the same: its own ready bits, in bit order. So it
// offers that list to the packer (the executor) before the AND. If the list is
// one host allreduce bucket of at most KOLO_AND_CARRY_BYTES, the packer writes
// its prescaled inputs into the control plane's carry slot beside the vector;
// if it is one allgather, broadcast, alltoall or reducescatter alone, this
// rank's part of it (its block, the root's data, its input with its blocks'
// offsets, its prescaled input); and a flag in the vector says so. After the
// AND every rank knows whether all the vectors were equal (NodeAnd compares
// them as it ANDs): equal vectors mean every rank made the same list, planned
// the same bucket and packed it (the flag is in the vector). Then, where the
// selector picks shm for it (as it would have; the same on every rank), each
// rank completes the operation from the carried copies as the shm engine would
// (the allreduce as its one round does: every copy reduced in rank order, the
// same kernels, so the same bits; the reducescatter from the own block, then
// the peers' in rank order), and it costs no second rendezvous. Otherwise,
// which every rank sees alike, the cycle goes on as before and the packed
// bytes are never read. Peers' slots stay readable until this rank's next AND
// (NodeAnd's two slots). The default is the largest the knob takes, 16 KiB:
// from 8 KiB the carried operation (every rank reading every copy) measured
// faster than the shm engine's split rounds after the AND, for every
// collective at 2 ranks and for the allreduce at 4 (docs/perf/small-ops.md,
// "The carry's limit, measured again"; the first measurement, at 4 KiB's
// favour, is in "Data rides with the AND").

// Note [Announcements]
// Some decisions are rank 0's alone but must take effect on every rank at the
// same cycle: the autotuner's next setting changes how buckets are cut, and two
// ranks cutting the same list differently reduce garbage. Rank 0 sets a flag in
// the cycle's AND vector (inverted, like every flag, so any rank's flag is seen
// by all) and, after the slow path, broadcasts the message; every rank takes it
// before it executes that cycle's responses. It costs one broadcast per
// announcement (a handful per tuning run) and nothing otherwise.

// Note [Stall reports]
// Rank 0 sees which ranks lack a stalled name, but the user needs to know what
// those ranks are doing instead. When a stall is due for a warning (or is being
// failed), rank 0 sets a flag in the next cycle's AND vector; every rank then,
// after the slow path, gathers its RankReport to rank 0, which writes the warning
// naming per missing rank the names it has in flight that others lack and how
// long it has been idle. Every rank sees the flag too, and the coordinator dumps
// its flight recorder. The cost is one gather per report (at most one per
// KOLO_STALL_CHECK_TIME_SECONDS); the fast path only carries one more flag bit in
// a word it sends anyway.

}  // namespace kolo::core
