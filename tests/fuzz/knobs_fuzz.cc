// Fuzz target: the knob parsers (src/common/knobs.h).
//
// - parse_bytes agrees with a reference written here from its documentation
//   (digits, an optional K/M/G suffix with B or iB, or a bare B; powers of 1024;
//   surrounding whitespace ignored; anything over INT64_MAX refused), on
//   acceptance and on the value.
// - parse_bool and parse_log_level accept exactly their documented words, in
//   any case, surrounded by whitespace; log_level_name gives a level's word back.
// - load_config over an environment made of the input: either every field lies
//   in its documented range, or it fails naming a variable whose value it
//   quotes, leaving the config as it was; the same environment gives the same
//   answer twice.
#include <cctype>
#include <cmath>
#include <map>
#include <string>

#include "common/knobs.h"
#include "tests/fuzz/fuzz_input.h"

namespace kolo {
namespace {

using fuzz::FuzzInput;

std::string reference_trim(const std::string& s) {
  size_t b = 0, e = s.size();
  while (b < e && std::isspace(static_cast<unsigned char>(s[b]))) ++b;
  while (e > b && std::isspace(static_cast<unsigned char>(s[e - 1]))) --e;
  return s.substr(b, e - b);
}

std::string reference_lower(std::string s) {
  for (char& c : s) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return s;
}

// The documented grammar, computed with 128-bit arithmetic so nothing can wrap.
bool reference_bytes(const std::string& input, int64_t* out) {
  const std::string t = reference_trim(input);
  size_t digits = 0;
  unsigned __int128 number = 0;
  while (digits < t.size() && t[digits] >= '0' && t[digits] <= '9') {
    number = number * 10 + static_cast<unsigned>(t[digits] - '0');
    if (number > static_cast<unsigned __int128>(INT64_MAX)) return false;
    ++digits;
  }
  if (digits == 0) return false;
  const std::string suffix = t.substr(digits);
  static const std::map<std::string, int> kShifts = {
      {"", 0},    {"B", 0},    {"b", 0},    {"K", 10},   {"k", 10},   {"KB", 10},
      {"kB", 10}, {"KiB", 10}, {"kiB", 10}, {"M", 20},   {"m", 20},   {"MB", 20},
      {"mB", 20}, {"MiB", 20}, {"miB", 20}, {"G", 30},   {"g", 30},   {"GB", 30},
      {"gB", 30}, {"GiB", 30}, {"giB", 30}};
  const auto it = kShifts.find(suffix);
  if (it == kShifts.end()) return false;
  const unsigned __int128 value = number << it->second;
  if (value > static_cast<unsigned __int128>(INT64_MAX)) return false;
  *out = static_cast<int64_t>(value);
  return true;
}

void check_bytes(const std::string& text) {
  int64_t got = -7, want = -7;
  const bool ok = parse_bytes(text, &got);
  const bool want_ok = reference_bytes(text, &want);
  KOLO_FUZZ_CHECK(ok == want_ok, "parse_bytes(\"%s\") accepted=%d, reference %d", text.c_str(),
                  ok, want_ok);
  if (ok) {
    KOLO_FUZZ_CHECK(got == want, "parse_bytes(\"%s\") = %lld, reference %lld", text.c_str(),
                    static_cast<long long>(got), static_cast<long long>(want));
  } else {
    KOLO_FUZZ_CHECK(got == -7, "parse_bytes(\"%s\") wrote its output on failure", text.c_str());
  }
}

void check_bool_and_level(const std::string& text) {
  const std::string w = reference_lower(reference_trim(text));
  bool b = false;
  const bool want_bool = w == "1" || w == "0" || w == "true" || w == "false" || w == "yes" ||
                         w == "no" || w == "on" || w == "off";
  KOLO_FUZZ_CHECK(parse_bool(text, &b) == want_bool, "parse_bool(\"%s\")", text.c_str());
  if (want_bool) {
    KOLO_FUZZ_CHECK(b == (w == "1" || w == "true" || w == "yes" || w == "on"),
                    "parse_bool(\"%s\") value", text.c_str());
  }
  LogLevel level = LogLevel::kInfo;
  if (parse_log_level(text, &level)) {
    KOLO_FUZZ_CHECK(w == log_level_name(level), "parse_log_level(\"%s\") gave %s", text.c_str(),
                    log_level_name(level));
  } else {
    KOLO_FUZZ_CHECK(w != "trace" && w != "debug" && w != "info" && w != "warning" &&
                        w != "error" && w != "fatal",
                    "parse_log_level(\"%s\") refused a level", text.c_str());
  }
}

bool same(const Config& a, const Config& b) {
  return a.fusion_threshold_bytes == b.fusion_threshold_bytes &&
         a.cycle_time_ms == b.cycle_time_ms && a.cache_capacity == b.cache_capacity &&
         a.timeline_path == b.timeline_path && a.stall_check_seconds == b.stall_check_seconds &&
         a.stall_shutdown_seconds == b.stall_shutdown_seconds &&
         a.hierarchical_allreduce == b.hierarchical_allreduce &&
         a.thread_affinity == b.thread_affinity && a.log_level == b.log_level &&
         a.transport == b.transport;
}

void check_config(FuzzInput* in) {
  const std::vector<KnobSpec>& specs = knob_specs();
  std::map<std::string, std::string> vars;
  const int64_t n = in->in_range(0, 2 * static_cast<int64_t>(specs.size()));
  for (int64_t i = 0; i < n; ++i) {
    const KnobSpec& spec = specs[in->in_range(0, static_cast<int64_t>(specs.size()) - 1)];
    vars[spec.name] = in->text(24);
  }
  const EnvLookup env = [&vars](const char* name) -> std::optional<std::string> {
    const auto it = vars.find(name);
    if (it == vars.end()) return std::nullopt;
    return it->second;
  };
  Config sentinel;
  sentinel.transport = "sentinel";
  Config config = sentinel;
  const Status s = load_config(env, &config);
  Config again = sentinel;
  KOLO_FUZZ_CHECK(load_config(env, &again).ok() == s.ok() && same(config, again),
                  "load_config is not deterministic");
  if (!s.ok()) {
    KOLO_FUZZ_CHECK(same(config, sentinel), "load_config changed the config on failure");
    bool named = false;
    for (const KnobSpec& spec : specs)
      named = named || s.message().find(spec.name) != std::string::npos;
    KOLO_FUZZ_CHECK(named, "error names no variable: %s", s.message().c_str());
    return;
  }
  KOLO_FUZZ_CHECK(config.fusion_threshold_bytes >= 0, "fusion threshold");
  KOLO_FUZZ_CHECK(std::isfinite(config.cycle_time_ms) && config.cycle_time_ms >= 0, "cycle");
  KOLO_FUZZ_CHECK(config.cache_capacity >= 0, "cache capacity");
  KOLO_FUZZ_CHECK(std::isfinite(config.stall_check_seconds) && config.stall_check_seconds >= 0 &&
                      !std::signbit(config.stall_check_seconds),
                  "stall check");
  KOLO_FUZZ_CHECK(std::isfinite(config.stall_shutdown_seconds) &&
                      config.stall_shutdown_seconds >= 0,
                  "stall shutdown");
  KOLO_FUZZ_CHECK(config.thread_affinity >= -1, "affinity");
  KOLO_FUZZ_CHECK(config.transport != "sentinel", "transport not set");
  KOLO_FUZZ_CHECK(knob_values(env).size() == specs.size(), "knob_values size");
}

}  // namespace
}  // namespace kolo

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  kolo::fuzz::FuzzInput in(data, size);
  const uint8_t mode = in.take<uint8_t>();
  if (mode % 2 == 0) {
    const std::string text = in.rest();
    kolo::check_bytes(text);
    kolo::check_bool_and_level(text);
  } else {
    kolo::check_config(&in);
  }
  return 0;
}
