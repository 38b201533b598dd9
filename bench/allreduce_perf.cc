// kolo-allreduce-perf: allreduce bandwidth and latency through kolo's public API,
// in nccl-tests' conventions (flags, columns, units), with every result checked.
//
//   mpiexec.mpich -n 2 kolo-allreduce-perf -b 8 -e 64M -r mpi
//   mpiexec.mpich -n 2 kolo-allreduce-perf -m resnet50
//   mpiexec.mpich -n 4 kolo-allreduce-perf --process-set 0,2   (a two-rank subset)
//   mpiexec.mpich -n 1 kolo-allreduce-perf -t nccl -b 8 -e 256M -r nccl   (one GPU per rank)
//
// The program owns MPI: it calls MPI_Init_thread(MPI_THREAD_MULTIPLE) before
// kolo_init, so kolo adopts MPI and its shutdown leaves MPI up. That lets the
// benchmark time MPI_Allreduce beside kolo, reduce timings over ranks, and restart
// kolo with other knobs (the model mode's fused / unfused variants). The size sweep
// is in perf_sweep.cc, the gradient-set mode in perf_model.cc; -t nccl's device side
// is behind perf_cuda.h.
#include <mpi.h>

#include <chrono>
#include <cstdio>
#include <thread>
#include <memory>
#include <string>

#include "bench/perf_cuda.h"
#include "bench/perf_kolo.h"
#include "bench/perf_model.h"
#include "bench/perf_options.h"
#include "bench/perf_sweep.h"

namespace {

// -t nccl: opens this rank's GPU on every rank. When some rank cannot, the first such
// rank says why in one line and every rank returns false, before kolo_init: a
// machine without a GPU or a build without NCCL fails at once, never hangs.
bool open_device_everywhere(MPI_Comm comm, std::unique_ptr<kolo::bench::CudaDevice>* device) {
  int rank = 0, size = 1;
  MPI_Comm_rank(comm, &rank);
  MPI_Comm_size(comm, &size);
  std::string reason;
  *device = kolo::bench::open_cuda_device(comm, &reason);
  const int mine = *device ? size : rank;
  int first_failed = size;
  MPI_Allreduce(&mine, &first_failed, 1, MPI_INT, MPI_MIN, comm);
  if (first_failed == size) return true;
  if (rank == first_failed) {
    std::fprintf(stderr, "kolo-allreduce-perf: -t nccl: %s\n", reason.c_str());
    std::fflush(stderr);
  }
  device->reset();
  return false;
}

// The largest `value` over ranks, waiting in 1 ms sleeps: ranks outside the process
// set wait here while the set's members run, and must not take the cores they time.
int max_over_ranks_sleeping(MPI_Comm comm, int value) {
  int out = value;
  MPI_Request request;
  MPI_Iallreduce(&value, &out, 1, MPI_INT, MPI_MAX, comm, &request);
  int done = 0;
  while (MPI_Test(&request, &done, MPI_STATUS_IGNORE) == MPI_SUCCESS && !done)
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  return out;
}

int run(MPI_Comm comm, int rank, int argc, char** argv) {
  using namespace kolo::bench;
  PerfOptions options;
  std::string error;
  if (!parse_perf_options(argc, argv, &options, &error)) {
    if (rank == 0) std::fprintf(stderr, "kolo-allreduce-perf: %s\n%s", error.c_str(), perf_usage());
    return 2;
  }
  if (options.help) {
    if (rank == 0) std::printf("%s", perf_usage());
    return 0;
  }
  std::unique_ptr<CudaDevice> device;
  if (uses_device(options) && !open_device_everywhere(comm, &device)) return 2;
  if (!options.model.empty()) return run_model(comm, options, device.get());
  start_kolo(comm, options.transport, "");
  int rc = 0;
  if (options.process_set.empty()) {
    rc = run_sweep(comm, options, device.get());
  } else {  // the set's members sweep on their communicator; the others wait
    MPI_Comm members = use_process_set(comm, options.process_set);
    if (members != MPI_COMM_NULL) {
      rc = run_sweep(members, options, device.get());
      MPI_Comm_free(&members);
    }
    rc = max_over_ranks_sleeping(comm, rc);
  }
  stop_kolo(comm);
  return rc;
}

}  // namespace

int main(int argc, char** argv) {
  int provided = 0;
  if (MPI_Init_thread(&argc, &argv, MPI_THREAD_MULTIPLE, &provided) != MPI_SUCCESS) {
    std::fprintf(stderr, "kolo-allreduce-perf: MPI_Init_thread failed\n");
    return 1;
  }
  if (provided < MPI_THREAD_MULTIPLE) {
    std::fprintf(stderr, "kolo-allreduce-perf: MPI provides no MPI_THREAD_MULTIPLE (got %d)\n",
                 provided);
    MPI_Abort(MPI_COMM_WORLD, 1);
  }
  MPI_Comm comm;
  MPI_Comm_dup(MPI_COMM_WORLD, &comm);
  int rank = 0;
  MPI_Comm_rank(comm, &rank);
  int rc = run(comm, rank, argc, argv);
  MPI_Comm_free(&comm);
  MPI_Finalize();
  return rc;
}
