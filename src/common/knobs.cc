#include "common/knobs.h"

#include <cctype>
#include <charconv>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <limits>

namespace kolo {

namespace {

std::string trim(const std::string& s) {
  size_t begin = 0;
  size_t end = s.size();
  while (begin < end && std::isspace(static_cast<unsigned char>(s[begin]))) ++begin;
  while (end > begin && std::isspace(static_cast<unsigned char>(s[end - 1]))) --end;
  return s.substr(begin, end - begin);
}

std::string lower(std::string s) {
  for (char& c : s) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return s;
}

// Whole-string integer parse, no sign other than '-', no whitespace.
template <typename T>
bool parse_whole(const std::string& text, T* out) {
  const char* first = text.data();
  const char* last = first + text.size();
  T value{};
  auto [ptr, ec] = std::from_chars(first, last, value);
  if (ec != std::errc() || ptr != last || text.empty()) return false;
  *out = value;
  return true;
}

bool parse_double(const std::string& text, double* out) {
  const char* first = text.data();
  const char* last = first + text.size();
  double value = 0;
  auto [ptr, ec] = std::from_chars(first, last, value);
  if (ec != std::errc() || ptr != last || text.empty() || !std::isfinite(value)) return false;
  *out = value;
  return true;
}

bool parse_int_at_least(const std::string& text, int64_t min, int64_t max, int64_t* out) {
  int64_t v = 0;
  if (!parse_whole(text, &v) || v < min || v > max) return false;
  *out = v;
  return true;
}

bool parse_non_negative_double(const std::string& text, double* out) {
  double v = 0;
  if (!parse_double(text, &v) || v < 0) return false;
  *out = v + 0.0;  // turns -0 into +0
  return true;
}

std::string number(double v) {
  char text[32];
  std::snprintf(text, sizeof text, "%.17g", v);
  return text;
}

// One row per knob: its spec, how a (trimmed, non-empty) value lands in Config
// (false when the value is not accepted) and the canonical text of the value it
// landed as (see KnobValue).
struct Knob {
  KnobSpec spec;
  bool (*apply)(const std::string& value, Config* config);
  std::string (*canonical)(const Config& config);
};

constexpr const char* kDoubleSeconds = "a finite number >= 0 (seconds); 0 disables";

const Knob kKnobs[] = {
    {{"KOLO_FUSION_THRESHOLD", KnobType::kBytes, "64M",
      "a byte count >= 0: an integer with an optional K, M or G suffix (powers of 1024; "
      "KiB, MiB, GiB, KB, MB, GB mean the same), e.g. 1048576, 512K, 64M, 1G",
      "fusion buffer size; tensors are packed into buckets up to this many bytes; 0 "
      "disables fusion"},
     [](const std::string& v, Config* c) { return parse_bytes(v, &c->fusion_threshold_bytes); },
     [](const Config& c) { return std::to_string(c.fusion_threshold_bytes); }},
    // May differ: it only bounds how long this rank's idle coordinator sleeps before it
    // looks for a peer's doorbell again; cycles start on the doorbell and run in
    // lockstep whatever each rank's value, so it changes latency, not the plan.
    {{"KOLO_CYCLE_TIME_MS", KnobType::kDouble, "1", "a finite number >= 0 (milliseconds)",
      "longest an idle coordinator sleeps between checks for peers' cycles; it wakes at once "
      "on a local enqueue",
      Agreement::kMayDiffer},
     [](const std::string& v, Config* c) {
       return parse_non_negative_double(v, &c->cycle_time_ms);
     },
     [](const Config& c) { return number(c.cycle_time_ms); }},
    {{"KOLO_CACHE_CAPACITY", KnobType::kInt, "1024", "an integer >= 0",
      "response-cache entries; 0 disables the cache"},
     [](const std::string& v, Config* c) {
       return parse_int_at_least(v, 0, std::numeric_limits<int64_t>::max(), &c->cache_capacity);
     },
     [](const Config& c) { return std::to_string(c.cache_capacity); }},
    {{"KOLO_TIMELINE", KnobType::kString, "",
      "a file path (rank 0 writes it), a path with %r (the rank), or a directory",
      "write a Chrome-trace timeline of negotiation and execution: one file per rank with "
      "%r or a directory, else rank 0's alone",
      Agreement::kMayDiffer},  // each rank records for itself
     [](const std::string& v, Config* c) {
       c->timeline_path = v;
       return true;
     },
     [](const Config& c) { return c.timeline_path; }},
    {{"KOLO_TIMELINE_MARK_CYCLES", KnobType::kBool, "0", "1/0, true/false, yes/no, on/off",
      "mark each negotiation cycle in the timeline", Agreement::kMayDiffer},
     [](const std::string& v, Config* c) { return parse_bool(v, &c->timeline_mark_cycles); },
     [](const Config& c) { return std::string(c.timeline_mark_cycles ? "1" : "0"); }},
    {{"KOLO_STALL_CHECK_TIME_SECONDS", KnobType::kDouble, "60", kDoubleSeconds,
      "warn about names some ranks have not submitted after this long; 0 disables",
      Agreement::kMayDiffer},  // rank 0 warns; elsewhere it only hastens the slow path
     [](const std::string& v, Config* c) {
       return parse_non_negative_double(v, &c->stall_check_seconds);
     },
     [](const Config& c) { return number(c.stall_check_seconds); }},
    {{"KOLO_STALL_SHUTDOWN_TIME_SECONDS", KnobType::kDouble, "0", kDoubleSeconds,
      "fail stalled names with KOLO_ERR_STALLED after this long; 0 disables"},
     // Must agree: it decides which operations fail on every rank (rank 0 decides;
     // a value set on other ranks only would be ignored without a word).
     [](const std::string& v, Config* c) {
       return parse_non_negative_double(v, &c->stall_shutdown_seconds);
     },
     [](const Config& c) { return number(c.stall_shutdown_seconds); }},
    {{"KOLO_HIERARCHICAL_ALLREDUCE", KnobType::kBool, "0", "1/0, true/false, yes/no, on/off",
      "1: the hierarchical path (reduce-scatter within each node, allreduce across nodes "
      "on each shard, allgather within the node) for every bucket on several nodes; 0: "
      "the auto order picks it for large buckets only"},
     [](const std::string& v, Config* c) { return parse_bool(v, &c->hierarchical_allreduce); },
     [](const Config& c) { return std::string(c.hierarchical_allreduce ? "1" : "0"); }},
    {{"KOLO_THREAD_AFFINITY", KnobType::kInt, "-1", "an integer >= -1 (a core number, or -1)",
      "pin the coordinator thread to this core; -1 leaves it", Agreement::kMayDiffer},
     [](const std::string& v, Config* c) {
       int64_t core = 0;
       if (!parse_int_at_least(v, -1, std::numeric_limits<int>::max(), &core)) return false;
       c->thread_affinity = static_cast<int>(core);
       return true;
     },
     [](const Config& c) { return std::to_string(c.thread_affinity); }},
    {{"KOLO_LOG_LEVEL", KnobType::kChoice, "warning",
      "one of trace, debug, info, warning, error, fatal",
      "least severe message that kolo writes to stderr", Agreement::kMayDiffer},
     [](const std::string& v, Config* c) { return parse_log_level(v, &c->log_level); },
     [](const Config& c) { return std::string(log_level_name(c.log_level)); }},
    {{"KOLO_TRANSPORT", KnobType::kString, "auto", "auto or a transport name",
      "transport preference: auto or a transport name"},
     [](const std::string& v, Config* c) {
       c->transport = lower(v);
       return true;
     },
     [](const Config& c) { return c.transport; }},
    {{"KOLO_SELECT", KnobType::kString, "", "rules: KINDS MEMORY SIZES SPAN : T1, T2 [only]; ...",
      "selection rules tried before kolo's table (kolo-info prints the table; syntax in "
      "docs/knobs.md)"},
     [](const std::string& v, Config* c) {
       c->select = v;
       return true;
     },
     [](const Config& c) { return c.select; }},
    // Must agree: it decides which transports may serve a bucket.
    {{"KOLO_DETERMINISTIC", KnobType::kBool, "0", "1/0, true/false, yes/no, on/off",
      "1: every floating sum, average and product allreduce is reduced in rank order "
      "0..n-1 (16-bit floats in float32): the same bits whatever the transport, fusion "
      "and sizes (docs/deterministic.md)"},
     [](const std::string& v, Config* c) { return parse_bool(v, &c->deterministic); },
     [](const Config& c) { return std::string(c.deterministic ? "1" : "0"); }},
    // The flight recorder may differ between ranks: it shapes no plan and no data path.
    {{"KOLO_FLIGHT_RECORDER", KnobType::kInt, "1024",
      "an integer from 0 to 16777216 (operations); 0 disables",
      "keep this rank's last N operations (name, kind, size, state and times) and dump them on "
      "a stall, a failed peer or SIGUSR1; may differ between ranks",
      Agreement::kMayDiffer},
     [](const std::string& v, Config* c) {
       return parse_int_at_least(v, 0, int64_t{1} << 24, &c->flight_recorder);
     },
     [](const Config& c) { return std::to_string(c.flight_recorder); }},
    {{"KOLO_FLIGHT_RECORDER_DIR", KnobType::kString, ".", "a directory",
      "where each rank writes its flight recorder dump, kolo-flight-rank<R>.jsonl; may differ "
      "between ranks",
      Agreement::kMayDiffer},
     [](const std::string& v, Config* c) {
       c->flight_recorder_dir = v;
       return true;
     },
     [](const Config& c) { return c.flight_recorder_dir; }},
    // Must agree: a rank beats every fifth of its own timeout, so a peer with a
    // shorter timeout would declare a live rank dead.
    {{"KOLO_PEER_TIMEOUT_SECONDS", KnobType::kDouble, "10",
      "a finite number > 0 (seconds), at least 0.05",
      "a peer rank not heard from for this long has failed: every pending and later "
      "operation fails with KOLO_ERR_RANK_FAILED naming it (a dead process is seen sooner)"},
     [](const std::string& v, Config* c) {
       double seconds = 0;
       if (!parse_double(v, &seconds) || seconds < 0.05 || seconds > 1e6) return false;
       c->peer_timeout_seconds = seconds;
       return true;
     },
     [](const Config& c) { return number(c.peer_timeout_seconds); }},
    // Must agree: it decides which ranks share a node, hence which transports exist.
    {{"KOLO_TEST_NODE_SIZE", KnobType::kInt, "0", "an integer >= 0",
      "tests only: split one machine's ranks into pretend nodes of this many consecutive "
      "ranks (multi-node paths without a cluster); 0: real nodes",
      Agreement::kMustAgree, /*secret=*/false, /*test_only=*/true},
     [](const std::string& v, Config* c) {
       int64_t n = 0;
       if (!parse_int_at_least(v, 0, std::numeric_limits<int>::max(), &n)) return false;
       c->test_node_size = static_cast<int>(n);
       return true;
     },
     [](const Config& c) { return std::to_string(c.test_node_size); }},
    {{"KOLO_LARGE_TENSOR_BYTES", KnobType::kBytes, "1M",
      "a byte count >= 0 with an optional K, M or G suffix, e.g. 1M",
      "a host tensor of at least this many bytes is a bucket of its own, reduced in place "
      "without the fusion buffer; 0: every tensor"},
     [](const std::string& v, Config* c) { return parse_bytes(v, &c->large_tensor_bytes); },
     [](const Config& c) { return std::to_string(c.large_tensor_bytes); }},
    {{"KOLO_SHM_SLICE_BYTES", KnobType::kBytes, "512K",
      "a byte count from 4K to 64M with an optional K, M or G suffix, e.g. 512K",
      "bytes of one shared-memory slice (the shm transport's unit of pipelining)"},
     [](const std::string& v, Config* c) {
       int64_t b = 0;
       if (!parse_bytes(v, &b) || b < (4 << 10) || b > (int64_t{64} << 20)) return false;
       c->shm_slice_bytes = b;
       return true;
     },
     [](const Config& c) { return std::to_string(c.shm_slice_bytes); }},
    {{"KOLO_RING_SEGMENT_BYTES", KnobType::kBytes, "256K",
      "a byte count from 1K to 1G with an optional K, M or G suffix, e.g. 256K",
      "bytes of one pipelined segment of kolo's ring allreduce"},
     [](const std::string& v, Config* c) {
       int64_t b = 0;
       if (!parse_bytes(v, &b) || b < (1 << 10) || b > (int64_t{1} << 30)) return false;
       c->ring_segment_bytes = b;
       return true;
     },
     [](const Config& c) { return std::to_string(c.ring_segment_bytes); }},
    {{"KOLO_AND_CARRY_BYTES", KnobType::kBytes, "16K",
      "a byte count from 0 to 16K with an optional K suffix, e.g. 4K",
      "on one node, a host allreduce bucket of at most this many bytes whose tensors are "
      "all cached rides with the negotiation's AND (one shared-memory round trip, not two); "
      "0: never"},
     [](const std::string& v, Config* c) {
       int64_t b = 0;
       if (!parse_bytes(v, &b) || b < 0 || b > (16 << 10)) return false;
       c->and_carry_bytes = b;
       return true;
     },
     [](const Config& c) { return std::to_string(c.and_carry_bytes); }},
    {{"KOLO_TRANSPORT_SMALL", KnobType::kString, "auto", "auto or a transport name",
      "with KOLO_TRANSPORT=auto: the transport tried first for host buckets under 64 KiB"},
     [](const std::string& v, Config* c) {
       c->transport_small = lower(v);
       return true;
     },
     [](const Config& c) { return c.transport_small; }},
    {{"KOLO_TRANSPORT_LARGE", KnobType::kString, "auto", "auto or a transport name",
      "with KOLO_TRANSPORT=auto: the transport tried first for host buckets of 64 KiB and up"},
     [](const std::string& v, Config* c) {
       c->transport_large = lower(v);
       return true;
     },
     [](const Config& c) { return c.transport_large; }},
    {{"KOLO_AUTOTUNE", KnobType::kBool, "0", "1/0, true/false, yes/no, on/off",
      "1: tune the fusion threshold, the sizes and the transport order on the running "
      "workload (rank 0 decides, every rank applies at the same cycle), then freeze the best"},
     [](const std::string& v, Config* c) { return parse_bool(v, &c->autotune); },
     [](const Config& c) { return std::string(c.autotune ? "1" : "0"); }},
    {{"KOLO_AUTOTUNE_LOG", KnobType::kString, "", "a file path; empty for none",
      "rank 0 writes every autotune sample here as CSV; a file that ends in a frozen "
      "setting is read back at init and reused without searching",
      Agreement::kMayDiffer},  // read and written on rank 0 only
     [](const std::string& v, Config* c) {
       c->autotune_log = v;
       return true;
     },
     [](const Config& c) { return c.autotune_log; }},
    {{"KOLO_AUTOTUNE_WARMUP_SAMPLES", KnobType::kInt, "3", "an integer from 0 to 1000",
      "autotune: samples discarded at the start (rank 0)", Agreement::kMayDiffer},
     [](const std::string& v, Config* c) {
       return parse_int_at_least(v, 0, 1000, &c->autotune_warmup_samples);
     },
     [](const Config& c) { return std::to_string(c.autotune_warmup_samples); }},
    {{"KOLO_AUTOTUNE_SAMPLE_SECONDS", KnobType::kDouble, "0.5",
      "a finite number from 0.001 to 3600 (seconds)",
      "autotune: a sample ends at the first cycle end after this long (rank 0)",
      Agreement::kMayDiffer},
     [](const std::string& v, Config* c) {
       double s = 0;
       if (!parse_double(v, &s) || s < 0.001 || s > 3600) return false;
       c->autotune_sample_seconds = s;
       return true;
     },
     [](const Config& c) { return number(c.autotune_sample_seconds); }},
    {{"KOLO_AUTOTUNE_MAX_SAMPLES", KnobType::kInt, "40", "an integer from 2 to 1000",
      "autotune: the search freezes its best after at most this many scored samples (rank 0)",
      Agreement::kMayDiffer},
     [](const std::string& v, Config* c) {
       return parse_int_at_least(v, 2, 1000, &c->autotune_max_samples);
     },
     [](const Config& c) { return std::to_string(c.autotune_max_samples); }},
    // The socket world (transports/socket). All may differ: they decide how a rank
    // finds the others, and ranks that differ in them never meet (or meet alike:
    // auto and socket, or a port given and the same port derived), so comparing
    // them after the world is formed could only fail ranks that work together.
    {{"KOLO_WORLD", KnobType::kChoice, "auto", "one of auto, mpi, socket",
      "which world kolo_init starts: auto picks the socket world when torchrun's variables "
      "(MASTER_ADDR, MASTER_PORT, RANK, WORLD_SIZE) are set and no MPI launcher's are, else MPI",
      Agreement::kMayDiffer},
     [](const std::string& v, Config* c) {
       c->world = lower(v);
       return c->world == "auto" || c->world == "mpi" || c->world == "socket";
     },
     [](const Config& c) { return c.world; }},
    {{"KOLO_SOCKET_IFNAME", KnobType::kString, "", "empty, or a network interface name (e.g. eth0)",
      "socket world: listen on this interface's address; empty: the address that reaches the "
      "store (never every interface)",
      Agreement::kMayDiffer},
     [](const std::string& v, Config* c) {
       c->socket_ifname = v;
       return true;
     },
     [](const Config& c) { return c.socket_ifname; }},
    {{"KOLO_STORE_ADDR", KnobType::kString, "", "empty, or a host name or address",
      "socket world: the host of kolo's rendezvous store (a launcher that serves it for the whole "
      "job, e.g. kolorun --elastic); empty: MASTER_ADDR",
      Agreement::kMayDiffer},
     [](const std::string& v, Config* c) {
       c->store_addr = v;
       return true;
     },
     [](const Config& c) { return c.store_addr; }},
    {{"KOLO_STORE_PORT", KnobType::kInt, "0", "an integer from 0 to 65535",
      "socket world: the port of kolo's rendezvous store at KOLO_STORE_ADDR or MASTER_ADDR (rank 0 "
      "serves it unless "
      "something listens there); 0: MASTER_PORT + 1 (torchrun's own store holds MASTER_PORT)",
      Agreement::kMayDiffer},
     [](const std::string& v, Config* c) { return parse_int_at_least(v, 0, 65535, &c->store_port); },
     [](const Config& c) { return std::to_string(c.store_port); }},
    {{"KOLO_STORE_DIR", KnobType::kString, "", "empty, or a directory",
      "socket world on one host: meet through a file store in this directory (one per job) "
      "instead of a TCP store",
      Agreement::kMayDiffer},
     [](const std::string& v, Config* c) {
       c->store_dir = v;
       return true;
     },
     [](const Config& c) { return c.store_dir; }},
    {{"KOLO_JOB_TOKEN", KnobType::kString, "", "empty, or up to 256 bytes (never printed)",
      "socket world: the job's secret; a connection that does not present it is dropped. Empty: "
      "derived from the launcher's variables (keeps jobs apart, but is no secret)",
      Agreement::kMayDiffer, true},
     [](const std::string& v, Config* c) {
       c->job_token = v;
       return v.size() <= 256;
     },
     [](const Config& c) { return std::string(c.job_token.empty() ? "" : "(set)"); }},
    {{"KOLO_GENERATION", KnobType::kInt, "-1", "an integer >= -1",
      "socket world: this forming of the world (elastic jobs count up); -1: "
      "TORCHELASTIC_RESTART_COUNT, else 0",
      Agreement::kMayDiffer},
     [](const std::string& v, Config* c) {
       return parse_int_at_least(v, -1, std::numeric_limits<int64_t>::max(), &c->generation);
     },
     [](const Config& c) { return std::to_string(c.generation); }},
    {{"KOLO_INIT_TIMEOUT_SECONDS", KnobType::kDouble, "300", "a finite number > 0 (seconds)",
      "socket world: how long kolo_init waits for the store and for every rank to arrive",
      Agreement::kMayDiffer},
     [](const std::string& v, Config* c) {
       double seconds = 0;
       if (!parse_double(v, &seconds) || seconds <= 0 || seconds > 1e6) return false;
       c->init_timeout_seconds = seconds;
       return true;
     },
     [](const Config& c) { return number(c.init_timeout_seconds); }},
};

// The value a knob has under `env`: trimmed; unset or blank means the default.
std::string effective_value(const EnvLookup& env, const KnobSpec& spec) {
  const std::optional<std::string> raw = env(spec.name);
  std::string value = raw ? trim(*raw) : std::string();
  return value.empty() ? std::string(spec.default_value) : value;
}

}  // namespace

const std::vector<KnobSpec>& knob_specs() {
  static const std::vector<KnobSpec> specs = [] {
    std::vector<KnobSpec> v;
    for (const Knob& k : kKnobs) v.push_back(k.spec);
    return v;
  }();
  return specs;
}

EnvLookup process_env() {
  return [](const char* name) -> std::optional<std::string> {
    const char* v = std::getenv(name);
    if (v == nullptr) return std::nullopt;
    return std::string(v);
  };
}

Status load_config(const EnvLookup& env, Config* config) {
  Config next;
  for (const Knob& k : kKnobs) {
    const std::string value = effective_value(env, k.spec);
    // An empty string default (KOLO_TIMELINE) is applied like any other value.
    if (!k.apply(value, &next)) {
      const std::string shown = k.spec.secret ? " (value not shown)" : "=\"" + value + "\"";
      return invalid_argument(std::string(k.spec.name) + shown + " is not valid: expected " +
                              k.spec.accepted);
    }
  }
  *config = next;
  return Status::OK();
}

std::vector<KnobValue> agreed_knob_values(const Config& config) {
  std::vector<KnobValue> values;
  for (const Knob& k : kKnobs)
    if (k.spec.agreement == Agreement::kMustAgree)
      values.push_back({k.spec.name, k.canonical(config)});
  return values;
}

const char* agreement_name(Agreement agreement) {
  return agreement == Agreement::kMustAgree ? "must agree" : "may differ";
}

std::vector<std::string> knob_values(const EnvLookup& env) {
  std::vector<std::string> values;
  for (const Knob& k : kKnobs) {
    const std::string value = effective_value(env, k.spec);
    values.push_back(k.spec.secret && !value.empty() ? "(set)" : value);
  }
  return values;
}

bool parse_bytes(const std::string& input, int64_t* out) {
  const std::string text = trim(input);
  size_t digits = 0;
  while (digits < text.size() && std::isdigit(static_cast<unsigned char>(text[digits]))) ++digits;
  uint64_t number = 0;
  if (!parse_whole(text.substr(0, digits), &number)) return false;  // no digits, or overflow

  const std::string suffix = text.substr(digits);
  int shift = 0;
  if (!suffix.empty()) {
    switch (std::toupper(static_cast<unsigned char>(suffix[0]))) {
      case 'B': shift = 0; break;
      case 'K': shift = 10; break;
      case 'M': shift = 20; break;
      case 'G': shift = 30; break;
      default: return false;
    }
    const std::string rest = suffix.substr(1);
    const bool plain_bytes = suffix[0] == 'B' || suffix[0] == 'b';
    if (!(rest.empty() || (!plain_bytes && (rest == "B" || rest == "iB")))) return false;
  }
  constexpr uint64_t kMax = static_cast<uint64_t>(std::numeric_limits<int64_t>::max());
  if (number > (kMax >> shift)) return false;
  *out = static_cast<int64_t>(number << shift);
  return true;
}

bool parse_bool(const std::string& text, bool* out) {
  const std::string v = lower(trim(text));
  if (v == "1" || v == "true" || v == "yes" || v == "on") {
    *out = true;
    return true;
  }
  if (v == "0" || v == "false" || v == "no" || v == "off") {
    *out = false;
    return true;
  }
  return false;
}

bool parse_log_level(const std::string& text, LogLevel* out) {
  const std::string v = lower(trim(text));
  for (int i = static_cast<int>(LogLevel::kTrace); i <= static_cast<int>(LogLevel::kFatal); ++i) {
    if (v == log_level_name(static_cast<LogLevel>(i))) {
      *out = static_cast<LogLevel>(i);
      return true;
    }
  }
  return false;
}

const char* log_level_name(LogLevel level) {
  switch (level) {
    case LogLevel::kTrace: return "trace";
    case LogLevel::kDebug: return "debug";
    case LogLevel::kInfo: return "info";
    case LogLevel::kWarning: return "warning";
    case LogLevel::kError: return "error";
    case LogLevel::kFatal: return "fatal";
  }
  return "invalid";
}

}  // namespace kolo
