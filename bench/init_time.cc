// kolo-init-time: how long kolo_init takes, through the public C API, in whatever
// world the launch gives (the MPI world under mpiexec; the socket world when
// torchrun's variables are set or KOLO_WORLD=socket). One row per job:
//
//   world  ranks  init_ms  first_op_ms  shutdown_ms
//
// init_ms is the slowest rank's kolo_init (for the MPI world it includes
// MPI_Init, which kolo_init calls; for the socket world the rendezvous through the
// store); first_op_ms the first allreduce after it (one 8-byte tensor, which pays
// for the first negotiation); shutdown_ms rank 0's kolo_shutdown. A world cannot be
// formed twice in one MPICH process, so one job gives one row; bench/init_time.sh
// runs the jobs and takes medians.
#include <kolo/kolo.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>

namespace {

using Clock = std::chrono::steady_clock;

double ms_since(Clock::time_point t) {
  return std::chrono::duration<double, std::milli>(Clock::now() - t).count();
}

// The slowest rank's value (an allreduce MAX), or -1 on error.
bool slowest(const char* name, double* value) {
  kolo_handle_t h = nullptr;
  kolo_status_t s = kolo_allreduce_async(name, value, value, 1, KOLO_FLOAT64, KOLO_OP_MAX, 1.0,
                                         1.0, KOLO_CPU_DEVICE, &h);
  if (s == KOLO_OK) s = kolo_wait(h, 60.0);
  if (s != KOLO_OK) {
    std::fprintf(stderr, "kolo-init-time: allreduce %s: %s %s\n", name, kolo_status_string(s),
                 h ? kolo_handle_message(h) : kolo_last_error());
  }
  if (h) kolo_handle_release(h);
  return s == KOLO_OK;
}

}  // namespace

int main() {
  const auto start = Clock::now();
  kolo_status_t s = kolo_init();
  double init_ms = ms_since(start);
  if (s != KOLO_OK) {
    std::fprintf(stderr, "kolo-init-time: kolo_init: %s: %s\n", kolo_status_string(s),
                 kolo_last_error());
    return 1;
  }
  const auto first = Clock::now();
  double first_ms = 0;
  bool ok = slowest("init_time.first", &first_ms);
  first_ms = ms_since(first);
  ok = ok && slowest("init_time.init", &init_ms) && slowest("init_time.op", &first_ms);
  const int rank = kolo_rank(), size = kolo_size();
  const char* world = std::getenv("KOLO_WORLD");
  if (world == nullptr || *world == '\0') world = std::getenv("RANK") ? "socket" : "mpi";
  const auto stop = Clock::now();
  s = kolo_shutdown();
  const double shutdown_ms = ms_since(stop);
  if (rank == 0 && ok)
    std::printf("%-6s %5d %9.1f %11.2f %11.1f\n", world, size, init_ms, first_ms, shutdown_ms);
  return ok && s == KOLO_OK ? 0 : 1;
}
