// The executor's fused allgather and broadcast (Note [Fused allgather and
// broadcast] in executor_gather.h), ranks as threads over the loopback transport: one
// cycle's responses handed to Executor::execute() directly, so that what shares
// a bucket is decided by the planner alone (through the runtime, what lands in
// one cycle depends on timing). A counting wrapper around the loopback transport
// shows how many operations ran; the outputs are compared exactly, at 1..4 ranks,
// every dtype, uneven rows, zero rows, allreduces and broadcasts mixed in.
#include <gtest/gtest.h>

#include <atomic>
#include <cstring>
#include <map>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "core/executor.h"
#include "transports/loopback/loopback_world.h"

namespace kolo::core {
namespace {


// Forwards to a transport and counts the operations started through it.
class Counting : public transport::Transport {
 public:
  explicit Counting(transport::Transport* inner) : inner_(inner) {}
  const char* name() const override { return inner_->name(); }
  transport::Capabilities capabilities() const override { return inner_->capabilities(); }
  Status supports(const transport::Bucket& b) const override { return inner_->supports(b); }
  std::unique_ptr<transport::Work> allreduce(const transport::Bucket& b) override {
    ++allreduces;
    return inner_->allreduce(b);
  }
  Status supports_collective(Collective op, const transport::CollectiveView& v) const override {
    return inner_->supports_collective(op, v);
  }
  std::unique_ptr<transport::Work> collective(Collective op,
                                              const transport::CollectiveView& v) override {
    ++(op == Collective::kAllgather ? allgathers : broadcasts);
    if (v.callers_output) ++callers_outputs;
    return inner_->collective(op, v);
  }
  int allreduces = 0, allgathers = 0, broadcasts = 0;
  int callers_outputs = 0;  // views whose output is the caller's buffer

 private:
  transport::Transport* inner_;
};

// One rank's executor over its loopback world, the "loopback" transport only.
struct Rank {
  Rank(transport::World w, size_t fusion_bytes, size_t threshold, size_t alone)
      : world(std::move(w)),
        counting(world.transports[0].get()),
        selector({&counting}, "auto", world.control->topology()),
        fusion(fusion_bytes),
        executor(selector, fusion, world.control->topology().rank, world.control->topology().size,
                 [](TensorEntry& e, Status s, Clock::time_point at) {
                   e.handle->complete(std::move(s), at);
                 },
                 nullptr) {
    executor.set_sizes(threshold, alone);
  }
  transport::World world;
  Counting counting;
  transport::Selector selector;
  FusionBuffer fusion;
  Executor executor;
};

// Runs fn(rank, Rank&) on a thread per rank.
template <typename Fn>
void run_ranks(int size, size_t threshold, size_t alone, Fn fn) {
  auto worlds = loopback::create_worlds(size);
  std::vector<std::thread> threads;
  for (int r = 0; r < size; ++r) {
    threads.emplace_back([&, r] {
      Rank rank(std::move(worlds[r]), 1 << 20, threshold, alone);
      fn(r, rank);
    });
  }
  for (auto& t : threads) t.join();
}

// Every tensor's elements are bytes i * 7 + 3 * source + tensor (mod 251),
// whatever the dtype: allgather and broadcast move bits, so bytes compare exactly.
unsigned char byte_of(int source, int tensor, size_t i) {
  return static_cast<unsigned char>((i * 7 + 3 * source + tensor) % 251);
}

// Rows that allgather tensor t gets from rank r: uneven, some ranks none.
int64_t rows_of(int t, int r) { return (t + 2 * r) % 3; }

struct Cycle {
  std::vector<Response> responses;
  std::vector<std::vector<unsigned char>> inputs, outputs;  // per response, this rank's
  Pending pending;
};

// Builds, identically on every rank, a cycle of `per_dtype` allgathers and
// `per_dtype` broadcasts (roots 0 and size-1 alternating) of every dtype, and
// float32 sum allreduces between them; and this rank's entries for them.
Cycle make_cycle(int rank, int size, int per_dtype) {
  Cycle c;
  int t = 0;
  for (int d = 0; d < kNumDataTypes; ++d) {
    const DataType dtype = static_cast<DataType>(d);
    for (int k = 0; k < per_dtype; ++k, ++t) {
      Response g;
      g.name = "g" + std::to_string(t);
      g.params.collective = Collective::kAllgather;
      g.params.dtype = dtype;
      g.params.row_count = 1 + t % 3;
      for (int r = 0; r < size; ++r) g.rows_per_rank.push_back(rows_of(t, r));
      g.params.count = g.rows_per_rank[0] * g.params.row_count;  // rank 0's, as validate() gives
      c.responses.push_back(g);
      Response b;
      b.name = "b" + std::to_string(t);
      b.params.collective = Collective::kBroadcast;
      b.params.dtype = dtype;
      b.params.count = t % 4;  // some empty
      b.params.root = k % 2 == 0 ? 0 : size - 1;
      c.responses.push_back(b);
      Response a;
      a.name = "a" + std::to_string(t);
      a.params.collective = Collective::kAllreduce;
      a.params.dtype = DataType::kFloat32;
      a.params.count = 5;
      c.responses.push_back(a);
    }
  }
  c.inputs.resize(c.responses.size());
  c.outputs.resize(c.responses.size());
  for (size_t i = 0; i < c.responses.size(); ++i) {
    const Response& resp = c.responses[i];
    TensorEntry e;
    e.request.name = resp.name;
    e.request.params = resp.params;
    const size_t elem = dtype_size(resp.params.dtype);
    if (resp.params.collective == Collective::kAllgather) {
      e.request.params.count = resp.rows_per_rank[rank] * resp.params.row_count;
    }
    const size_t bytes = static_cast<size_t>(e.request.params.count) * elem;
    c.inputs[i].resize(bytes);
    if (resp.params.collective == Collective::kAllreduce) {
      for (size_t j = 0; j < 5; ++j) {
        const float v = static_cast<float>((rank + 1) * (j + i));
        std::memcpy(c.inputs[i].data() + j * 4, &v, 4);
      }
    } else {
      for (size_t j = 0; j < bytes; ++j) c.inputs[i][j] = byte_of(rank, static_cast<int>(i), j);
    }
    c.outputs[i].assign(resp.params.collective == Collective::kAllgather ? 0 : bytes, 0xEE);
    e.input = c.inputs[i].data();
    e.output = c.outputs[i].data();
    e.device = Device{DeviceKind::kCpu, 0, nullptr};
    e.handle = std::make_shared<HandleState>();
    c.pending.emplace(resp.name, std::move(e));
  }
  return c;
}

// Each response's result on this rank, exact.
void check_cycle(const Cycle& c, std::vector<std::shared_ptr<HandleState>>& handles, int size) {
  for (size_t i = 0; i < c.responses.size(); ++i) {
    const Response& resp = c.responses[i];
    SCOPED_TRACE(resp.name + " (" + dtype_name(resp.params.dtype) + ")");
    ASSERT_TRUE(handles[i]->done());
    ASSERT_EQ(handles[i]->code(), Code::kOk) << handles[i]->message();
    const size_t elem = dtype_size(resp.params.dtype);
    if (resp.params.collective == Collective::kAllgather) {
      std::vector<unsigned char> want;
      for (int r = 0; r < size; ++r) {
        const size_t bytes = static_cast<size_t>(resp.rows_per_rank[r] * resp.params.row_count) * elem;
        for (size_t j = 0; j < bytes; ++j) want.push_back(byte_of(r, static_cast<int>(i), j));
      }
      EXPECT_EQ(handles[i]->splits, resp.rows_per_rank);
      ASSERT_EQ(handles[i]->output.size(), want.size());
      std::vector<unsigned char> got(want.size());
      if (!want.empty()) std::memcpy(got.data(), handles[i]->output.data(), want.size());
      EXPECT_EQ(got, want);
    } else if (resp.params.collective == Collective::kBroadcast) {
      std::vector<unsigned char> want(c.outputs[i].size());
      for (size_t j = 0; j < want.size(); ++j) want[j] = byte_of(resp.params.root, static_cast<int>(i), j);
      EXPECT_EQ(c.outputs[i], want);
    } else {
      for (size_t j = 0; j < 5; ++j) {
        float got;
        std::memcpy(&got, c.outputs[i].data() + j * 4, 4);
        EXPECT_EQ(got, static_cast<float>(size * (size + 1) / 2 * (j + i)));
      }
    }
  }
}

void run_cycle(Rank& r, int rank, int size, int per_dtype) {
  Cycle c = make_cycle(rank, size, per_dtype);
  std::vector<std::shared_ptr<HandleState>> handles;
  for (const Response& resp : c.responses) {
    auto it = c.pending.find(resp.name);
    ASSERT_NE(it, c.pending.end()) << resp.name;
    handles.push_back(it->second.handle);
  }
  r.executor.execute(c.responses, &c.pending);
  EXPECT_TRUE(c.pending.empty());
  check_cycle(c, handles, size);
}

TEST(ExecutorFusion, OneAllgatherAndOneBroadcastPerDtypeAndRootExactAtEveryWorldSize) {
  for (int size : {1, 2, 3, 4}) {
    SCOPED_TRACE("size " + std::to_string(size));
    run_ranks(size, 1 << 20, 1 << 20, [&](int rank, Rank& r) {
      run_cycle(r, rank, size, 4);
      // One allgather per dtype; broadcasts: one per dtype and root, but a
      // bucket of empty broadcasts makes no call, and at one rank the roots agree.
      EXPECT_EQ(r.counting.allgathers, kNumDataTypes);
      EXPECT_EQ(r.counting.broadcasts, kNumDataTypes * (size == 1 ? 1 : 2));
      EXPECT_EQ(r.counting.allreduces, 1);
    });
  }
}

TEST(ExecutorFusion, ThresholdAndLargeTensorCutOffBoundTheBuckets) {
  // Threshold 0: every tensor alone, as before fusion (empty ones make no call).
  run_ranks(3, 0, 1 << 20, [&](int rank, Rank& r) {
    run_cycle(r, rank, 3, 3);
    EXPECT_GT(r.counting.allgathers, 2 * kNumDataTypes);
  });
  // A cut-off of 1 byte: nothing is packed (every non-empty tensor is "large").
  run_ranks(2, 1 << 20, 1, [&](int rank, Rank& r) { run_cycle(r, rank, 2, 3); });
  // A small threshold: several buckets per dtype, still exact.
  run_ranks(4, 24, 1 << 20, [&](int rank, Rank& r) {
    run_cycle(r, rank, 4, 4);
    EXPECT_GT(r.counting.allgathers, kNumDataTypes);
  });
}

// An allgather into the caller's output tells the transport so (a hint for how
// to write it: Note [Streaming the output] in transports/shm/collectives.cc),
// and gathers there; one into kolo's output does not.
TEST(ExecutorFusion, AnAllgatherIntoTheCallersOutputTellsTheTransport) {
  for (bool into : {false, true}) {
    SCOPED_TRACE(into ? "into the caller's output" : "into kolo's output");
    run_ranks(2, 0, 1, [&](int rank, Rank& r) {
      Response g;
      g.name = "g";
      g.params.collective = Collective::kAllgather;
      g.params.dtype = DataType::kInt32;
      g.params.row_count = 2;
      g.params.count = 6;
      g.params.into = into;
      g.rows_per_rank = {3, 3};
      std::vector<int32_t> in(6), out(12, -1);
      for (int j = 0; j < 6; ++j) in[j] = 10 * rank + j;
      TensorEntry e;
      e.request.name = g.name;
      e.request.params = g.params;
      e.input = in.data();
      e.output = into ? out.data() : nullptr;
      e.device = Device{DeviceKind::kCpu, 0, nullptr};
      e.handle = std::make_shared<HandleState>();
      std::shared_ptr<HandleState> handle = e.handle;
      Pending pending;
      pending.emplace(g.name, std::move(e));
      r.executor.execute({g}, &pending);
      ASSERT_TRUE(handle->done());
      ASSERT_EQ(handle->code(), Code::kOk) << handle->message();
      const int32_t* got =
          into ? out.data() : reinterpret_cast<const int32_t*>(handle->output.data());
      for (int s = 0; s < 2; ++s)
        for (int j = 0; j < 6; ++j) EXPECT_EQ(got[6 * s + j], 10 * s + j) << s << " " << j;
      EXPECT_EQ(r.counting.allgathers, 1);
      EXPECT_EQ(r.counting.callers_outputs, into ? 1 : 0);
    });
  }
}

// A grouped allgather below the threshold is one allgather, members unpacked in
// member order; above it, one call per member as before.
TEST(ExecutorFusion, GroupedAllgatherIsOnePackedOperationWhenItFits) {
  for (size_t threshold : {size_t{1} << 20, size_t{8}}) {  // the group gathers 10 bytes
    run_ranks(3, threshold, 1 << 20, [&](int rank, Rank& r) {
      const int n = 3;
      std::vector<std::vector<int16_t>> in = {std::vector<int16_t>(2 * (rank % 2)),
                                              std::vector<int16_t>(rank)};
      Response g;
      g.name = "group";
      g.params.collective = Collective::kGroupedAllgather;
      g.params.dtype = DataType::kInt16;
      g.params.member_row_counts = {2, 1};
      for (int m = 0; m < 2; ++m)
        for (int s = 0; s < n; ++s) g.rows_per_rank.push_back(m == 0 ? s % 2 : s);
      TensorEntry e;
      e.request.name = g.name;
      e.request.params = g.params;
      e.device = Device{DeviceKind::kCpu, 0, nullptr};
      for (int m = 0; m < 2; ++m) {
        for (size_t j = 0; j < in[m].size(); ++j) in[m][j] = static_cast<int16_t>(100 * m + 10 * rank + j);
        e.members.push_back({in[m].data(), nullptr, static_cast<int64_t>(in[m].size())});
      }
      e.handle = std::make_shared<HandleState>();
      auto h = e.handle;
      Pending pending;
      pending.emplace(g.name, std::move(e));
      r.executor.execute({g}, &pending);
      ASSERT_EQ(h->code(), Code::kOk) << h->message();
      std::vector<int16_t> want;
      for (int m = 0; m < 2; ++m)
        for (int s = 0; s < n; ++s)
          for (int64_t j = 0; j < (m == 0 ? 2 * (s % 2) : s); ++j)
            want.push_back(static_cast<int16_t>(100 * m + 10 * s + j));
      ASSERT_EQ(h->output.size(), want.size() * 2);
      std::vector<int16_t> got(want.size());
      std::memcpy(got.data(), h->output.data(), h->output.size());
      EXPECT_EQ(got, want);
      EXPECT_EQ(h->splits, g.rows_per_rank);
      EXPECT_EQ(r.counting.allgathers, threshold >= 100 ? 1 : 2);
    });
  }
}

}  // namespace
}  // namespace kolo::core
