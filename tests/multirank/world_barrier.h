// A barrier over every rank of a test job, whichever way the job was started:
// under mpiexec, MPI_Barrier; as a socket-world job without mpiexec
// (tests/socket/socket_launch.py, which sets KOLO_TEST_BARRIER_DIR), each
// rank's MPI is a world of one, so the ranks meet in that directory instead:
// barrier k is done once every rank has created its file b<k>.<rank> there. It
// works whether or not kolo is running (some tests meet after kolo_shutdown).
// Across pretend hosts (tests/multihost/socket_host.sh) the directory is in /tmp,
// which the hosts share: only their network, /dev/shm and names are their own.
#pragma once

#include <mpi.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <thread>

namespace kolo_test {

// True in a socket-world job started without mpiexec (KOLO_TEST_BARRIER_DIR set).
inline bool socket_job() {
  const char* dir = std::getenv("KOLO_TEST_BARRIER_DIR");
  return dir != nullptr && *dir != '\0';
}

// This rank and the job's size, known before kolo_init: MPI_COMM_WORLD's under
// mpiexec; in a socket-world job (each rank's MPI a world of one), RANK and
// WORLD_SIZE, as the launcher set them.
inline int job_rank() {
  if (socket_job()) return std::atoi(std::getenv("RANK") ? std::getenv("RANK") : "0");
  int rank = 0;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  return rank;
}

inline int job_size() {
  if (socket_job()) return std::atoi(std::getenv("WORLD_SIZE") ? std::getenv("WORLD_SIZE") : "1");
  int size = 1;
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  return size;
}

inline void world_barrier() {
  if (!socket_job()) {
    MPI_Barrier(MPI_COMM_WORLD);
    return;
  }
  const char* dir = std::getenv("KOLO_TEST_BARRIER_DIR");
  static int calls = 0;  // every rank makes the same barrier calls, in order
  const int k = calls++;
  const int rank = job_rank();
  const int size = job_size();
  auto file = [&](int r) { return std::string(dir) + "/b" + std::to_string(k) + "." + std::to_string(r); };
  if (FILE* f = std::fopen(file(rank).c_str(), "w")) std::fclose(f);
  for (int r = 0; r < size; ++r) {
    while (access(file(r).c_str(), F_OK) != 0)
      std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
}

}  // namespace kolo_test
