// The flight recorder's ring (numbering, wraparound, state changes, long names) and
// its dump format; the stall report's wire form and text.
#include "core/flight_recorder.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdio>
#include <fstream>
#include <sstream>

#include "core/stall_report.h"
#include "core/wire.h"

namespace kolo::core {
namespace {

using State = FlightRecorder::State;
using Clock = FlightRecorder::Clock;

Request request(const std::string& name, int64_t count = 4, DataType dtype = DataType::kFloat32,
                Collective c = Collective::kAllreduce) {
  Request r;
  r.name = name;
  r.params.count = count;
  r.params.dtype = dtype;
  r.params.collective = c;
  return r;
}

std::vector<std::string> lines_of(const std::string& text) {
  std::vector<std::string> out;
  std::istringstream in(text);
  for (std::string line; std::getline(in, line);) out.push_back(line);
  return out;
}

bool has(const std::string& text, const std::string& part) {
  return text.find(part) != std::string::npos;
}

TEST(FlightRecorder, OffRecordsNothing) {
  FlightRecorder f(0);
  EXPECT_FALSE(f.enabled());
  EXPECT_EQ(f.submitted(request("a"), Clock::now()), 0u);
  f.advance(0, State::kNegotiated, Clock::now());
  f.finish(0, Code::kOk, Clock::now());
  EXPECT_TRUE(f.ops().empty());
  EXPECT_EQ(f.recorded(), 0u);
}

TEST(FlightRecorder, NumbersFromOneAndKeepsTheLastNAcrossWraparound) {
  FlightRecorder f(4);
  for (int i = 1; i <= 10; ++i)
    EXPECT_EQ(f.submitted(request("op" + std::to_string(i)), Clock::now()), uint64_t(i));
  EXPECT_EQ(f.recorded(), 10u);
  const auto ops = f.ops();
  ASSERT_EQ(ops.size(), 4u);
  for (size_t i = 0; i < ops.size(); ++i) {
    EXPECT_EQ(ops[i]->seq, 7 + i);
    EXPECT_EQ(ops[i]->stored_name(), "op" + std::to_string(7 + i));
  }
  // Dropped operations are no longer found, and updating them touches nothing.
  EXPECT_EQ(f.find(6), nullptr);
  f.finish(6, Code::kMismatch, Clock::now());
  f.finish(2, Code::kMismatch, Clock::now());  // its slot now holds #10
  EXPECT_EQ(f.find(10)->state, State::kSubmitted);
  EXPECT_EQ(f.find(10)->stored_name(), "op10");
}

TEST(FlightRecorder, FewerThanCapacityAreHeldInOrder) {
  FlightRecorder f(8);
  f.submitted(request("a"), Clock::now());
  f.submitted(request("b"), Clock::now());
  const auto ops = f.ops();
  ASSERT_EQ(ops.size(), 2u);
  EXPECT_EQ(ops[0]->stored_name(), "a");
  EXPECT_EQ(ops[1]->stored_name(), "b");
}

TEST(FlightRecorder, RecordsEachStateChangeWithItsTime) {
  FlightRecorder f(4);
  const auto t0 = Clock::now() - std::chrono::milliseconds(10);
  const uint64_t a = f.submitted(request("grad/w", 10, DataType::kFloat64), t0);
  const uint64_t b =
      f.submitted(request("grad/b", 3, DataType::kInt32, Collective::kBroadcast), t0);
  EXPECT_EQ(f.find(a)->state, State::kSubmitted);
  EXPECT_EQ(f.find(a)->bytes, 80);
  EXPECT_EQ(f.find(b)->collective, Collective::kBroadcast);
  f.advance(a, State::kNegotiated, t0 + std::chrono::milliseconds(1));
  EXPECT_EQ(f.find(a)->state, State::kNegotiated);
  f.advance(a, State::kExecuting, t0 + std::chrono::milliseconds(2));
  EXPECT_EQ(f.find(a)->state, State::kExecuting);
  f.finish(a, Code::kOk, t0 + std::chrono::milliseconds(3));
  f.finish(b, Code::kMismatch, t0 + std::chrono::milliseconds(3));
  const FlightRecorder::Op& op = *f.find(a);
  EXPECT_EQ(op.state, State::kDone);
  EXPECT_EQ(op.code, Code::kOk);
  EXPECT_LT(op.at[0], op.at[1]);
  EXPECT_LT(op.at[1], op.at[2]);
  EXPECT_LE(op.at[2], op.at[3]);
  EXPECT_EQ(f.find(b)->state, State::kFailed);
  EXPECT_EQ(f.find(b)->code, Code::kMismatch);
  EXPECT_EQ(f.find(b)->at[1], 0);  // never negotiated
  EXPECT_NE(f.find(b)->at[3], 0);
  // A slot reused for a new operation starts clean.
  FlightRecorder g(1);
  const uint64_t x = g.submitted(request("x"), t0);
  g.advance(x, State::kExecuting, t0);
  g.finish(x, Code::kStalled, Clock::now());
  const uint64_t y = g.submitted(request("y"), t0);
  EXPECT_EQ(g.find(y)->state, State::kSubmitted);
  EXPECT_EQ(g.find(y)->code, Code::kOk);
  EXPECT_EQ(g.find(y)->at[2], 0);
  EXPECT_EQ(g.find(y)->at[3], 0);
}

TEST(FlightRecorder, LongNamesAreCutButKeepTheirLengthAndHash) {
  FlightRecorder f(2);
  const std::string a(300, 'a');
  std::string b = a;
  b.back() = 'b';  // differs past the part kept
  const uint64_t sa = f.submitted(request(a), Clock::now());
  const uint64_t sb = f.submitted(request(b), Clock::now());
  EXPECT_TRUE(f.find(sa)->truncated());
  EXPECT_EQ(f.find(sa)->name_length, 300u);
  EXPECT_EQ(f.find(sa)->stored_name(), a.substr(0, FlightRecorder::kNameBytes));
  EXPECT_EQ(f.find(sa)->stored_name(), f.find(sb)->stored_name());
  EXPECT_NE(f.find(sa)->hash(), f.find(sb)->hash());
}

// A call that completed alone (Note [A call alone] in core/coordinator.h) is one
// record: numbered with the rest, done, every state stamped.
TEST(FlightRecorder, ACallThatCompletedAloneIsOneDoneRecordNumberedWithTheRest) {
  FlightRecorder f(2);
  const auto t0 = Clock::now() - std::chrono::milliseconds(10);
  const uint64_t a = f.submitted(request("grad/a"), t0);
  f.completed(request("grad/w1", 2), t0, t0 + std::chrono::milliseconds(1));
  const uint64_t c = f.submitted(request("grad/c"), t0);
  EXPECT_EQ(c, a + 2);
  const FlightRecorder::Op& op = *f.find(a + 1);
  EXPECT_EQ(op.stored_name(), "grad/w1");
  EXPECT_EQ(op.bytes, 8);
  EXPECT_EQ(op.state, State::kDone);
  EXPECT_EQ(op.code, Code::kOk);
  EXPECT_LT(op.at[0], op.at[1]);
  EXPECT_EQ(op.at[1], op.at[2]);
  EXPECT_EQ(op.at[2], op.at[3]);
  // The dump hashes a name held whole when it writes it: FNV-1a of "grad/w1".
  const auto lines = lines_of(f.to_json_lines(FlightRecorder::DumpInfo{}, Clock::now()));
  ASSERT_EQ(lines.size(), 3u);
  EXPECT_TRUE(has(lines[1], "\"name\": \"grad/w1\", \"name_length\": 7, "
                            "\"name_hash\": \"6558a55f32ee24fa\"")) << lines[1];
  EXPECT_FALSE(has(lines[1], "null")) << lines[1];
  // Off, it records nothing.
  FlightRecorder off(0);
  off.completed(request("x"), t0, t0);
  EXPECT_EQ(off.recorded(), 0u);
}

TEST(FlightRecorder, DumpIsAHeaderLineAndOneLinePerOperationOldestFirst) {
  FlightRecorder f(3);
  const auto t0 = Clock::now();
  for (int i = 1; i <= 4; ++i) f.submitted(request("grad/" + std::to_string(i)), t0);
  f.advance(2, State::kNegotiated, t0);
  f.advance(2, State::kExecuting, t0);
  f.finish(2, Code::kOk, Clock::now());
  f.finish(3, Code::kStalled, Clock::now());
  FlightRecorder::DumpInfo info;
  info.rank = 1;
  info.size = 2;
  info.reason = "stall \"quoted\"\n";
  info.last_submission = t0;
  const auto lines = lines_of(f.to_json_lines(info, t0 + std::chrono::milliseconds(1500)));
  ASSERT_EQ(lines.size(), 4u);
  const std::string& h = lines[0];
  EXPECT_TRUE(has(h, "{\"kolo_flight_recorder\": 1, \"rank\": 1, \"size\": 2, ")) << h;
  EXPECT_TRUE(has(h, "\"reason\": \"stall \\\"quoted\\\"\\u000a\"")) << h;
  EXPECT_TRUE(has(h, "\"capacity\": 3, \"recorded\": 4, \"idle_s\": 1.500}")) << h;
  EXPECT_TRUE(has(lines[1], "{\"seq\": 2, \"name\": \"grad/2\", \"name_length\": 6, ")) << lines[1];
  EXPECT_TRUE(has(lines[1],
                  "\"kind\": \"allreduce\", \"bytes\": 16, \"dtype\": \"float32\", "
                  "\"state\": \"done\", \"status\": \"KOLO_OK\", \"submitted\": "))
      << lines[1];
  EXPECT_FALSE(has(lines[1], "null")) << lines[1];  // every state reached
  EXPECT_TRUE(has(lines[2], "\"state\": \"failed\", \"status\": \"KOLO_ERR_STALLED\"")) << lines[2];
  EXPECT_TRUE(has(lines[2], "\"negotiated\": null, \"executing\": null, \"finished\": "))
      << lines[2];
  EXPECT_TRUE(has(lines[3], "\"seq\": 4, ")) << lines[3];
  EXPECT_TRUE(has(lines[3], "\"status\": null, ")) << lines[3];
  EXPECT_TRUE(has(lines[3], "\"finished\": null}")) << lines[3];
  // Nothing submitted yet: idle is null.
  FlightRecorder empty(2);
  EXPECT_TRUE(has(empty.to_json_lines(FlightRecorder::DumpInfo{}, t0), "\"idle_s\": null}"));
}

TEST(FlightRecorder, DumpWritesTheFileAtomicallyAndReportsAnUnwritableDirectory) {
  FlightRecorder f(2);
  f.submitted(request("x"), Clock::now());
  const std::string path =
      ::testing::TempDir() + "kolo_flight_recorder_test." + std::to_string(getpid()) + ".jsonl";
  ASSERT_TRUE(f.dump(path, FlightRecorder::DumpInfo{}).ok());
  std::ifstream in(path);
  std::stringstream text;
  text << in.rdbuf();
  EXPECT_EQ(lines_of(text.str()).size(), 2u);
  EXPECT_FALSE(std::ifstream(path + ".tmp").good());
  std::remove(path.c_str());

  Status s = f.dump("/nonexistent-kolo-dir/x.jsonl", FlightRecorder::DumpInfo{});
  EXPECT_FALSE(s.ok());
  EXPECT_TRUE(has(s.message(), "/nonexistent-kolo-dir/x.jsonl")) << s.message();
  EXPECT_EQ(flight_dump_path("", 0), "./kolo-flight-rank0.jsonl");
  EXPECT_EQ(flight_dump_path("/a/", 3), "/a/kolo-flight-rank3.jsonl");
}

int g_theirs = 0;
void their_handler(int) { ++g_theirs; }

TEST(FlightRecorder, SignalHandlerCountsChainsAndIsRestoredByTheLastUninstall) {
  ASSERT_TRUE(install_dump_signal());
  ASSERT_TRUE(install_dump_signal());
  const uint32_t before = dump_signals();
  ASSERT_EQ(kill(getpid(), SIGUSR1), 0);
  EXPECT_EQ(dump_signals(), before + 1);  // delivered to this thread before kill returns
  uninstall_dump_signal();
  ASSERT_EQ(kill(getpid(), SIGUSR1), 0);  // the default action would end the test here
  EXPECT_EQ(dump_signals(), before + 2);
  uninstall_dump_signal();
  struct sigaction now;
  ASSERT_EQ(sigaction(SIGUSR1, nullptr, &now), 0);
  EXPECT_EQ(now.sa_handler, SIG_DFL);

  // A handler that was there first (MPICH has one) still runs, and comes back.
  ASSERT_NE(signal(SIGUSR1, their_handler), SIG_ERR);
  ASSERT_TRUE(install_dump_signal());
  ASSERT_EQ(kill(getpid(), SIGUSR1), 0);
  EXPECT_EQ(dump_signals(), before + 3);
  EXPECT_EQ(g_theirs, 1);
  uninstall_dump_signal();
  ASSERT_EQ(kill(getpid(), SIGUSR1), 0);
  EXPECT_EQ(dump_signals(), before + 3);
  EXPECT_EQ(g_theirs, 2);
  signal(SIGUSR1, SIG_DFL);
}

TEST(StallReport, RoundTripsAndRejectsCorruption) {
  RankReport in;
  in.idle_seconds = 12.5;
  in.pending = {"grad_x", "", std::string(1024, 'n')};
  in.pending_total = 7;
  RankReport out;
  const std::string bytes = encode_rank_report(in);
  ASSERT_TRUE(decode_rank_report(bytes, &out).ok());
  EXPECT_EQ(out.idle_seconds, 12.5);
  EXPECT_EQ(out.pending, in.pending);
  EXPECT_EQ(out.pending_total, 7u);
  for (size_t cut = 0; cut < bytes.size(); ++cut)
    EXPECT_FALSE(decode_rank_report(bytes.substr(0, cut), &out).ok()) << cut;
  EXPECT_FALSE(decode_rank_report(bytes + "x", &out).ok());
  EXPECT_FALSE(decode_rank_report(encode_requests({}), &out).ok());  // another kind
  // At most kMaxReportedNames travel.
  RankReport many;
  many.pending.assign(kMaxReportedNames + 5, "n");
  many.pending_total = kMaxReportedNames + 5;
  ASSERT_TRUE(decode_rank_report(encode_rank_report(many), &out).ok());
  EXPECT_EQ(out.pending.size(), kMaxReportedNames);
  EXPECT_EQ(out.pending_total, kMaxReportedNames + 5);
}

TEST(StallReport, NamesWhatEachMissingRankDidInsteadAndItsIdleTime) {
  std::vector<MessageTable::Stall> stalls = {{"grad_y", {1, 2}, 61.0}};
  std::vector<RankReport> reports(3);
  reports[0].idle_seconds = 0.25;
  reports[0].pending = {"grad_y", "common"};
  reports[1].idle_seconds = 61.04;
  reports[1].pending = {"common", "grad_x", "a", "b", "c", "d"};
  reports[2].pending = {"common"};  // idle_seconds < 0: nothing submitted
  const std::string text = describe_stalls(stalls, reports);
  EXPECT_TRUE(has(text, "Missing ranks: 1: [grad_y]; 2: [grad_y]")) << text;
  EXPECT_TRUE(has(text,
                  "rank 1 submitted instead [grad_x, a, b, c, ... (1 more)] and has been "
                  "idle for 61.0 s since its last submission"))
      << text;
  EXPECT_TRUE(has(text,
                  "rank 2 has nothing else in flight and has submitted nothing since "
                  "kolo_init"))
      << text;
  EXPECT_FALSE(has(text, "rank 0 ")) << text;  // not missing
  EXPECT_EQ(describe_stalls(stalls, {}), describe_stalls(stalls));
}

}  // namespace
}  // namespace kolo::core
