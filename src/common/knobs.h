// The knob registry: every KOLO_* environment variable, declared once.
//
// Each knob has an env name, a type, a default, the accepted values, a one-line
// doc and whether every rank must set it alike. load_config() reads them all once
// (at kolo_init), validates them, and fails with a message naming the variable and
// the accepted values. kolo-info and kolo_build_info_json() print the table.
// Horovod's knobs are the reference for meaning (HOROVOD_FUSION_THRESHOLD,
// HOROVOD_CYCLE_TIME, ...). See Note [Knobs that must agree].
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "common/status.h"

namespace kolo {

enum class LogLevel : int { kTrace = 0, kDebug = 1, kInfo = 2, kWarning = 3, kError = 4, kFatal = 5 };

struct Config {
  int64_t fusion_threshold_bytes = 64 << 20;  // KOLO_FUSION_THRESHOLD; 0 disables fusion
  double cycle_time_ms = 1.0;                 // KOLO_CYCLE_TIME_MS
  int64_t cache_capacity = 1024;              // KOLO_CACHE_CAPACITY; 0 disables the cache
  std::string timeline_path;                  // KOLO_TIMELINE; empty: no timeline
  bool timeline_mark_cycles = false;          // KOLO_TIMELINE_MARK_CYCLES
  double stall_check_seconds = 60.0;          // KOLO_STALL_CHECK_TIME_SECONDS; 0 disables
  double stall_shutdown_seconds = 0.0;        // KOLO_STALL_SHUTDOWN_TIME_SECONDS; 0 disables
  bool hierarchical_allreduce = false;        // KOLO_HIERARCHICAL_ALLREDUCE
  int thread_affinity = -1;                   // KOLO_THREAD_AFFINITY; -1: not pinned
  LogLevel log_level = LogLevel::kWarning;    // KOLO_LOG_LEVEL
  std::string transport = "auto";             // KOLO_TRANSPORT
  std::string select;                         // KOLO_SELECT: rules before the default table
  bool deterministic = false;                 // KOLO_DETERMINISTIC (docs/deterministic.md)
  int64_t flight_recorder = 1024;             // KOLO_FLIGHT_RECORDER; 0 disables
  std::string flight_recorder_dir = ".";      // KOLO_FLIGHT_RECORDER_DIR
  double peer_timeout_seconds = 10.0;         // KOLO_PEER_TIMEOUT_SECONDS; > 0
  int test_node_size = 0;                     // KOLO_TEST_NODE_SIZE (tests only); 0: real nodes
  // The data path's sizes and the transport order per size class: what the
  // autotuner changes at run time (see Note [What autotune tunes] in core/autotune.h).
  int64_t large_tensor_bytes = 1 << 20;       // KOLO_LARGE_TENSOR_BYTES
  int64_t shm_slice_bytes = 512 << 10;        // KOLO_SHM_SLICE_BYTES
  int64_t ring_segment_bytes = 256 << 10;     // KOLO_RING_SEGMENT_BYTES
  int64_t and_carry_bytes = 16 << 10;          // KOLO_AND_CARRY_BYTES (Note [Data rides with the AND])
  std::string transport_small = "auto";       // KOLO_TRANSPORT_SMALL
  std::string transport_large = "auto";       // KOLO_TRANSPORT_LARGE
  bool autotune = false;                      // KOLO_AUTOTUNE
  std::string autotune_log;                   // KOLO_AUTOTUNE_LOG (rank 0)
  int64_t autotune_warmup_samples = 3;        // KOLO_AUTOTUNE_WARMUP_SAMPLES (rank 0)
  double autotune_sample_seconds = 0.5;       // KOLO_AUTOTUNE_SAMPLE_SECONDS (rank 0)
  int64_t autotune_max_samples = 40;          // KOLO_AUTOTUNE_MAX_SAMPLES (rank 0)
  // Which world kolo_init starts, and the socket world's rendezvous
  // (transports/socket/launch_env.h says how kolo_init reads them).
  std::string world = "auto";                 // KOLO_WORLD: auto, mpi or socket
  std::string socket_ifname;                  // KOLO_SOCKET_IFNAME; empty: the store's route
  std::string store_addr;                     // KOLO_STORE_ADDR; empty: MASTER_ADDR
  int64_t store_port = 0;                     // KOLO_STORE_PORT; 0: MASTER_PORT + 1
  std::string store_dir;                      // KOLO_STORE_DIR; empty: a TCP store
  std::string job_token;                      // KOLO_JOB_TOKEN (secret: never printed)
  int64_t generation = -1;                    // KOLO_GENERATION; -1: TORCHELASTIC_RESTART_COUNT or 0
  double init_timeout_seconds = 300.0;        // KOLO_INIT_TIMEOUT_SECONDS
};

enum class KnobType { kBytes, kDouble, kInt, kBool, kString, kChoice };

// Whether ranks may set a knob differently. See Note [Knobs that must agree].
enum class Agreement { kMustAgree, kMayDiffer };

struct KnobSpec {
  const char* name;           // "KOLO_FUSION_THRESHOLD"
  KnobType type;
  const char* default_value;  // as a user would write it
  const char* accepted;       // human description of accepted values
  const char* doc;            // one line
  Agreement agreement = Agreement::kMustAgree;
  bool secret = false;        // its value is never printed (knob_values says "(set)")
  // For kolo's own tests (Note [Test-only switches]): read and agreed like every
  // knob, never listed by kolo-info or kolo_build_info_json().
  bool test_only = false;
};

// A knob's effective value in one spelling per value ("64M" and "67108864" both
// read 67108864), so that ranks compare values, not text.
struct KnobValue {
  std::string name;
  std::string value;
};

// Every knob, in a stable order; test-only ones included.
const std::vector<KnobSpec>& knob_specs();

// Looks up an environment variable; nullopt when unset. Injectable for tests.
using EnvLookup = std::function<std::optional<std::string>(const char* name)>;
EnvLookup process_env();

// Reads and validates every knob. On error *config is unchanged and the message
// names the variable, the bad value and the accepted values.
Status load_config(const EnvLookup& env, Config* config);

// The current textual value of each knob (default if unset), same order as
// knob_specs(); a secret knob that is set reads "(set)".
std::vector<std::string> knob_values(const EnvLookup& env);

// The canonical effective value of every knob that must agree, in knob_specs()
// order: what kolo_init compares across ranks.
std::vector<KnobValue> agreed_knob_values(const Config& config);

// "must agree" or "may differ".
const char* agreement_name(Agreement agreement);

// Parsers shared with the benchmark's flags. Bytes accept a plain integer or a
// K/M/G suffix (powers of 1024), e.g. "64M". Return false on malformed input.
bool parse_bytes(const std::string& text, int64_t* out);
bool parse_bool(const std::string& text, bool* out);  // 1/0, true/false, yes/no, on/off
bool parse_log_level(const std::string& text, LogLevel* out);
const char* log_level_name(LogLevel level);

// Note [Knobs that must agree]
// Every rank plans the same buckets from the same negotiated list and picks the same
// transport for each (docs/design.md, Rules, 4), so a knob that shapes the plan or
// the data path (fusion threshold, cache capacity, transport, hierarchical, stall
// shutdown) must have one value on every rank: a rank with another fusion threshold
// cuts other buckets and reduces garbage into its peers' results. kolo_init compares
// these knobs' canonical values across ranks and fails on every rank if they differ.
// A knob is "must agree" unless its row says otherwise; the ones that may differ
// change only this rank's own behaviour (what it logs, where its coordinator runs,
// how long it sleeps between polls) or are read on rank 0 alone (the timeline).

// Note [Test-only switches]
// A switch that only kolo's own tests set (KOLO_TEST_NODE_SIZE: pretend nodes on one
// machine) shapes the world as much as any knob, so it is read and agreed at init
// the same way; but a user never sees it: kolo-info and the build info leave it out,
// and docs/testing.md, not docs/knobs.md, describes it (docs/design.md, "Knobs").

}  // namespace kolo
