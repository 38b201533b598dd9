// host_failure_probe: one rank of the failure matrix across pretend hosts
// (run_matrix.py starts it under mpiexec.mpich -disable-auto-cleanup inside
// tools/pretend_cluster.sh, or on the socket world one process per rank with
// torchrun's variables). The driver disrupts the hosts' links or processes
// while every rank is in the phase under test; each rank reports what kolo told
// it and when, on CLOCK_MONOTONIC (one clock for every namespace of the machine,
// the driver's too). The probe and the driver talk through files in <dir>:
//
//   the probe writes  pid.<rank>       its pid (the driver signals it)
//                     ready.<rank>     it is inside the phase: disrupt now
//                     verdict.<rank>   "<ns>": when its operation ended
//                     result.<rank>    one line, at the end:
//     code=<status> at_ns=<ns> iterations=<n> wrong=<n> later=<status>
//     shutdown_ms=<ms> message=<text>
//   the driver writes event            "<ns>": the disruption is in place
//                     go-on            every verdict is in (and links are back)
//
// `later`: an allreduce submitted after go-on, before kolo_shutdown: once a rank
// has failed, it must stay failed however the links have healed. Usage:
//   host_failure_probe <phase> <dir> [iterations]
// Phases: init idle negotiate ring hierarchical mixed barrier join shutdown soak
// (mixed: the soak's sizes until a failure). The
// collective under test is chosen by the driver through KOLO_TRANSPORT. Each rank
// contributes rank + 1 + i % 8 to element i, so every sum is exact (checked with ==).
#include <fcntl.h>
#include <signal.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

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
int g_rank = 0;
int g_size = 1;
int g_first = 0;  // the lowest rank that contributes to the sums
constexpr double kWaitFileLimitS = 300;  // the driver's watchdog ends hangs first

int64_t now_ns() {
  timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return int64_t{ts.tv_sec} * 1000000000 + ts.tv_nsec;
}

// Whole or not at all: the driver may read at any moment.
void write_file(const std::string& name, const std::string& text) {
  const std::string path = g_dir + "/" + name;
  std::ofstream(path + ".tmp") << text << "\n";
  std::rename((path + ".tmp").c_str(), path.c_str());
}

bool wait_file(const std::string& name) {
  const int64_t limit = now_ns() + static_cast<int64_t>(kWaitFileLimitS * 1e9);
  while (!std::ifstream(g_dir + "/" + name).good()) {
    if (now_ns() > limit) return false;
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  return true;
}

void mark(const char* what) { write_file(std::string(what) + "." + std::to_string(g_rank), "1"); }

struct Outcome {
  kolo_status_t code = KOLO_OK;
  std::string message;
  int64_t at_ns = 0;
  long iterations = 0;
  long wrong = 0;
};

Outcome ended(kolo_status_t code, std::string message, long iterations = 0, long wrong = 0) {
  return Outcome{code, std::move(message), now_ns(), iterations, wrong};
}

// One allreduce of `count` floats; *wrong counts elements off the exact sum.
kolo_status_t allreduce(const std::string& name, int64_t count, long* wrong, std::string* message) {
  std::vector<float> data(static_cast<size_t>(count));
  for (int64_t i = 0; i < count; ++i) data[i] = static_cast<float>(g_rank + 1 + i % 8);
  kolo_handle_t h = nullptr;
  kolo_status_t code = kolo_allreduce_async(name.c_str(), data.data(), data.data(), count,
                                            KOLO_FLOAT32, KOLO_OP_SUM, 1.0, 1.0,
                                            KOLO_CPU_DEVICE, &h);
  if (code != KOLO_OK) {
    *message = kolo_last_error();
    return code;
  }
  code = kolo_wait(h, -1.0);
  *message = kolo_handle_message(h);
  kolo_handle_release(h);
  if (code != KOLO_OK) return code;
  // Ranks g_first.. contribute; joined ranks (below g_first in "join") add zeros.
  const int n = g_size - g_first;
  const float base = static_cast<float>(g_size * (g_size + 1) / 2 - g_first * (g_first + 1) / 2);
  for (int64_t i = 0; i < count; ++i)
    if (data[i] != base + static_cast<float>(n * (i % 8))) ++*wrong;
  return code;
}

// The size of soak iteration i: mostly small, every 16th up to 4 MiB.
int64_t soak_count(long i) {
  static const int64_t kSizes[] = {1, 16, 1000, 4096, 65536, 262144, 1 << 20};
  if (i % 16 == 15) return kSizes[4 + (i / 16) % 3];
  return kSizes[i % 4];
}

// Allreduces until one fails or `limit` ran (0: no limit); ready after 20.
Outcome loop(int64_t count, long limit) {
  long wrong = 0;
  std::string message;
  for (long i = 0; limit == 0 || i < limit; ++i) {
    if (i == 20) mark("ready");
    const int64_t n = count > 0 ? count : soak_count(i);
    const kolo_status_t code = allreduce("t" + std::to_string(i % 7), n, &wrong, &message);
    if (code != KOLO_OK) return ended(code, message, i, wrong);
  }
  if (limit <= 20) mark("ready");
  return ended(KOLO_OK, "all allreduces done", limit, wrong);
}

Outcome barriers() {
  for (long i = 0;; ++i) {
    if (i == 20) mark("ready");
    const kolo_status_t code = kolo_barrier();
    if (code != KOLO_OK) return ended(code, kolo_last_error(), i);
  }
}

// A name only this rank submits stays pending while the coordinator idles.
Outcome idle() {
  float data[4] = {1, 1, 1, 1};
  kolo_handle_t h = nullptr;
  const std::string name = "only-" + std::to_string(g_rank);
  kolo_status_t code = kolo_allreduce_async(name.c_str(), data, data, 4, KOLO_FLOAT32,
                                            KOLO_OP_SUM, 1.0, 1.0, KOLO_CPU_DEVICE, &h);
  if (code != KOLO_OK) return ended(code, kolo_last_error());
  std::this_thread::sleep_for(std::chrono::milliseconds(200));  // its cycle is over
  mark("ready");
  code = kolo_wait(h, -1.0);
  Outcome out = ended(code, kolo_handle_message(h));
  kolo_handle_release(h);
  return out;
}

// The ranks of the first host (ranks 0 .. size/2 - 1) join; the others loop.
Outcome join() {
  if (g_rank >= g_size / 2) {
    g_first = g_size / 2;
    return loop(16, 0);
  }
  mark("ready");
  const kolo_status_t code = kolo_join(nullptr);
  return ended(code, code == KOLO_OK ? "joined" : kolo_last_error());
}

// "init": the failpoint at the end of kolo_init's communicators holds every rank
// until the driver's disruption is in place; the rest of kolo_init runs under it.
void hold_at_init(const char* point) {
  if (std::strcmp(point, "init") != 0) return;
  mark("ready");
  wait_file("event");
}

Outcome run(const std::string& phase, long iterations) {
  if (phase == "idle") return idle();
  if (phase == "negotiate") return loop(16, 0);
  if (phase == "ring" || phase == "hierarchical") return loop(256 << 10, 0);
  if (phase == "mixed") return loop(0, 0);
  if (phase == "barrier") return barriers();
  if (phase == "join") return join();
  if (phase == "soak") return loop(0, iterations);
  if (phase == "shutdown") {
    mark("ready");
    wait_file("event");
    const kolo_status_t code = kolo_shutdown();
    return ended(code, code == KOLO_OK ? "shut down" : kolo_last_error());
  }
  return ended(KOLO_ERR_INVALID_ARGUMENT, "unknown phase " + phase);
}

void report(const Outcome& o, kolo_status_t later, double shutdown_ms) {
  char head[256];
  std::snprintf(head, sizeof head, "code=%s at_ns=%lld iterations=%ld wrong=%ld later=%s shutdown_ms=%.0f",
                kolo_status_string(o.code), static_cast<long long>(o.at_ns), o.iterations, o.wrong,
                kolo_status_string(later), shutdown_ms);
  write_file("result." + std::to_string(g_rank), std::string(head) + " message=" + o.message);
  std::printf("[rank %d] %s message=%s\n", g_rank, head, o.message.c_str());
  std::fflush(stdout);
}

// Note [Hydra's kill despite -disable-auto-cleanup] (tests/failure/failure_probe.cc):
// the rank runs in a child in its own session; the parent, the process hydra
// knows, passes hydra's SIGUSR1 (its failure notice) on and ends as the child did.
pid_t g_child = 0;

void forward(int signal_number) {
  if (g_child > 0) kill(g_child, signal_number);
}

void run_in_own_session() {
  const pid_t child = fork();
  if (child < 0) return;
  if (child == 0) {
    setsid();
    return;
  }
  g_child = child;
  signal(SIGUSR1, forward);
  int status = 0;
  while (waitpid(child, &status, 0) < 0) {
  }
  if (WIFSIGNALED(status)) {
    signal(WTERMSIG(status), SIG_DFL);
    raise(WTERMSIG(status));
  }
  _exit(WIFEXITED(status) ? WEXITSTATUS(status) : 1);
}

}  // namespace

int main(int argc, char** argv) {
  run_in_own_session();
  if (argc < 3) {
    std::fprintf(stderr, "usage: host_failure_probe <phase> <dir> [iterations]\n");
    return 2;
  }
  const std::string phase = argv[1];
  g_dir = argv[2];
  const long iterations = argc > 3 ? std::atol(argv[3]) : 1000;
  // mpiexec's variables on the MPI world, torchrun's on the socket world.
  const char* r = std::getenv("PMI_RANK");
  const char* s = std::getenv("PMI_SIZE");
  if (r == nullptr) r = std::getenv("RANK");
  if (s == nullptr) s = std::getenv("WORLD_SIZE");
  if (r != nullptr) g_rank = std::atoi(r);
  if (s != nullptr) g_size = std::atoi(s);
  write_file("pid." + std::to_string(g_rank), std::to_string(getpid()));
  // A cut link also cuts hydra's forwarding of this rank's output (and a full pipe
  // would block the writer): the rank writes its own file.
  const int log = open((g_dir + "/log." + std::to_string(g_rank)).c_str(),
                       O_WRONLY | O_CREAT | O_TRUNC, 0644);
  if (log >= 0) {
    dup2(log, 1);
    dup2(log, 2);
    close(log);
  }
  // How hydra's failure notice is taken is kolo's business (Note [SIGUSR1 and
  // MPICH]); a program that does not handle it ignores it.
  signal(SIGUSR1, SIG_IGN);

  if (phase == "init") kolo_testing_set_failpoint_action(hold_at_init);
  const kolo_status_t init = kolo_init();
  Outcome o;
  if (phase == "init") {
    o = init == KOLO_OK ? loop(16, 0) : ended(init, kolo_last_error());
  } else if (init != KOLO_OK) {
    o = ended(init, std::string("kolo_init failed before the disruption: ") + kolo_last_error());
    o.at_ns = 0;
  } else {
    long wrong = 0;
    std::string message;
    const kolo_status_t warm = allreduce("warm", 1024, &wrong, &message);
    o = warm == KOLO_OK && wrong == 0 ? run(phase, iterations)
                                      : ended(warm, "warm-up failed: " + message, 0, wrong);
  }
  write_file("verdict." + std::to_string(g_rank), std::to_string(o.at_ns));
  wait_file("go-on");
  long unused = 0;
  std::string message;
  const kolo_status_t later = allreduce("later", 4, &unused, &message);
  const int64_t start = now_ns();
  kolo_shutdown();
  report(o, later, (now_ns() - start) * 1e-6);
  return 0;
}
