// The coordinator end to end, with ranks as threads over the loopback transport:
// negotiation (both paths), fusion, validation, mismatches, shutdown, stalls.
#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <numeric>
#include <random>
#include <thread>

#include "kolo/kolo.h"
#include "loopback_job.h"
#include "read_file.h"

namespace kolo::core {
namespace {

using testing::LoopbackJob;
using testing::submit;
using testing::wait_code;

// Rank r contributes value(r, i) = r + 1 + i % 5 at element i; sums stay exact.
float value(int rank, int64_t i) { return static_cast<float>(rank + 1 + i % 5); }
float expected_sum(int size, int64_t i) {
  float s = 0;
  for (int r = 0; r < size; ++r) s += value(r, i);
  return s;
}

void expect_sum_everywhere(LoopbackJob& job, int64_t count, const std::string& name,
                           bool in_place) {
  job.run([&](int rank, Runtime& rt) {
    std::vector<float> in(count), out(count, -1.0f);
    for (int64_t i = 0; i < count; ++i) in[i] = value(rank, i);
    void* dst = in_place ? static_cast<void*>(in.data()) : out.data();
    auto h = submit(rt, name, in.data(), dst, count, DataType::kFloat32);
    ASSERT_EQ(wait_code(h), Code::kOk) << h->message();
    const float* res = static_cast<const float*>(dst);
    for (int64_t i = 0; i < count; ++i)
      ASSERT_EQ(res[i], expected_sum(job.size(), i)) << "rank " << rank << " i " << i;
  });
}

TEST(Runtime, AllreduceSumEveryWorldSizeAndCount) {
  for (int size = 1; size <= 8; ++size) {
    LoopbackJob job(size);
    for (int64_t count : {int64_t{0}, int64_t{1}, int64_t{size - 1}, int64_t{size + 1},
                          int64_t{1000}, int64_t{(1 << 16) + 3}}) {
      for (bool in_place : {false, true}) {
        SCOPED_TRACE("size " + std::to_string(size) + " count " + std::to_string(count));
        expect_sum_everywhere(job, count, "t" + std::to_string(count), in_place);
      }
    }
  }
}

// Hundreds of tensors of seeded random sizes, submitted in a different order on
// every rank from several threads, steps repeated so the cache path is taken.
// With a cache of 64 entries, eviction is exercised; with 1024, the AND vector
// grows to four words per kind as the cache fills (Note [An AND as long as the
// cache in use]).
TEST(Runtime, OutOfOrderManyTensorsFromSeveralThreads) {
  for (int64_t threshold : {int64_t{0}, int64_t{4096}, int64_t{8} << 20})  // 8 MiB: all fuse
  for (size_t capacity : {size_t{64}, size_t{1024}}) {
    SCOPED_TRACE("threshold " + std::to_string(threshold) + " cache " + std::to_string(capacity));
    Config config;
    config.fusion_threshold_bytes = threshold;
    config.cache_capacity = capacity;
    const int size = 3, tensors = 200, threads = 3;
    LoopbackJob job(size, config);
    std::mt19937 sizes_rng(123);
    std::vector<int64_t> counts(tensors);
    for (auto& c : counts) c = sizes_rng() % 3000;
    for (int step = 0; step < 3; ++step) {
      job.run([&](int rank, Runtime& rt) {
        std::vector<int> order(tensors);
        std::iota(order.begin(), order.end(), 0);
        std::shuffle(order.begin(), order.end(), std::mt19937(rank * 1000 + step));
        std::vector<std::vector<int32_t>> bufs(tensors);
        std::vector<std::shared_ptr<HandleState>> handles(tensors);
        std::vector<std::thread> pool;
        for (int t = 0; t < threads; ++t) {
          pool.emplace_back([&, t] {
            for (int k = t; k < tensors; k += threads) {
              int id = order[k];
              bufs[id].resize(counts[id]);
              for (int64_t i = 0; i < counts[id]; ++i) bufs[id][i] = (rank + 1) * (id + i % 7);
              handles[id] = submit(rt, "grad/" + std::to_string(id), bufs[id].data(),
                                   bufs[id].data(), counts[id], DataType::kInt32);
            }
          });
        }
        for (auto& p : pool) p.join();
        const int rank_sum = size * (size + 1) / 2;
        for (int id = 0; id < tensors; ++id) {
          ASSERT_EQ(wait_code(handles[id]), Code::kOk) << handles[id]->message();
          for (int64_t i = 0; i < counts[id]; ++i)
            ASSERT_EQ(bufs[id][i], rank_sum * (id + i % 7)) << "tensor " << id;
        }
      });
    }
  }
}

TEST(Runtime, FusionOnAndOffGiveIdenticalResults) {
  std::vector<std::vector<float>> results[2];
  int idx = 0;
  for (int64_t threshold : {int64_t{0}, int64_t{1} << 20}) {
    Config config;
    config.fusion_threshold_bytes = threshold;
    LoopbackJob job(2, config);
    std::vector<std::vector<float>> mine(10);
    job.run([&](int rank, Runtime& rt) {
      std::vector<std::vector<float>> bufs(10);
      std::vector<std::shared_ptr<HandleState>> hs;
      for (int t = 0; t < 10; ++t) {
        bufs[t].resize(100 + t);
        for (size_t i = 0; i < bufs[t].size(); ++i) bufs[t][i] = 0.1f * (rank + 1) * (t + i);
        hs.push_back(submit(rt, "w" + std::to_string(t), bufs[t].data(), bufs[t].data(),
                            bufs[t].size(), DataType::kFloat32, ReduceOp::kAverage, 0.5, 3.0));
      }
      for (auto& h : hs) ASSERT_EQ(wait_code(h), Code::kOk);
      if (rank == 0) mine = bufs;
    });
    results[idx++] = mine;
  }
  EXPECT_EQ(results[0], results[1]);
}

TEST(Runtime, AverageAndScaling) {
  LoopbackJob job(4);
  job.run([&](int rank, Runtime& rt) {
    std::vector<int32_t> ints = {rank == 0 ? -7 : 0, 7, 9, rank};  // sums -7, 28, 36, 6
    auto h1 = submit(rt, "ints", ints.data(), ints.data(), 4, DataType::kInt32, ReduceOp::kAverage);
    std::vector<double> d = {1.0 * rank, 2.0};
    auto h2 = submit(rt, "doubles", d.data(), d.data(), 2, DataType::kFloat64,
                     ReduceOp::kAverage, 2.0, 0.25);
    ASSERT_EQ(wait_code(h1), Code::kOk);
    ASSERT_EQ(wait_code(h2), Code::kOk);
    EXPECT_EQ(ints, (std::vector<int32_t>{-1, 7, 9, 1}));  // truncation toward zero
    EXPECT_EQ(d, (std::vector<double>{0.75, 1.0}));        // (0+1+2+3)*2/4*0.25, 16/4*0.25
  });
}

TEST(Runtime, MismatchFailsThatNameOnEveryRankAndOthersGoOn) {
  struct Case {
    const char* field;
    std::function<void(CollectiveArgs&)> change;
  };
  std::vector<Case> cases = {
      {"dtype", [](CollectiveArgs& a) { a.dtype = DataType::kInt32; }},
      {"count", [](CollectiveArgs& a) { a.rows = 3; }},
      {"op", [](CollectiveArgs& a) { a.op = ReduceOp::kMax; }},
      {"prescale", [](CollectiveArgs& a) { a.prescale = 2.0; }},
      {"postscale", [](CollectiveArgs& a) { a.postscale = 2.0; }},
  };
  LoopbackJob job(3);
  for (int round = 0; round < 2; ++round) {  // round 1: the good names are cached
    for (const Case& c : cases) {
      job.run([&](int rank, Runtime& rt) {
        std::vector<float> bad(4, 1.0f), good(4, 1.0f);
        CollectiveArgs a;
        std::string name = std::string("bad_") + c.field;
        a.name = name;
        a.input = a.output = bad.data();
        a.rows = 4;
        if (rank == 1) c.change(a);
        std::shared_ptr<HandleState> hb;
        ASSERT_TRUE(rt.submit(a, &hb).ok());
        auto hg = submit(rt, "good", good.data(), good.data(), 4, DataType::kFloat32);
        ASSERT_EQ(wait_code(hb), Code::kMismatch);
        EXPECT_NE(hb->message().find(name), std::string::npos) << hb->message();
        EXPECT_NE(hb->message().find(c.field), std::string::npos) << hb->message();
        EXPECT_NE(hb->message().find("rank 1"), std::string::npos) << hb->message();
        ASSERT_EQ(wait_code(hg), Code::kOk);
        EXPECT_EQ(good, std::vector<float>(4, 3.0f));
      });
    }
  }
}

// A cached name resubmitted with other parameters (on every rank, then on one).
TEST(Runtime, CachedNameWithNewParameters) {
  LoopbackJob job(2);
  for (int64_t count : {4, 4, 6, 6}) expect_sum_everywhere(job, count, "reused", false);
  job.run([&](int rank, Runtime& rt) {
    std::vector<float> buf(rank == 0 ? 6 : 7, 1.0f);
    auto h = submit(rt, "reused", buf.data(), buf.data(), buf.size(), DataType::kFloat32);
    ASSERT_EQ(wait_code(h), Code::kMismatch);
    EXPECT_NE(h->message().find("count: 6 on rank 0; 7 on rank 1"), std::string::npos)
        << h->message();
  });
  expect_sum_everywhere(job, 6, "reused", false);
}

// Note [The waiter runs the cycle]: threads that wait run most cycles of a
// cached name themselves; results stay exact at every world size, a rank that
// disagrees on the cached name fails it on every rank, and the name works again.
TEST(Runtime, WaitersRunCyclesExactlyAndMismatchesStillFail) {
  for (int size : {1, 2, 3, 4}) {
    LoopbackJob job(size);
    job.run([&](int rank, Runtime& rt) {
      std::vector<float> in(3), out(3);
      for (int step = 0; step < 200; ++step) {
        for (int64_t i = 0; i < 3; ++i) in[i] = static_cast<float>(rank + step + i);
        auto h = submit(rt, "hot", in.data(), out.data(), 3, DataType::kFloat32);
        ASSERT_EQ(wait_code(h), Code::kOk) << h->message();
        for (int64_t i = 0; i < 3; ++i)
          ASSERT_EQ(out[i], static_cast<float>(size * (step + i) + size * (size - 1) / 2));
      }
      if (size == 1) return;
      std::vector<float> odd(rank == size - 1 ? 4 : 3, 1.0f);
      auto bad = submit(rt, "hot", odd.data(), odd.data(), odd.size(), DataType::kFloat32);
      ASSERT_EQ(wait_code(bad), Code::kMismatch);
      EXPECT_NE(bad->message().find("count"), std::string::npos) << bad->message();
      auto again = submit(rt, "hot", in.data(), out.data(), 3, DataType::kFloat32);
      ASSERT_EQ(wait_code(again), Code::kOk) << again->message();
    });
  }
}

TEST(Runtime, DuplicateNameInFlightIsRefusedLocally) {
  LoopbackJob job(2);
  std::vector<float> a(4, 1.0f), b(4, 1.0f);
  auto h = submit(job.rank(0), "dup", a.data(), a.data(), 4, DataType::kFloat32);
  CollectiveArgs args;
  args.name = "dup";
  args.input = args.output = b.data();
  args.rows = 4;
  std::shared_ptr<HandleState> h2;
  Status s = job.rank(0).submit(args, &h2);
  EXPECT_EQ(s.code(), Code::kDuplicateName);
  EXPECT_NE(s.message().find("'dup'"), std::string::npos);
  auto h1 = submit(job.rank(1), "dup", b.data(), b.data(), 4, DataType::kFloat32);
  ASSERT_EQ(wait_code(h), Code::kOk);
  ASSERT_EQ(wait_code(h1), Code::kOk);
  EXPECT_EQ(a, std::vector<float>(4, 2.0f));  // the refused call changed nothing
}

TEST(Runtime, InvalidArgumentsAreRefusedWithClearMessages) {
  LoopbackJob job(1);
  std::vector<float> f(8);
  auto call = [&](std::function<void(CollectiveArgs&)> change) {
    CollectiveArgs a;
    a.name = "x";
    a.input = a.output = f.data();
    a.rows = 8;
    change(a);
    std::shared_ptr<HandleState> h;
    Status s = job.rank(0).submit(a, &h);
    EXPECT_FALSE(h);
    return s;
  };
  auto expect = [](Status s, Code code, const std::string& text) {
    EXPECT_EQ(s.code(), code) << s.to_string();
    EXPECT_NE(s.message().find(text), std::string::npos) << s.message();
  };
  std::string long_name(KOLO_MAX_NAME_LENGTH + 1, 'n');
  expect(call([](auto& a) { a.name = ""; }), Code::kInvalidArgument, "name is empty");
  expect(call([&](auto& a) { a.name = long_name; }), Code::kInvalidArgument, "limit");
  expect(call([](auto& a) { a.rows = -1; }), Code::kInvalidArgument, "negative count");
  expect(call([](auto& a) { a.rows = int64_t{1} << 62; }), Code::kInvalidArgument, "overflows");
  expect(call([](auto& a) { a.input = nullptr; }), Code::kInvalidArgument, "input is NULL");
  expect(call([](auto& a) { a.output = nullptr; }), Code::kInvalidArgument, "output is NULL");
  expect(call([](auto& a) { a.dtype = static_cast<DataType>(42); }), Code::kInvalidArgument, "unknown dtype");
  expect(call([](auto& a) { a.op = static_cast<ReduceOp>(-1); }), Code::kInvalidArgument, "unknown op");
  expect(call([](auto& a) { a.device.kind = static_cast<DeviceKind>(7); }), Code::kInvalidArgument, "device");
  expect(call([&](auto& a) { a.output = f.data() + 1; a.rows = 4; }), Code::kInvalidArgument, "overlap");
  expect(call([](auto& a) { a.dtype = DataType::kBool; a.op = ReduceOp::kAverage; }),
         Code::kInvalidArgument, "bool");
  expect(call([&](auto& a) { a.dtype = DataType::kBool; a.prescale = 2; }),
         Code::kInvalidArgument, "needs a numeric dtype, not bool");
  expect(call([](auto& a) { a.postscale = std::numeric_limits<double>::quiet_NaN(); }),
         Code::kInvalidArgument, "finite");
  expect(call([](auto& a) { a.device.kind = DeviceKind::kCuda; }), Code::kUnsupported, "NCCL");
  // None of that left anything in flight: the name is free.
  auto h = submit(job.rank(0), "x", f.data(), f.data(), 8, DataType::kFloat32);
  EXPECT_EQ(wait_code(h), Code::kOk);
}

TEST(Runtime, ShutdownCompletesPendingWorkEverywhere) {
  LoopbackJob job(3);
  std::vector<float> buf(4, 1.0f);
  // Only rank 2 submits: the name can never become ready.
  auto h = submit(job.rank(2), "orphan", buf.data(), buf.data(), 4, DataType::kFloat32);
  job.rank(0).shutdown();  // one rank's shutdown reaches every rank
  ASSERT_EQ(wait_code(h), Code::kShutdown);
  EXPECT_NE(h->message().find("another rank"), std::string::npos) << h->message();
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(60);
  for (int r = 0; r < 3; ++r) {
    while (job.rank(r).running() && std::chrono::steady_clock::now() < deadline)
      std::this_thread::sleep_for(std::chrono::milliseconds(5));
    EXPECT_FALSE(job.rank(r).running()) << "rank " << r;
  }
  CollectiveArgs a;
  a.name = "late";
  a.input = a.output = buf.data();
  a.rows = 4;
  std::shared_ptr<HandleState> late;
  EXPECT_EQ(job.rank(1).submit(a, &late).code(), Code::kShutdown);
  EXPECT_EQ(buf, std::vector<float>(4, 1.0f));  // nothing touched the buffer
}

// The ranks' threads of the names that must succeed may start far apart on a
// loaded machine under a sanitizer: the stall times leave them seconds.
TEST(Runtime, StalledNamesFailWhenConfigured) {
  Config config;
  config.stall_check_seconds = 1.0;
  config.stall_shutdown_seconds = 2.0;
  LoopbackJob job(2, config);
  expect_sum_everywhere(job, 4, "cached_then_stalled", false);  // now in the cache
  std::vector<float> a(4, 1.0f), b(4, 1.0f);
  auto h1 = submit(job.rank(0), "never_on_rank1", a.data(), a.data(), 4, DataType::kFloat32);
  auto h2 = submit(job.rank(0), "cached_then_stalled", b.data(), b.data(), 4, DataType::kFloat32);
  ASSERT_EQ(wait_code(h1), Code::kStalled);
  EXPECT_NE(h1->message().find("missing ranks: 1"), std::string::npos) << h1->message();
  ASSERT_EQ(wait_code(h2), Code::kStalled);
  // The job goes on.
  expect_sum_everywhere(job, 4, "after", false);
}

TEST(Runtime, TimelineRecordsNegotiationAndBucketsOnRankZero) {
  // Of this process's own: CTest runs test cases side by side, and other builds'
  // runs share the directory.
  const std::string path =
      ::testing::TempDir() + "kolo_timeline_test." + std::to_string(getpid()) + ".json";
  std::remove(path.c_str());
  {
    Config config;
    config.timeline_path = path;
    LoopbackJob job(2, config);
    expect_sum_everywhere(job, 100, "layer1/weight", false);
    expect_sum_everywhere(job, 7, "layer1/bias", true);
    job.shutdown();
  }
  const std::string text = kolo_test::read_file(path);
  ASSERT_FALSE(text.empty()) << "no timeline at " << path;
  EXPECT_EQ(text.substr(0, 1), "[");
  EXPECT_NE(text.find("]"), std::string::npos);
  for (const char* want : {"\"layer1/weight\"", "\"layer1/bias\"", "NEGOTIATE", "PROCESS",
                           "\"bytes\": 400", "\"collective\": \"allreduce\""})
    EXPECT_NE(text.find(want), std::string::npos) << want << " in\n" << text;
}

TEST(Runtime, UnwritableTimelineFailsStart) {
  Config config;
  config.timeline_path = "/nonexistent-dir/timeline.json";
  auto worlds = loopback::create_worlds(1);
  std::unique_ptr<Runtime> rt;
  Status s = Runtime::start(std::move(worlds[0]), config, &rt);
  EXPECT_EQ(s.code(), Code::kInvalidArgument);
  EXPECT_NE(s.message().find("KOLO_TIMELINE"), std::string::npos) << s.message();
}

// Only rank 0 opens the timeline, so only rank 0's start fails on its own; the others
// must fail with it (before, they started and then waited for rank 0 for ever).
TEST(Runtime, OneRanksFailedStartFailsEveryRank) {
  Config config;
  config.timeline_path = "/nonexistent-dir/timeline.json";
  auto worlds = loopback::create_worlds(3);
  std::vector<Status> started(3);
  std::vector<std::unique_ptr<Runtime>> runtimes(3);
  std::vector<std::thread> threads;
  for (int r = 0; r < 3; ++r)
    threads.emplace_back(
        [&, r] { started[r] = Runtime::start(std::move(worlds[r]), config, &runtimes[r]); });
  for (auto& t : threads) t.join();
  for (int r = 0; r < 3; ++r) {
    EXPECT_EQ(started[r].code(), Code::kInvalidArgument) << r;
    EXPECT_EQ(started[r].message().rfind("kolo_init failed on rank 0: ", 0), 0u)
        << started[r].message();
    EXPECT_NE(started[r].message().find("/nonexistent-dir/timeline.json"), std::string::npos);
    EXPECT_EQ(runtimes[r], nullptr);
  }
}

}  // namespace
}  // namespace kolo::core
