#include "transports/shm/counter.h"

#include <linux/futex.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include <climits>

#include "common/backoff.h"
#include "common/check.h"

namespace kolo::shm {
namespace {

// The longest sleep on a counter between liveness checks (a wake-up ends it early).
constexpr int64_t kSleepSliceUs = 2000;

uint32_t* futex_word(const uint64_t* counter) {
  // The low half of the little-endian counter: it changes with every publish.
  return reinterpret_cast<uint32_t*>(const_cast<uint64_t*>(counter));
}

uint32_t* sleepers(const uint64_t* counter) {
  return reinterpret_cast<uint32_t*>(const_cast<uint64_t*>(counter) + 1);
}

long futex(uint32_t* word, int op, uint32_t value, const timespec* timeout) {
  return syscall(SYS_futex, word, op, value, timeout, nullptr, 0);
}

}  // namespace

void publish_counter(uint64_t* counter, uint64_t value) {
  __atomic_store_n(counter, value, __ATOMIC_SEQ_CST);
  if (__atomic_load_n(sleepers(counter), __ATOMIC_SEQ_CST) != 0)
    futex(futex_word(counter), FUTEX_WAKE, INT_MAX, nullptr);
}

void sleep_on_counter(const uint64_t* counter, uint64_t seen, int64_t timeout_us) {
  __atomic_fetch_add(sleepers(counter), 1, __ATOMIC_SEQ_CST);
  if (__atomic_load_n(counter, __ATOMIC_SEQ_CST) == seen) {
    timespec ts;
    ts.tv_sec = static_cast<time_t>(timeout_us / 1000000);
    ts.tv_nsec = static_cast<long>(timeout_us % 1000000) * 1000;
    futex(futex_word(counter), FUTEX_WAIT, static_cast<uint32_t>(seen), &ts);
  }
  __atomic_fetch_sub(sleepers(counter), 1, __ATOMIC_SEQ_CST);
}

Status wait_for_counter(const uint64_t* counter, uint64_t target, int spin_loads,
                        transport::Liveness* alive) {
  for (int i = 0; i < spin_loads; ++i) {
    if (__atomic_load_n(counter, __ATOMIC_ACQUIRE) >= target) return Status::OK();
    __builtin_ia32_pause();
  }
  // Note [Waiting for a counter in the kernel]: the Backoff's spin and yields
  // first, on every node, then the kernel. Liveness is consulted once the
  // Backoff stops spinning (its 32 polls): a check reads the clock, and a peer
  // just a little late should not cost one read per poll. From the first yield
  // on, every pass checks.
  Backoff backoff;
  for (;;) {
    const uint64_t seen = __atomic_load_n(counter, __ATOMIC_ACQUIRE);
    if (seen >= target) return Status::OK();
    if (alive && backoff.done_spinning()) KOLO_RETURN_IF_ERROR_AS_IS(alive->check());
    if (backoff.pause_awake()) continue;
    sleep_on_counter(counter, seen, kSleepSliceUs);
  }
}

}  // namespace kolo::shm
