// A job of N ranks as threads over the loopback transport, each with its own
// core::Runtime — the coordinator tests' harness (Gloo's BaseTest::spawn).
#pragma once

#include <functional>
#include <memory>
#include <thread>
#include <vector>

#include <gtest/gtest.h>

#include "core/runtime.h"
#include "transports/loopback/loopback_world.h"

namespace kolo::core::testing {

// Every rank allocates and touches a fusion buffer of the threshold's size at start
// (docs/design.md, Rules, 7) and unmaps it at shutdown: at the default 64 MiB that was
// most of these tests' CPU time (a 19-rank test: 0.8 s of 0.9 s, and 100 s of
// wall time under TSan on a loaded machine). A job left at the default gets
// kTestFusionBytes instead, more than any test here fuses; a test that sets a
// threshold keeps it.
constexpr int64_t kTestFusionBytes = int64_t{4} << 20;

class LoopbackJob {
 public:
  // Changes the worlds before the runtimes start (e.g. wraps their control planes).
  using Decorate = std::function<void(std::vector<transport::World>*)>;

  // Starts every rank's runtime on its own thread (Runtime::start is collective).
  LoopbackJob(int size, Config config = Config(), int node_size = 0,
              const Decorate& decorate = nullptr) {
    if (config.fusion_threshold_bytes == Config().fusion_threshold_bytes)
      config.fusion_threshold_bytes = kTestFusionBytes;
    auto worlds = loopback::create_worlds(size, node_size);
    if (decorate) decorate(&worlds);
    runtimes_.resize(worlds.size());
    std::vector<Status> started(worlds.size());
    std::vector<std::thread> threads;
    for (size_t r = 0; r < worlds.size(); ++r)
      threads.emplace_back(
          [&, r] { started[r] = Runtime::start(std::move(worlds[r]), config, &runtimes_[r]); });
    for (auto& t : threads) t.join();
    for (const Status& s : started) EXPECT_TRUE(s.ok()) << s.to_string();
  }
  ~LoopbackJob() { shutdown(); }

  int size() const { return static_cast<int>(runtimes_.size()); }
  Runtime& rank(int r) { return *runtimes_[r]; }

  // Runs fn(rank, runtime) on one thread per rank and joins them.
  void run(const std::function<void(int, Runtime&)>& fn) {
    std::vector<std::thread> threads;
    for (int r = 0; r < size(); ++r) threads.emplace_back([&, r] { fn(r, *runtimes_[r]); });
    for (auto& t : threads) t.join();
  }

  void shutdown() {
    for (auto& rt : runtimes_)
      if (rt) rt->shutdown();
  }

 private:
  std::vector<std::unique_ptr<Runtime>> runtimes_;
};

// Enqueues any collective and returns its handle, expecting `expect` from submit.
inline std::shared_ptr<HandleState> submit_args(Runtime& rt, CollectiveArgs a,
                                                Code expect = Code::kOk) {
  const std::string name = a.name;
  std::shared_ptr<HandleState> h;
  Status s = rt.submit(std::move(a), &h);
  EXPECT_EQ(s.code(), expect) << name << ": " << s.to_string();
  return h;
}

// Enqueues an allreduce and returns its handle (failing the test on error).
inline std::shared_ptr<HandleState> submit(Runtime& rt, const std::string& name, const void* in,
                                           void* out, int64_t count, DataType dtype,
                                           ReduceOp op = ReduceOp::kSum, double prescale = 1.0,
                                           double postscale = 1.0) {
  CollectiveArgs a;
  a.collective = Collective::kAllreduce;
  a.name = name;
  a.input = in;
  a.output = out;
  a.rows = count;
  a.dtype = dtype;
  a.op = op;
  a.prescale = prescale;
  a.postscale = postscale;
  return submit_args(rt, std::move(a));
}

inline Code wait_code(const std::shared_ptr<HandleState>& h) {
  if (!h) return Code::kInternal;
  EXPECT_TRUE(h->wait(60.0)) << "handle did not complete within 60 s";
  return h->code();
}

}  // namespace kolo::core::testing
