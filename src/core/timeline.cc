#include "core/timeline.h"

#include <sys/stat.h>

#include <cerrno>
#include <cstring>

namespace kolo::core {
namespace {

std::string quoted(const std::string& s) {
  std::string out = "\"";
  for (char c : s) {
    if (c == '"' || c == '\\') out += '\\';
    if (static_cast<unsigned char>(c) < 0x20) continue;
    out += c;
  }
  return out + "\"";
}

std::string number(double v) {
  char text[32];
  std::snprintf(text, sizeof(text), "%.3f", v);
  return text;
}

double micros_between(Timeline::Clock::time_point a, Timeline::Clock::time_point b) {
  return std::chrono::duration<double, std::micro>(b - a).count();
}

bool is_directory(const std::string& path) {
  struct stat st;
  return ::stat(path.c_str(), &st) == 0 && S_ISDIR(st.st_mode);
}

constexpr size_t kFlushAt = 1 << 16;
constexpr int kBucketsRow = 0;  // tensor rows are 1, 2, ...

}  // namespace

std::string timeline_file_for(const std::string& path, int rank) {
  const std::string r = std::to_string(rank);
  if (path.find("%r") != std::string::npos) {
    std::string out;
    for (size_t i = 0; i < path.size(); ++i) {
      if (path.compare(i, 2, "%r") == 0) {
        out += r;
        ++i;
      } else {
        out += path[i];
      }
    }
    return out;
  }
  if (path.empty()) return "";
  if (path.back() == '/') return path + "kolo-timeline-rank" + r + ".json";
  if (is_directory(path)) return path + "/kolo-timeline-rank" + r + ".json";
  return rank == 0 ? path : "";
}

Timeline::~Timeline() { close(); }

Status Timeline::start(const std::string& path, bool mark_cycles) {
  std::lock_guard<std::mutex> lock(mu_);
  if (started_)
    return invalid_argument("the timeline is already started (writing '" + path_ +
                            "'); stop it before starting it again");
  if (path.empty()) return invalid_argument("the timeline path is empty");
  const std::string file = timeline_file_for(path, rank_);
  if (!file.empty()) {
    file_ = std::fopen(file.c_str(), "w");
    if (file_ == nullptr)
      return invalid_argument("cannot open '" + file + "': " + std::strerror(errno));
  }
  started_ = true;
  path_ = path;
  mark_cycles_ = mark_cycles;
  if (file_ == nullptr) return Status::OK();  // Note [Timeline files]: not this rank's
  origin_ = Clock::now();
  const auto unix_us = std::chrono::duration_cast<std::chrono::microseconds>(
      std::chrono::system_clock::now().time_since_epoch());
  rows_.clear();
  first_ = true;
  buffer_ = "[\n";
  const std::string pid = std::to_string(rank_);
  event("{\"name\": \"process_name\", \"ph\": \"M\", \"pid\": " + pid +
        ", \"args\": {\"name\": \"rank " + pid + "\"}}");
  event("{\"name\": \"process_sort_index\", \"ph\": \"M\", \"pid\": " + pid +
        ", \"args\": {\"sort_index\": " + pid + "}}");
  event("{\"name\": \"kolo_clock\", \"ph\": \"M\", \"pid\": " + pid +
        ", \"args\": {\"rank\": " + pid + ", \"unix_us_at_ts0\": " +
        std::to_string(unix_us.count()) + "}}");
  event("{\"name\": \"thread_name\", \"ph\": \"M\", \"pid\": " + pid + ", \"tid\": " +
        std::to_string(kBucketsRow) + ", \"args\": {\"name\": \"buckets\"}}");
  flush();
  recording_.store(true, std::memory_order_relaxed);
  return Status::OK();
}

Status Timeline::stop() {
  std::lock_guard<std::mutex> lock(mu_);
  if (!started_) return invalid_argument("the timeline is not started");
  close_locked();
  return Status::OK();
}

void Timeline::close() {
  std::lock_guard<std::mutex> lock(mu_);
  close_locked();
}

void Timeline::close_locked() {
  started_ = false;
  recording_.store(false, std::memory_order_relaxed);
  if (file_ == nullptr) return;
  buffer_ += "\n]\n";
  flush();
  std::fclose(file_);
  file_ = nullptr;
}

int Timeline::row(const std::string& name) {
  auto it = rows_.find(name);
  if (it != rows_.end()) return it->second;
  int tid = static_cast<int>(rows_.size()) + 1;
  rows_.emplace(name, tid);
  event("{\"name\": \"thread_name\", \"ph\": \"M\", \"pid\": " + std::to_string(rank_) +
        ", \"tid\": " + std::to_string(tid) + ", \"args\": {\"name\": " + quoted(name) + "}}");
  return tid;
}

void Timeline::event(const std::string& json) {
  if (!first_) buffer_ += ",\n";
  first_ = false;
  buffer_ += json;
  if (buffer_.size() >= kFlushAt) flush();
}

void Timeline::flush() {
  if (file_ == nullptr || buffer_.empty()) return;
  std::fwrite(buffer_.data(), 1, buffer_.size(), file_);
  buffer_.clear();
}

std::string Timeline::micros(Clock::time_point t) const {
  return number(micros_between(origin_, t));
}

void Timeline::negotiated(const std::string& name, const char* collective,
                          Clock::time_point submitted, Clock::time_point ready,
                          const Straggler& straggler) {
  std::lock_guard<std::mutex> lock(mu_);
  if (file_ == nullptr) return;
  const int tid = row(name);
  event("{\"name\": \"NEGOTIATE\", \"ph\": \"X\", \"pid\": " + std::to_string(rank_) +
        ", \"tid\": " + std::to_string(tid) + ", \"ts\": " + micros(submitted) +
        ", \"dur\": " + number(micros_between(submitted, ready)) +
        ", \"args\": {\"tensor\": " + quoted(name) + ", \"collective\": " + quoted(collective) +
        ", \"straggler\": " + std::to_string(straggler.rank) +
        ", \"straggler_lag_us\": " + number(straggler.lag_us) + "}}");
}

void Timeline::bucket(const std::vector<const std::string*>& names, const BucketInfo& b) {
  std::lock_guard<std::mutex> lock(mu_);
  if (file_ == nullptr) return;
  const double us = micros_between(b.start, b.end);
  const double gbps = us > 0 ? static_cast<double>(b.bytes) / (us * 1e3) : 0.0;
  const std::string pid = std::to_string(rank_);
  const std::string ts = micros(b.start);
  const std::string dur = number(us);
  const std::string args = "\"bucket\": " + std::to_string(b.sequence) +
                           ", \"bytes\": " + std::to_string(b.bytes) +
                           ", \"tensors\": " + std::to_string(names.size()) +
                           ", \"collective\": " + quoted(b.collective) +
                           ", \"transport\": " + quoted(b.transport) + ", \"gbps\": " + number(gbps) +
                           (b.deterministic ? ", \"deterministic\": true" : "");
  const std::string activity = std::string(b.collective) + " " + b.transport +
                               (b.deterministic ? " deterministic" : "");
  event("{\"name\": " + quoted(activity) +
        ", \"cat\": \"bucket\", \"ph\": \"X\", \"pid\": " + pid + ", \"tid\": " +
        std::to_string(kBucketsRow) + ", \"ts\": " + ts + ", \"dur\": " + dur +
        ", \"args\": {" + args + "}}");
  for (const std::string* name : names) {
    event("{\"name\": \"PROCESS\", \"ph\": \"X\", \"pid\": " + pid +
          ", \"tid\": " + std::to_string(row(*name)) + ", \"ts\": " + ts + ", \"dur\": " + dur +
          ", \"args\": {" + args + "}}");
  }
}

void Timeline::cycle(uint64_t cycle, size_t ready, Clock::time_point at) {
  std::lock_guard<std::mutex> lock(mu_);
  if (file_ == nullptr || !mark_cycles_) return;
  event("{\"name\": \"CYCLE\", \"ph\": \"i\", \"s\": \"p\", \"pid\": " + std::to_string(rank_) +
        ", \"tid\": " + std::to_string(kBucketsRow) + ", \"ts\": " + micros(at) +
        ", \"args\": {\"cycle\": " + std::to_string(cycle) + ", \"ready\": " +
        std::to_string(ready) + "}}");
}

}  // namespace kolo::core
