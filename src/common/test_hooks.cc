#include "common/test_hooks.h"

#include <signal.h>
#include <time.h>

#include <algorithm>
#include <cstdio>

#include <atomic>
#include <cstdlib>
#include <mutex>

namespace kolo {
namespace {

std::atomic<bool> g_armed{false};
std::mutex g_mu;
std::string g_point;
std::string g_mark;
long g_left = 0;

}  // namespace

void set_die_at(const std::string& spec) {
  std::lock_guard<std::mutex> lock(g_mu);
  const size_t at = spec.find('@');
  g_mark = at == std::string::npos ? std::string() : spec.substr(at + 1);
  const std::string head = spec.substr(0, at);
  const size_t colon = head.find(':');
  g_point = head.substr(0, colon);
  g_left = colon == std::string::npos ? 1 : std::max(1L, std::atol(head.c_str() + colon + 1));
  g_armed.store(!g_point.empty(), std::memory_order_release);
}

void test_point(const char* point) {
  if (!g_armed.load(std::memory_order_relaxed)) return;
  std::lock_guard<std::mutex> lock(g_mu);
  if (g_point != point || --g_left > 0) return;
  if (!g_mark.empty()) {
    timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    if (FILE* f = std::fopen(g_mark.c_str(), "w")) {
      std::fprintf(f, "%lld\n", static_cast<long long>(ts.tv_sec) * 1000000000LL + ts.tv_nsec);
      std::fclose(f);
    }
  }
  raise(SIGKILL);
}

}  // namespace kolo
