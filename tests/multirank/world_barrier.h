// A barrier over every rank of a test job, whichever way the job was started:
// under mpiexec, MPI_Barrier; as a socket-world job without mpiexec
// (tests/socket/socket_launch.py, which sets KOLO_TEST_BARRIER_DIR), each
// rank's MPI is a world of one, so the ranks meet in that directory instead:
// barrier k is done once every rank has created its file b<k>.<rank> there. It
// works whether or not kolo is running (some tests meet after kolo_shutdown).
#pragma once

#include <mpi.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <thread>

namespace kolo_test {

inline void world_barrier() {
  const char* dir = std::getenv("KOLO_TEST_BARRIER_DIR");
  if (dir == nullptr || *dir == '\0') {
    MPI_Barrier(MPI_COMM_WORLD);
    return;
  }
  static int calls = 0;  // every rank makes the same barrier calls, in order
  const int k = calls++;
  const int rank = std::atoi(std::getenv("RANK") ? std::getenv("RANK") : "0");
  const int size = std::atoi(std::getenv("WORLD_SIZE") ? std::getenv("WORLD_SIZE") : "1");
  auto file = [&](int r) { return std::string(dir) + "/b" + std::to_string(k) + "." + std::to_string(r); };
  if (FILE* f = std::fopen(file(rank).c_str(), "w")) std::fclose(f);
  for (int r = 0; r < size; ++r) {
    while (access(file(r).c_str(), F_OK) != 0)
      std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
}

}  // namespace kolo_test
