// How kolo waits: one policy for every wait loop (docs/design.md, "Waiting").
//
// A wait checks its condition and, after each check that fails, pauses. Every
// wait follows a WaitProfile:
//
//   checks 1..spin_checks   the pause returns at once (a fast answer comes here)
//   then for yield_for      sched_yield() (hands the core to a runnable peer)
//   then                    sleeps: first_sleep, each next one twice as long, up
//                           to max_sleep. The Waiter naps itself (pause()), or
//                           the caller sleeps its own way — a condition variable,
//                           a futex, the doorbell — for take_sleep()'s length.
//
// The profiles are named by what a wait waits for (WaitFor) and kept in one table
// (wait_policy.cc), each with its reason. A WaitPolicy is the one place that
// decides, from the node's shape, which column of that table applies (Note
// [Crowded nodes wait in the kernel]) and whether a thread about to wait on a
// handle runs the coordinator's cycle itself (Note [The waiter runs the cycle] in
// core/coordinator_gate.h). A waiter that sleeps in the kernel also asks its
// liveness check between sleeps; that is the wait's business, not the policy's.
//
// Note [Spin, then yield, then sleep]
// ~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~
// Small collectives complete in microseconds, so a waiter first polls: a sleep
// or a futex wake-up costs tens of microseconds in a VM. Ranks may outnumber cores
// (4 ranks on 2 cores in CI, or ranks beside framework threads), so the poll
// yields: a spinning rank would steal the core its peer needs to answer, and a
// yield costs nothing when no one else is runnable. Past the yield phase the peer
// is idle, not slow: sleep, and leave the core alone. Sleeps stay short (max_sleep)
// so that a wait that ends late costs at most one sleep of latency. The numbers
// of each profile, and the runs behind them, are in docs/perf/waiting.md.
//
// Note [Crowded nodes wait in the kernel]
// ~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~
// With more ranks than CPUs on the node (4 ranks on 2 cores in CI) every thread
// that polls or yields takes the core from the one thread that must run next.
// There (the table's crowded column) the coordinator does not yield before it
// sleeps on the doorbell, nor dozes after the helpers left (doze_window() is 0),
// a host handle's waiter sleeps on its condition variable without yielding, and
// a helper that finds no news hands back at once (helper_hands_back_when_idle()):
// each sleeps in the kernel until the thread that has what it needs wakes it.
// Waits between ranks (kPeer, kCounter) are the exception: they yield before they
// sleep on every node, because a futex wake-up costs a scheduling round trip
// that a yield does not (measured tenfold slower: docs/perf/waiting.md).
#pragma once

#include <chrono>
#include <cstdint>

namespace kolo {

// How one kind of wait spends its time; see the top of this file.
struct WaitProfile {
  using Duration = std::chrono::steady_clock::duration;

  int spin_checks = 0;
  std::chrono::microseconds yield_for{0};  // measured from the first yield
  std::chrono::microseconds max_sleep{0};  // the longest sleep (0: the caller's own)
  std::chrono::microseconds first_sleep{1};

  // The sleep after one of `length`: twice as long, up to max_sleep (never less
  // than 1 us, so that sleeps keep growing from a zero cap).
  Duration after(Duration length) const;
};

// Every wait kolo makes, by what it waits for. The table in wait_policy.cc gives
// each its profile on an ordinary node and on a crowded one.
enum class WaitFor : uint8_t {
  kPeer,            // an MPI request, a point-to-point message: the Waiter naps itself
  kCounter,         // a peer's counter in node shared memory: then a futex on the counter
  kDeviceStream,    // an event on kolo's CUDA stream
  kHostHandle,      // a user thread on a host operation's handle: then its condition variable
  kDeviceHandle,    // a user thread on a device operation's handle: the same
  kNews,            // the idle coordinator: then the doorbell, until its next deadline
  kDeviceInFlight,  // the coordinator with device work in flight: then the doorbell, capped
  kHelperNews,      // a user thread that runs cycles, looking for news: then it hands back
  kDoze,            // the coordinator while user threads run cycles: dozes that lengthen
  kRingPoll,        // a doorbell seen only by polling: naps up to KOLO_CYCLE_TIME_MS
};
constexpr int kNumWaits = 10;

// The profile of `what` on an ordinary node: for waits that do not depend on the
// node (kPeer, kCounter, kDeviceStream, kRingPoll are the same on every node).
const WaitProfile& wait_profile(WaitFor what);

// The one place that decides how this process waits. Built once per world (the
// coordinator's; a transport may build its own from the same facts and gets the
// same answers). Immutable; any thread.
class WaitPolicy {
 public:
  struct Node {
    int ranks_here = 1;  // ranks of the world on this node
    int cpus = 1;        // CPUs of the machine (0: unknown, taken as 1)
    // The control plane's idle checks make no foreign calls (every rank of the
    // world on one node), so a cycle may run on any thread that holds the gate.
    bool idle_checks_local = false;
  };

  WaitPolicy() : WaitPolicy(Node{}) {}
  explicit WaitPolicy(Node node);
  // This node, with the CPUs this machine reports.
  static WaitPolicy for_node(int ranks_here, bool idle_checks_local);

  // More ranks of the world on this node than CPUs: Note [Crowded nodes wait in
  // the kernel].
  bool crowded() const { return crowded_; }
  // `what`'s profile on this node (the crowded column where crowded()).
  const WaitProfile& profile(WaitFor what) const;

  // Note [The waiter runs the cycle] (core/coordinator_gate.h): whether a thread
  // about to wait on a handle runs the coordinator's cycle itself. Only where the
  // idle checks are local, and only for host work (device work is polled by the
  // coordinator, whose wake-up costs nothing on a machine with GPUs).
  bool waiter_runs_cycle(bool on_device) const { return idle_checks_local_ && !on_device; }
  // A helper that finds no news hands back at once instead of looking again for
  // kHelperNews's yield phase (crowded nodes).
  bool helper_hands_back_when_idle() const { return crowded_; }
  // How long after the last helper left the coordinator still dozes instead of
  // sleeping on the doorbell (Note [The coordinator dozes while waiters run
  // cycles] in core/coordinator_gate.h); 0 on crowded nodes, where it dozes only
  // while a thread helps.
  std::chrono::microseconds doze_window() const;

 private:
  bool crowded_;
  bool idle_checks_local_;
};

// Waiter: one wait on one thread, stepping through a profile. The caller checks
// its condition and calls pause() (or pause_awake()) after each check that fails.
//
// Linux pads every sleep by the thread's timer slack (50 us by default: a 1 us
// sleep measured 109 us on a loaded 2-core machine, 17 us with a 1 us slack), so
// while a Waiter naps it lowers the calling thread's slack to 1 us, and the
// destructor restores it. Sleeps the caller takes itself (take_sleep()) leave the
// slack alone.
//
// Not thread-safe; belongs to the thread that waits.
class Waiter {
 public:
  using Clock = std::chrono::steady_clock;
  enum class Phase { kSpin, kYield, kSleep };

  // Without a deadline, pause() always pauses; with one, see pause().
  explicit Waiter(const WaitProfile& profile = wait_profile(WaitFor::kPeer),
                  Clock::time_point deadline = Clock::time_point::max());
  Waiter(const Waiter&) = delete;
  Waiter& operator=(const Waiter&) = delete;
  ~Waiter();  // restores the thread's timer slack if a nap lowered it

  // One check that failed: returns at once, yields or naps, per the profile. A
  // nap never runs past the deadline. Answers false, without pausing, once the
  // deadline has passed.
  bool pause();
  // Like pause(), but answers false instead of napping: for a caller with its own
  // way to sleep once spinning and yielding are over. `now`: the caller's clock
  // read, where it has one.
  bool pause_awake();
  bool pause_awake(Clock::time_point now);

  // For a caller that sleeps its own way: the length of the next sleep, never past
  // the deadline (zero once it has passed); the one after is twice as long, up to
  // the profile's max_sleep.
  Clock::duration take_sleep();

  // Back to the first check and the first sleep (news came: the next wait starts
  // afresh).
  void restart();
  // As if the spin were over and the yields had begun at `yields_began`.
  void restart(Clock::time_point yields_began);
  // Goes on with `profile` from where this wait is (the checks made, the yields'
  // start, the next sleep).
  void use(const WaitProfile& profile) { profile_ = profile; }

  // The phase the next pause() is in.
  Phase phase() const;
  // Whether the spin is over (the next pause yields or sleeps); reads no clock.
  bool done_spinning() const { return checks_ >= profile_.spin_checks; }
  // How long a sleep starting now would be (never past the deadline).
  Clock::duration next_sleep() const { return sleep_length(Clock::now()); }

 private:
  bool step(bool may_sleep, Clock::time_point now);
  Clock::duration sleep_length(Clock::time_point now) const;
  void nap(Clock::time_point now);

  WaitProfile profile_;
  const Clock::time_point deadline_;
  const bool has_deadline_;
  int checks_ = 0;
  bool yielding_ = false;  // the yield phase has begun, at yields_began_
  Clock::time_point yields_began_;
  Clock::duration sleep_;
  bool slack_lowered_ = false;
  unsigned long saved_slack_ns_ = 0;
};

}  // namespace kolo
