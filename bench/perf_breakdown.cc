#include "bench/perf_breakdown.h"

#include <time.h>

#include <algorithm>
#include <array>
#include <cstdio>
#include <vector>

namespace kolo::bench {
namespace {

// A row: the call's start, kolo's KOLO_NUM_PHASES stamps, kolo_wait's return.
constexpr int kStamps = KOLO_NUM_PHASES + 2;
using Row = std::array<int64_t, kStamps>;

// Intervals between consecutive stamps, as printed.
constexpr const char* kNames[kStamps - 1] = {
    "submit",        // call -> queued: argument checks, the queue, the doorbell
    "to_cycle",      // queued -> the cycle that negotiated it began
    "negotiate",     // that cycle: the cache's AND with every rank (or the slow path)
    "to_transport",  // negotiated -> its transport call began (planning, allocation)
    "transport",     // the transport call (host work: until done)
    "to_complete",   // transport done -> the handle completed
    "wake",          // completed -> kolo_wait returned
};

bool g_on = false;
int64_t g_call = 0;
std::vector<Row> g_rows;

int64_t now_ns() {
  timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return static_cast<int64_t>(ts.tv_sec) * 1000000000 + ts.tv_nsec;
}

double median_us(std::vector<double> v) {
  if (v.empty()) return 0;
  std::nth_element(v.begin(), v.begin() + static_cast<std::ptrdiff_t>(v.size() / 2), v.end());
  return v[v.size() / 2];
}

// Per-interval medians (and the total's) over the last `iters` rows.
std::vector<double> medians(int iters) {
  const size_t first = g_rows.size() > static_cast<size_t>(iters) ? g_rows.size() - iters : 0;
  std::vector<double> out;
  for (int i = 0; i < kStamps; ++i) {
    const int from = i < kStamps - 1 ? i : 0, to = i < kStamps - 1 ? i + 1 : kStamps - 1;
    std::vector<double> v;
    for (size_t r = first; r < g_rows.size(); ++r) {
      const Row& row = g_rows[r];
      if (row[from] != 0 && row[to] != 0) v.push_back((row[to] - row[from]) / 1e3);
    }
    out.push_back(median_us(std::move(v)));
  }
  return out;
}

}  // namespace

void breakdown_enable() { g_on = true; }
bool breakdown_enabled() { return g_on; }

void breakdown_call_started() {
  if (g_on) g_call = now_ns();
}

void breakdown_record(kolo_handle_t handle) {
  if (!g_on) return;
  const int64_t returned = now_ns();
  Row row{};
  row[0] = g_call;
  if (kolo_handle_phases(handle, row.data() + 1, KOLO_NUM_PHASES) != KOLO_OK) return;
  row[kStamps - 1] = returned;
  g_rows.push_back(row);
}

void breakdown_report(MPI_Comm comm, int iters) {
  if (!g_on) return;
  int rank = 0, size = 1;
  MPI_Comm_rank(comm, &rank);
  MPI_Comm_size(comm, &size);
  std::vector<double> mine = medians(iters);
  std::vector<double> all(mine.size() * static_cast<size_t>(size));
  MPI_Gather(mine.data(), static_cast<int>(mine.size()), MPI_DOUBLE, all.data(),
             static_cast<int>(mine.size()), MPI_DOUBLE, 0, comm);
  g_rows.clear();
  if (rank != 0) return;
  for (int r = 0; r < size; ++r) {
    std::printf("#   breakdown rank %d (median us):", r);
    for (int i = 0; i < kStamps - 1; ++i)
      std::printf(" %s %.2f", kNames[i], all[static_cast<size_t>(r) * mine.size() + i]);
    std::printf(" | total %.2f\n", all[static_cast<size_t>(r) * mine.size() + kStamps - 1]);
  }
}

}  // namespace kolo::bench
