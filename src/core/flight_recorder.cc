#include "core/flight_recorder.h"

#include <signal.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <cinttypes>
#include <cstdio>
#include <cstring>
#include <mutex>

#include "common/dtype.h"

namespace kolo::core {
namespace {

int64_t nanos(FlightRecorder::Clock::time_point t) {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(t.time_since_epoch()).count();
}

uint64_t fnv1a(std::string_view s) {
  uint64_t h = 14695981039346656037ull;
  for (unsigned char c : s) {
    h ^= c;
    h *= 1099511628211ull;
  }
  return h;
}

void append_quoted(std::string* out, const char* s, size_t n) {
  out->push_back('"');
  for (size_t i = 0; i < n; ++i) {
    const unsigned char c = static_cast<unsigned char>(s[i]);
    if (c == '"' || c == '\\') {
      out->push_back('\\');
      out->push_back(static_cast<char>(c));
    } else if (c < 0x20) {
      char esc[8];
      std::snprintf(esc, sizeof(esc), "\\u%04x", c);
      out->append(esc);
    } else {
      out->push_back(static_cast<char>(c));
    }
  }
  out->push_back('"');
}

void append_quoted(std::string* out, const std::string& s) {
  append_quoted(out, s.data(), s.size());
}

// Steady-clock nanoseconds as Unix seconds, by the offset between the clocks now.
class WallTime {
 public:
  explicit WallTime(FlightRecorder::Clock::time_point now)
      : steady_now_(nanos(now)),
        wall_now_(std::chrono::duration_cast<std::chrono::nanoseconds>(
                      std::chrono::system_clock::now().time_since_epoch())
                      .count()) {}
  void append(std::string* out, int64_t steady_ns) const {
    if (steady_ns == 0) {
      out->append("null");
      return;
    }
    const int64_t wall_us = (wall_now_ - (steady_now_ - steady_ns)) / 1000;
    char text[40];
    std::snprintf(text, sizeof(text), "%" PRId64 ".%06" PRId64, wall_us / 1000000,
                  wall_us % 1000000);
    out->append(text);
  }

 private:
  int64_t steady_now_;
  int64_t wall_now_;
};

void append_op(std::string* out, const FlightRecorder::Op& op, const WallTime& wall) {
  char hash[24];
  std::snprintf(hash, sizeof(hash), "%016" PRIx64, op.hash());
  *out += "{\"seq\": " + std::to_string(op.seq) + ", \"name\": ";
  append_quoted(
      out, op.name,
      op.name_length < FlightRecorder::kNameBytes ? op.name_length : FlightRecorder::kNameBytes);
  *out += ", \"name_length\": " + std::to_string(op.name_length) + ", \"name_hash\": \"" + hash +
          "\", \"kind\": \"" + collective_name(op.collective) +
          "\", \"bytes\": " + std::to_string(op.bytes) + ", \"dtype\": \"" + dtype_name(op.dtype) +
          "\", \"state\": \"" + state_name(op.state) + "\", \"status\": ";
  const bool finished =
      op.state == FlightRecorder::State::kDone || op.state == FlightRecorder::State::kFailed;
  if (finished)
    *out += std::string("\"") + code_name(op.code) + "\"";
  else
    *out += "null";
  static const char* const kTimes[] = {"submitted", "negotiated", "executing", "finished"};
  for (int i = 0; i < 4; ++i) {
    *out += std::string(", \"") + kTimes[i] + "\": ";
    wall.append(out, op.at[i]);
  }
  *out += "}\n";
}

std::string host_name() {
  char host[256] = {0};
  if (gethostname(host, sizeof(host) - 1) != 0) return "";
  return host;
}

}  // namespace

FlightRecorder::FlightRecorder(size_t capacity) : ops_(capacity) {}

FlightRecorder::Op* FlightRecorder::slot(uint64_t seq) {
  if (seq == 0 || ops_.empty()) return nullptr;
  Op& op = ops_[(seq - 1) % ops_.size()];
  return op.seq == seq ? &op : nullptr;
}

const FlightRecorder::Op* FlightRecorder::find(uint64_t seq) const {
  return const_cast<FlightRecorder*>(this)->slot(seq);
}

uint64_t FlightRecorder::submitted(const Request& request, Clock::time_point at) {
  if (ops_.empty()) return 0;
  const uint64_t seq = next_seq_++;
  Op& op = ops_[(seq - 1) % ops_.size()];
  op.seq = seq;
  op.name_length = static_cast<uint32_t>(request.name.size());
  std::memcpy(op.name, request.name.data(), std::min(request.name.size(), kNameBytes));
  op.name_hash = op.truncated() ? fnv1a(request.name) : 0;
  op.bytes = static_cast<int64_t>(request.params.bytes());
  op.collective = request.params.collective;
  op.dtype = request.params.dtype;
  op.state = State::kSubmitted;
  op.code = Code::kOk;
  op.at[0] = nanos(at);
  op.at[1] = op.at[2] = op.at[3] = 0;
  return seq;
}

void FlightRecorder::completed(const Request& request, Clock::time_point submitted,
                               Clock::time_point done) {
  Op* op = slot(this->submitted(request, submitted));
  if (op == nullptr) return;
  op->state = State::kDone;
  op->at[1] = op->at[2] = op->at[3] = nanos(done);
}

uint64_t FlightRecorder::Op::hash() const {
  return truncated() ? name_hash : fnv1a(std::string_view(name, name_length));
}

void FlightRecorder::advance(uint64_t seq, State state, Clock::time_point at) {
  Op* op = slot(seq);
  if (op == nullptr || state == State::kSubmitted || state >= State::kDone) return;
  op->state = state;
  op->at[static_cast<int>(state)] = nanos(at);
}

void FlightRecorder::finish(uint64_t seq, Code code, Clock::time_point at) {
  Op* op = slot(seq);
  if (op == nullptr) return;
  op->state = code == Code::kOk ? State::kDone : State::kFailed;
  op->code = code;
  op->at[3] = nanos(at);
}

std::vector<const FlightRecorder::Op*> FlightRecorder::ops() const {
  std::vector<const Op*> out;
  const uint64_t last = next_seq_ - 1;
  const uint64_t first = last > ops_.size() ? last - ops_.size() + 1 : 1;
  for (uint64_t seq = first; seq <= last; ++seq)
    if (const Op* op = find(seq)) out.push_back(op);
  return out;
}

std::string FlightRecorder::to_json_lines(const DumpInfo& info, Clock::time_point now) const {
  const WallTime wall(now);
  std::string out = "{\"kolo_flight_recorder\": 1, \"rank\": " + std::to_string(info.rank) +
                    ", \"size\": " + std::to_string(info.size) + ", \"reason\": ";
  append_quoted(&out, info.reason);
  out += ", \"pid\": " + std::to_string(static_cast<long>(getpid())) + ", \"host\": ";
  append_quoted(&out, host_name());
  out += ", \"time\": ";
  wall.append(&out, nanos(now));
  out += ", \"capacity\": " + std::to_string(capacity()) +
         ", \"recorded\": " + std::to_string(recorded()) + ", \"idle_s\": ";
  if (info.last_submission == Clock::time_point{}) {
    out += "null";
  } else {
    char idle[32];
    std::snprintf(idle, sizeof(idle), "%.3f",
                  std::chrono::duration<double>(now - info.last_submission).count());
    out += idle;
  }
  out += "}\n";
  for (const Op* op : ops()) append_op(&out, *op, wall);
  return out;
}

Status FlightRecorder::dump(const std::string& path, const DumpInfo& info) const {
  const std::string text = to_json_lines(info, Clock::now());
  const std::string tmp = path + ".tmp";
  std::FILE* f = std::fopen(tmp.c_str(), "w");
  if (f == nullptr)
    return Status(Code::kInvalidArgument, "cannot write '" + tmp + "': " + std::strerror(errno));
  const bool written = std::fwrite(text.data(), 1, text.size(), f) == text.size();
  const bool closed = std::fclose(f) == 0;
  if (!written || !closed || std::rename(tmp.c_str(), path.c_str()) != 0) {
    const int err = errno;
    std::remove(tmp.c_str());
    return Status(Code::kInvalidArgument, "cannot write '" + path + "': " + std::strerror(err));
  }
  return Status::OK();
}

const char* state_name(FlightRecorder::State state) {
  switch (state) {
    case FlightRecorder::State::kSubmitted:
      return "submitted";
    case FlightRecorder::State::kNegotiated:
      return "negotiated";
    case FlightRecorder::State::kExecuting:
      return "executing";
    case FlightRecorder::State::kDone:
      return "done";
    case FlightRecorder::State::kFailed:
      return "failed";
  }
  return "invalid";
}

std::string flight_dump_path(const std::string& dir, int rank) {
  std::string d = dir.empty() ? "." : dir;
  if (d.back() != '/') d.push_back('/');
  return d + "kolo-flight-rank" + std::to_string(rank) + ".jsonl";
}

namespace {

std::atomic<uint32_t> g_dump_signals{0};
static_assert(std::atomic<uint32_t>::is_always_lock_free,
              "the SIGUSR1 handler needs a lock-free counter");

std::mutex g_signal_mu;
int g_signal_users = 0;       // installs not yet uninstalled; guarded by g_signal_mu
struct sigaction g_previous;  // what SIGUSR1 did before; written before the handler is installed

void on_dump_signal(int sig, siginfo_t* info, void* context) {
  g_dump_signals.fetch_add(1, std::memory_order_relaxed);
  // Chain to a handler that was there before (MPICH's ch3 has one, to hear of
  // failed processes from its launcher); the default action and SIG_IGN are not called.
  if ((g_previous.sa_flags & SA_SIGINFO) != 0) {
    if (g_previous.sa_sigaction != nullptr) g_previous.sa_sigaction(sig, info, context);
  } else if (g_previous.sa_handler != SIG_DFL && g_previous.sa_handler != SIG_IGN) {
    g_previous.sa_handler(sig);
  }
}

}  // namespace

bool install_dump_signal() {
  std::lock_guard<std::mutex> lock(g_signal_mu);
  if (g_signal_users > 0) {
    ++g_signal_users;
    return true;
  }
  if (sigaction(SIGUSR1, nullptr, &g_previous) != 0) return false;
  struct sigaction act;
  std::memset(&act, 0, sizeof(act));
  act.sa_sigaction = on_dump_signal;
  act.sa_flags = SA_RESTART | SA_SIGINFO;
  sigemptyset(&act.sa_mask);
  if (sigaction(SIGUSR1, &act, nullptr) != 0) return false;
  g_signal_users = 1;
  return true;
}

void uninstall_dump_signal() {
  std::lock_guard<std::mutex> lock(g_signal_mu);
  if (g_signal_users == 0 || --g_signal_users > 0) return;
  // Put back what was there, unless someone has replaced kolo's handler since
  // (they may chain to it; it stays harmless).
  struct sigaction now;
  if (sigaction(SIGUSR1, nullptr, &now) == 0 && (now.sa_flags & SA_SIGINFO) != 0 &&
      now.sa_sigaction == on_dump_signal)
    sigaction(SIGUSR1, &g_previous, nullptr);
}

uint32_t dump_signals() { return g_dump_signals.load(std::memory_order_relaxed); }

}  // namespace kolo::core
