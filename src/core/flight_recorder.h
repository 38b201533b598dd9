// FlightRecorder: the last N operations of one rank, for diagnosing a hang after
// the fact (KOLO_FLIGHT_RECORDER=N, 0 turns it off).
//
// Each operation gets a slot in a fixed ring the moment the coordinator picks it
// up; the slot then records each state change with its time:
//
//   submitted -> negotiated -> executing -> done | failed
//
// (an operation can fail from any state: a mismatch fails it once negotiated, a
// broken control plane while still submitted). When the ring is full the oldest
// slot is reused. Sequence numbers count this rank's submissions from 1, so on
// ranks that submit the same operations in the same order, operation #57 is the
// same on every rank — which is what tools/kolo_flight.py lines up.
//
// dump() writes the ring, oldest first, as JSON lines (see Note [Flight recorder
// dump]) — on a stall report, on a failed control plane and on SIGUSR1.
//
// Coordinator thread only: recording and dumping happen there, so the ring needs
// no lock. Recording allocates nothing: the slots are allocated at construction and
// a name is copied into a fixed field (truncated past kNameBytes, with the full
// name's length and hash kept so that long names still compare).
#pragma once

#include <chrono>
#include <cstdint>
#include <string>
#include <vector>

#include "common/status.h"
#include "core/request.h"

namespace kolo::core {

class FlightRecorder {
 public:
  using Clock = std::chrono::steady_clock;

  enum class State : uint8_t { kSubmitted, kNegotiated, kExecuting, kDone, kFailed };
  static constexpr int kNumStates = 5;
  static constexpr size_t kNameBytes = 96;

  struct Op {
    uint64_t seq = 0;  // 0: an empty slot
    uint64_t name_hash = 0;  // of a truncated name only; hash() for any
    int64_t bytes = 0;
    // Nanoseconds on Clock at which the op entered each state (index = State, with
    // done and failed sharing the last); 0 where it has not.
    int64_t at[4] = {0, 0, 0, 0};
    uint32_t name_length = 0;  // of the full name
    Code code = Code::kOk;     // the outcome once done or failed
    Collective collective = Collective::kAllreduce;
    DataType dtype = DataType::kFloat32;
    State state = State::kSubmitted;
    char name[kNameBytes];  // the first min(name_length, kNameBytes) bytes

    std::string stored_name() const {
      return std::string(name, name_length < kNameBytes ? name_length : kNameBytes);
    }
    bool truncated() const { return name_length > kNameBytes; }
    // FNV-1a of the full name: a name the slot holds whole is hashed when asked,
    // not on the path of every operation.
    uint64_t hash() const;
  };

  explicit FlightRecorder(size_t capacity);

  bool enabled() const { return !ops_.empty(); }
  size_t capacity() const { return ops_.size(); }
  uint64_t recorded() const { return next_seq_ - 1; }  // operations ever recorded

  // Records a new operation; returns its sequence number (0 when off).
  uint64_t submitted(const Request& request, Clock::time_point at);
  // Moves operation `seq` to `state` (negotiated or executing). Ignores seq 0 and
  // operations the ring has already dropped.
  void advance(uint64_t seq, State state, Clock::time_point at);
  // The operation completed at `at`: done when `code` is OK, failed otherwise.
  void finish(uint64_t seq, Code code, Clock::time_point at);
  // A whole operation, submitted at `submitted`, that was negotiated, executed
  // and done by `done` (Note [A call alone] in coordinator.h): one record.
  void completed(const Request& request, Clock::time_point submitted, Clock::time_point done);

  // The operation with this number, or null if it is not (or no longer) held.
  const Op* find(uint64_t seq) const;
  // The held operations, oldest first.
  std::vector<const Op*> ops() const;

  struct DumpInfo {
    int rank = 0;
    int size = 1;
    std::string reason;
    Clock::time_point last_submission{};  // epoch: nothing submitted yet
  };
  // The dump as text: a header line, then one line per held operation.
  std::string to_json_lines(const DumpInfo& info, Clock::time_point now) const;
  // Writes to_json_lines() to `path` (through a temporary file and a rename, so a
  // reader never sees half a dump).
  Status dump(const std::string& path, const DumpInfo& info) const;

 private:
  Op* slot(uint64_t seq);

  std::vector<Op> ops_;
  uint64_t next_seq_ = 1;
};

const char* state_name(FlightRecorder::State state);

// Where rank `rank` dumps: "<dir>/kolo-flight-rank<rank>.jsonl" ("." for an empty dir).
std::string flight_dump_path(const std::string& dir, int rank);

// SIGUSR1 asks every recorder in the process to dump. The handler only counts
// (async-signal-safe) and chains to the handler that was installed before it, if
// any (MPICH installs one); each coordinator compares dump_signals() with the
// count it last saw and dumps on its own thread. Installs are counted; the last
// uninstall puts the previous disposition back. install returns false if
// sigaction fails.
bool install_dump_signal();
void uninstall_dump_signal();
uint32_t dump_signals();

// Note [Flight recorder dump]
// JSON lines, so a dump can be read with any JSON parser line by line, and a
// truncated file loses only its tail. Line 1 describes the dump:
//   {"kolo_flight_recorder": 1, "rank": R, "size": S, "reason": "...", "pid": P,
//    "host": "...", "time": T, "capacity": N, "recorded": K, "idle_s": I}
// (time: Unix seconds; recorded: operations ever recorded, of which the last
// min(K, N) follow; idle_s: seconds since the last submission, null if none).
// Then one line per operation, oldest first:
//   {"seq": 57, "name": "grad/w1", "name_length": 7, "name_hash": "...",
//    "kind": "allreduce", "bytes": 4096, "dtype": "float32", "state": "done",
//    "status": "KOLO_OK", "submitted": T, "negotiated": T, "executing": T,
//    "finished": T}
// Times are Unix seconds (microsecond precision), null for states not reached;
// status is null until the operation finishes. A name longer than the recorder
// keeps is cut and flagged by "name_length"; "name_hash" (FNV-1a of the full
// name, hex) tells two cut names apart.

}  // namespace kolo::core
