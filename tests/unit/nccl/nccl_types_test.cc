// kolo <-> NCCL/CUDA vocabulary (transports/nccl/nccl_types.h), and the device
// kernels' host side on a machine without a usable GPU: argument errors and
// empty work need no device, a real launch fails with a CUDA Status instead of
// crashing.
#include "transports/nccl/nccl_types.h"

#include <gtest/gtest.h>

#include <cstdint>
#include <string>
#include <vector>

#include "transports/nccl/device_kernels.h"

namespace kolo::nccl {
namespace {

bool contains(const std::string& text, const std::string& part) {
  return text.find(part) != std::string::npos;
}

TEST(NcclTypesTest, DtypesWithAnNcclType) {
  const std::pair<DataType, ncclDataType_t> expected[] = {
      {DataType::kUint8, ncclUint8},         {DataType::kInt8, ncclInt8},
      {DataType::kInt32, ncclInt32},         {DataType::kInt64, ncclInt64},
      {DataType::kFloat16, ncclFloat16},     {DataType::kBfloat16, ncclBfloat16},
      {DataType::kFloat32, ncclFloat32},     {DataType::kFloat64, ncclFloat64},
      {DataType::kBool, ncclUint8},
  };
  for (const auto& [dtype, nccl] : expected) {
    ncclDataType_t out = ncclNumTypes;
    Status s = to_nccl_dtype(dtype, &out);
    EXPECT_TRUE(s.ok()) << dtype_name(dtype) << ": " << s.to_string();
    EXPECT_EQ(out, nccl) << dtype_name(dtype);
  }
}

TEST(NcclTypesTest, SixteenBitIntegersAreUnsupportedWithAReason) {
  for (DataType dtype : {DataType::kUint16, DataType::kInt16}) {
    ncclDataType_t out = ncclNumTypes;
    Status s = to_nccl_dtype(dtype, &out);
    EXPECT_EQ(s.code(), Code::kUnsupported);
    EXPECT_TRUE(contains(s.message(), dtype_name(dtype))) << s.message();
    EXPECT_TRUE(contains(s.message(), "NCCL has no 16-bit integer type")) << s.message();
  }
}

TEST(NcclTypesTest, InvalidDtypeIsAnInvalidArgument) {
  ncclDataType_t out;
  EXPECT_EQ(to_nccl_dtype(static_cast<DataType>(99), &out).code(), Code::kInvalidArgument);
}

TEST(NcclTypesTest, OpsOnNumbers) {
  const std::pair<ReduceOp, ncclRedOp_t> expected[] = {
      {ReduceOp::kSum, ncclSum},
      {ReduceOp::kMin, ncclMin},
      {ReduceOp::kMax, ncclMax},
      {ReduceOp::kProduct, ncclProd},
  };
  for (DataType dtype : {DataType::kUint8, DataType::kInt32, DataType::kFloat16,
                         DataType::kBfloat16, DataType::kFloat64}) {
    for (const auto& [op, nccl] : expected) {
      ncclRedOp_t out = ncclNumOps;
      EXPECT_TRUE(to_nccl_op(op, dtype, &out).ok());
      EXPECT_EQ(out, nccl) << op_name(op) << " " << dtype_name(dtype);
    }
  }
}

TEST(NcclTypesTest, BoolOpsAreOrAndAnd) {
  const std::pair<ReduceOp, ncclRedOp_t> expected[] = {
      {ReduceOp::kSum, ncclMax},  // or
      {ReduceOp::kMax, ncclMax},  // or
      {ReduceOp::kMin, ncclMin},  // and
      {ReduceOp::kProduct, ncclMin},  // and
  };
  for (const auto& [op, nccl] : expected) {
    ncclRedOp_t out = ncclNumOps;
    EXPECT_TRUE(to_nccl_op(op, DataType::kBool, &out).ok());
    EXPECT_EQ(out, nccl) << op_name(op);
  }
}

TEST(NcclTypesTest, AverageIsNotAnNcclOp) {
  for (DataType dtype : {DataType::kFloat32, DataType::kInt64, DataType::kBool}) {
    ncclRedOp_t out;
    EXPECT_EQ(to_nccl_op(ReduceOp::kAverage, dtype, &out).code(), Code::kInternal);
  }
  ncclRedOp_t out;
  EXPECT_EQ(to_nccl_op(static_cast<ReduceOp>(42), DataType::kFloat32, &out).code(),
            Code::kInvalidArgument);
}

TEST(NcclTypesTest, NcclResults) {
  EXPECT_TRUE(nccl_status(ncclSuccess, "ncclAllReduce").ok());
  const std::pair<ncclResult_t, Code> expected[] = {
      {ncclUnhandledCudaError, Code::kTransport}, {ncclSystemError, Code::kTransport},
      {ncclInternalError, Code::kTransport},      {ncclRemoteError, Code::kTransport},
      {ncclInvalidArgument, Code::kInvalidArgument},
      {ncclInvalidUsage, Code::kInvalidArgument}, {ncclInProgress, Code::kInProgress},
  };
  for (const auto& [result, code] : expected) {
    Status s = nccl_status(result, "ncclAllReduce");
    EXPECT_EQ(s.code(), code) << result;
    const std::string prefix = std::string("ncclAllReduce: ") + ncclGetErrorString(result);
    EXPECT_EQ(s.message().substr(0, prefix.size()), prefix);
  }
}

TEST(NcclTypesTest, CudaErrors) {
  EXPECT_TRUE(cuda_status(cudaSuccess, "cudaMalloc").ok());
  Status s = cuda_status(cudaErrorMemoryAllocation, "cudaMalloc");
  EXPECT_EQ(s.code(), Code::kTransport);
  EXPECT_EQ(s.message(), "cudaMalloc: cudaErrorMemoryAllocation: out of memory");
  s = cuda_status(cudaErrorInvalidValue, "cudaMemcpyAsync");
  EXPECT_EQ(s.code(), Code::kTransport);
  EXPECT_EQ(s.message(), std::string("cudaMemcpyAsync: cudaErrorInvalidValue: ") +
                             cudaGetErrorString(cudaErrorInvalidValue));
  s = cuda_status(cudaErrorNoDevice, "cudaSetDevice");
  EXPECT_TRUE(contains(s.message(), "cudaSetDevice: cudaErrorNoDevice: ")) << s.message();
}

ncclResult_t fake_nccl_call(ncclResult_t result) { return result; }
cudaError_t fake_cuda_call(cudaError_t result) { return result; }

Status through_nccl_macro(ncclResult_t result) {
  KOLO_NCCL_RETURN_IF_ERROR(fake_nccl_call(result));
  return Status::OK();
}

Status through_cuda_macro(cudaError_t result) {
  KOLO_CUDA_RETURN_IF_ERROR(fake_cuda_call(result));
  return Status::OK();
}

TEST(NcclTypesTest, MacrosNameTheCallAndTheLine) {
  EXPECT_TRUE(through_nccl_macro(ncclSuccess).ok());
  EXPECT_TRUE(through_cuda_macro(cudaSuccess).ok());
  Status s = through_nccl_macro(ncclInvalidUsage);
  EXPECT_EQ(s.code(), Code::kInvalidArgument);
  EXPECT_TRUE(contains(s.where(), "nccl_types_test.cc:")) << s.where();
  EXPECT_FALSE(contains(s.message(), "nccl_types_test.cc")) << s.message();
  EXPECT_TRUE(contains(s.message(), "fake_nccl_call(result): ")) << s.message();
  s = through_cuda_macro(cudaErrorInvalidValue);
  EXPECT_EQ(s.code(), Code::kTransport);
  EXPECT_TRUE(contains(s.where(), "nccl_types_test.cc:")) << s.where();
  EXPECT_TRUE(contains(s.message(), "fake_cuda_call(result): cudaErrorInvalidValue"))
      << s.message();
}

// The device kernels' checks that come before any CUDA call.
TEST(DeviceKernelsHostTest, ArgumentErrorsNeedNoDevice) {
  std::vector<int32_t> host(4);
  const std::vector<CopySegment> one = {{host.data(), host.data(), 4}};
  EXPECT_EQ(batched_copy(one, DataType::kInt32, 0.5, nullptr).code(), Code::kInvalidArgument);
  EXPECT_EQ(batched_copy(one, DataType::kBool, 2.0, nullptr).code(), Code::kInvalidArgument);
  EXPECT_EQ(batched_copy({{nullptr, nullptr, 3}}, DataType::kFloat32, 1.0, nullptr).code(),
            Code::kInvalidArgument);
  EXPECT_EQ(batched_copy({{nullptr, host.data(), -1}}, DataType::kFloat32, 1.0, nullptr).code(),
            Code::kInvalidArgument);
  EXPECT_EQ(scale(host.data(), host.data(), 4, DataType::kInt32, 0.5, nullptr).code(),
            Code::kInvalidArgument);
  EXPECT_EQ(divide_integer(host.data(), 4, DataType::kFloat32, 2, nullptr).code(),
            Code::kInvalidArgument);
  EXPECT_EQ(divide_integer(host.data(), 4, DataType::kInt32, 0, nullptr).code(),
            Code::kInvalidArgument);
}

// Nothing to do launches nothing, so it succeeds even without a device.
TEST(DeviceKernelsHostTest, NoWorkIsOkWithoutADevice) {
  std::vector<float> host(4);
  EXPECT_TRUE(batched_copy({}, DataType::kFloat32, 1.0, nullptr).ok());
  EXPECT_TRUE(batched_copy({{nullptr, host.data(), 0}, {host.data(), nullptr, 0}},
                           DataType::kFloat16, 0.5, nullptr).ok());
  EXPECT_TRUE(scale(host.data(), host.data(), 4, DataType::kFloat32, 1.0, nullptr).ok());
  EXPECT_TRUE(scale(host.data(), host.data(), 0, DataType::kFloat32, 0.5, nullptr).ok());
  EXPECT_TRUE(divide_integer(host.data(), 4, DataType::kInt32, 1, nullptr).ok());
  EXPECT_TRUE(divide_integer(host.data(), 0, DataType::kInt32, 3, nullptr).ok());
}

// Where CUDA has no device (this build machine), a launch is a clean CUDA error.
TEST(DeviceKernelsHostTest, LaunchWithoutADeviceIsACudaError) {
  int devices = 0;
  if (cudaGetDeviceCount(&devices) == cudaSuccess && devices > 0) {
    GTEST_SKIP() << "a CUDA device is visible; tests/gpu runs the kernels";
  }
  std::vector<double> host(16, 1.0);
  Status s = batched_copy({{host.data(), host.data() + 8, 8}}, DataType::kFloat64, 0.5, nullptr);
  EXPECT_EQ(s.code(), Code::kTransport);
  EXPECT_TRUE(contains(s.message(), "batched copy kernel: cuda")) << s.message();
  s = scale(host.data(), host.data(), 16, DataType::kFloat64, 0.25, nullptr);
  EXPECT_EQ(s.code(), Code::kTransport);
  s = divide_integer(host.data(), 16, DataType::kInt64, 3, nullptr);
  EXPECT_EQ(s.code(), Code::kTransport);
  EXPECT_TRUE(contains(s.message(), "integer divide kernel: cuda")) << s.message();
}

}  // namespace
}  // namespace kolo::nccl
