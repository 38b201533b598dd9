// Timing statistics and output of kolo-allreduce-perf: nccl-tests' columns on
// stdout (rank 0 only), the same rows as CSV on request.
#pragma once

#include <chrono>
#include <cstdint>
#include <cstdio>
#include <string>
#include <vector>

namespace kolo::bench {

inline double now_seconds() {
  using Clock = std::chrono::steady_clock;
  return std::chrono::duration<double>(Clock::now().time_since_epoch()).count();
}

// Median of the values (the mean of the middle two for an even number); 0 if empty.
double median(std::vector<double> values);

// GB/s for `bytes` moved in `seconds` (GB = 1e9 bytes). The bus bandwidth factors
// are in perf_collective.h.
double gb_per_second(double bytes, double seconds);

// Rows written as CSV: a header row, then one row per call. Values are written as
// given; fields never contain commas. A writer that failed to open writes nothing
// and reports ok() == false.
class CsvWriter {
 public:
  CsvWriter() = default;
  CsvWriter(const std::string& path, const std::vector<std::string>& header);
  ~CsvWriter();
  CsvWriter(const CsvWriter&) = delete;
  CsvWriter& operator=(const CsvWriter&) = delete;

  bool ok() const { return file_ != nullptr; }
  void row(const std::vector<std::string>& fields);

 private:
  std::FILE* file_ = nullptr;
};

// printf into a std::string.
std::string format(const char* fmt, ...) __attribute__((format(printf, 1, 2)));

}  // namespace kolo::bench
