#include "common/logging.h"

#include <unistd.h>

#include <atomic>
#include <cctype>
#include <cerrno>
#include <string>

namespace kolo::log {

namespace {

std::atomic<int> g_level{static_cast<int>(LogLevel::kWarning)};
std::atomic<int> g_rank{-1};  // -1: not known yet, printed as "?"

// One write(2) per line, so that lines from several threads (and ranks sharing a
// terminal) do not interleave; retried only for EINTR and short writes.
void write_all(const std::string& text) {
  const char* p = text.data();
  size_t left = text.size();
  while (left > 0) {
    const ssize_t n = ::write(STDERR_FILENO, p, left);
    if (n < 0) {
      if (errno == EINTR) continue;
      return;  // nowhere left to report it
    }
    p += n;
    left -= static_cast<size_t>(n);
  }
}

}  // namespace

void set_level(LogLevel level) { g_level.store(static_cast<int>(level), std::memory_order_relaxed); }

LogLevel level() { return static_cast<LogLevel>(g_level.load(std::memory_order_relaxed)); }

void set_rank(int rank) { g_rank.store(rank, std::memory_order_relaxed); }

bool enabled(LogLevel level) {
  return static_cast<int>(level) >= g_level.load(std::memory_order_relaxed);
}

Line::~Line() {
  std::string name = log_level_name(level_);
  for (char& c : name) c = static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
  const int rank = g_rank.load(std::memory_order_relaxed);
  std::string line = "[kolo " + name + " rank " + (rank < 0 ? std::string("?") : std::to_string(rank)) +
                     "] " + os_.str();
  if (line.empty() || line.back() != '\n') line.push_back('\n');
  write_all(line);
}

}  // namespace kolo::log
