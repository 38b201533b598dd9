// The init agreement: the fingerprint of a configuration, its encoding, the verdict
// from every rank's report, and the exchange over ranks as threads.
#include "core/init_agreement.h"

#include <gtest/gtest.h>

#include <map>
#include <mutex>

#include "core/wire.h"
#include "unit/algorithms/spawn.h"

namespace kolo::core {
namespace {

bool contains(const std::string& text, const std::string& part) {
  return text.find(part) != std::string::npos;
}

Config config_of(const std::map<std::string, std::string>& vars) {
  Config c;
  Status s = load_config(
      [&vars](const char* name) -> std::optional<std::string> {
        auto it = vars.find(name);
        if (it == vars.end()) return std::nullopt;
        return it->second;
      },
      &c);
  EXPECT_TRUE(s.ok()) << s.to_string();
  return c;
}

Fingerprint fp(std::vector<KnobValue> entries) { return Fingerprint{std::move(entries)}; }

TEST(InitAgreement, DescribesRanksAsRanges) {
  EXPECT_EQ(describe_ranks({3}), "rank 3");
  EXPECT_EQ(describe_ranks({0, 1}), "ranks 0-1");
  EXPECT_EQ(describe_ranks({1, 2, 3}), "ranks 1-3");
  EXPECT_EQ(describe_ranks({0, 2, 5, 6, 7, 9}), "ranks 0, 2, 5-7, 9");
}

TEST(InitAgreement, FingerprintHoldsCanonicalValuesOfKnobsThatMustAgree) {
  const Fingerprint a = fingerprint_of(config_of({{"KOLO_FUSION_THRESHOLD", "64M"},
                                                  {"KOLO_TRANSPORT", " Auto "},
                                                  {"KOLO_HIERARCHICAL_ALLREDUCE", "off"}}));
  const Fingerprint b = fingerprint_of(config_of({{"KOLO_FUSION_THRESHOLD", "67108864"},
                                                  {"KOLO_LOG_LEVEL", "debug"},
                                                  {"KOLO_CYCLE_TIME_MS", "7"},
                                                  {"KOLO_THREAD_AFFINITY", "1"},
                                                  {"KOLO_TIMELINE", "/tmp/t.json"},
                                                  {"KOLO_STALL_CHECK_TIME_SECONDS", "3"}}));
  std::map<std::string, std::string> values;
  for (const KnobValue& e : a.entries) values[e.name] = e.value;
  EXPECT_EQ(values["KOLO_FUSION_THRESHOLD"], "67108864");
  EXPECT_EQ(values["KOLO_TRANSPORT"], "auto");
  EXPECT_EQ(values["KOLO_HIERARCHICAL_ALLREDUCE"], "0");
  EXPECT_EQ(values["KOLO_CACHE_CAPACITY"], "1024");
  EXPECT_EQ(values["KOLO_STALL_SHUTDOWN_TIME_SECONDS"], "0");
  EXPECT_EQ(values.count("KOLO_LOG_LEVEL"), 0u);  // may differ
  // Spelled differently, equal in value; knobs that may differ are left out.
  EXPECT_TRUE(init_verdict({Status::OK(), Status::OK()}, {a, b}).ok());
  const Fingerprint c = fingerprint_of(config_of({{"KOLO_CACHE_CAPACITY", "0"}}));
  EXPECT_FALSE(init_verdict({Status::OK(), Status::OK()}, {a, c}).ok());
}

TEST(InitAgreement, EqualFingerprintsAgree) {
  const Fingerprint f = fp({{"A", "1"}, {"B", "x"}});
  EXPECT_TRUE(init_verdict({Status::OK()}, {f}).ok());
  EXPECT_TRUE(init_verdict({Status::OK(), Status::OK(), Status::OK()}, {f, f, f}).ok());
}

TEST(InitAgreement, DifferenceNamesTheSettingTheValuesAndTheRanks) {
  const Fingerprint usual =
      fp({{"KOLO_FUSION_THRESHOLD", "67108864"}, {"KOLO_TRANSPORT", "auto"}});
  const Fingerprint odd = fp({{"KOLO_FUSION_THRESHOLD", "0"}, {"KOLO_TRANSPORT", "auto"}});
  const std::vector<Status> ok(3);
  // The odd rank out first, then last.
  Status first = init_verdict(ok, {odd, usual, usual});
  EXPECT_EQ(first.code(), Code::kInvalidArgument);
  EXPECT_TRUE(
      contains(first.message(), "KOLO_FUSION_THRESHOLD is 0 on rank 0, 67108864 on ranks 1-2"))
      << first.message();
  EXPECT_FALSE(contains(first.message(), "KOLO_TRANSPORT")) << first.message();
  Status last = init_verdict(ok, {usual, usual, odd});
  EXPECT_TRUE(
      contains(last.message(), "KOLO_FUSION_THRESHOLD is 67108864 on ranks 0-1, 0 on rank 2"))
      << last.message();
  // Two settings differ: both are named.
  const Fingerprint both = fp({{"KOLO_FUSION_THRESHOLD", "0"}, {"KOLO_TRANSPORT", "ring"}});
  Status two = init_verdict({Status::OK(), Status::OK()}, {usual, both});
  EXPECT_TRUE(contains(two.message(), "KOLO_FUSION_THRESHOLD is 67108864 on rank 0, 0 on rank 1; "
                                      "KOLO_TRANSPORT is auto on rank 0, ring on rank 1"))
      << two.message();
}

TEST(InitAgreement, ManyDistinctValuesAreCounted) {
  std::vector<Fingerprint> fps;
  for (int r = 0; r < 7; ++r) fps.push_back(fp({{"KOLO_CACHE_CAPACITY", std::to_string(r % 6)}}));
  Status s = init_verdict(std::vector<Status>(7), fps);
  EXPECT_TRUE(contains(s.message(), "0 on ranks 0, 6, 1 on rank 1, 2 on rank 2, 3 on rank 3, and 2 "
                                    "more values elsewhere"))
      << s.message();
}

TEST(InitAgreement, SettingAbsentOnARankIsADifference) {
  Status s =
      init_verdict(std::vector<Status>(2), {fp({{"A", "1"}, {"NEW", "2"}}), fp({{"A", "1"}})});
  EXPECT_TRUE(contains(s.message(), "NEW is 2 on rank 0, (absent) on rank 1")) << s.message();
}

TEST(InitAgreement, FailuresNameTheRanksAndTheirMessagesAndWinOverDifferences) {
  const Fingerprint a = fp({{"A", "1"}}), b = fp({{"A", "2"}});
  Status one = init_verdict({Status::OK(), unsupported("no shm here"), Status::OK()}, {a, b, a});
  EXPECT_EQ(one.code(), Code::kUnsupported);
  EXPECT_EQ(one.message(), "kolo_init failed on rank 1: no shm here");
  // Grouped by message; the code is the lowest failing rank's.
  Status many = init_verdict({invalid_argument("bad knob"), internal_error("boom"),
                              internal_error("boom"), Status::OK()},
                             {a, a, a, a});
  EXPECT_EQ(many.code(), Code::kInvalidArgument);
  EXPECT_EQ(many.message(), "kolo_init failed on rank 0: bad knob; on ranks 1-2: boom");
  // A failure without a message is named by its code.
  Status bare = init_verdict({Status::OK(), Status(Code::kTransport, "")}, {a, a});
  EXPECT_EQ(bare.message(), "kolo_init failed on rank 1: KOLO_ERR_TRANSPORT");
}

TEST(InitAgreement, ReportRoundTrips) {
  const std::vector<KnobValue> entries = {{"KOLO_FUSION_THRESHOLD", "0"}, {"empty", ""},
                                          {std::string(300, 'n'), std::string(4000, 'v')}};
  for (const Status& status : {Status::OK(), Status(Code::kRankFailed, "rank 3 went away")}) {
    Status got;
    std::vector<KnobValue> back;
    ASSERT_TRUE(decode_init_report(encode_init_report(status, entries), &got, &back).ok());
    EXPECT_EQ(got.code(), status.code());
    EXPECT_EQ(got.message(), status.message());
    ASSERT_EQ(back.size(), entries.size());
    for (size_t i = 0; i < entries.size(); ++i) {
      EXPECT_EQ(back[i].name, entries[i].name);
      EXPECT_EQ(back[i].value, entries[i].value);
    }
  }
}

TEST(InitAgreement, EveryTruncationOrCorruptionIsAnError) {
  const std::string bytes = encode_init_report(invalid_argument("m"), {{"K", "v"}, {"L", "w"}});
  Status status;
  std::vector<KnobValue> entries;
  for (size_t n = 0; n < bytes.size(); ++n)
    EXPECT_FALSE(decode_init_report(bytes.substr(0, n), &status, &entries).ok()) << n;
  EXPECT_FALSE(decode_init_report(bytes + "x", &status, &entries).ok());
  std::string bad_code = bytes;
  bad_code[10] = 99;  // the status code, after the 10-byte header
  EXPECT_FALSE(decode_init_report(bad_code, &status, &entries).ok());
  // A negotiation message is not a report.
  EXPECT_FALSE(decode_init_report(encode_requests({}), &status, &entries).ok());
}

// Every rank's thread gets the same verdict from the exchange.
std::vector<Status> agree_as_threads(const std::vector<Status>& mine,
                                     const std::vector<Fingerprint>& fingerprints) {
  std::vector<Status> verdicts(mine.size());
  kolo::testing::spawn(static_cast<int>(mine.size()), [&](int rank, transport::World& world) {
    verdicts[rank] = agree_at_init(*world.control, mine[rank], fingerprints[rank]);
  });
  return verdicts;
}

TEST(InitAgreement, ExchangeGivesEveryRankTheSameVerdict) {
  const Fingerprint a = fp({{"KOLO_TRANSPORT", "auto"}}), b = fp({{"KOLO_TRANSPORT", "ring"}});
  for (const Status& s : agree_as_threads(std::vector<Status>(3), {a, a, a})) EXPECT_TRUE(s.ok());
  for (const Status& s : agree_as_threads(std::vector<Status>(3), {a, a, b}))
    EXPECT_EQ(s.message(), "the ranks' settings differ, and these must be equal on every rank "
                           "(they shape how kolo plans and moves the data): KOLO_TRANSPORT is "
                           "auto on ranks 0-1, ring on rank 2");
  for (const Status& s :
       agree_as_threads({invalid_argument("KOLO_TRANSPORT=\"bogus\" is not a transport"),
                         Status::OK()},
                        {Fingerprint{}, a})) {
    EXPECT_EQ(s.code(), Code::kInvalidArgument);
    EXPECT_EQ(s.message(),
              "kolo_init failed on rank 0: KOLO_TRANSPORT=\"bogus\" is not a transport");
  }
}

}  // namespace
}  // namespace kolo::core
