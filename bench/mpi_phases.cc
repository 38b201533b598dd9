// kolo-mpi-phases: MPICH's node-aware allreduce taken apart, timed phase by phase on
// every rank (issue #16: why MPI_Allreduce on 2 hosts x 2 ranks is slower than the
// scaling model says). No kolo: MPI alone.
//
// MPICH 4.0.2 (ch4) runs an allreduce that spans nodes as a composition: reduce to one
// leader per node in shared memory, allreduce among the leaders, broadcast back. This
// program runs the same three calls itself, on a node communicator and a leaders'
// communicator, and times each on each rank:
//   reduce   MPI_Reduce to node rank 0 on the node communicator
//   leaders  MPI_Allreduce on the leaders' communicator (node rank 0 of each node;
//            the other ranks skip it and are already waiting in the broadcast)
//   bcast    MPI_Bcast from node rank 0 on the node communicator
// and, in its own loop, the whole MPI_Allreduce on MPI_COMM_WORLD. Every iteration
// starts after a barrier. Per size it prints each phase's median (over iterations)
// on every rank, the median of the slowest rank's sum of the three, and the median
// of the slowest rank's whole MPI_Allreduce; correctness is checked in the same run
// (float32 sums of small integers: exact).
//
// The node communicator is MPI_Comm_split_type(SHARED) (the nodes MPICH sees), or
// with --node-size G ranks r / G (pretend nodes inside one host: "1 host x 4 ranks
// as two nodes of 2"). --spin makes the program a busy neighbour instead: rank 0
// waits (sleeping) until the file FILE exists, then broadcasts one int; the other
// ranks wait for it inside MPI_Bcast, busy-polling as MPICH's ranks do. It writes
// FILE.ready once every rank is in MPI (after a barrier).
//
//   mpiexec -n P kolo-mpi-phases [--node-size G] [-b 8] [-e 8M] [-f 4] [-n 5] [-w 2]
//   mpiexec -n P kolo-mpi-phases --spin FILE
#include <mpi.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <string>
#include <vector>

namespace {

// Every MPI call goes through this: on failure it names the call and its place,
// and ends the job (a benchmark has no caller to hand a status to).
#define PHASES_MPI_CHECK(call)                                                  \
  do {                                                                          \
    int phases_rc_ = (call);                                                    \
    if (phases_rc_ != MPI_SUCCESS) {                                            \
      std::fprintf(stderr, "kolo-mpi-phases: %s failed (%d) at %s:%d\n", #call, \
                   phases_rc_, __FILE__, __LINE__);                             \
      MPI_Abort(MPI_COMM_WORLD, 1);                                             \
    }                                                                           \
  } while (0)

struct Options {
  long min_bytes = 8;
  long max_bytes = 8L << 20;
  long factor = 4;
  int iters = 5;
  int warmup = 2;
  int node_size = 0;  // 0: MPI_Comm_split_type(SHARED)
  std::string spin_file;
};

// One value of a flag: a count with an optional K, M or G suffix (powers of 1024).
long parse_count(const char* flag, const char* text) {
  char* end = nullptr;
  long v = std::strtol(text, &end, 10);
  if (*end == 'K') v <<= 10, ++end;
  else if (*end == 'M') v <<= 20, ++end;
  else if (*end == 'G') v <<= 30, ++end;
  if (end == text || *end != '\0' || v < 0) {
    std::fprintf(stderr, "kolo-mpi-phases: %s wants a count (e.g. 8, 64K, 8M), not '%s'\n",
                 flag, text);
    std::exit(2);
  }
  return v;
}

Options parse(int argc, char** argv) {
  Options o;
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    if (i + 1 >= argc) {
      std::fprintf(stderr, "kolo-mpi-phases: '%s' needs a value\n", a.c_str());
      std::exit(2);
    }
    const char* v = argv[++i];
    if (a == "-b") o.min_bytes = parse_count("-b", v);
    else if (a == "-e") o.max_bytes = parse_count("-e", v);
    else if (a == "-f") o.factor = parse_count("-f", v);
    else if (a == "-n") o.iters = static_cast<int>(parse_count("-n", v));
    else if (a == "-w") o.warmup = static_cast<int>(parse_count("-w", v));
    else if (a == "--node-size") o.node_size = static_cast<int>(parse_count(a.c_str(), v));
    else if (a == "--spin") o.spin_file = v;
    else {
      std::fprintf(stderr, "kolo-mpi-phases: unknown flag '%s'\n", a.c_str());
      std::exit(2);
    }
  }
  if (o.min_bytes < 4 || o.factor < 2 || o.iters < 1 || o.max_bytes < o.min_bytes) {
    std::fprintf(stderr, "kolo-mpi-phases: need -b >= 4, -f >= 2, -n >= 1, -e >= -b\n");
    std::exit(2);
  }
  return o;
}

bool file_exists(const std::string& path) {
  FILE* f = std::fopen(path.c_str(), "r");
  if (f) std::fclose(f);
  return f != nullptr;
}

// --spin: the busy neighbours. Rank 0 sleeps in 10 ms naps until FILE exists; the
// others busy-poll inside MPI_Bcast until rank 0 broadcasts.
void spin(const std::string& file) {
  int rank = 0;
  PHASES_MPI_CHECK(MPI_Comm_rank(MPI_COMM_WORLD, &rank));
  PHASES_MPI_CHECK(MPI_Barrier(MPI_COMM_WORLD));
  int token = 0;
  if (rank == 0) {
    FILE* ready = std::fopen((file + ".ready").c_str(), "w");
    if (ready == nullptr) {
      std::fprintf(stderr, "kolo-mpi-phases: cannot write %s.ready: %s\n", file.c_str(),
                   std::strerror(errno));
      MPI_Abort(MPI_COMM_WORLD, 1);
    }
    std::fclose(ready);
    const timespec nap{0, 10 * 1000 * 1000};
    while (!file_exists(file)) nanosleep(&nap, nullptr);
    token = 1;
  }
  PHASES_MPI_CHECK(MPI_Bcast(&token, 1, MPI_INT, 0, MPI_COMM_WORLD));
}

struct Comms {
  MPI_Comm node = MPI_COMM_NULL;
  MPI_Comm leaders = MPI_COMM_NULL;  // MPI_COMM_NULL on ranks that are not leaders
  int node_rank = 0;
};

Comms make_comms(const Options& o, int rank) {
  Comms c;
  if (o.node_size > 0) {
    PHASES_MPI_CHECK(MPI_Comm_split(MPI_COMM_WORLD, rank / o.node_size, rank, &c.node));
  } else {
    PHASES_MPI_CHECK(MPI_Comm_split_type(MPI_COMM_WORLD, MPI_COMM_TYPE_SHARED, rank,
                                         MPI_INFO_NULL, &c.node));
  }
  PHASES_MPI_CHECK(MPI_Comm_rank(c.node, &c.node_rank));
  const int color = c.node_rank == 0 ? 0 : MPI_UNDEFINED;
  PHASES_MPI_CHECK(MPI_Comm_split(MPI_COMM_WORLD, color, rank, &c.leaders));
  return c;
}

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  const size_t n = v.size();
  return n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

// Per iteration and rank: reduce, leaders, bcast (seconds), then the whole call.
struct Timings {
  std::vector<double> reduce, leaders, bcast, composed, whole;
};

// One size: warm-ups, then the timed iterations of the composition and of the
// whole MPI_Allreduce; counts wrong elements into *wrong.
Timings run_size(const Comms& c, int rank, int ranks, long count, const Options& o,
                 long* wrong) {
  std::vector<float> buf(static_cast<size_t>(count));
  const float want = static_cast<float>(ranks) * (ranks + 1) / 2;
  const int n = static_cast<int>(count);
  Timings t;
  for (int it = 0; it < o.warmup + o.iters; ++it) {
    std::fill(buf.begin(), buf.end(), static_cast<float>(rank + 1));
    PHASES_MPI_CHECK(MPI_Barrier(MPI_COMM_WORLD));
    const double t0 = MPI_Wtime();
    void* send = c.node_rank == 0 ? MPI_IN_PLACE : buf.data();
    PHASES_MPI_CHECK(MPI_Reduce(send, buf.data(), n, MPI_FLOAT, MPI_SUM, 0, c.node));
    const double t1 = MPI_Wtime();
    if (c.leaders != MPI_COMM_NULL) {
      PHASES_MPI_CHECK(
          MPI_Allreduce(MPI_IN_PLACE, buf.data(), n, MPI_FLOAT, MPI_SUM, c.leaders));
    }
    const double t2 = MPI_Wtime();
    PHASES_MPI_CHECK(MPI_Bcast(buf.data(), n, MPI_FLOAT, 0, c.node));
    const double t3 = MPI_Wtime();
    *wrong += std::count_if(buf.begin(), buf.end(), [&](float x) { return x != want; });
    std::fill(buf.begin(), buf.end(), static_cast<float>(rank + 1));
    PHASES_MPI_CHECK(MPI_Barrier(MPI_COMM_WORLD));
    const double t4 = MPI_Wtime();
    PHASES_MPI_CHECK(MPI_Allreduce(MPI_IN_PLACE, buf.data(), n, MPI_FLOAT, MPI_SUM,
                                   MPI_COMM_WORLD));
    const double t5 = MPI_Wtime();
    *wrong += std::count_if(buf.begin(), buf.end(), [&](float x) { return x != want; });
    if (it < o.warmup) continue;
    t.reduce.push_back(t1 - t0);
    t.leaders.push_back(t2 - t1);
    t.bcast.push_back(t3 - t2);
    t.composed.push_back(t3 - t0);
    t.whole.push_back(t5 - t4);
  }
  return t;
}

// The median over iterations of the slowest rank's time, on every rank.
double slowest_median(const std::vector<double>& mine) {
  std::vector<double> worst(mine.size());
  PHASES_MPI_CHECK(MPI_Allreduce(mine.data(), worst.data(), static_cast<int>(mine.size()),
                                 MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD));
  return median(worst);
}

// One line per size: each phase's median on every rank (ms), then the slowest
// rank's composed and whole medians. Rank 0 prints.
void report(long bytes, const Timings& t, int rank, int ranks, long wrong) {
  const double mine[3] = {median(t.reduce), median(t.leaders), median(t.bcast)};
  std::vector<double> all(3 * static_cast<size_t>(ranks));
  PHASES_MPI_CHECK(
      MPI_Gather(mine, 3, MPI_DOUBLE, all.data(), 3, MPI_DOUBLE, 0, MPI_COMM_WORLD));
  const double composed = slowest_median(t.composed);
  const double whole = slowest_median(t.whole);
  long wrong_all = 0;
  PHASES_MPI_CHECK(MPI_Reduce(&wrong, &wrong_all, 1, MPI_LONG, MPI_SUM, 0, MPI_COMM_WORLD));
  if (rank != 0) return;
  std::printf("%10ld", bytes);
  for (int phase = 0; phase < 3; ++phase) {
    std::printf("  ");
    for (int r = 0; r < ranks; ++r) std::printf(" %8.3f", all[3 * r + phase] * 1e3);
  }
  std::printf("   %9.3f %9.3f %6ld\n", composed * 1e3, whole * 1e3, wrong_all);
  std::fflush(stdout);
}

void print_header(const Options& o, const Comms& c, int rank, int ranks) {
  const int leader = c.node_rank == 0;
  int leaders = 0;
  PHASES_MPI_CHECK(MPI_Allreduce(&leader, &leaders, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD));
  if (rank != 0) return;
  std::printf("# kolo-mpi-phases: %d ranks, %d nodes (%s), float32 sum, %d iterations "
              "after %d warm-ups; medians in ms\n",
              ranks, leaders,
              o.node_size > 0 ? ("--node-size " + std::to_string(o.node_size)).c_str()
                              : "MPI_COMM_TYPE_SHARED",
              o.iters, o.warmup);
  std::printf("# columns: bytes, reduce on ranks 0..%d, leaders on ranks 0..%d, bcast on "
              "ranks 0..%d, composed (slowest rank), MPI_Allreduce (slowest rank), wrong\n",
              ranks - 1, ranks - 1, ranks - 1);
}

}  // namespace

int main(int argc, char** argv) {
  PHASES_MPI_CHECK(MPI_Init(&argc, &argv));
  const Options o = parse(argc, argv);
  if (!o.spin_file.empty()) {
    spin(o.spin_file);
    PHASES_MPI_CHECK(MPI_Finalize());
    return 0;
  }
  int rank = 0, ranks = 0;
  PHASES_MPI_CHECK(MPI_Comm_rank(MPI_COMM_WORLD, &rank));
  PHASES_MPI_CHECK(MPI_Comm_size(MPI_COMM_WORLD, &ranks));
  const Comms c = make_comms(o, rank);
  print_header(o, c, rank, ranks);
  long wrong_total = 0;
  for (long bytes = o.min_bytes; bytes <= o.max_bytes; bytes *= o.factor) {
    long wrong = 0;
    const Timings t = run_size(c, rank, ranks, bytes / 4, o, &wrong);
    report(bytes, t, rank, ranks, wrong);
    wrong_total += wrong;
  }
  long wrong_all = 0;
  PHASES_MPI_CHECK(MPI_Allreduce(&wrong_total, &wrong_all, 1, MPI_LONG, MPI_SUM, MPI_COMM_WORLD));
  if (rank == 0 && wrong_all) std::printf("FAILED: %ld wrong elements\n", wrong_all);
  PHASES_MPI_CHECK(MPI_Finalize());
  return wrong_all ? 1 : 0;
}
