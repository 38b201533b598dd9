// failure_probe: one rank of a failure test (run_failure.py starts it under
// mpiexec.mpich -disable-auto-cleanup). The victim rank dies at the phase under
// test (at a failpoint inside kolo, armed here from KOLO_TEST_DIE_AT through the
// test-only kolo_testing_set_failpoint_action, or by the probe itself); every survivor reports what
// kolo told it and how long after the death, as one line in <dir>/result.<rank>:
//
//   code=<status> detect_ms=<ms> shutdown_ms=<ms> later=<status> message=<text>
//
// detect_ms: from the victim's death (the time it wrote to <dir>/death, on the
// node's CLOCK_MONOTONIC) to the survivor's error; shutdown_ms: how long the
// survivor's kolo_shutdown took; later: the status of an allreduce submitted
// after the error (before kolo_shutdown; for init and the shutdown orders,
// after it). Usage: failure_probe <phase> <victim rank> <dir>.
// Phases: init idle negotiate blocking blocking-shm shm shm-in-place shm-described shm-mapped
// shm-share ring mpi
// barrier
// join teardown exit stop resume shutdown-after-death (the blocking phases: negotiate's and
// shm's through the blocking kolo_allreduce), and the shutdown orders (order, idiom, busy; see
// below). In "resume" the victim stops with a handle pending, the survivors give
// it up and exit, and the driver then resumes it: the victim reports too (its
// pending handle must fail, naming a peer, rather than wait forever). In
// "traced" nobody dies: the driver holds the victim in a tracing stop (as gdb -p
// does) for longer than the timeout, then releases it; every rank must finish
// its allreduces with KOLO_OK.
#include <signal.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <string>
#include <thread>
#include <vector>

#include "bindings/c/testing.h"
#include "kolo/kolo.h"

namespace {

std::string g_dir;
int g_rank = -1;

double monotonic_ms() {
  timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return ts.tv_sec * 1e3 + ts.tv_nsec * 1e-6;
}

// The victim's death time (written by it, or by kolo's test hook), or -1.
double death_ms() {
  std::ifstream in(g_dir + "/death");
  long long ns = -1;
  if (!(in >> ns)) return -1;
  return ns * 1e-6;
}

void wait_for_death() {
  while (death_ms() < 0) std::this_thread::sleep_for(std::chrono::milliseconds(5));
}

void die(int signal_number) {
  std::ofstream(g_dir + "/death") << static_cast<long long>(monotonic_ms() * 1e6) << "\n";
  raise(signal_number);
}

// KOLO_TEST_DIE_AT=<point>[:<n>]: the victim raises SIGKILL on itself the n-th
// time (default the first) a kolo thread passes that failpoint, after writing the
// time of death. The variable is this probe's, read here, never by kolo.
std::string g_die_point;
std::atomic<long> g_die_passes{1};

void die_at_failpoint(const char* point) {
  if (g_die_point != point || g_die_passes.fetch_sub(1) != 1) return;
  die(SIGKILL);
}

void arm_failpoint(const char* spec) {
  if (spec == nullptr || *spec == '\0') return;
  const std::string head = spec;
  const size_t colon = head.find(':');
  g_die_point = head.substr(0, colon);
  if (colon != std::string::npos) g_die_passes = std::max(1L, std::atol(head.c_str() + colon + 1));
  kolo_testing_set_failpoint_action(die_at_failpoint);
}

struct Outcome {
  kolo_status_t code = KOLO_OK;
  std::string message;
  double at_ms = 0;
};

Outcome fail_in(kolo_status_t code);

// What an enqueue that returned `code` (with handle h when OK) came to.
Outcome waited(kolo_status_t code, kolo_handle_t h) {
  Outcome out;
  out.code = code;
  if (out.code == KOLO_OK) {
    out.code = kolo_wait(h, -1.0);
    out.message = kolo_handle_message(h);
    kolo_handle_release(h);
  } else {
    out.message = kolo_last_error();
  }
  out.at_ms = monotonic_ms();
  return out;
}

// `memory`: the buffer (count floats), or null for one of the heap's.
Outcome allreduce(const char* name, int64_t count, float* memory = nullptr) {
  std::vector<float> heap(memory ? 0 : static_cast<size_t>(count), 1.0f);
  float* data = memory ? memory : heap.data();
  kolo_handle_t h = nullptr;
  const kolo_status_t code = kolo_allreduce_async(name, data, data, count, KOLO_FLOAT32,
                                                  KOLO_OP_SUM, 1.0, 1.0, KOLO_CPU_DEVICE, &h);
  return waited(code, h);
}

// `count` floats from `memory` gathered from every rank (into kolo's output).
Outcome allgather(const char* name, int64_t count, float* memory) {
  kolo_handle_t h = nullptr;
  const kolo_status_t code =
      kolo_allgather_async(name, memory, count, 1, KOLO_FLOAT32, KOLO_CPU_DEVICE, &h);
  return waited(code, h);
}

// The blocking call (kolo_allreduce), which on one node enters the cycle on
// this thread: its outcome is its status. A call that returns OK has summed
// every rank's ones: one that returned OK with its buffer unreduced (a call
// alone that lost its peer, Note [A call alone]) is KOLO_ERR_INTERNAL here.
Outcome blocking_allreduce(const char* name, int64_t count, float* memory) {
  std::vector<float> heap(memory ? 0 : static_cast<size_t>(count), 1.0f);
  float* data = memory ? memory : heap.data();
  const kolo_status_t code = kolo_allreduce(name, data, data, count, KOLO_FLOAT32, KOLO_OP_SUM);
  if (code == KOLO_OK && memory == nullptr && data[count - 1] != static_cast<float>(kolo_size()))
    return Outcome{KOLO_ERR_INTERNAL, "OK without the sum: " + std::to_string(data[count - 1]),
                   monotonic_ms()};
  return fail_in(code);
}

// The victim's rank: the root of the "shm-share" broadcasts.
int g_victim_rank = -1;

// `count` floats of `memory` broadcast in place from the victim, whose shm
// engine writes a share of every survivor's kolo_alloc output while the
// survivors wait for it (Note [The root writes a share]).
Outcome broadcast_from_victim(const char* name, int64_t count, float* memory) {
  kolo_handle_t h = nullptr;
  const kolo_status_t code = kolo_broadcast_async(name, memory, memory, count, KOLO_FLOAT32,
                                                  g_victim_rank, KOLO_CPU_DEVICE, &h);
  return waited(code, h);
}

using Op = Outcome (*)(const char* name, int64_t count, float* memory);

// Allreduces (or `op`s) until one fails (the victim dies meanwhile); the victim
// dies itself at iteration `die_at` with `signal_number` (0: kolo's hook kills it).
Outcome loop(int64_t count, bool victim, int die_at, int signal_number, float* memory = nullptr,
             Op op = allreduce) {
  for (int i = 0; i < 100000; ++i) {
    if (victim && signal_number != 0 && i == die_at) {
      if (signal_number < 0) std::exit(0);  // exits without kolo_shutdown
      die(signal_number);
    }
    Outcome o = op(("t" + std::to_string(i % 7)).c_str(), count, memory);
    if (o.code != KOLO_OK) return o;
  }
  return Outcome{KOLO_OK, "no failure", monotonic_ms()};
}

// The "resume" victim: a name only it submits stays pending while it is stopped.
Outcome stop_with_pending_handle() {
  std::vector<float> data(4, 1.0f);
  kolo_handle_t h = nullptr;
  Outcome out;
  out.code = kolo_allreduce_async("victim-only", data.data(), data.data(), 4, KOLO_FLOAT32,
                                  KOLO_OP_SUM, 1.0, 1.0, KOLO_CPU_DEVICE, &h);
  if (out.code != KOLO_OK) return Outcome{out.code, kolo_last_error(), monotonic_ms()};
  die(SIGSTOP);  // until the driver's SIGCONT, after every survivor has exited
  out.code = kolo_wait(h, -1.0);
  out.message = kolo_handle_message(h);
  kolo_handle_release(h);
  out.at_ms = monotonic_ms();
  return out;
}

// "traced": allreduces until the driver has released the victim (<dir>/released);
// each call's sum counts the ranks that have seen the file, so all stop together.
Outcome until_released() {
  std::ofstream(g_dir + "/looping." + std::to_string(g_rank)) << "\n";
  for (int i = 0;; ++i) {
    float seen = std::ifstream(g_dir + "/released").good() ? 1.0f : 0.0f;
    kolo_handle_t h = nullptr;
    kolo_status_t code = kolo_allreduce_async(("r" + std::to_string(i)).c_str(), &seen, &seen,
                                              1, KOLO_FLOAT32, KOLO_OP_SUM, 1.0, 1.0,
                                              KOLO_CPU_DEVICE, &h);
    if (code != KOLO_OK) return Outcome{code, kolo_last_error(), monotonic_ms()};
    code = kolo_wait(h, -1.0);
    const std::string message = kolo_handle_message(h);
    kolo_handle_release(h);
    if (code != KOLO_OK) return Outcome{code, message, monotonic_ms()};
    if (seen > 0) return Outcome{KOLO_OK, "", monotonic_ms()};
    std::this_thread::sleep_for(std::chrono::milliseconds(20));  // pacing only
  }
}

Outcome fail_in(kolo_status_t code) {
  return Outcome{code, code == KOLO_OK ? "" : kolo_last_error(), monotonic_ms()};
}

void report(const std::string& phase, const Outcome& o, double shutdown_ms,
            kolo_status_t later) {
  const double death = death_ms();
  char line[4096];
  std::snprintf(line, sizeof line, "code=%s detect_ms=%.0f shutdown_ms=%.0f later=%s message=%s",
                kolo_status_string(o.code), death < 0 ? -1.0 : o.at_ms - death, shutdown_ms,
                kolo_status_string(later), o.message.c_str());
  std::ofstream(g_dir + "/result." + std::to_string(g_rank)) << line << "\n";
  std::printf("[%s rank %d] %s\n", phase.c_str(), g_rank, line);
}

double timed_shutdown() {
  const double start = monotonic_ms();
  kolo_shutdown();
  return monotonic_ms() - start;
}

// Item 3: shutdown orders. "order": rank r shuts down after r * 1.2 s (the
// driver reverses the order with victim = -2); "idiom": the same with
// `if (kolo_is_initialized()) kolo_shutdown();`; "busy": rank 0 shuts down while
// the others keep submitting until kolo refuses. Every rank stays 1.5 s after
// its shutdown, so a shutdown that waits for the others' shows (kolo before
// these fixes: rank 0's waited in MPI_Win_free until the last rank's shutdown
// or exit, over a second).
int shutdown_phase(const std::string& phase, int size, bool reversed) {
  if (kolo_init() != KOLO_OK) return 2;
  Outcome warm = allreduce("warm", 16);
  if (warm.code != KOLO_OK) return 3;
  const int slot = reversed ? size - 1 - g_rank : g_rank;
  Outcome o{KOLO_OK, "", monotonic_ms()};
  if (phase == "busy" && g_rank != 0) {
    o = loop(1024, false, 0, 0);  // until rank 0's shutdown reaches this rank
  } else {
    std::this_thread::sleep_for(std::chrono::milliseconds(1200 * slot));
  }
  double took = -1;
  if (phase == "idiom") {
    const double start = monotonic_ms();
    if (kolo_is_initialized()) kolo_shutdown();
    took = monotonic_ms() - start;
  } else {
    took = timed_shutdown();
  }
  report(phase, o, took, allreduce("after", 4).code);
  std::this_thread::sleep_for(std::chrono::milliseconds(1500));
  return 0;
}

// Note [Hydra's kill despite -disable-auto-cleanup]
// hydra_pmi_proxy (MPICH 4.0.2) now and then answers a rank's death with
// kill(-pgid, SIGKILL) on the other ranks' process groups (seen with strace)
// although -disable-auto-cleanup is given, which would end a survivor before it
// could report. So each rank runs in a child in its own session; the parent,
// the process hydra knows, only waits for it and passes its end on.
void run_in_own_session() {
  const pid_t child = fork();
  if (child < 0) return;  // no fork: run here
  if (child == 0) {
    setsid();
    return;
  }
  int status = 0;
  while (waitpid(child, &status, 0) < 0) {
  }
  if (WIFSIGNALED(status)) raise(WTERMSIG(status));
  _exit(WIFEXITED(status) ? WEXITSTATUS(status) : 1);
}

}  // namespace

int main(int argc, char** argv) {
  run_in_own_session();
  if (argc != 4) {
    std::fprintf(stderr, "usage: failure_probe <phase> <victim rank> <dir>\n");
    return 2;
  }
  signal(SIGUSR1, SIG_IGN);  // hydra's failure notice: this models a launcher that does not kill
  const std::string phase = argv[1];
  const int victim_rank = std::atoi(argv[2]);
  g_victim_rank = victim_rank;
  g_dir = argv[3];
  // mpiexec's PMI_RANK and PMI_SIZE, or a socket-world launcher's RANK and WORLD_SIZE.
  const char* pmi_rank = std::getenv("PMI_RANK") ? std::getenv("PMI_RANK") : std::getenv("RANK");
  g_rank = pmi_rank ? std::atoi(pmi_rank) : 0;
  std::ofstream(g_dir + "/pid." + std::to_string(g_rank)) << getpid() << "\n";
  const char* size_env =
      std::getenv("PMI_SIZE") ? std::getenv("PMI_SIZE") : std::getenv("WORLD_SIZE");
  const int size = size_env ? std::atoi(size_env) : 1;
  if (phase == "order" || phase == "idiom" || phase == "busy")
    return shutdown_phase(phase, size, victim_rank == -2);

  const bool victim = g_rank == victim_rank;
  if (victim) arm_failpoint(std::getenv("KOLO_TEST_DIE_AT"));
  kolo_status_t s = kolo_init();
  if (phase == "init") {
    const Outcome o = fail_in(s);
    const double took = timed_shutdown();
    report(phase, o, took, allreduce("after", 4).code);
    return 0;
  }
  if (s != KOLO_OK || allreduce("warm", 16).code != KOLO_OK) {
    std::fprintf(stderr, "rank %d: init or warm-up failed: %s\n", g_rank, kolo_last_error());
    return 3;
  }
  Outcome o;
  if (phase == "idle" || phase == "barrier" || phase == "join" ||
      phase == "shutdown-after-death") {
    if (victim) die(SIGKILL);
    if (phase == "idle") {
      wait_for_death();
      o = allreduce("after-death", 4);
    } else if (phase == "barrier") {
      o = fail_in(kolo_barrier());
    } else if (phase == "join") {
      o = fail_in(kolo_join(nullptr));
    } else {
      wait_for_death();
      o = Outcome{KOLO_OK, "", monotonic_ms()};
    }
  } else if (phase == "negotiate" || phase == "mpi" || phase == "ring") {
    o = loop(16, victim, 0, 0);  // the victim dies inside kolo (KOLO_TEST_DIE_AT)
  } else if (phase == "blocking") {
    o = loop(16, victim, 0, 0, nullptr, blocking_allreduce);
  } else if (phase == "blocking-shm") {
    o = loop(256 << 10, victim, 0, 0, nullptr, blocking_allreduce);
  } else if (phase == "shm") {
    o = loop(256 << 10, victim, 0, 0);
  } else if (phase == "shm-in-place") {
    // 1 MiB from kolo_alloc on every rank: the shm allreduce works on the peers'
    // buffers in place, and the victim dies inside that pass.
    void* memory = nullptr;
    if (kolo_alloc(size_t{1} << 20, &memory) != KOLO_OK) return 2;
    o = loop(256 << 10, victim, 0, 0, static_cast<float*>(memory));
  } else if (phase == "shm-described") {
    // 1 MiB (two slices), the victim's buffer from kolo_alloc and the others on
    // the heap: the victim posts its first slice's description alone (Note [A
    // described slice skips the slot]) and dies there, while the others read
    // that slice from its input and wait for its shard.
    void* memory = nullptr;
    if (victim && kolo_alloc(size_t{1} << 20, &memory) != KOLO_OK) return 2;
    o = loop(256 << 10, victim, 0, 0, static_cast<float*>(memory));
  } else if (phase == "shm-mapped") {
    // 1 MiB a rank from kolo_alloc on every rank: the allgather reads the peers'
    // inputs mapped, and the victim dies after its read, before it says done.
    void* memory = nullptr;
    if (kolo_alloc(size_t{1} << 20, &memory) != KOLO_OK) return 2;
    o = loop(256 << 10, victim, 0, 0, static_cast<float*>(memory), allgather);
  } else if (phase == "shm-share") {
    // 1 MiB from kolo_alloc on every rank, broadcast in place from the victim:
    // it dies after writing its shares, before it says done, while the others
    // wait for its done to know their share is there.
    void* memory = nullptr;
    if (kolo_alloc(size_t{1} << 20, &memory) != KOLO_OK) return 2;
    o = loop(256 << 10, victim, 0, 0, static_cast<float*>(memory), broadcast_from_victim);
  } else if (phase == "teardown") {
    o = Outcome{KOLO_OK, "", monotonic_ms()};  // the victim dies inside its teardown
  } else if (phase == "exit") {
    o = loop(16, victim, 20, -1);
  } else if (phase == "stop") {
    o = loop(16, victim, 20, SIGSTOP);
  } else if (phase == "resume") {
    o = victim ? stop_with_pending_handle() : loop(16, false, 0, 0);
  } else if (phase == "traced") {
    o = until_released();
  } else {
    std::fprintf(stderr, "unknown phase %s\n", phase.c_str());
    return 2;
  }
  const kolo_status_t later = allreduce("later", 4).code;
  report(phase, o, timed_shutdown(), later);
  return 0;
}
