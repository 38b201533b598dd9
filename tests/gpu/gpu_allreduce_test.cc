// Allreduce of cudaMalloc'd buffers through the C API: every dtype NCCL reduces and
// every op, in place and out of place, at counts 0, 1, 3 and 1000003; scale factors
// on the floating types; 100 small tensors submitted together (fused on the device)
// beside tensors of 1 MiB and more (which go alone); a grouped allreduce.
//
// Rank r's element i is a small integer of (i + r) mod 7 (or mod 3 for bool), so
// sums and products of a few ranks are exact in every dtype, and with one rank every
// op is the identity (which the sentinel-filled output still has to receive).
#include <functional>
#include <memory>

#include "gpu_support.h"

namespace kolo_gpu_test {
namespace {

constexpr int kPeriod = 21;  // inputs and results repeat every 21 elements

template <typename V>
double input_value(int rank, int64_t i) {
  if (V::kBool) return (i + rank) % 3 == 0 ? 1 : 0;
  const int k = static_cast<int>((i + rank) % 7);
  return V::kSigned ? k - 3 : k + 1;  // -3..3, or 1..7 for unsigned types
}

// The expected result of element i (for i in one period), over `size` ranks, with
// every input scaled by `prescale` and the result by `postscale`.
template <typename V>
std::vector<double> expected_period(int size, kolo_op_t op, double prescale = 1.0,
                                    double postscale = 1.0) {
  std::vector<double> out(kPeriod);
  for (int i = 0; i < kPeriod; ++i) {
    std::vector<double> per_rank;
    for (int r = 0; r < size; ++r) per_rank.push_back(input_value<V>(r, i) * prescale);
    out[i] = reduce_expected(per_rank, op, V::kBool, V::kFloating) * postscale;
  }
  return out;
}

template <typename V>
class GpuAllreduceDtype : public GpuTest {
 protected:
  // One allreduce of `count` elements; checks the output and, out of place, that
  // the input is untouched.
  void run(kolo_op_t op, int64_t count, bool in_place, double prescale = 1.0,
           double postscale = 1.0) {
    SCOPED_TRACE(std::string(op_label(op)) + " count " + std::to_string(count) +
                 (in_place ? " in place" : " out of place") + " prescale " +
                 std::to_string(prescale) + " postscale " + std::to_string(postscale));
    const int rank = rank_;
    const auto input = make_bytes<V>(count, [&](int64_t i) { return input_value<V>(rank, i); });
    DeviceBuffer in(input.size());
    DeviceBuffer out(in_place ? 0 : input.size());
    in.upload(input.data(), input.size());
    if (!in_place) out.fill_bytes(0xA5);
    void* result = in_place ? in.get() : out.get();

    kolo_handle_t h = nullptr;
    const std::string tensor = this->name(std::string(op_label(op)) + "." + std::to_string(count) +
                                          (in_place ? ".inplace" : ".outofplace") + "." +
                                          std::to_string(prescale));
    ASSERT_EQ(kolo_allreduce_async(tensor.c_str(), in.get(), result, count, V::kDtype, op,
                                   prescale, postscale, cuda(), &h),
              KOLO_OK)
        << kolo_last_error();
    std::string message;
    ASSERT_EQ(finish(h, &message), KOLO_OK) << message;

    const auto expected = expected_period<V>(size_, op, prescale, postscale);
    const auto got = download_bytes(result, input.size());
    EXPECT_TRUE(elements_equal<V>(got, count, [&](int64_t i) { return expected[i % kPeriod]; }));
    if (!in_place) {
      EXPECT_EQ(download_bytes(in.get(), input.size()), input) << "input modified";
    }
  }
};
TYPED_TEST_SUITE(GpuAllreduceDtype, NcclDtypes);

TYPED_TEST(GpuAllreduceDtype, EveryOpCountAndPlacement) {
  for (kolo_op_t op : {KOLO_OP_SUM, KOLO_OP_AVERAGE, KOLO_OP_MIN, KOLO_OP_MAX, KOLO_OP_PRODUCT}) {
    if (TypeParam::kBool && op == KOLO_OP_AVERAGE) continue;  // invalid; see gpu_device_args_test
    for (int64_t count : {0, 1, 3, 1000003}) {
      for (bool in_place : {false, true}) {
        this->run(op, count, in_place);
        if (this->HasFatalFailure()) return;
      }
    }
  }
}

template <typename V>
using GpuScaledAllreduce = GpuAllreduceDtype<V>;
TYPED_TEST_SUITE(GpuScaledAllreduce, FloatDtypes);

// Powers of two keep every product exact: prescale 2 then postscale 0.5 gives the
// plain result back; the others scale it.
TYPED_TEST(GpuScaledAllreduce, PrescaleAndPostscale) {
  const std::pair<double, double> factors[] = {{2.0, 0.5}, {0.5, 4.0}, {4.0, 0.25}, {1.0, 2.0}};
  for (kolo_op_t op : {KOLO_OP_SUM, KOLO_OP_AVERAGE}) {
    for (const auto& [pre, post] : factors) {
      for (int64_t count : {3, 1000003}) {
        this->run(op, count, count == 3, pre, post);
        if (this->HasFatalFailure()) return;
      }
    }
  }
}

// One tensor in flight: its buffers, handle and a check of its result.
struct Tensor {
  std::string label;
  DeviceBuffer in, out;
  kolo_handle_t handle = nullptr;
  std::function<::testing::AssertionResult()> check;
};

// Tensor k's element i on rank r: ((k + i + r) mod 11) - 5, or + 1 when unsigned.
template <typename V>
double tensor_value(int k, int rank, int64_t i) {
  const int v = static_cast<int>((k + i + rank) % 11);
  return V::kSigned ? v - 5 : v + 1;
}

class GpuFusion : public GpuTest {
 protected:
  // Uploads tensor k of `count` elements and submits its SUM; the check compares
  // with the sum over all ranks.
  template <typename V>
  void submit(int k, int64_t count, bool in_place, std::vector<std::unique_ptr<Tensor>>* all) {
    auto t = std::make_unique<Tensor>();
    t->label = name("t" + std::to_string(k));
    const int rank = rank_;
    const auto input = make_bytes<V>(count, [&](int64_t i) { return tensor_value<V>(k, rank, i); });
    t->in = DeviceBuffer(input.size());
    t->in.upload(input.data(), input.size());
    if (!in_place) {
      t->out = DeviceBuffer(input.size());
      t->out.fill_bytes(0x5A);
    }
    void* result = in_place ? t->in.get() : t->out.get();
    ASSERT_EQ(kolo_allreduce_async(t->label.c_str(), t->in.get(), result, count, V::kDtype,
                                   KOLO_OP_SUM, 1.0, 1.0, cuda(), &t->handle),
              KOLO_OK)
        << t->label << ": " << kolo_last_error();
    const int size = size_;
    const size_t bytes = input.size();
    t->check = [=]() {
      const auto got = download_bytes(result, bytes);
      return elements_equal<V>(got, count, [&](int64_t i) {
        double sum = 0;
        for (int r = 0; r < size; ++r) sum += tensor_value<V>(k, r, i);
        return sum;
      });
    };
    all->push_back(std::move(t));
  }

  void finish_all(std::vector<std::unique_ptr<Tensor>>* all) {
    for (auto& t : *all) {
      std::string message;
      EXPECT_EQ(finish(t->handle, &message), KOLO_OK) << t->label << ": " << message;
      EXPECT_TRUE(t->check()) << t->label;
    }
  }
};

// 100 small tensors of two dtypes (two fusion classes) and two tensors of 1 MiB and
// more, all submitted before any wait: the small ones share device buckets, the
// large ones go alone, and every result lands in its own buffer.
TEST_F(GpuFusion, ManySmallTensorsBesideLargeOnes) {
  std::vector<std::unique_ptr<Tensor>> all;
  for (int k = 0; k < 100; ++k) {
    const int64_t count = 1 + (k * 7919) % 20000;
    const bool in_place = k % 3 == 0;
    if (k % 2 == 0)
      submit<Plain<float, KOLO_FLOAT32>>(k, count, in_place, &all);
    else
      submit<Plain<int32_t, KOLO_INT32>>(k, count, in_place, &all);
    if (HasFatalFailure()) break;
    if (k == 50) {  // the large ones arrive in the middle of the small ones
      submit<Plain<float, KOLO_FLOAT32>>(1000, (1 << 18) + 3, false, &all);  // 1 MiB + 12 B
      submit<Plain<uint8_t, KOLO_UINT8>>(1001, (1 << 20) + 1, true, &all);
    }
  }
  finish_all(&all);
}

// Several rounds of the same names: the persistent device fusion buffer is reused
// while the previous round's results are still being read.
TEST_F(GpuFusion, RepeatedRoundsReuseTheFusionBuffer) {
  for (int round = 0; round < 5; ++round) {
    SCOPED_TRACE("round " + std::to_string(round));
    std::vector<std::unique_ptr<Tensor>> all;
    for (int k = 0; k < 20; ++k)
      submit<Plain<float, KOLO_FLOAT32>>(k + round, 1000 + 17 * k, k % 2 == 0, &all);
    finish_all(&all);
    if (HasFailure()) return;
  }
}

// A grouped AVERAGE with prescale 2 and postscale 0.5 (which cancel): one handle,
// one bucket, tensors of different sizes, some in place; one of them larger than
// 1 MiB.
TEST_F(GpuFusion, GroupedAllreduce) {
  using V = Plain<double, KOLO_FLOAT64>;
  constexpr int kTensors = 8;
  std::vector<std::string> names;
  std::vector<DeviceBuffer> ins, outs;
  std::vector<const void*> inputs;
  std::vector<void*> outputs;
  std::vector<int64_t> counts;
  for (int j = 0; j < kTensors; ++j) {
    const int64_t count = j == kTensors - 1 ? (1 << 17) + 1 : 1 + 1000 * j;
    const int rank = rank_;
    const auto input = make_bytes<V>(count, [&](int64_t i) { return tensor_value<V>(j, rank, i); });
    names.push_back(name("g" + std::to_string(j)));
    ins.emplace_back(input.size());
    ins.back().upload(input.data(), input.size());
    const bool in_place = j % 2 == 0;
    outs.emplace_back(in_place ? 0 : input.size());
    if (!in_place) outs.back().fill_bytes(0x33);
    inputs.push_back(ins.back().get());
    outputs.push_back(in_place ? ins.back().get() : outs.back().get());
    counts.push_back(count);
  }
  std::vector<const char*> name_ptrs;
  for (const auto& n : names) name_ptrs.push_back(n.c_str());

  kolo_handle_t h = nullptr;
  ASSERT_EQ(kolo_grouped_allreduce_async(kTensors, name_ptrs.data(), inputs.data(), outputs.data(),
                                         counts.data(), V::kDtype, KOLO_OP_AVERAGE, 2.0, 0.5,
                                         cuda(), &h),
            KOLO_OK)
      << kolo_last_error();
  std::string message;
  ASSERT_EQ(finish(h, &message), KOLO_OK) << message;
  for (int j = 0; j < kTensors; ++j) {
    const auto got = download_bytes(outputs[j], counts[j] * sizeof(double));
    EXPECT_TRUE(elements_equal<V>(got, counts[j], [&](int64_t i) {
      double sum = 0;
      for (int r = 0; r < size_; ++r) sum += tensor_value<V>(j, r, i);
      return sum / size_;
    })) << names[j];
  }
}

}  // namespace
}  // namespace kolo_gpu_test
