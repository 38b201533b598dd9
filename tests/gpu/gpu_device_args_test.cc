// What the C API accepts and refuses for CUDA tensors (kolo.h, above kolo_device_t):
// uint16 and int16 are unsupported (NCCL has no such types) with a message naming
// the dtype; a device ordinal that does not exist is an invalid argument naming it,
// and nothing is enqueued; index -1 is kolo's choice (local rank modulo the visible
// devices); the dtype rules of the CPU path hold for devices too; and a name
// submitted as CUDA memory on one rank and as CPU memory on another is a mismatch.
#include "gpu_support.h"

namespace kolo_gpu_test {
namespace {

class GpuDeviceArgs : public GpuTest {
 protected:
  // Submits a one-rank-sized allreduce; returns the first error (the submission's,
  // or the handle's) and its message.
  kolo_status_t submit_and_wait(const std::string& tensor, void* buf, int64_t count,
                                kolo_dtype_t dtype, kolo_op_t op, kolo_device_t device,
                                std::string* message, double prescale = 1.0) {
    kolo_handle_t h = nullptr;
    kolo_status_t s = kolo_allreduce_async(tensor.c_str(), buf, buf, count, dtype, op, prescale,
                                           1.0, device, &h);
    if (s != KOLO_OK) {
      *message = kolo_last_error();
      EXPECT_EQ(h, nullptr) << "a failed submission returned a handle";
      return s;
    }
    return finish(h, message);
  }
};

// Unsupported either at submission or on the handle: the contract says the
// operation fails with KOLO_ERR_UNSUPPORTED, and the message names the dtype.
TEST_F(GpuDeviceArgs, Uint16AndInt16AreUnsupported) {
  DeviceBuffer buf(64 * sizeof(uint16_t));
  buf.fill_bytes(0);
  for (auto [dtype, label] : {std::pair{KOLO_UINT16, "uint16"}, std::pair{KOLO_INT16, "int16"}}) {
    std::string message;
    EXPECT_EQ(submit_and_wait(name(label), buf.get(), 64, dtype, KOLO_OP_SUM, cuda(), &message),
              KOLO_ERR_UNSUPPORTED)
        << label;
    EXPECT_NE(message.find(label), std::string::npos) << "message: " << message;
  }
  // The same names work afterwards as a supported dtype: nothing stayed in flight.
  std::string message;
  EXPECT_EQ(submit_and_wait(name("uint16"), buf.get(), 64, KOLO_INT32, KOLO_OP_SUM, cuda(),
                            &message),
            KOLO_OK)
      << message;
}

TEST_F(GpuDeviceArgs, MissingDeviceIsAnInvalidArgument) {
  DeviceBuffer buf(16 * sizeof(float));
  buf.fill_bytes(0);
  kolo_device_t d = cuda();
  d.index = 99;
  kolo_handle_t h = nullptr;
  EXPECT_EQ(kolo_allreduce_async(name("x").c_str(), buf.get(), buf.get(), 16, KOLO_FLOAT32,
                                 KOLO_OP_SUM, 1.0, 1.0, d, &h),
            KOLO_ERR_INVALID_ARGUMENT);
  EXPECT_EQ(h, nullptr);
  const std::string message = kolo_last_error();
  EXPECT_NE(message.find("99"), std::string::npos) << "message: " << message;
  // Nothing was enqueued: the name is free at once.
  std::string again;
  EXPECT_EQ(submit_and_wait(name("x"), buf.get(), 16, KOLO_FLOAT32, KOLO_OP_SUM, cuda(), &again),
            KOLO_OK)
      << again;

  d.index = -2;
  EXPECT_EQ(kolo_allreduce_async(name("y").c_str(), buf.get(), buf.get(), 16, KOLO_FLOAT32,
                                 KOLO_OP_SUM, 1.0, 1.0, d, &h),
            KOLO_ERR_INVALID_ARGUMENT);
  EXPECT_EQ(h, nullptr);
}

// Index -1: kolo picks local_rank % devices, which is where GpuTest allocated.
TEST_F(GpuDeviceArgs, IndexMinusOneIsLocalRankModuloDevices) {
  constexpr int64_t kCount = 1001;
  std::vector<int32_t> host(kCount);
  for (int64_t i = 0; i < kCount; ++i) host[i] = static_cast<int32_t>(i - 500 + rank_);
  DeviceBuffer buf(kCount * sizeof(int32_t));
  buf.upload(host.data(), kCount * sizeof(int32_t));
  kolo_device_t d = cuda();
  d.index = -1;
  std::string message;
  ASSERT_EQ(submit_and_wait(name("x"), buf.get(), kCount, KOLO_INT32, KOLO_OP_SUM, d, &message),
            KOLO_OK)
      << message;
  buf.download(host.data(), kCount * sizeof(int32_t));
  const int rank_sum = size_ * (size_ - 1) / 2;
  for (int64_t i = 0; i < kCount; ++i)
    ASSERT_EQ(host[i], static_cast<int32_t>(size_ * (i - 500) + rank_sum)) << "element " << i;
}

// The dtype rules are the CPU path's, checked at submission; integer scale
// factors, which host memory takes, are refused on the device as unsupported.
TEST_F(GpuDeviceArgs, BoolAverageIsInvalidAndIntegerScalesUnsupported) {
  DeviceBuffer buf(64);
  buf.fill_bytes(0);
  std::string message;
  EXPECT_EQ(submit_and_wait(name("bool"), buf.get(), 8, KOLO_BOOL, KOLO_OP_AVERAGE, cuda(),
                            &message),
            KOLO_ERR_INVALID_ARGUMENT);
  EXPECT_NE(message.find("bool"), std::string::npos) << "message: " << message;
  EXPECT_EQ(submit_and_wait(name("int"), buf.get(), 8, KOLO_INT32, KOLO_OP_SUM, cuda(), &message,
                            2.0),
            KOLO_ERR_UNSUPPORTED);
  EXPECT_NE(message.find("int32"), std::string::npos) << "message: " << message;
}

// Rank 0 submits CUDA memory, the others CPU memory, under one name: every rank's
// handle fails with a mismatch that names the device on each side.
TEST_F(GpuDeviceArgs, CudaOnOneRankAndCpuOnAnotherIsAMismatch) {
  if (size_ < 2) GTEST_SKIP() << "needs two ranks (a mismatch is between ranks)";
  constexpr int64_t kCount = 32;
  DeviceBuffer dev(kCount * sizeof(float));
  dev.fill_bytes(0);
  std::vector<float> host(kCount, 1.0f);
  kolo_device_t cpu;
  cpu.kind = KOLO_DEVICE_CPU;
  cpu.index = 0;
  cpu.stream = nullptr;
  std::string message;
  const kolo_status_t s =
      rank_ == 0
          ? submit_and_wait(name("x"), dev.get(), kCount, KOLO_FLOAT32, KOLO_OP_SUM, cuda(), &message)
          : submit_and_wait(name("x"), host.data(), kCount, KOLO_FLOAT32, KOLO_OP_SUM, cpu, &message);
  EXPECT_EQ(s, KOLO_ERR_MISMATCH) << message;
  EXPECT_NE(message.find("cpu"), std::string::npos) << "message: " << message;
  EXPECT_NE(message.find("cuda"), std::string::npos) << "message: " << message;
}

}  // namespace
}  // namespace kolo_gpu_test
