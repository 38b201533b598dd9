#include "bench/perf_report.h"

#include <algorithm>
#include <cstdarg>

namespace kolo::bench {

double median(std::vector<double> values) {
  if (values.empty()) return 0.0;
  size_t mid = values.size() / 2;
  std::nth_element(values.begin(), values.begin() + mid, values.end());
  double upper = values[mid];
  if (values.size() % 2 == 1) return upper;
  double lower = *std::max_element(values.begin(), values.begin() + mid);
  return (lower + upper) / 2;
}

double gb_per_second(double bytes, double seconds) {
  return seconds > 0 ? bytes / seconds / 1e9 : 0.0;
}

CsvWriter::CsvWriter(const std::string& path, const std::vector<std::string>& header)
    : file_(std::fopen(path.c_str(), "w")) {
  if (file_ != nullptr) row(header);
}

CsvWriter::~CsvWriter() {
  if (file_ != nullptr) std::fclose(file_);
}

void CsvWriter::row(const std::vector<std::string>& fields) {
  if (file_ == nullptr) return;
  for (size_t i = 0; i < fields.size(); ++i) {
    std::fprintf(file_, "%s%s", i ? "," : "", fields[i].c_str());
  }
  std::fputc('\n', file_);
  std::fflush(file_);
}

std::string format(const char* fmt, ...) {
  va_list args;
  va_start(args, fmt);
  char buffer[512];
  int n = std::vsnprintf(buffer, sizeof(buffer), fmt, args);
  va_end(args);
  if (n < 0) return "";
  if (static_cast<size_t>(n) < sizeof(buffer)) return std::string(buffer, static_cast<size_t>(n));
  std::string big(static_cast<size_t>(n) + 1, '\0');
  va_start(args, fmt);
  std::vsnprintf(&big[0], big.size(), fmt, args);
  va_end(args);
  big.resize(static_cast<size_t>(n));
  return big;
}

}  // namespace kolo::bench
