#include "common/knobs.h"

#include <gtest/gtest.h>

#include <cstdlib>
#include <map>
#include <set>
#include <string>

namespace kolo {
namespace {

// An environment made of a map, injected through EnvLookup.
EnvLookup env_of(std::map<std::string, std::string> vars) {
  return [vars = std::move(vars)](const char* name) -> std::optional<std::string> {
    auto it = vars.find(name);
    if (it == vars.end()) return std::nullopt;
    return it->second;
  };
}

Config load_ok(std::map<std::string, std::string> vars) {
  Config c;
  Status s = load_config(env_of(std::move(vars)), &c);
  EXPECT_TRUE(s.ok()) << s.to_string();
  return c;
}

// Loads with one bad variable and returns the error message.
std::string load_error(const std::string& name, const std::string& value) {
  Config c;
  c.cache_capacity = 77;  // a marker: a failed load must not touch *config
  Status s = load_config(env_of({{name, value}}), &c);
  EXPECT_EQ(s.code(), Code::kInvalidArgument) << name << "=" << value;
  EXPECT_EQ(c.cache_capacity, 77);
  return s.message();
}

TEST(KnobsTest, EveryKnobIsDeclaredOnceInOrder) {
  const char* expected[] = {
      "KOLO_FUSION_THRESHOLD",         "KOLO_CYCLE_TIME_MS",
      "KOLO_CACHE_CAPACITY",           "KOLO_TIMELINE",
      "KOLO_TIMELINE_MARK_CYCLES",     "KOLO_STALL_CHECK_TIME_SECONDS",
      "KOLO_STALL_SHUTDOWN_TIME_SECONDS", "KOLO_HIERARCHICAL_ALLREDUCE",
      "KOLO_THREAD_AFFINITY",          "KOLO_LOG_LEVEL",
      "KOLO_TRANSPORT",                "KOLO_SELECT",
      "KOLO_DETERMINISTIC",
      "KOLO_FLIGHT_RECORDER",
      "KOLO_FLIGHT_RECORDER_DIR",      "KOLO_PEER_TIMEOUT_SECONDS",
      "KOLO_TEST_NODE_SIZE",
      "KOLO_LARGE_TENSOR_BYTES",       "KOLO_SHM_SLICE_BYTES",
      "KOLO_RING_SEGMENT_BYTES",       "KOLO_AND_CARRY_BYTES",
      "KOLO_TRANSPORT_SMALL",
      "KOLO_TRANSPORT_LARGE",          "KOLO_AUTOTUNE",
      "KOLO_AUTOTUNE_LOG",             "KOLO_AUTOTUNE_WARMUP_SAMPLES",
      "KOLO_AUTOTUNE_SAMPLE_SECONDS",  "KOLO_AUTOTUNE_MAX_SAMPLES",
      "KOLO_WORLD",                    "KOLO_SOCKET_IFNAME",
      "KOLO_STORE_ADDR",               "KOLO_STORE_PORT",               "KOLO_STORE_DIR",
      "KOLO_JOB_TOKEN",                "KOLO_GENERATION",
      "KOLO_INIT_TIMEOUT_SECONDS",
  };
  const auto& specs = knob_specs();
  ASSERT_EQ(specs.size(), std::size(expected));
  for (size_t i = 0; i < specs.size(); ++i) {
    EXPECT_STREQ(specs[i].name, expected[i]);
    EXPECT_NE(std::string(specs[i].doc), "");
    EXPECT_NE(std::string(specs[i].accepted), "");
  }
  EXPECT_EQ(specs[0].type, KnobType::kBytes);
  EXPECT_EQ(specs[9].type, KnobType::kChoice);
}

// The autotune knobs' ranges: a bad value names the variable and what it takes.
TEST(KnobsTest, TunedSizesAndAutotuneKnobsAreChecked) {
  EXPECT_NE(load_error("KOLO_SHM_SLICE_BYTES", "1K").find("from 4K to 64M"), std::string::npos);
  EXPECT_NE(load_error("KOLO_RING_SEGMENT_BYTES", "12").find("KOLO_RING_SEGMENT_BYTES"),
            std::string::npos);
  EXPECT_NE(load_error("KOLO_AND_CARRY_BYTES", "17K").find("from 0 to 16K"), std::string::npos);
  EXPECT_NE(load_error("KOLO_AND_CARRY_BYTES", "-1").find("KOLO_AND_CARRY_BYTES"),
            std::string::npos);
  EXPECT_EQ(load_ok({{"KOLO_AND_CARRY_BYTES", "4K"}}).and_carry_bytes, 4 << 10);
  EXPECT_EQ(load_ok({{"KOLO_AND_CARRY_BYTES", "0"}}).and_carry_bytes, 0);
  EXPECT_NE(load_error("KOLO_AUTOTUNE", "maybe").find("KOLO_AUTOTUNE=\"maybe\""), std::string::npos);
  EXPECT_NE(load_error("KOLO_AUTOTUNE_SAMPLE_SECONDS", "0").find("0.001"), std::string::npos);
  EXPECT_NE(load_error("KOLO_AUTOTUNE_MAX_SAMPLES", "1").find("from 2 to 1000"), std::string::npos);
  const Config c = load_ok({{"KOLO_LARGE_TENSOR_BYTES", "4M"}, {"KOLO_TRANSPORT_SMALL", "MPI"}});
  EXPECT_EQ(c.large_tensor_bytes, 4 << 20);
  EXPECT_EQ(c.transport_small, "mpi");
}

TEST(KnobsTest, DefaultsWhenUnset) {
  const Config c = load_ok({});
  EXPECT_EQ(c.fusion_threshold_bytes, 64 << 20);
  EXPECT_EQ(c.cycle_time_ms, 1.0);
  EXPECT_EQ(c.cache_capacity, 1024);
  EXPECT_EQ(c.timeline_path, "");
  EXPECT_FALSE(c.timeline_mark_cycles);
  EXPECT_EQ(c.stall_check_seconds, 60.0);
  EXPECT_EQ(c.stall_shutdown_seconds, 0.0);
  EXPECT_FALSE(c.hierarchical_allreduce);
  EXPECT_EQ(c.thread_affinity, -1);
  EXPECT_EQ(c.log_level, LogLevel::kWarning);
  EXPECT_EQ(c.transport, "auto");
  EXPECT_EQ(c.flight_recorder, 1024);
  EXPECT_EQ(c.flight_recorder_dir, ".");
  EXPECT_EQ(c.peer_timeout_seconds, 10.0);
  EXPECT_EQ(c.test_node_size, 0);
  EXPECT_EQ(c.large_tensor_bytes, 1 << 20);
  EXPECT_EQ(c.shm_slice_bytes, 512 << 10);
  EXPECT_EQ(c.ring_segment_bytes, 256 << 10);
  EXPECT_EQ(c.and_carry_bytes, 16 << 10);
  EXPECT_EQ(c.transport_small, "auto");
  EXPECT_EQ(c.transport_large, "auto");
  EXPECT_FALSE(c.autotune);
  EXPECT_EQ(c.autotune_log, "");
  EXPECT_EQ(c.autotune_warmup_samples, 3);
  EXPECT_EQ(c.autotune_sample_seconds, 0.5);
  EXPECT_EQ(c.autotune_max_samples, 40);
  EXPECT_EQ(c.world, "auto");
  EXPECT_EQ(c.socket_ifname, "");
  EXPECT_EQ(c.store_addr, "");
  EXPECT_EQ(c.store_port, 0);
  EXPECT_EQ(c.store_dir, "");
  EXPECT_EQ(c.job_token, "");
  EXPECT_EQ(c.generation, -1);
  EXPECT_EQ(c.init_timeout_seconds, 300.0);

  const std::vector<std::string> values = knob_values(env_of({}));
  const std::vector<std::string> expected = {"64M", "1",    "1024",    "",     "0",
                                             "60",  "0",    "0",       "-1",   "warning",
                                             "auto", "",   "0",    "1024", ".",      "10",
                                             "0",   "1M",   "512K",    "256K", "16K",
                                             "auto",
                                             "auto", "0",   "",        "3",    "0.5",
                                             "40",  "auto", "",        "",     "0",    "",
                                             "",    "-1",   "300"};
  EXPECT_EQ(values, expected);
}

TEST(KnobsTest, PeerTimeoutIsPositive) {
  EXPECT_EQ(load_ok({{"KOLO_PEER_TIMEOUT_SECONDS", "2.5"}}).peer_timeout_seconds, 2.5);
  for (const char* bad : {"0", "-1", "0.01", "soon", "nan"}) {
    Config c;
    Status s = load_config(env_of({{"KOLO_PEER_TIMEOUT_SECONDS", bad}}), &c);
    EXPECT_EQ(s.code(), Code::kInvalidArgument) << bad;
    EXPECT_NE(s.message().find("KOLO_PEER_TIMEOUT_SECONDS"), std::string::npos) << s.message();
  }
}

// KOLO_TEST_NODE_SIZE is read through the registry like every knob (not getenv).
TEST(KnobsTest, TestNodeSizeIsANonNegativeInteger) {
  EXPECT_EQ(load_ok({}).test_node_size, 0);
  EXPECT_EQ(load_ok({{"KOLO_TEST_NODE_SIZE", "2"}}).test_node_size, 2);
  for (const char* bad : {"-1", "two", "1.5"}) {
    Config c;
    Status s = load_config(env_of({{"KOLO_TEST_NODE_SIZE", bad}}), &c);
    EXPECT_EQ(s.code(), Code::kInvalidArgument) << bad;
    EXPECT_NE(s.message().find("KOLO_TEST_NODE_SIZE"), std::string::npos) << s.message();
  }
}

TEST(KnobsTest, BlankMeansDefault) {
  const Config c = load_ok({{"KOLO_FUSION_THRESHOLD", "  "}, {"KOLO_LOG_LEVEL", ""}});
  EXPECT_EQ(c.fusion_threshold_bytes, 64 << 20);
  EXPECT_EQ(c.log_level, LogLevel::kWarning);
}

TEST(KnobsTest, ValidValues) {
  const Config c = load_ok({
      {"KOLO_FUSION_THRESHOLD", " 512K\t"},
      {"KOLO_CYCLE_TIME_MS", "0.25"},
      {"KOLO_CACHE_CAPACITY", "0"},
      {"KOLO_TIMELINE", " /tmp/kolo timeline.json \n"},
      {"KOLO_STALL_CHECK_TIME_SECONDS", "0"},
      {"KOLO_STALL_SHUTDOWN_TIME_SECONDS", "120.5"},
      {"KOLO_HIERARCHICAL_ALLREDUCE", "Yes"},
      {"KOLO_THREAD_AFFINITY", "3"},
      {"KOLO_LOG_LEVEL", "DEBUG"},
      {"KOLO_TRANSPORT", " MPI "},
      {"KOLO_FLIGHT_RECORDER", "0"},
      {"KOLO_FLIGHT_RECORDER_DIR", "/tmp/dumps"},
  });
  EXPECT_EQ(c.fusion_threshold_bytes, 512 * 1024);
  EXPECT_EQ(c.cycle_time_ms, 0.25);
  EXPECT_EQ(c.cache_capacity, 0);
  EXPECT_EQ(c.timeline_path, "/tmp/kolo timeline.json");
  EXPECT_EQ(c.stall_check_seconds, 0.0);
  EXPECT_EQ(c.stall_shutdown_seconds, 120.5);
  EXPECT_TRUE(c.hierarchical_allreduce);
  EXPECT_EQ(c.thread_affinity, 3);
  EXPECT_EQ(c.log_level, LogLevel::kDebug);
  EXPECT_EQ(c.transport, "mpi");
  EXPECT_EQ(c.flight_recorder, 0);
  EXPECT_EQ(c.flight_recorder_dir, "/tmp/dumps");

  EXPECT_EQ(load_ok({{"KOLO_FUSION_THRESHOLD", "0"}}).fusion_threshold_bytes, 0);
  EXPECT_EQ(load_ok({{"KOLO_THREAD_AFFINITY", "-1"}}).thread_affinity, -1);
  EXPECT_EQ(load_ok({{"KOLO_LOG_LEVEL", "trace"}}).log_level, LogLevel::kTrace);
  EXPECT_EQ(load_ok({{"KOLO_LOG_LEVEL", "fatal"}}).log_level, LogLevel::kFatal);
  EXPECT_FALSE(load_ok({{"KOLO_HIERARCHICAL_ALLREDUCE", "off"}}).hierarchical_allreduce);
  EXPECT_TRUE(load_ok({{"KOLO_DETERMINISTIC", "1"}}).deterministic);
  EXPECT_FALSE(load_ok({}).deterministic);
  EXPECT_EQ(load_ok({{"KOLO_CYCLE_TIME_MS", "5"}}).cycle_time_ms, 5.0);

  const std::vector<std::string> values = knob_values(env_of({{"KOLO_CACHE_CAPACITY", " 8 "}}));
  EXPECT_EQ(values[2], "8");
}

TEST(KnobsTest, InvalidValuesNameVariableValueAndAcceptedValues) {
  struct Case {
    const char* name;
    const char* value;
    const char* accepted_fragment;
  };
  const Case cases[] = {
      {"KOLO_FUSION_THRESHOLD", "banana", "K, M or G"},
      {"KOLO_FUSION_THRESHOLD", "-1", "byte count >= 0"},
      {"KOLO_FUSION_THRESHOLD", "99999999999G", "byte count"},
      {"KOLO_CYCLE_TIME_MS", "-0.5", "number >= 0"},
      {"KOLO_CYCLE_TIME_MS", "1ms", "number >= 0"},
      {"KOLO_CYCLE_TIME_MS", "nan", "number >= 0"},
      {"KOLO_CACHE_CAPACITY", "-1", "integer >= 0"},
      {"KOLO_CACHE_CAPACITY", "1.5", "integer >= 0"},
      {"KOLO_STALL_CHECK_TIME_SECONDS", "soon", "number >= 0"},
      {"KOLO_STALL_SHUTDOWN_TIME_SECONDS", "-3", "number >= 0"},
      {"KOLO_HIERARCHICAL_ALLREDUCE", "maybe", "true/false"},
      {"KOLO_THREAD_AFFINITY", "-2", "integer >= -1"},
      {"KOLO_THREAD_AFFINITY", "99999999999", "integer >= -1"},
      {"KOLO_LOG_LEVEL", "loud", "trace, debug, info, warning, error, fatal"},
      {"KOLO_FLIGHT_RECORDER", "-1", "integer from 0 to 16777216"},
      {"KOLO_FLIGHT_RECORDER", "1e9", "integer from 0 to 16777216"},
      {"KOLO_FLIGHT_RECORDER", "99999999", "integer from 0 to 16777216"},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(std::string(c.name) + "=" + c.value);
    const std::string msg = load_error(c.name, c.value);
    EXPECT_NE(msg.find(c.name), std::string::npos) << msg;
    EXPECT_NE(msg.find(std::string("\"") + c.value + "\""), std::string::npos) << msg;
    EXPECT_NE(msg.find(c.accepted_fragment), std::string::npos) << msg;
  }
}

TEST(KnobsTest, ParseBytes) {
  struct Case {
    const char* text;
    int64_t bytes;
  };
  const Case ok[] = {
      {"0", 0},           {"1048576", 1048576},   {"64M", 64LL << 20}, {"64MiB", 64LL << 20},
      {"64MB", 64LL << 20}, {"1G", 1LL << 30},    {"512K", 512 << 10}, {"512k", 512 << 10},
      {"7B", 7},          {" 2M ", 2LL << 20},     {"8589934591G", 8589934591LL << 30},
      {"9223372036854775807", INT64_MAX},
  };
  for (const Case& c : ok) {
    int64_t out = -1;
    EXPECT_TRUE(parse_bytes(c.text, &out)) << c.text;
    EXPECT_EQ(out, c.bytes) << c.text;
  }
  const char* bad[] = {"",     "-1",  "+5",   "banana", "64X",  "64MM", "M",  "1.5M",
                       "64 M", "64Mi", "64BB", "8589934592G", "9223372036854775808",
                       "99999999999999999999999"};
  for (const char* text : bad) {
    int64_t out = 42;
    EXPECT_FALSE(parse_bytes(text, &out)) << text;
    EXPECT_EQ(out, 42) << text;
  }
}

TEST(KnobsTest, ParseBoolAndLogLevel) {
  for (const char* t : {"1", "true", "TRUE", "yes", "on", " On "}) {
    bool b = false;
    EXPECT_TRUE(parse_bool(t, &b)) << t;
    EXPECT_TRUE(b) << t;
  }
  for (const char* t : {"0", "false", "no", "off", "OFF"}) {
    bool b = true;
    EXPECT_TRUE(parse_bool(t, &b)) << t;
    EXPECT_FALSE(b) << t;
  }
  for (const char* t : {"", "2", "y", "enabled"}) {
    bool b = true;
    EXPECT_FALSE(parse_bool(t, &b)) << t;
  }
  const char* names[] = {"trace", "debug", "info", "warning", "error", "fatal"};
  for (int i = 0; i < 6; ++i) {
    const auto level = static_cast<LogLevel>(i);
    EXPECT_STREQ(log_level_name(level), names[i]);
    LogLevel parsed = LogLevel::kFatal;
    EXPECT_TRUE(parse_log_level(names[i], &parsed));
    EXPECT_EQ(parsed, level);
  }
  LogLevel parsed = LogLevel::kInfo;
  EXPECT_FALSE(parse_log_level("warn", &parsed));
  EXPECT_EQ(parsed, LogLevel::kInfo);
}

TEST(KnobsTest, ProcessEnvReadsTheEnvironment) {
  ASSERT_EQ(setenv("KOLO_KNOBS_TEST_PROBE", "x y", 1), 0);
  const EnvLookup env = process_env();
  EXPECT_EQ(env("KOLO_KNOBS_TEST_PROBE"), std::optional<std::string>("x y"));
  ASSERT_EQ(unsetenv("KOLO_KNOBS_TEST_PROBE"), 0);
  EXPECT_EQ(env("KOLO_KNOBS_TEST_PROBE"), std::nullopt);
}

// See Note [Knobs that must agree]: the knobs that may differ are the ones that
// change only the rank's own behaviour; everything else is compared at init.
TEST(KnobsTest, OnlyKnobsThatShapeNothingSharedMayDiffer) {
  std::set<std::string> may_differ;
  for (const KnobSpec& k : knob_specs())
    if (k.agreement == Agreement::kMayDiffer) may_differ.insert(k.name);
  EXPECT_EQ(may_differ, (std::set<std::string>{"KOLO_CYCLE_TIME_MS", "KOLO_TIMELINE",
                                                "KOLO_TIMELINE_MARK_CYCLES",
                                                "KOLO_STALL_CHECK_TIME_SECONDS",
                                                "KOLO_THREAD_AFFINITY", "KOLO_LOG_LEVEL",
                                                "KOLO_FLIGHT_RECORDER",
                                                "KOLO_FLIGHT_RECORDER_DIR",
                                                "KOLO_AUTOTUNE_LOG", "KOLO_AUTOTUNE_WARMUP_SAMPLES",
                                                "KOLO_AUTOTUNE_SAMPLE_SECONDS",
                                                "KOLO_AUTOTUNE_MAX_SAMPLES", "KOLO_WORLD",
                                                "KOLO_SOCKET_IFNAME", "KOLO_STORE_ADDR", "KOLO_STORE_PORT",
                                                "KOLO_STORE_DIR", "KOLO_JOB_TOKEN",
                                                "KOLO_GENERATION",
                                                "KOLO_INIT_TIMEOUT_SECONDS"}));
  std::vector<std::string> agreed;
  for (const KnobValue& v : agreed_knob_values(Config())) agreed.push_back(v.name);
  EXPECT_EQ(agreed, (std::vector<std::string>{"KOLO_FUSION_THRESHOLD", "KOLO_CACHE_CAPACITY",
                                              "KOLO_STALL_SHUTDOWN_TIME_SECONDS",
                                              "KOLO_HIERARCHICAL_ALLREDUCE", "KOLO_TRANSPORT",
                                              "KOLO_SELECT", "KOLO_DETERMINISTIC",
                                              "KOLO_PEER_TIMEOUT_SECONDS", "KOLO_TEST_NODE_SIZE",
                                              "KOLO_LARGE_TENSOR_BYTES", "KOLO_SHM_SLICE_BYTES",
                                              "KOLO_RING_SEGMENT_BYTES", "KOLO_AND_CARRY_BYTES",
                                              "KOLO_TRANSPORT_SMALL",
                                              "KOLO_TRANSPORT_LARGE", "KOLO_AUTOTUNE"}));
  EXPECT_STREQ(agreement_name(Agreement::kMustAgree), "must agree");
  EXPECT_STREQ(agreement_name(Agreement::kMayDiffer), "may differ");
}

TEST(KnobsTest, AgreedValuesAreCanonical) {
  Config a, b;
  ASSERT_TRUE(load_config([](const char* n) -> std::optional<std::string> {
                if (std::string(n) == "KOLO_FUSION_THRESHOLD") return "1K";
                if (std::string(n) == "KOLO_HIERARCHICAL_ALLREDUCE") return "yes";
                if (std::string(n) == "KOLO_STALL_SHUTDOWN_TIME_SECONDS") return "2.50";
                return std::nullopt;
              }, &a).ok());
  ASSERT_TRUE(load_config([](const char* n) -> std::optional<std::string> {
                if (std::string(n) == "KOLO_FUSION_THRESHOLD") return "1024";
                if (std::string(n) == "KOLO_HIERARCHICAL_ALLREDUCE") return "1";
                if (std::string(n) == "KOLO_STALL_SHUTDOWN_TIME_SECONDS") return "2.5";
                return std::nullopt;
              }, &b).ok());
  const auto va = agreed_knob_values(a), vb = agreed_knob_values(b);
  ASSERT_EQ(va.size(), vb.size());
  for (size_t i = 0; i < va.size(); ++i) EXPECT_EQ(va[i].value, vb[i].value) << va[i].name;
  EXPECT_EQ(va[0].value, "1024");
}

// Note [Test-only switches]: the pretend nodes shape the world, so ranks still
// compare them at init; only the listing leaves them out.
TEST(KnobsTest, TheTestOnlySwitchIsAgreedLikeAKnob) {
  Config c;
  ASSERT_TRUE(load_config([](const char* n) -> std::optional<std::string> {
                if (std::string(n) == "KOLO_TEST_NODE_SIZE") return "2";
                return std::nullopt;
              }, &c).ok());
  bool agreed = false;
  for (const KnobValue& v : agreed_knob_values(c))
    if (v.name == "KOLO_TEST_NODE_SIZE") agreed = v.value == "2";
  EXPECT_TRUE(agreed);
  for (const KnobSpec& spec : knob_specs())
    EXPECT_EQ(spec.test_only, std::string(spec.name) == "KOLO_TEST_NODE_SIZE") << spec.name;
}

// The socket world's knobs: KOLO_WORLD takes three words, and the job token is a
// secret: neither kolo-info's values nor an error message show it.
TEST(KnobsTest, TheSocketWorldsKnobsAndTheSecretToken) {
  EXPECT_NE(load_error("KOLO_WORLD", "gloo").find("one of auto, mpi, socket"), std::string::npos);
  EXPECT_NE(load_error("KOLO_STORE_PORT", "65536").find("KOLO_STORE_PORT"), std::string::npos);
  EXPECT_NE(load_error("KOLO_INIT_TIMEOUT_SECONDS", "0").find("> 0"), std::string::npos);
  const std::string long_token(300, 's');
  const std::string message = load_error("KOLO_JOB_TOKEN", long_token);
  EXPECT_NE(message.find("KOLO_JOB_TOKEN (value not shown)"), std::string::npos) << message;
  EXPECT_EQ(message.find("sss"), std::string::npos) << message;
  Config c;
  ASSERT_TRUE(load_config(env_of({{"KOLO_WORLD", "Socket"}, {"KOLO_JOB_TOKEN", "hunter2"},
                                  {"KOLO_GENERATION", "3"}}), &c).ok());
  EXPECT_EQ(c.world, "socket");
  EXPECT_EQ(c.job_token, "hunter2");
  EXPECT_EQ(c.generation, 3);
  const auto values = knob_values(env_of({{"KOLO_JOB_TOKEN", "hunter2"}}));
  const auto& specs = knob_specs();
  for (size_t i = 0; i < specs.size(); ++i) {
    EXPECT_EQ(values[i].find("hunter2"), std::string::npos) << specs[i].name;
    if (std::string(specs[i].name) == "KOLO_JOB_TOKEN") {
      EXPECT_EQ(values[i], "(set)");
    }
  }
}

}  // namespace
}  // namespace kolo
