// The stream contract of kolo_device_t and kolo_handle_stream_wait (kolo.h): the
// submitting call records where the producer stream stands and returns at once;
// kolo's own stream waits for that point, never the CPU; a consumer stream can be
// made to wait for the result without blocking the CPU on the GPU.
//
// The producer is made slow on purpose: a host function that sleeps on the stream,
// then the copy that writes the input. A kolo that read the input without waiting
// for the producer would reduce the stale contents (zeros); one that blocked the
// CPU on the producer would take the sleep's time to return from the submission.
#include <chrono>
#include <thread>

#include "gpu_support.h"

namespace kolo_gpu_test {
namespace {

using Clock = std::chrono::steady_clock;
constexpr auto kProducerSleep = std::chrono::milliseconds(60);

void CUDART_CB sleep_on_stream(void*) { std::this_thread::sleep_for(kProducerSleep); }

double ms_since(Clock::time_point t0) {
  return std::chrono::duration<double, std::milli>(Clock::now() - t0).count();
}

// Pinned host memory, freed at scope exit.
class PinnedBuffer {
 public:
  explicit PinnedBuffer(size_t bytes) {
    if (cudaMallocHost(&ptr_, bytes) != cudaSuccess) ptr_ = nullptr;
  }
  ~PinnedBuffer() {
    if (ptr_) cudaFreeHost(ptr_);
  }
  PinnedBuffer(const PinnedBuffer&) = delete;
  PinnedBuffer& operator=(const PinnedBuffer&) = delete;
  template <typename T>
  T* as() const { return static_cast<T*>(ptr_); }

 private:
  void* ptr_ = nullptr;
};

// A non-blocking stream (no implicit order with the legacy default stream, so only
// the events kolo records can order it against kolo's work).
class Stream {
 public:
  Stream() { cudaStreamCreateWithFlags(&s_, cudaStreamNonBlocking); }
  ~Stream() {
    if (s_) cudaStreamDestroy(s_);
  }
  Stream(const Stream&) = delete;
  Stream& operator=(const Stream&) = delete;
  cudaStream_t get() const { return s_; }

 private:
  cudaStream_t s_ = nullptr;
};

class GpuStream : public GpuTest {
 protected:
  static constexpr int64_t kCount = 1 << 16;  // float32
  static constexpr size_t kBytes = kCount * sizeof(float);

  void SetUp() override {
    GpuTest::SetUp();
    if (IsSkipped() || HasFatalFailure()) return;
    // A first allreduce, so that one-time set-up (communicator, streams, buffers)
    // is not inside the timed submissions below.
    DeviceBuffer warm(sizeof(float));
    warm.fill_bytes(0);
    kolo_handle_t h = nullptr;
    ASSERT_EQ(kolo_allreduce_async(name("warmup").c_str(), warm.get(), warm.get(), 1,
                                   KOLO_FLOAT32, KOLO_OP_SUM, 1.0, 1.0, cuda(), &h),
              KOLO_OK)
        << kolo_last_error();
    std::string message;
    ASSERT_EQ(finish(h, &message), KOLO_OK) << message;
  }

  // On `producer`: sleep, then copy rank-dependent values (rank + 1 + i mod 5) from
  // pinned memory into `in`, which holds zeros before. Returns nothing the CPU waits on.
  void produce_late(const Stream& producer, const PinnedBuffer& host, DeviceBuffer* in) {
    in->fill_bytes(0);
    for (int64_t i = 0; i < kCount; ++i) host.as<float>()[i] = static_cast<float>(rank_ + 1 + i % 5);
    GPU_CHECK(cudaLaunchHostFunc(producer.get(), sleep_on_stream, nullptr));
    GPU_CHECK(cudaMemcpyAsync(in->get(), host.as<float>(), kBytes, cudaMemcpyHostToDevice,
                              producer.get()));
  }

  // The test's allreduce: a float32 SUM of kCount elements produced on `stream`.
  kolo_status_t sum_async(const void* in, void* out, void* stream, kolo_handle_t* h) const {
    return kolo_allreduce_async(name("x").c_str(), in, out, kCount, KOLO_FLOAT32, KOLO_OP_SUM,
                                1.0, 1.0, cuda(stream), h);
  }

  float expected_sum(int64_t i) const {
    float sum = 0;
    for (int r = 0; r < size_; ++r) sum += static_cast<float>(r + 1 + i % 5);
    return sum;
  }

  ::testing::AssertionResult sums_equal(const float* got) const {
    for (int64_t i = 0; i < kCount; ++i)
      if (got[i] != expected_sum(i))
        return ::testing::AssertionFailure()
               << "element " << i << ": got " << got[i] << ", expected " << expected_sum(i)
               << (got[i] == 0 ? " (the input before the producer wrote it)" : "");
    return ::testing::AssertionSuccess();
  }
};

// The allreduce sees what the producer stream wrote before the submission, and the
// submission does not wait for the producer.
TEST_F(GpuStream, WaitsForTheProducerStreamWithoutBlockingTheCpu) {
  Stream producer;
  PinnedBuffer host(kBytes);
  DeviceBuffer in(kBytes), out(kBytes);
  out.fill_bytes(0x7F);
  produce_late(producer, host, &in);

  kolo_handle_t h = nullptr;
  const auto t0 = Clock::now();
  ASSERT_EQ(sum_async(in.get(), out.get(), producer.get(), &h), KOLO_OK) << kolo_last_error();
  const double submit_ms = ms_since(t0);
  EXPECT_LT(submit_ms, 30.0) << "the submission blocked the CPU (the producer sleeps "
                             << kProducerSleep.count() << " ms)";
  std::string message;
  ASSERT_EQ(finish(h, &message), KOLO_OK) << message;

  std::vector<float> got(kCount);
  out.download(got.data(), kBytes);
  EXPECT_TRUE(sums_equal(got.data()));
  GPU_CHECK(cudaStreamSynchronize(producer.get()));
}

// kolo_handle_stream_wait orders a consumer stream after the allreduce: a copy of
// the output queued on it right away reads the result, although the input is only
// produced ~60 ms later. The CPU waits for nothing but the consumer stream.
TEST_F(GpuStream, StreamWaitOrdersAConsumerStream) {
  Stream producer, consumer;
  PinnedBuffer host_in(kBytes), host_out(kBytes);
  DeviceBuffer in(kBytes), out(kBytes);
  out.fill_bytes(0);
  produce_late(producer, host_in, &in);

  kolo_handle_t h = nullptr;
  ASSERT_EQ(sum_async(in.get(), out.get(), producer.get(), &h), KOLO_OK) << kolo_last_error();
  const auto t0 = Clock::now();
  EXPECT_EQ(kolo_handle_stream_wait(h, consumer.get()), KOLO_OK) << kolo_last_error();
  EXPECT_LT(ms_since(t0), 30.0) << "kolo_handle_stream_wait waited for the GPU work";
  GPU_CHECK(cudaMemcpyAsync(host_out.as<float>(), out.get(), kBytes, cudaMemcpyDeviceToHost,
                            consumer.get()));
  GPU_CHECK(cudaStreamSynchronize(consumer.get()));
  EXPECT_TRUE(sums_equal(host_out.as<float>()));

  std::string message;
  EXPECT_EQ(finish(h, &message), KOLO_OK) << message;
  GPU_CHECK(cudaStreamSynchronize(producer.get()));
}

// The legacy default stream (stream NULL) as producer and as consumer.
TEST_F(GpuStream, LegacyDefaultStream) {
  PinnedBuffer host(kBytes);
  DeviceBuffer in(kBytes);
  for (int64_t i = 0; i < kCount; ++i) host.as<float>()[i] = static_cast<float>(rank_ + 1 + i % 5);
  GPU_CHECK(cudaMemcpyAsync(in.get(), host.as<float>(), kBytes, cudaMemcpyHostToDevice, nullptr));

  kolo_handle_t h = nullptr;
  ASSERT_EQ(sum_async(in.get(), in.get(), nullptr, &h), KOLO_OK) << kolo_last_error();
  EXPECT_EQ(kolo_handle_stream_wait(h, nullptr), KOLO_OK) << kolo_last_error();
  std::vector<float> got(kCount);
  GPU_CHECK(cudaMemcpy(got.data(), in.get(), kBytes, cudaMemcpyDeviceToHost));
  EXPECT_TRUE(sums_equal(got.data()));
  std::string message;
  EXPECT_EQ(finish(h, &message), KOLO_OK) << message;
}

// After kolo_wait the result is readable from any stream, with no further sync.
TEST_F(GpuStream, WaitMeansReadableFromAnyStream) {
  Stream producer, reader;
  PinnedBuffer host_in(kBytes), host_out(kBytes);
  DeviceBuffer in(kBytes), out(kBytes);
  out.fill_bytes(0);
  produce_late(producer, host_in, &in);
  kolo_handle_t h = nullptr;
  ASSERT_EQ(sum_async(in.get(), out.get(), producer.get(), &h), KOLO_OK) << kolo_last_error();
  std::string message;
  ASSERT_EQ(finish(h, &message), KOLO_OK) << message;
  GPU_CHECK(cudaMemcpyAsync(host_out.as<float>(), out.get(), kBytes, cudaMemcpyDeviceToHost,
                            reader.get()));
  GPU_CHECK(cudaStreamSynchronize(reader.get()));
  EXPECT_TRUE(sums_equal(host_out.as<float>()));
  GPU_CHECK(cudaStreamSynchronize(producer.get()));
}

TEST_F(GpuStream, StreamWaitRejectsNullAndCpuHandles) {
  EXPECT_EQ(kolo_handle_stream_wait(nullptr, nullptr), KOLO_ERR_INVALID_ARGUMENT);
  float x = 1.0f;
  kolo_handle_t h = nullptr;
  kolo_device_t cpu;
  cpu.kind = KOLO_DEVICE_CPU;
  cpu.index = 0;
  cpu.stream = nullptr;
  ASSERT_EQ(kolo_allreduce_async(name("cpu").c_str(), &x, &x, 1, KOLO_FLOAT32, KOLO_OP_SUM, 1.0,
                                 1.0, cpu, &h),
            KOLO_OK)
      << kolo_last_error();
  EXPECT_EQ(kolo_handle_stream_wait(h, nullptr), KOLO_ERR_INVALID_ARGUMENT);
  std::string message;
  EXPECT_EQ(finish(h, &message), KOLO_OK) << message;
  EXPECT_EQ(x, static_cast<float>(size_));
}

}  // namespace
}  // namespace kolo_gpu_test
