#include "common/wait_policy.h"

#include <sched.h>
#ifdef __linux__
#include <sys/prctl.h>
#endif

#include <algorithm>
#include <thread>

namespace kolo {
namespace {

using std::chrono::microseconds;
using std::chrono::milliseconds;

constexpr unsigned long kSleepSlackNs = 1000;

// One row per WaitFor: the profile on an ordinary node, then on a crowded one
// (Note [Crowded nodes wait in the kernel]). {spin checks, yield for, longest
// sleep, first sleep}; a longest sleep of 0 means the caller sleeps its own way,
// without a cap of the policy's. docs/perf/waiting.md has the runs behind the
// numbers.
struct Row {
  WaitFor what;
  WaitProfile normal;
  WaitProfile crowded;
};

constexpr Row kTable[kNumWaits] = {
    // A peer's answer (MPI requests, messages). Yields for 500 us: with 4 ranks on
    // 2 busy cores an 8 B allreduce through "mpi" took 22 to 350 us when it slept
    // after 64 yields, 15-16 us with 500 us of yields. Yields on crowded nodes too.
    {WaitFor::kPeer,
     {32, microseconds(500), microseconds(50), microseconds(1)},
     {32, microseconds(500), microseconds(50), microseconds(1)}},
    // A peer's counter in node shared memory (transports/mpi, Note [Waiting for a
    // counter in the kernel]): kPeer's spin and yields, then a futex on the
    // counter, in slices of 2 ms between liveness checks. Yields on crowded nodes
    // too: there a futex round trip cost ten times a yield.
    {WaitFor::kCounter,
     {32, microseconds(500), milliseconds(2), milliseconds(2)},
     {32, microseconds(500), milliseconds(2), milliseconds(2)}},
    // An event on kolo's CUDA stream: no spin (each check is a driver call), yields
    // for 50 us (64 yields took ~35 us on the 2-core VM), then naps up to 20 us.
    {WaitFor::kDeviceStream,
     {0, microseconds(50), microseconds(20), microseconds(1)},
     {0, microseconds(50), microseconds(20), microseconds(1)}},
    // A host operation's handle: a small allreduce on one node completes in a few
    // microseconds, so polling that long saves a futex wake-up (tens of
    // microseconds in a VM); then the handle's condition variable. Crowded: no
    // yields, the thread that completes the handle needs the core.
    {WaitFor::kHostHandle,
     {8, microseconds(50), microseconds(0), microseconds(1)},
     {8, microseconds(0), microseconds(0), microseconds(1)}},
    // A device operation's handle: the GPU's work, then the coordinator's poll,
    // take longer; a waiter polls longer before it sleeps, for the same reason.
    {WaitFor::kDeviceHandle,
     {8, milliseconds(2), microseconds(0), microseconds(1)},
     {8, milliseconds(2), microseconds(0), microseconds(1)}},
    // The idle coordinator (Note [Waking up] in core/coordinator.h): looks for news
    // between yields for 50 us, then sleeps on the doorbell until its next
    // deadline. Crowded: straight to the doorbell.
    {WaitFor::kNews,
     {0, microseconds(50), microseconds(0), microseconds(1)},
     {0, microseconds(0), microseconds(0), microseconds(1)}},
    // The coordinator with device work in flight polls it between yields for 2 ms
    // before it sleeps: a wake-up from the transport's host callback costs two
    // thread wake-ups, tens of microseconds each in a VM, on every bucket. Only
    // machines with GPUs take this path, and there cores are not scarce. Its
    // sleeps on the doorbell last 1 ms at most, in case a wake-up is lost.
    {WaitFor::kDeviceInFlight,
     {0, milliseconds(2), milliseconds(1), microseconds(1)},
     {0, milliseconds(2), milliseconds(1), microseconds(1)}},
    // A user thread that runs cycles looks for news (the peer's ring, its own
    // submission) between yields as long as the coordinator does, then hands back.
    // Crowded: WaitPolicy::helper_hands_back_when_idle().
    {WaitFor::kHelperNews,
     {0, microseconds(50), microseconds(0), microseconds(1)},
     {0, microseconds(50), microseconds(0), microseconds(1)}},
    // The coordinator while user threads run cycles (Note [The coordinator dozes
    // while waiters run cycles] in core/coordinator_gate.h): dozes of 100 us, each
    // next one twice as long, up to 800 us.
    {WaitFor::kDoze,
     {0, microseconds(0), microseconds(800), microseconds(100)},
     {0, microseconds(0), microseconds(800), microseconds(100)}},
    // A doorbell that only polling sees (ControlPlane::wait_for_ring's default):
    // naps from 10 us, twice as long each time, up to the poll interval
    // (KOLO_CYCLE_TIME_MS), which the caller sets as max_sleep.
    {WaitFor::kRingPoll,
     {0, microseconds(0), microseconds(0), microseconds(10)},
     {0, microseconds(0), microseconds(0), microseconds(10)}},
};

constexpr bool rows_in_order() {
  for (int i = 0; i < kNumWaits; ++i)
    if (static_cast<int>(kTable[i].what) != i) return false;
  return true;
}
static_assert(rows_in_order(), "kTable has one row per WaitFor, in the enum's order");

// Note [The coordinator dozes while waiters run cycles]: how long after the last
// helper left.
constexpr auto kDozeWindow = milliseconds(1);

}  // namespace

WaitProfile::Duration WaitProfile::after(Duration length) const {
  return std::max<Duration>(std::min<Duration>(2 * length, max_sleep), microseconds(1));
}

const WaitProfile& wait_profile(WaitFor what) { return kTable[static_cast<int>(what)].normal; }

WaitPolicy::WaitPolicy(Node node)
    : crowded_(node.ranks_here > std::max(1, node.cpus)),
      idle_checks_local_(node.idle_checks_local) {}

WaitPolicy WaitPolicy::for_node(int ranks_here, bool idle_checks_local) {
  const int cpus = static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
  return WaitPolicy(Node{ranks_here, cpus, idle_checks_local});
}

const WaitProfile& WaitPolicy::profile(WaitFor what) const {
  const Row& row = kTable[static_cast<int>(what)];
  return crowded_ ? row.crowded : row.normal;
}

std::chrono::microseconds WaitPolicy::doze_window() const {
  return crowded_ ? microseconds(0) : kDozeWindow;
}

Waiter::Waiter(const WaitProfile& profile, Clock::time_point deadline)
    : profile_(profile),
      deadline_(deadline),
      has_deadline_(deadline != Clock::time_point::max()),
      sleep_(profile.first_sleep) {}

Waiter::~Waiter() {
#ifdef __linux__
  if (slack_lowered_) prctl(PR_SET_TIMERSLACK, saved_slack_ns_, 0, 0, 0);
#endif
}

bool Waiter::pause() {
  // The spin phase reads no clock unless there is a deadline to keep.
  const bool spinning = checks_ < profile_.spin_checks;
  return step(true, spinning && !has_deadline_ ? Clock::time_point() : Clock::now());
}

bool Waiter::pause_awake() {
  const bool spinning = checks_ < profile_.spin_checks;
  return step(false, spinning && !has_deadline_ ? Clock::time_point() : Clock::now());
}

bool Waiter::pause_awake(Clock::time_point now) { return step(false, now); }

Waiter::Phase Waiter::phase() const {
  if (checks_ < profile_.spin_checks) return Phase::kSpin;
  if (!yielding_) return profile_.yield_for.count() > 0 ? Phase::kYield : Phase::kSleep;
  return Clock::now() < yields_began_ + profile_.yield_for ? Phase::kYield : Phase::kSleep;
}

bool Waiter::step(bool may_sleep, Clock::time_point now) {
  if (has_deadline_ && now >= deadline_) return false;
  if (checks_ < profile_.spin_checks) {
    ++checks_;
    return true;
  }
  if (!yielding_) {  // the first pause after spinning
    yielding_ = true;
    yields_began_ = now;
  }
  if (now < yields_began_ + profile_.yield_for) {
    sched_yield();
    return true;
  }
  if (!may_sleep) return false;
  nap(now);
  return true;
}

Waiter::Clock::duration Waiter::take_sleep() {
  const Clock::duration length = has_deadline_ ? sleep_length(Clock::now()) : sleep_;
  sleep_ = profile_.after(sleep_);
  return length;
}

void Waiter::restart() {
  checks_ = 0;
  yielding_ = false;
  sleep_ = profile_.first_sleep;
}

void Waiter::restart(Clock::time_point yields_began) {
  checks_ = profile_.spin_checks;
  yielding_ = true;
  yields_began_ = yields_began;
  sleep_ = profile_.first_sleep;
}

Waiter::Clock::duration Waiter::sleep_length(Clock::time_point now) const {
  if (!has_deadline_) return sleep_;
  return std::max(Clock::duration::zero(), std::min<Clock::duration>(sleep_, deadline_ - now));
}

void Waiter::nap(Clock::time_point now) {
#ifdef __linux__
  if (!slack_lowered_) {
    const int saved = prctl(PR_GET_TIMERSLACK, 0, 0, 0, 0);
    if (saved > 0 && prctl(PR_SET_TIMERSLACK, kSleepSlackNs, 0, 0, 0) == 0) {
      saved_slack_ns_ = static_cast<unsigned long>(saved);
      slack_lowered_ = true;
    }
  }
#endif
  std::this_thread::sleep_for(sleep_length(now));
  sleep_ = profile_.after(sleep_);
}

}  // namespace kolo
