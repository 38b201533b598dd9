/* A plain MPI program for the pretend cluster's own tests (no kolo): every rank sends
 * to every other rank once (so that every UCX endpoint is used), then allreduces
 * ROUNDS times a buffer of 1 Mi doubles whose sum is exact, checks it with ==, and
 * finalizes. Exit 0 only if every sum was right. */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>

enum { kCount = 1 << 20, kRounds = 4 };

static int check(const double *sum, int size, int round) {
  /* rank r contributes r + i % 7 + round, so the sum is exact in a double */
  for (int i = 0; i < kCount; ++i) {
    double want = (double)size * (size - 1) / 2 + (double)size * (i % 7 + round);
    if (sum[i] != want) {
      fprintf(stderr, "mpi_probe: round %d element %d is %g, not %g\n", round, i, sum[i], want);
      return 1;
    }
  }
  return 0;
}

int main(int argc, char **argv) {
  MPI_Init(&argc, &argv);
  int rank, size, bad = 0;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  for (int peer = 0; peer < size; ++peer) {
    int out = rank, in = -1;
    MPI_Sendrecv(&out, 1, MPI_INT, peer, 7, &in, 1, MPI_INT, peer, 7, MPI_COMM_WORLD,
                 MPI_STATUS_IGNORE);
    if (in != peer) bad = 1;
  }
  double *mine = malloc(sizeof(double) * kCount), *sum = malloc(sizeof(double) * kCount);
  for (int round = 0; round < kRounds && mine && sum; ++round) {
    for (int i = 0; i < kCount; ++i) mine[i] = rank + i % 7 + round;
    MPI_Allreduce(mine, sum, kCount, MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD);
    bad |= check(sum, size, round);
  }
  if (!mine || !sum) bad = 1;
  int any_bad = 0;
  MPI_Allreduce(&bad, &any_bad, 1, MPI_INT, MPI_MAX, MPI_COMM_WORLD);
  if (rank == 0) printf("mpi_probe: %d ranks, %s\n", size, any_bad ? "WRONG" : "OK");
  free(mine);
  free(sum);
  MPI_Finalize();
  return any_bad;
}
