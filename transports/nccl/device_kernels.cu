// The batched copy kernel and the AVERAGE finishing kernels. The work split
// (segments -> tiles -> blocks) is explained in copy_plan.h; here is how a block
// copies one tile, and how each dtype is scaled.
#include "transports/nccl/device_kernels.h"

#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <string>

#include "transports/nccl/nccl_types.h"

namespace kolo::nccl {
namespace {

// The segment table of one launch, passed by value: the kernel reads it from
// parameter space (__grid_constant__), so no device memory is allocated or copied.
struct CopyParams {
  const void* src[kMaxSegmentsPerLaunch];
  void* dst[kMaxSegmentsPerLaunch];
  int64_t count[kMaxSegmentsPerLaunch];
  int64_t tile_start[kMaxSegmentsPerLaunch + 1];
  int segments;
};
static_assert(sizeof(CopyParams) <= 4096 - 64,
              "the copy table and the op must fit the 4 KiB kernel parameter space");

// Element-wise ops the copy applies. Identity copies bits (T is an unsigned
// integer of the element's size); the scales widen, multiply once and round once.
struct Identity {
  template <typename T>
  __device__ T operator()(T x) const { return x; }
};

struct ScaleHalf {
  float factor;
  __device__ __half operator()(__half x) const {
    return __float2half_rn(__half2float(x) * factor);
  }
};

struct ScaleBfloat16 {
  float factor;
  __device__ __nv_bfloat16 operator()(__nv_bfloat16 x) const {
    return __float2bfloat16_rn(__bfloat162float(x) * factor);
  }
};

template <typename T>
struct ScaleNative {  // float in float, double in double
  T factor;
  __device__ T operator()(T x) const { return x * factor; }
};

template <typename T>
__device__ T zero_of() { return T(0); }
template <>
__device__ __half zero_of<__half>() { return __ushort_as_half(0); }
template <>
__device__ __nv_bfloat16 zero_of<__nv_bfloat16>() { return __ushort_as_bfloat16(0); }

__device__ bool aligned16(const void* p) {
  return (reinterpret_cast<uintptr_t>(p) & 15u) == 0;
}

// 16-byte words each thread moves in a full tile.
constexpr int kWordsPerThread = static_cast<int>(kTileBytes / 16 / kThreadsPerBlock);
static_assert(kWordsPerThread * 16 * kThreadsPerBlock == kTileBytes, "tiles split evenly");

template <typename T, typename Op>
__device__ void apply(uint4* word, Op op) {
  T* elems = reinterpret_cast<T*>(word);
#pragma unroll
  for (int k = 0; k < static_cast<int>(16 / sizeof(T)); ++k) elems[k] = op(elems[k]);
}

// The block's threads copy elements [0, n) of src -> dst (src null: zeros): 16
// bytes at a time when both pointers allow it, then the remainder one by one.
// Consecutive threads touch consecutive 16-byte words, so every warp access is
// coalesced; a full aligned tile issues all of a thread's loads before its
// stores, so that they are in flight together.
template <typename T, typename Op>
__device__ void copy_tile(T* dst, const T* src, int64_t n, Op op) {
  constexpr int kVec = 16 / sizeof(T);
  int64_t done = 0;
  const bool aligned = aligned16(dst) && (src == nullptr || aligned16(src));
  if (aligned && src != nullptr && n == tile_elems(sizeof(T))) {
    const uint4* src_words = reinterpret_cast<const uint4*>(src);
    uint4* dst_words = reinterpret_cast<uint4*>(dst);
    uint4 words[kWordsPerThread];
#pragma unroll
    for (int k = 0; k < kWordsPerThread; ++k) {
      words[k] = src_words[threadIdx.x + k * kThreadsPerBlock];
    }
#pragma unroll
    for (int k = 0; k < kWordsPerThread; ++k) {
      apply<T>(&words[k], op);
      dst_words[threadIdx.x + k * kThreadsPerBlock] = words[k];
    }
    return;
  }
  if (aligned) {
    const int64_t words = n / kVec;
    uint4* dst_words = reinterpret_cast<uint4*>(dst);
    const uint4* src_words = reinterpret_cast<const uint4*>(src);
    for (int64_t w = threadIdx.x; w < words; w += blockDim.x) {
      uint4 word = make_uint4(0, 0, 0, 0);
      if (src != nullptr) {
        word = src_words[w];
        apply<T>(&word, op);
      }
      dst_words[w] = word;
    }
    done = words * kVec;
  }
  for (int64_t i = done + threadIdx.x; i < n; i += blockDim.x) {
    dst[i] = src != nullptr ? op(src[i]) : zero_of<T>();
  }
}

// Block b copies tiles b, b + gridDim.x, ... of the launch (copy_plan.h).
template <typename T, typename Op>
__global__ void __launch_bounds__(kThreadsPerBlock)
    batched_copy_kernel(const __grid_constant__ CopyParams params, Op op) {
  constexpr int64_t kElemsPerTile = tile_elems(sizeof(T));
  const int64_t tiles = params.tile_start[params.segments];
  for (int64_t tile = blockIdx.x; tile < tiles; tile += gridDim.x) {
    const TileRange r =
        tile_range(params.tile_start, params.count, params.segments, tile, kElemsPerTile);
    const T* src = static_cast<const T*>(params.src[r.segment]);
    copy_tile(static_cast<T*>(params.dst[r.segment]) + r.begin,
              src != nullptr ? src + r.begin : nullptr, r.end - r.begin, op);
  }
}

// Truncating division computed in Wide (32 bits for the narrow types, where every
// quotient fits; 64 for int64/uint64), as reduce::divide_integer does on the CPU.
template <typename T, typename Wide>
__global__ void __launch_bounds__(kThreadsPerBlock)
    divide_kernel(T* data, int64_t count, Wide divisor) {
  const int64_t stride = static_cast<int64_t>(gridDim.x) * blockDim.x;
  for (int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < count;
       i += stride) {
    data[i] = static_cast<T>(static_cast<Wide>(data[i]) / divisor);
  }
}

Status launch_error(const char* kernel) {
  return cuda_status(cudaGetLastError(), kernel);
}

// One launch per CopyLaunch of the plan, each with its packed table.
template <typename T, typename Op>
Status launch_copies(const std::vector<CopySegment>& segments,
                     const std::vector<int64_t>& counts, Op op, cudaStream_t stream) {
  for (const CopyLaunch& launch : plan_batched_copy(counts, sizeof(T))) {
    const LaunchTable table = pack_launch(launch, counts, sizeof(T));
    CopyParams params;
    params.segments = table.segments;
    params.tile_start[0] = 0;
    for (int s = 0; s < table.segments; ++s) {
      const CopySegment& segment = segments[table.index[s]];
      params.src[s] = segment.src;
      params.dst[s] = segment.dst;
      params.count[s] = table.count[s];
      params.tile_start[s + 1] = table.tile_start[s + 1];
    }
    KOLO_CHECK_EQ(launch.threads, kThreadsPerBlock);  // copy_tile's full-tile path
    batched_copy_kernel<T, Op><<<launch.blocks, launch.threads, 0, stream>>>(params, op);
    KOLO_RETURN_IF_ERROR(launch_error("launch of kolo's batched copy kernel"));
  }
  return Status::OK();
}

Status check_segments(const std::vector<CopySegment>& segments) {
  for (size_t i = 0; i < segments.size(); ++i) {
    const CopySegment& s = segments[i];
    if (s.count < 0) {
      return invalid_argument("batched_copy: segment " + std::to_string(i) +
                              " has a negative count " + std::to_string(s.count));
    }
    if (s.count > 0 && s.dst == nullptr) {
      return invalid_argument("batched_copy: segment " + std::to_string(i) +
                              " has no destination");
    }
  }
  return Status::OK();
}

// The bit-copying element of a dtype of `size` bytes.
template <typename Op>
Status launch_exact(size_t size, const std::vector<CopySegment>& segments,
                    const std::vector<int64_t>& counts, Op op, cudaStream_t stream) {
  switch (size) {
    case 1: return launch_copies<uint8_t>(segments, counts, op, stream);
    case 2: return launch_copies<uint16_t>(segments, counts, op, stream);
    case 4: return launch_copies<uint32_t>(segments, counts, op, stream);
    default: return launch_copies<uint64_t>(segments, counts, op, stream);
  }
}

// A grid of up to kMaxBlocksPerLaunch blocks, four elements per thread before
// the grid-stride loop takes over.
template <typename T, typename Wide>
Status launch_divide(void* data, int64_t count, int divisor, cudaStream_t stream) {
  const int64_t per_block = int64_t{kThreadsPerBlock} * 4;
  const int blocks = static_cast<int>(
      std::min<int64_t>((count + per_block - 1) / per_block, kMaxBlocksPerLaunch));
  divide_kernel<T, Wide><<<blocks, kThreadsPerBlock, 0, stream>>>(
      static_cast<T*>(data), count, static_cast<Wide>(divisor));
  return launch_error("launch of kolo's integer divide kernel");
}

}  // namespace

Status batched_copy(const std::vector<CopySegment>& segments, DataType dtype, double factor,
                    cudaStream_t stream) {
  if (!is_valid(dtype)) return invalid_argument("batched_copy: invalid dtype " + dtype_name(dtype));
  if (factor != 1.0 && !is_floating(dtype)) {
    return invalid_argument("batched_copy: dtype " + dtype_name(dtype) +
                            " can only be copied with factor 1, got " + std::to_string(factor));
  }
  KOLO_RETURN_IF_ERROR_AS_IS(check_segments(segments));
  std::vector<int64_t> counts(segments.size());
  for (size_t i = 0; i < segments.size(); ++i) counts[i] = segments[i].count;
  if (factor == 1.0) return launch_exact(dtype_size(dtype), segments, counts, Identity{}, stream);
  const float f = static_cast<float>(factor);
  switch (dtype) {
    case DataType::kFloat16:
      return launch_copies<__half>(segments, counts, ScaleHalf{f}, stream);
    case DataType::kBfloat16:
      return launch_copies<__nv_bfloat16>(segments, counts, ScaleBfloat16{f}, stream);
    case DataType::kFloat32:
      return launch_copies<float>(segments, counts, ScaleNative<float>{f}, stream);
    default:
      return launch_copies<double>(segments, counts, ScaleNative<double>{factor}, stream);
  }
}

Status scale(void* dst, const void* src, int64_t count, DataType dtype, double factor,
             cudaStream_t stream) {
  if (!is_floating(dtype)) {
    return invalid_argument("scale needs a floating dtype, got " + dtype_name(dtype));
  }
  if (count < 0) return invalid_argument("scale: negative count " + std::to_string(count));
  if (count == 0 || (factor == 1.0 && dst == src)) return Status::OK();
  if (dst == nullptr || src == nullptr) return invalid_argument("scale: null pointer");
  return batched_copy({CopySegment{src, dst, count}}, dtype, factor, stream);
}

Status divide_integer(void* data, int64_t count, DataType dtype, int divisor,
                      cudaStream_t stream) {
  if (!is_integer(dtype)) {
    return invalid_argument("divide_integer needs an integer dtype, got " + dtype_name(dtype));
  }
  if (divisor < 1) {
    return invalid_argument("divide_integer: divisor must be >= 1, got " +
                            std::to_string(divisor));
  }
  if (count < 0) return invalid_argument("divide_integer: negative count " + std::to_string(count));
  if (count == 0 || divisor == 1) return Status::OK();
  if (data == nullptr) return invalid_argument("divide_integer: null pointer");
  switch (dtype) {
    case DataType::kUint8: return launch_divide<uint8_t, uint32_t>(data, count, divisor, stream);
    case DataType::kInt8: return launch_divide<int8_t, int32_t>(data, count, divisor, stream);
    case DataType::kUint16: return launch_divide<uint16_t, uint32_t>(data, count, divisor, stream);
    case DataType::kInt16: return launch_divide<int16_t, int32_t>(data, count, divisor, stream);
    case DataType::kInt32: return launch_divide<int32_t, int32_t>(data, count, divisor, stream);
    default: return launch_divide<int64_t, int64_t>(data, count, divisor, stream);
  }
}

}  // namespace kolo::nccl
