// The coordinator's device path without a GPU (Note [Device work in flight],
// Note [Device streams]): a fake device transport stands in for NCCL. Its work
// completes only when the test opens a gate, so the tests can see what happens
// while device work is in flight: handles stay pending, other tensors go on, the
// name stays taken, kolo_handle_stream_wait waits for the launch, and shutdown
// lets queued work finish. "Device memory" here is host memory.
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstring>
#include <mutex>
#include <thread>
#include <vector>

#include <algorithm>

#include "core/runtime.h"
#include "loopback_job.h"
#include "transports/loopback/loopback_world.h"

namespace kolo::core {
namespace {

using testing::submit;
using testing::submit_args;
using testing::wait_code;
using transport::Bucket;
using transport::DeviceEvent;

struct FakeEvent : DeviceEvent {
  explicit FakeEvent(int id) : id(id) {}
  int id;
};

// What the fake saw and the gate its work waits for. Shared by test and transport.
struct Gate {
  std::mutex mu;
  std::condition_variable cv;
  bool open = false;
  Status outcome;
  std::vector<Bucket> buckets;  // as handed over
  std::vector<const DeviceEvent*> stream_waits;
  int recorded = 0;
  // The coordinator's waker rings its control plane, which goes when the world
  // does: the fake clears it in its destructor, and a call in flight holds
  // wake_mu, so none runs past the transport (set_completion_waker's contract).
  std::mutex wake_mu;
  std::function<void()> wake;

  void release(Status s = Status::OK()) {
    {
      std::lock_guard<std::mutex> lock(mu);
      open = true;
      outcome = std::move(s);
    }
    cv.notify_all();
    std::lock_guard<std::mutex> lock(wake_mu);
    if (wake) wake();
  }
  size_t bucket_count() {
    std::lock_guard<std::mutex> lock(mu);
    return buckets.size();
  }
};

// Done when the gate is open; then "reduces" with one rank: output = input *
// prescale * postscale (floats; AVERAGE's 1/size is in postscale).
class GateWork : public transport::Work {
 public:
  GateWork(std::shared_ptr<Gate> gate, Bucket bucket)
      : gate_(std::move(gate)), bucket_(std::move(bucket)), done_(std::make_shared<FakeEvent>(-1)) {}
  bool test() override {
    std::lock_guard<std::mutex> lock(gate_->mu);
    return gate_->open;
  }
  Status wait() override {
    std::unique_lock<std::mutex> lock(gate_->mu);
    gate_->cv.wait(lock, [&] { return gate_->open; });
    if (!gate_->outcome.ok()) return gate_->outcome;
    for (const transport::BucketTensor& t : bucket_.tensors) {
      const auto* in = static_cast<const float*>(t.input);
      auto* out = static_cast<float*>(t.output);
      for (int64_t i = 0; i < t.count; ++i)
        out[i] = static_cast<float>(in[i] * bucket_.reduction.prescale * bucket_.reduction.postscale);
    }
    return Status::OK();
  }
  std::shared_ptr<DeviceEvent> done_event() const override { return done_; }

 private:
  std::shared_ptr<Gate> gate_;
  Bucket bucket_;
  std::shared_ptr<DeviceEvent> done_;
};

class FakeDevice : public transport::Transport, public transport::DeviceSupport {
 public:
  explicit FakeDevice(std::shared_ptr<Gate> gate) : gate_(std::move(gate)) {}
  ~FakeDevice() override {
    std::lock_guard<std::mutex> lock(gate_->wake_mu);
    gate_->wake = nullptr;
  }
  const char* name() const override { return "nccl"; }
  transport::Capabilities capabilities() const override {
    transport::Capabilities c;
    c.collectives = transport::kAllCollectives;
    c.device = true;
    return c;
  }
  Status supports(const Bucket& b) const override {
    return b.device.kind == DeviceKind::kCuda ? Status::OK() : unsupported("fake: CUDA only");
  }
  std::unique_ptr<transport::Work> allreduce(const Bucket& b) override {
    std::lock_guard<std::mutex> lock(gate_->mu);
    gate_->buckets.push_back(b);
    return std::make_unique<GateWork>(gate_, b);
  }
  void set_completion_waker(std::function<void()> wake) override {
    std::lock_guard<std::mutex> lock(gate_->wake_mu);
    gate_->wake = std::move(wake);
  }
  Status resolve(Device* d) override {
    if (d->index == -1) d->index = 0;
    return d->index == 0 ? Status::OK() : invalid_argument("fake: only device 0");
  }
  Status record_ready(const Device&, std::shared_ptr<DeviceEvent>* ready) override {
    std::lock_guard<std::mutex> lock(gate_->mu);
    *ready = std::make_shared<FakeEvent>(++gate_->recorded);
    return Status::OK();
  }
  Status stream_wait(const DeviceEvent& e, void*) override {
    std::lock_guard<std::mutex> lock(gate_->mu);
    gate_->stream_waits.push_back(&e);
    return Status::OK();
  }
  Status allocate(const Device&, size_t bytes, std::shared_ptr<char>* out) override {
    *out = std::shared_ptr<char>(new char[bytes + 1], std::default_delete<char[]>());
    return Status::OK();
  }
  Status allocate_zeros(const Device& d, size_t bytes, std::shared_ptr<char>* out) override {
    Status s = allocate(d, bytes, out);
    if (!s.ok()) return s;
    std::fill(out->get(), out->get() + bytes, 0);
    return Status::OK();
  }

 private:
  std::shared_ptr<Gate> gate_;
};

// One rank over loopback, with the fake as its device transport.
std::unique_ptr<Runtime> start_with_fake(const std::shared_ptr<Gate>& gate) {
  auto worlds = loopback::create_worlds(1);
  auto fake = std::make_unique<FakeDevice>(gate);
  worlds[0].device_support = fake.get();
  worlds[0].transports.push_back(std::move(fake));
  std::unique_ptr<Runtime> rt;
  Status s = Runtime::start(std::move(worlds[0]), Config(), &rt);
  EXPECT_TRUE(s.ok()) << s.to_string();
  return rt;
}

CollectiveArgs cuda_allreduce(const std::string& name, const float* in, float* out, int64_t count,
                              ReduceOp op = ReduceOp::kSum, double prescale = 1.0,
                              double postscale = 1.0) {
  CollectiveArgs a;
  a.name = name;
  a.input = in;
  a.output = out;
  a.rows = count;
  a.op = op;
  a.prescale = prescale;
  a.postscale = postscale;
  a.device = Device{DeviceKind::kCuda, -1, nullptr};
  return a;
}

// Waits (60 s at most: sanitizers on a loaded machine are slow) for n buckets.
void wait_for_buckets(Gate& gate, size_t n) {
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(60);
  while (gate.bucket_count() < n && std::chrono::steady_clock::now() < deadline)
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  ASSERT_GE(gate.bucket_count(), n);
}

TEST(DevicePathTest, HandleCompletesOnlyWhenTheDeviceWorkHasAndOthersGoOn) {
  auto gate = std::make_shared<Gate>();
  auto rt = start_with_fake(gate);
  std::vector<float> in(8, 3.0f), out(8, 0.0f);
  auto h = submit_args(*rt, cuda_allreduce("grad", in.data(), out.data(), 8));
  wait_for_buckets(*gate, 1);
  std::this_thread::sleep_for(std::chrono::milliseconds(20));
  EXPECT_FALSE(h->done());
  // The coordinator is not blocked: a CPU tensor completes meanwhile.
  std::vector<float> cin(4, 1.0f), cout(4, 0.0f);
  auto cpu = submit(*rt, "cpu", cin.data(), cout.data(), 4, DataType::kFloat32);
  EXPECT_EQ(wait_code(cpu), Code::kOk);
  EXPECT_FALSE(h->done());
  // The name stays in flight until the device work completes.
  std::shared_ptr<HandleState> dup;
  EXPECT_EQ(rt->submit(cuda_allreduce("grad", in.data(), out.data(), 8), &dup).code(),
            Code::kDuplicateName);
  gate->release();
  EXPECT_EQ(wait_code(h), Code::kOk);
  EXPECT_EQ(out, std::vector<float>(8, 3.0f));
  rt->shutdown();
}

TEST(DevicePathTest, DeviceBucketsCarryTensorsReadyEventsAndFactors) {
  auto gate = std::make_shared<Gate>();
  auto rt = start_with_fake(gate);
  // While "first" is in flight the next three are negotiated, fused or not as
  // they arrive; every bucket must carry its tensors whole.
  std::vector<float> a(4, 1.0f), b(2, 2.0f), c(3, 4.0f), oa(4), ob(2), oc(3), first(1, 1.0f), of(1);
  auto h0 = submit_args(*rt, cuda_allreduce("first", first.data(), of.data(), 1));
  wait_for_buckets(*gate, 1);
  auto ha = submit_args(*rt, cuda_allreduce("a", a.data(), oa.data(), 4, ReduceOp::kAverage, 2.0, 0.5));
  auto hb = submit_args(*rt, cuda_allreduce("b", b.data(), ob.data(), 2, ReduceOp::kAverage, 2.0, 0.5));
  auto hc = submit_args(*rt, cuda_allreduce("c", c.data(), oc.data(), 3, ReduceOp::kAverage, 2.0, 0.5));
  gate->release();
  for (auto& h : {h0, ha, hb, hc}) EXPECT_EQ(wait_code(h), Code::kOk);
  {
    std::lock_guard<std::mutex> lock(gate->mu);
    ASSERT_GE(gate->buckets.size(), 2u);
    int64_t tensors = 0;
    for (size_t i = 1; i < gate->buckets.size(); ++i) {
      const Bucket& bk = gate->buckets[i];
      EXPECT_EQ(bk.device.kind, DeviceKind::kCuda);
      EXPECT_EQ(bk.device.index, 0);  // resolved
      // decide_reduction: SUM, with AVERAGE's 1/size (one rank) folded into postscale.
      EXPECT_EQ(bk.reduction.op, ReduceOp::kSum);
      EXPECT_EQ(bk.reduction.prescale, 2.0);
      EXPECT_EQ(bk.reduction.postscale, 0.5);
      for (const auto& t : bk.tensors) {
        ASSERT_NE(t.ready, nullptr);
        EXPECT_GE(static_cast<const FakeEvent*>(t.ready.get())->id, 2);
        ++tensors;
      }
    }
    EXPECT_EQ(tensors, 3);
  }
  EXPECT_EQ(oa, a);  // * 2 * 0.5
  EXPECT_EQ(ob, b);
  EXPECT_EQ(oc, c);
  rt->shutdown();
}

TEST(DevicePathTest, StreamWaitWaitsForTheLaunchThenUsesTheDoneEvent) {
  auto gate = std::make_shared<Gate>();
  auto rt = start_with_fake(gate);
  std::vector<float> in(8, 1.0f), out(8);
  auto h = submit_args(*rt, cuda_allreduce("g", in.data(), out.data(), 8));
  EXPECT_TRUE(rt->stream_wait(*h, nullptr).ok());  // returns once launched, before completion
  EXPECT_FALSE(h->done());
  {
    std::lock_guard<std::mutex> lock(gate->mu);
    ASSERT_EQ(gate->stream_waits.size(), 1u);
    EXPECT_EQ(static_cast<const FakeEvent*>(gate->stream_waits[0])->id, -1);  // the Work's event
  }
  gate->release();
  EXPECT_EQ(wait_code(h), Code::kOk);
  // A CPU handle has no device work to wait for.
  std::vector<float> cin(2, 1.0f), cout(2);
  auto cpu = submit(*rt, "cpu", cin.data(), cout.data(), 2, DataType::kFloat32);
  EXPECT_EQ(wait_code(cpu), Code::kOk);
  EXPECT_EQ(rt->stream_wait(*cpu, nullptr).code(), Code::kInvalidArgument);
  rt->shutdown();
}

TEST(DevicePathTest, DeviceFailureFailsEveryHandleOfTheBucketWithItsMessage) {
  auto gate = std::make_shared<Gate>();
  auto rt = start_with_fake(gate);
  std::vector<float> in(8, 1.0f), out(8);
  auto h = submit_args(*rt, cuda_allreduce("g", in.data(), out.data(), 8));
  wait_for_buckets(*gate, 1);
  gate->release(Status(Code::kTransport, "NCCL: unhandled system error"));
  EXPECT_EQ(wait_code(h), Code::kTransport);
  EXPECT_NE(h->message().find("unhandled system error"), std::string::npos) << h->message();
  rt->shutdown();
}

TEST(DevicePathTest, BadDeviceIsRefusedAtSubmissionAndShutdownLetsQueuedWorkFinish) {
  auto gate = std::make_shared<Gate>();
  auto rt = start_with_fake(gate);
  std::vector<float> in(8, 5.0f), out(8);
  CollectiveArgs bad = cuda_allreduce("bad", in.data(), out.data(), 8);
  bad.device.index = 3;
  std::shared_ptr<HandleState> none;
  Status s = rt->submit(bad, &none);
  EXPECT_EQ(s.code(), Code::kInvalidArgument);
  EXPECT_NE(s.message().find("tensor 'bad'"), std::string::npos) << s.message();

  auto h = submit_args(*rt, cuda_allreduce("g", in.data(), out.data(), 8));
  wait_for_buckets(*gate, 1);
  std::thread opener([&] {
    std::this_thread::sleep_for(std::chrono::milliseconds(30));
    gate->release();
  });
  rt->shutdown();  // waits for the work already queued on the device
  opener.join();
  EXPECT_TRUE(h->done());
  EXPECT_EQ(h->code(), Code::kOk);
  EXPECT_EQ(out, in);
}

TEST(DevicePathTest, WorldWithoutDeviceTransportRefusesCudaTensors) {
  auto worlds = loopback::create_worlds(1);
  std::unique_ptr<Runtime> rt;
  ASSERT_TRUE(Runtime::start(std::move(worlds[0]), Config(), &rt).ok());
  std::vector<float> in(2), out(2);
  std::shared_ptr<HandleState> h;
  Status s = rt->submit(cuda_allreduce("g", in.data(), out.data(), 2), &h);
  EXPECT_EQ(s.code(), Code::kUnsupported);
  EXPECT_NE(s.message().find("NCCL"), std::string::npos) << s.message();
  rt->shutdown();
}

}  // namespace
}  // namespace kolo::core
