// For Google Benchmark programs under mpiexec whose every iteration is collective:
// every rank runs the same benchmarks with the same fixed iteration counts, and
// only rank 0 reports.
#pragma once

#include <benchmark/benchmark.h>

#include <vector>

namespace kolo::bench {

// Runs the registered benchmarks; ranks other than 0 print nothing.
inline void run_reporting_on_rank0(int rank) {
  class Silent : public benchmark::BenchmarkReporter {
   public:
    bool ReportContext(const Context&) override { return true; }
    void ReportRuns(const std::vector<Run>&) override {}
  };
  if (rank == 0) {
    benchmark::RunSpecifiedBenchmarks();
    return;
  }
  Silent silent;
  benchmark::RunSpecifiedBenchmarks(&silent);
}

}  // namespace kolo::bench
