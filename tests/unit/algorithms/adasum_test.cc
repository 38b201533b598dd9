// The Adasum engine: its arithmetic and index math (pure), then the engine and
// the "adasum" transport over loopback worlds (ranks as threads) against a
// reference of Horovod's NumPy formula computed here: per tensor,
//   adasum(a, b) = (1 - a.b / (2|a|^2)) a + (1 - a.b / (2|b|^2)) b
// (a coefficient is 1 where its |.|^2 < 1e-8), ranks combined as a binary tree
// (2i with 2i+1, then those pairs, ...), rounded to the dtype after each level.
//
// At 2 ranks the inputs are small integers, so every sum is exact and results
// compare with ==. Deeper trees combine non-integers whose dot products the
// engine adds up piece by piece, in another order than the reference: there the
// comparison allows a few units in the last place of the dtype.
#include "algorithms/adasum.h"

#include <gtest/gtest.h>

#include <cmath>
#include <vector>

#include "transport/reduction.h"
#include "tests/unit/algorithms/spawn.h"
#include "tests/unit/algorithms/values.h"

namespace kolo::algorithms {
namespace {

using kolo::testing::spawn;
using Vec = std::vector<double>;

// ---- the reference --------------------------------------------------------------

template <typename D>
double round_to(double v) {
  return D::to_double(D::from_double(v));
}

// One tensor of two ranks, as Horovod's test reference computes it.
template <typename D>
Vec reference_pair(const Vec& a, const Vec& b) {
  double dot = 0, aa = 0, bb = 0;
  for (size_t i = 0; i < a.size(); ++i) {
    dot += a[i] * b[i];
    aa += a[i] * a[i];
    bb += b[i] * b[i];
  }
  const double ca = aa >= 1e-8 ? 1.0 - dot / aa * 0.5 : 1.0;
  const double cb = bb >= 1e-8 ? 1.0 - dot / bb * 0.5 : 1.0;
  Vec out(a.size());
  for (size_t i = 0; i < a.size(); ++i) out[i] = round_to<D>(ca * a[i] + cb * b[i]);
  return out;
}

// One tensor over every rank: the binary tree.
template <typename D>
Vec reference(std::vector<Vec> ranks) {
  while (ranks.size() > 1) {
    std::vector<Vec> next;
    for (size_t i = 0; i < ranks.size(); i += 2) next.push_back(reference_pair<D>(ranks[i], ranks[i + 1]));
    ranks = std::move(next);
  }
  return ranks[0];
}

// Rank r's element i of tensor t: small integers of both signs; some tensors are
// zero on some ranks (a joined rank's contribution), some equal across ranks.
double value(int t, int rank, int64_t i) {
  if (t == 2 && rank % 2 == 1) return 0;
  if (t == 3) return static_cast<double>(i % 5) - 2;
  return static_cast<double>((i * 7 + rank * 3 + t * 5) % 9) - 4;
}

template <typename D>
void expect_close(const Vec& got, const Vec& want, int levels, const std::string& what) {
  ASSERT_EQ(got.size(), want.size()) << what;
  // Exact at one level (see the top); then a few ulps of the dtype.
  const double ulp = D::kType == DataType::kFloat64 ? 0x1p-52 : D::kType == DataType::kFloat32 ? 0x1p-23
                     : D::kType == DataType::kFloat16 ? 0x1p-10 : 0x1p-7;
  for (size_t i = 0; i < got.size(); ++i) {
    const double tolerance = levels <= 1 ? 0.0 : 4 * levels * ulp * std::max(1.0, std::fabs(want[i]));
    ASSERT_LE(std::fabs(got[i] - want[i]), tolerance)
        << what << ": element " << i << " is " << got[i] << ", the reference " << want[i];
  }
}

int levels_of(int size) {
  int levels = 0;
  while ((1 << levels) < size) ++levels;
  return levels;
}

// ---- the pure parts ---------------------------------------------------------------

TEST(AdasumMath, CoefficientsAverageEqualAddOrthogonalKeepAlone) {
  const adasum::Coefficients equal = adasum::coefficients(4, 4, 4);
  EXPECT_EQ(equal.a, 0.5);
  EXPECT_EQ(equal.b, 0.5);
  const adasum::Coefficients orthogonal = adasum::coefficients(0, 3, 5);
  EXPECT_EQ(orthogonal.a, 1.0);
  EXPECT_EQ(orthogonal.b, 1.0);
  const adasum::Coefficients zero_b = adasum::coefficients(0, 9, 0);
  EXPECT_EQ(zero_b.a, 1.0);
  EXPECT_EQ(zero_b.b, 1.0);
  const adasum::Coefficients tiny = adasum::coefficients(1e-9, 1e-9, 1);  // |a|^2 under 1e-8
  EXPECT_EQ(tiny.a, 1.0);
  EXPECT_EQ(tiny.b, 1.0 - 1e-9 * 0.5);
}

TEST(AdasumMath, DotAndNormsAndScaledAddPerDtype) {
  for (DataType t : {DataType::kFloat16, DataType::kBfloat16, DataType::kFloat32, DataType::kFloat64}) {
    std::vector<char> a(4 * dtype_size(t)), b(4 * dtype_size(t));
    const double av[] = {1, -2, 3, 0}, bv[] = {2, 2, -1, 4};
    auto put = [&](std::vector<char>& v, const double* x) {
      for (int i = 0; i < 4; ++i) {
        char* p = v.data() + i * dtype_size(t);
        switch (t) {
          case DataType::kFloat16: *reinterpret_cast<uint16_t*>(p) = float_to_half(x[i]); break;
          case DataType::kBfloat16: *reinterpret_cast<uint16_t*>(p) = float_to_bfloat16(x[i]); break;
          case DataType::kFloat32: *reinterpret_cast<float*>(p) = static_cast<float>(x[i]); break;
          default: *reinterpret_cast<double*>(p) = x[i]; break;
        }
      }
    };
    put(a, av);
    put(b, bv);
    const adasum::DotNorms d = adasum::dot_and_norms(a.data(), b.data(), 4, t);
    EXPECT_EQ(d.dot, 2 - 4 - 3 + 0) << dtype_name(t);
    EXPECT_EQ(d.a, 1 + 4 + 9) << dtype_name(t);
    EXPECT_EQ(d.b, 4 + 4 + 1 + 16) << dtype_name(t);
    adasum::scaled_add(a.data(), b.data(), 4, t, adasum::Coefficients{0.5, 2});
    const double want[] = {4.5, 3, -0.5, 8};
    std::vector<char> w(4 * dtype_size(t));
    put(w, want);
    EXPECT_EQ(a, w) << dtype_name(t);
  }
}

TEST(AdasumMath, HalvingCoversTheSegmentAndOverlapClips) {
  for (int64_t count : {0, 1, 2, 7, 8}) {
    adasum::Segment keep, give, other_keep, other_give;
    adasum::halve(adasum::Segment{10, count}, true, &keep, &give);
    adasum::halve(adasum::Segment{10, count}, false, &other_keep, &other_give);
    EXPECT_EQ(keep.begin, 10);
    EXPECT_EQ(keep.count, count / 2);
    EXPECT_EQ(give.begin, keep.end());
    EXPECT_EQ(give.end(), 10 + count);
    // The two sides of a pair split the segment the same way, mirrored.
    EXPECT_EQ(other_keep.begin, give.begin);
    EXPECT_EQ(other_keep.count, give.count);
    EXPECT_EQ(other_give.begin, keep.begin);
    EXPECT_EQ(other_give.count, keep.count);
  }
  EXPECT_EQ(adasum::overlap({0, 10}, {8, 5}).count, 2);
  EXPECT_EQ(adasum::overlap({0, 10}, {8, 5}).begin, 8);
  EXPECT_EQ(adasum::overlap({3, 4}, {0, 10}).begin, 3);
  EXPECT_EQ(adasum::overlap({3, 4}, {0, 10}).count, 4);
  EXPECT_EQ(adasum::overlap({0, 4}, {4, 3}).count, 0);
  EXPECT_EQ(adasum::overlap({5, 4}, {0, 3}).count, 0);
  EXPECT_TRUE(adasum::is_power_of_two(1));
  EXPECT_TRUE(adasum::is_power_of_two(8));
  EXPECT_FALSE(adasum::is_power_of_two(0));
  EXPECT_FALSE(adasum::is_power_of_two(6));
}

// ---- the engine --------------------------------------------------------------------

template <typename D>
class AdasumTest : public ::testing::Test {};
using Floating = ::testing::Types<testing::Float32Type, testing::Float64Type, testing::Float16Type,
                                  testing::Bfloat16Type>;
TYPED_TEST_SUITE(AdasumTest, Floating);

// Tensors of 0, 1, fewer elements than ranks, odd counts and a larger one, fused
// in one run and each alone; every world size 1..8 (sizes that are not powers of
// two are refused before anything is sent).
TYPED_TEST(AdasumTest, FusedAndAloneMatchTheReferenceEverySize) {
  using D = TypeParam;
  using T = typename D::Storage;
  const std::vector<int64_t> counts = {5, 0, 3, 17, 1, 300};
  for (int size = 1; size <= 8; ++size) {
    std::vector<std::vector<Vec>> got_fused(size), got_alone(size);
    spawn(size, [&](int rank, transport::World& world) {
      AdasumAllreduce engine(*world.p2p);
      std::vector<T> fused;
      std::vector<std::vector<T>> alone;
      for (size_t t = 0; t < counts.size(); ++t) {
        alone.emplace_back();
        for (int64_t i = 0; i < counts[t]; ++i) {
          fused.push_back(D::from_double(value(static_cast<int>(t), rank, i)));
          alone.back().push_back(fused.back());
        }
      }
      const Status s = engine.run(fused.data(), counts, D::kType);
      if (!adasum::is_power_of_two(size)) {
        EXPECT_EQ(s.code(), Code::kUnsupported);
        EXPECT_NE(s.message().find("power-of-two"), std::string::npos) << s.message();
        return;
      }
      ASSERT_TRUE(s.ok()) << s.to_string();
      size_t offset = 0;
      for (size_t t = 0; t < counts.size(); ++t) {
        ASSERT_TRUE(engine.run(alone[t].data(), {counts[t]}, D::kType).ok());
        Vec f, a;
        for (int64_t i = 0; i < counts[t]; ++i) {
          f.push_back(D::to_double(fused[offset + i]));
          a.push_back(D::to_double(alone[t][i]));
        }
        offset += counts[t];
        got_fused[rank].push_back(f);
        got_alone[rank].push_back(a);
      }
    });
    if (!adasum::is_power_of_two(size)) continue;
    for (size_t t = 0; t < counts.size(); ++t) {
      std::vector<Vec> inputs(size);
      for (int r = 0; r < size; ++r)
        for (int64_t i = 0; i < counts[t]; ++i) inputs[r].push_back(round_to<D>(value(static_cast<int>(t), r, i)));
      const Vec want = reference<D>(inputs);
      for (int r = 0; r < size; ++r) {
        const std::string what = "size " + std::to_string(size) + " rank " + std::to_string(r) +
                                 " tensor " + std::to_string(t);
        expect_close<D>(got_fused[r][t], want, levels_of(size), what + " fused");
        expect_close<D>(got_alone[r][t], want, levels_of(size), what + " alone");
        // Every rank ends with the same bits.
        EXPECT_EQ(got_fused[r][t], got_fused[0][t]) << what;
      }
    }
  }
}

// The transport: prescale before, postscale after, packed through staging or
// tensor by tensor (staging too small), in place and out of place.
TEST(AdasumTransport, ScalesAndPacksAsTheEngine) {
  const std::vector<int64_t> counts = {6, 4, 9};
  for (size_t staging_bytes : {size_t{0}, size_t{1} << 16}) {
    std::vector<std::vector<Vec>> got(2);
    spawn(2, [&](int rank, transport::World& world) {
      transport::Transport* t = kolo::testing::find_transport(world, "adasum");
      ASSERT_NE(t, nullptr);
      std::vector<std::vector<double>> in(counts.size()), out(counts.size());
      std::vector<char> staging(staging_bytes);
      transport::Bucket b;
      b.dtype = DataType::kFloat64;
      b.reduction = transport::decide_reduction(ReduceOp::kAdasum, b.dtype, 2.0, 0.25, 2);
      b.staging = staging.data();
      b.staging_bytes = staging_bytes;
      for (size_t k = 0; k < counts.size(); ++k) {
        for (int64_t i = 0; i < counts[k]; ++i) in[k].push_back(value(static_cast<int>(k), rank, i));
        out[k].assign(in[k].size(), -1);
        // The middle tensor in place.
        void* o = k == 1 ? static_cast<void*>(in[k].data()) : out[k].data();
        b.tensors.push_back({in[k].data(), o, counts[k], nullptr});
        b.count += counts[k];
      }
      ASSERT_TRUE(t->supports(b).ok()) << t->supports(b).to_string();
      const Status s = t->allreduce(b)->wait();
      ASSERT_TRUE(s.ok()) << s.to_string();
      got[rank] = {out[0], in[1], out[2]};
    });
    for (size_t k = 0; k < counts.size(); ++k) {
      std::vector<Vec> inputs(2);
      for (int r = 0; r < 2; ++r)
        for (int64_t i = 0; i < counts[k]; ++i) inputs[r].push_back(2.0 * value(static_cast<int>(k), r, i));
      Vec want = reference<testing::Float64Type>(inputs);
      for (double& v : want) v *= 0.25;
      EXPECT_EQ(got[0][k], want) << "tensor " << k << " staging " << staging_bytes;
      EXPECT_EQ(got[1][k], want) << "tensor " << k << " staging " << staging_bytes;
    }
  }
}

TEST(AdasumTransport, RefusesWhatItCannotCompute) {
  spawn(2, [&](int rank, transport::World& world) {
    transport::Transport* t = kolo::testing::find_transport(world, "adasum");
    ASSERT_NE(t, nullptr);
    float x[4] = {1, 2, 3, 4};
    transport::Bucket sum = transport::host_bucket(x, x, 4, DataType::kFloat32);
    EXPECT_EQ(t->supports(sum).code(), Code::kUnsupported);
    transport::Reduction adasum_op;
    adasum_op.op = ReduceOp::kAdasum;
    int32_t n[4] = {1, 2, 3, 4};
    const Status ints = t->supports(transport::host_bucket(n, n, 4, DataType::kInt32, adasum_op));
    EXPECT_EQ(ints.code(), Code::kUnsupported);
    EXPECT_NE(ints.message().find("int32"), std::string::npos) << ints.message();
    transport::Bucket gpu = transport::host_bucket(x, x, 4, DataType::kFloat32, adasum_op);
    gpu.device.kind = DeviceKind::kCuda;
    EXPECT_EQ(t->supports(gpu).code(), Code::kUnsupported);
  });
  spawn(3, [&](int rank, transport::World& world) {
    transport::Transport* t = kolo::testing::find_transport(world, "adasum");
    ASSERT_NE(t, nullptr);
    transport::Reduction adasum_op;
    adasum_op.op = ReduceOp::kAdasum;
    float x[4] = {1, 2, 3, 4};
    const Status s = t->supports(transport::host_bucket(x, x, 4, DataType::kFloat32, adasum_op));
    EXPECT_EQ(s.code(), Code::kUnsupported);
    EXPECT_NE(s.message().find("this world has 3"), std::string::npos) << s.message();
  });
}

}  // namespace
}  // namespace kolo::algorithms
