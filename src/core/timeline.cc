#include "core/timeline.h"

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

constexpr size_t kFlushAt = 1 << 16;

}  // namespace

Timeline::~Timeline() { close(); }

Status Timeline::open(const std::string& path) {
  if (path.empty()) return Status::OK();
  file_ = std::fopen(path.c_str(), "w");
  if (file_ == nullptr)
    return invalid_argument("KOLO_TIMELINE: cannot open '" + path + "': " + std::strerror(errno));
  origin_ = Clock::now();
  buffer_ = "[\n";
  return Status::OK();
}

int Timeline::row(const std::string& name) {
  auto it = rows_.find(name);
  if (it != rows_.end()) return it->second;
  int tid = static_cast<int>(rows_.size()) + 1;
  rows_.emplace(name, tid);
  event("{\"name\": \"thread_name\", \"ph\": \"M\", \"pid\": 0, \"tid\": " + std::to_string(tid) +
        ", \"args\": {\"name\": " + quoted(name) + "}}");
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

static std::string micros(Timeline::Clock::time_point t, Timeline::Clock::time_point origin) {
  return std::to_string(std::chrono::duration<double, std::micro>(t - origin).count());
}

void Timeline::negotiate_start(const std::string& name) {
  if (!enabled()) return;
  int tid = row(name);
  event("{\"name\": \"NEGOTIATE\", \"ph\": \"B\", \"pid\": 0, \"tid\": " + std::to_string(tid) +
        ", \"ts\": " + micros(Clock::now(), origin_) + "}");
}

void Timeline::negotiate_end(const std::string& name) {
  if (!enabled()) return;
  int tid = row(name);
  event("{\"name\": \"NEGOTIATE\", \"ph\": \"E\", \"pid\": 0, \"tid\": " + std::to_string(tid) +
        ", \"ts\": " + micros(Clock::now(), origin_) + "}");
}

void Timeline::bucket(const std::vector<std::string>& names, uint64_t sequence, size_t bytes,
                      const char* collective, Clock::time_point start, Clock::time_point end) {
  if (!enabled()) return;
  const std::string dur = std::to_string(std::chrono::duration<double, std::micro>(end - start).count());
  for (const std::string& name : names) {
    event("{\"name\": \"PROCESS\", \"ph\": \"X\", \"pid\": 0, \"tid\": " + std::to_string(row(name)) +
          ", \"ts\": " + micros(start, origin_) + ", \"dur\": " + dur +
          ", \"args\": {\"collective\": " + quoted(collective) + ", \"bucket\": " +
          std::to_string(sequence) + ", \"bucket_bytes\": " + std::to_string(bytes) +
          ", \"bucket_tensors\": " + std::to_string(names.size()) + "}}");
  }
}

void Timeline::close() {
  if (file_ == nullptr) return;
  buffer_ += "\n]\n";
  flush();
  std::fclose(file_);
  file_ = nullptr;
}

}  // namespace kolo::core
