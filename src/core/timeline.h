// Timeline: a Chrome-trace (chrome://tracing, Perfetto) record of what the
// coordinator did, written when KOLO_TIMELINE names a file (rank 0 only, like
// Horovod's HOROVOD_TIMELINE).
//
// One row per tensor name: NEGOTIATE spans from when the coordinator picked the
// request up to when it was ready on every rank; then the bucket that carried it
// appears as a complete event (PROCESS) with the bucket's sequence number, size,
// tensor count and transport. Coordinator thread only; buffered and flushed as it
// grows and at close.
#pragma once

#include <chrono>
#include <cstdint>
#include <cstdio>
#include <string>
#include <unordered_map>
#include <vector>

#include "common/status.h"

namespace kolo::core {

class Timeline {
 public:
  using Clock = std::chrono::steady_clock;

  Timeline() = default;
  ~Timeline();
  Timeline(const Timeline&) = delete;
  Timeline& operator=(const Timeline&) = delete;

  // Starts writing to `path`. An empty path leaves the timeline off.
  Status open(const std::string& path);
  bool enabled() const { return file_ != nullptr; }

  void negotiate_start(const std::string& name);
  void negotiate_end(const std::string& name);
  void bucket(const std::vector<std::string>& names, uint64_t sequence, size_t bytes,
              const char* collective, Clock::time_point start, Clock::time_point end);

  void close();

 private:
  int row(const std::string& name);  // the tid of the tensor's row
  void event(const std::string& json);
  void flush();

  std::FILE* file_ = nullptr;
  std::string buffer_;
  bool first_ = true;
  Clock::time_point origin_;
  std::unordered_map<std::string, int> rows_;
};

}  // namespace kolo::core
