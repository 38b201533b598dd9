// DeterministicAllreduce at 2, 3 and 4 ranks: for every segment size, count and
// op, on inputs whose sums round (random floats), every rank's result is
// byte-identical to a plain reference that folds rank 0's value, then rank 1's,
// and so on (float16 and bfloat16 in float, rounded once), in place and not.
// Also reduce::fold against the same reference.
#include "algorithms/deterministic_allreduce.h"

#include <gtest/gtest.h>

#include <cstring>
#include <random>
#include <vector>

#include "reduce/fold.h"
#include "tests/unit/algorithms/spawn.h"

namespace kolo::algorithms {
namespace {

using kolo::testing::spawn;

// One floating dtype: storage, the accumulator, and the conversions.
template <typename S, typename Acc, DataType D, Acc (*Widen)(S), S (*Narrow)(Acc)>
struct Floating {
  using Storage = S;
  static constexpr DataType kType = D;
  static Acc widen(S x) { return Widen(x); }
  static S narrow(Acc a) { return Narrow(a); }
  using Accumulator = Acc;
};

float id_f(float x) { return x; }
double id_d(double x) { return x; }
float h2f(uint16_t x) { return half_to_float(x); }
uint16_t f2h(float x) { return float_to_half(x); }
float b2f(uint16_t x) { return bfloat16_to_float(x); }
uint16_t f2b(float x) { return float_to_bfloat16(x); }

using F32 = Floating<float, float, DataType::kFloat32, id_f, id_f>;
using F64 = Floating<double, double, DataType::kFloat64, id_d, id_d>;
using F16 = Floating<uint16_t, float, DataType::kFloat16, h2f, f2h>;
using BF16 = Floating<uint16_t, float, DataType::kBfloat16, b2f, f2b>;

template <typename D>
std::vector<typename D::Storage> random_input(int rank, int64_t count, ReduceOp op) {
  std::mt19937 gen(1234 + 77 * rank + static_cast<unsigned>(count));
  // Products stay near 1 so that they neither vanish nor overflow.
  std::uniform_real_distribution<double> dist(op == ReduceOp::kProduct ? 0.5 : -4.0,
                                              op == ReduceOp::kProduct ? 1.7 : 4.0);
  std::vector<typename D::Storage> v(count);
  for (auto& x : v) x = D::narrow(static_cast<typename D::Accumulator>(dist(gen)));
  return v;
}

template <typename D>
typename D::Storage reference(const std::vector<std::vector<typename D::Storage>>& in, int64_t i,
                              ReduceOp op) {
  using A = typename D::Accumulator;
  A acc = D::widen(in[0][i]);
  for (size_t r = 1; r < in.size(); ++r) {
    const A x = D::widen(in[r][i]);
    switch (op) {
      case ReduceOp::kSum: acc = acc + x; break;
      case ReduceOp::kProduct: acc = acc * x; break;
      case ReduceOp::kMin: acc = x < acc ? x : acc; break;
      case ReduceOp::kMax: acc = acc < x ? x : acc; break;
      default: break;
    }
  }
  return D::narrow(acc);
}

template <typename D>
class DeterministicAllreduceTest : public ::testing::Test {};
using Dtypes = ::testing::Types<F32, F64, F16, BF16>;
TYPED_TEST_SUITE(DeterministicAllreduceTest, Dtypes);

constexpr ReduceOp kOps[] = {ReduceOp::kSum, ReduceOp::kProduct, ReduceOp::kMin, ReduceOp::kMax};

TYPED_TEST(DeterministicAllreduceTest, FoldMatchesTheRankOrderReference) {
  using T = typename TypeParam::Storage;
  for (int n : {1, 2, 3, 5, 8}) {
    for (ReduceOp op : kOps) {
      const int64_t count = 1000;  // several of fold's blocks, the last one partial
      std::vector<std::vector<T>> in;
      std::vector<const void*> ptrs;
      for (int r = 0; r < n; ++r) in.push_back(random_input<TypeParam>(r, count, op));
      for (auto& v : in) ptrs.push_back(v.data());
      std::vector<T> out(count);
      reduce::fold(out.data(), ptrs.data(), n, count, TypeParam::kType, op);
      int64_t wrong = 0;
      for (int64_t i = 0; i < count; ++i) {
        const T want = reference<TypeParam>(in, i, op);
        wrong += std::memcmp(&out[i], &want, sizeof(T)) != 0;
      }
      EXPECT_EQ(wrong, 0) << n << " inputs, op " << op_name(op);
      // Into one of its inputs (the allreduce's own chunk in place).
      std::vector<T> expect = out;
      reduce::fold(in[n - 1].data(), ptrs.data(), n, count, TypeParam::kType, op);
      EXPECT_TRUE(std::memcmp(in[n - 1].data(), expect.data(), count * sizeof(T)) == 0)
          << n << " inputs, op " << op_name(op) << ", into the last input";
    }
  }
}

TYPED_TEST(DeterministicAllreduceTest, ByteIdenticalToTheReferenceForEverySegmentSize) {
  using T = typename TypeParam::Storage;
  const size_t segments[] = {2, 6, 40, 1000, RingOptions{}.segment_bytes};
  for (int n : {2, 3, 4}) {
    for (int64_t count : {int64_t{0}, int64_t{1}, int64_t{n - 1}, int64_t{1000}, int64_t{5003}}) {
      for (ReduceOp op : kOps) {
        std::vector<std::vector<T>> inputs;
        for (int r = 0; r < n; ++r) inputs.push_back(random_input<TypeParam>(r, count, op));
        std::vector<T> want(count);
        for (int64_t i = 0; i < count; ++i) want[i] = reference<TypeParam>(inputs, i, op);
        spawn(n, [&](int rank, transport::World& world) {
          for (size_t segment : segments) {
            if (segment < 40 && count > 1000) continue;  // thousands of rounds: slow, nothing new
            DeterministicAllreduce det(*world.p2p, RingOptions{segment});
            for (bool in_place : {false, true}) {
              std::vector<T> in = inputs[rank], out(count);
              T* dst = in_place ? in.data() : out.data();
              EXPECT_TRUE(det.run(in.data(), dst, count, TypeParam::kType, op).ok());
              int64_t wrong = 0, first = -1;
              for (int64_t i = 0; i < count; ++i) {
                if (std::memcmp(&dst[i], &want[i], sizeof(T)) != 0 && wrong++ == 0) first = i;
              }
              EXPECT_EQ(wrong, 0) << "size " << n << " count " << count << " op " << op_name(op)
                                  << " segment " << segment << " bytes, rank " << rank
                                  << (in_place ? " in place" : "") << ", first wrong " << first;
              if (!in_place) {
                EXPECT_TRUE(in == inputs[rank]) << "the input was modified";
              }
            }
          }
        });
      }
    }
  }
}

// The reference is sensitive to the order: the ring, which starts each chunk's
// sum at a different rank, misses it for some elements at 3 ranks.
TEST(DeterministicAllreduceContrastTest, TheRingDiffersFromTheRankOrderReference) {
  const int n = 3;
  const int64_t count = 3000;
  std::vector<std::vector<float>> inputs;
  for (int r = 0; r < n; ++r) inputs.push_back(random_input<F32>(r, count, ReduceOp::kSum));
  std::vector<int64_t> differ(n, 0);
  spawn(n, [&](int rank, transport::World& world) {
    RingAllreduce ring(*world.p2p);
    std::vector<float> out(count);
    EXPECT_TRUE(ring.run(inputs[rank].data(), out.data(), count, DataType::kFloat32, ReduceOp::kSum).ok());
    for (int64_t i = 0; i < count; ++i) differ[rank] += out[i] != reference<F32>(inputs, i, ReduceOp::kSum);
  });
  EXPECT_GT(differ[0], 0) << "the ring summed every element in rank order";
}

TEST(DeterministicAllreduceErrorTest, RejectsBadArgumentsWithoutSendingAnything) {
  auto worlds = loopback::create_worlds(3);
  DeterministicAllreduce det(*worlds[0].p2p);
  float x[4] = {};
  EXPECT_EQ(det.run(x, x, 4, DataType::kFloat32, ReduceOp::kAverage).code(), Code::kInvalidArgument);
  EXPECT_EQ(det.run(x, x, -1, DataType::kFloat32, ReduceOp::kSum).code(), Code::kInvalidArgument);
  EXPECT_EQ(det.run(nullptr, x, 4, DataType::kFloat32, ReduceOp::kSum).code(), Code::kInvalidArgument);
  EXPECT_EQ(det.run(x, x, 4, static_cast<DataType>(42), ReduceOp::kSum).code(), Code::kInvalidArgument);
  EXPECT_TRUE(det.run(nullptr, nullptr, 0, DataType::kFloat32, ReduceOp::kSum).ok());
}

}  // namespace
}  // namespace kolo::algorithms
