// KOLO_OP_ADASUM through the C API under mpiexec -n 2, 3, 4, against a reference
// of Horovod's formula computed here (per tensor,
//   adasum(a, b) = (1 - a.b / (2|a|^2)) a + (1 - a.b / (2|b|^2)) b,
// ranks combined as a binary tree). At 2 ranks the inputs are small integers and
// every sum is exact: results compare with ==. At 4 ranks the second level
// combines non-integers whose dot products kolo adds piece by piece: a few ulps.
// At 3 ranks (not a power of two) every call is refused on every rank.
#include <cmath>
#include <cstring>
#include <string>
#include <vector>

#include "api_fixture.h"

namespace kolo_test {
namespace {

const ::testing::Environment* const kMpi = ::testing::AddGlobalTestEnvironment(new MpiEnvironment);

using Vec = std::vector<double>;

bool power_of_two(int n) { return n > 0 && (n & (n - 1)) == 0; }

// Rank r's element i of tensor t; tensor 2 is zero on odd ranks.
double value(int t, int rank, int64_t i) {
  if (t == 2 && rank % 2 == 1) return 0;
  return static_cast<double>((i * 5 + rank * 3 + t * 7) % 11) - 5;
}

Vec pair(const Vec& a, const Vec& b) {
  double dot = 0, aa = 0, bb = 0;
  for (size_t i = 0; i < a.size(); ++i) {
    dot += a[i] * b[i];
    aa += a[i] * a[i];
    bb += b[i] * b[i];
  }
  const double ca = aa >= 1e-8 ? 1.0 - dot / aa * 0.5 : 1.0;
  const double cb = bb >= 1e-8 ? 1.0 - dot / bb * 0.5 : 1.0;
  Vec out(a.size());
  for (size_t i = 0; i < a.size(); ++i) out[i] = ca * a[i] + cb * b[i];
  return out;
}

// Tensor t of `count` elements over `size` ranks (times `scale` on the way in);
// ranks in `zero` contribute zeros (joined).
Vec reference(int t, int64_t count, int size, double scale, int zero = -1) {
  std::vector<Vec> level;
  for (int r = 0; r < size; ++r) {
    Vec v;
    for (int64_t i = 0; i < count; ++i) v.push_back(r == zero ? 0.0 : scale * value(t, r, i));
    level.push_back(v);
  }
  while (level.size() > 1) {
    std::vector<Vec> next;
    for (size_t i = 0; i < level.size(); i += 2) next.push_back(pair(level[i], level[i + 1]));
    level = next;
  }
  return level[0];
}

void expect_matches(const std::vector<double>& got, const Vec& want, int size, const std::string& what) {
  ASSERT_EQ(got.size(), want.size());
  for (size_t i = 0; i < got.size(); ++i) {
    const double tolerance = size <= 2 ? 0.0 : 1e-13 * std::max(1.0, std::fabs(want[i]));
    ASSERT_LE(std::fabs(got[i] - want[i]), tolerance)
        << what << " element " << i << ": " << got[i] << ", reference " << want[i];
  }
}

class Adasum : public KoloTest {};

const std::vector<int64_t> kCounts = {7, 1, 33, 0, 300};

std::vector<double> input(int t, int rank) {
  std::vector<double> v;
  for (int64_t i = 0; i < kCounts[t]; ++i) v.push_back(value(t, rank, i));
  return v;
}

// The same tensors three ways: submitted together (fused by the coordinator),
// as one grouped allreduce (one bucket), and one at a time (each alone). Every
// way gives the reference, with prescale 2 and postscale 0.5.
TEST_F(Adasum, FusedGroupedAndAloneMatchTheReference) {
  if (!power_of_two(size_)) GTEST_SKIP() << "Adasum needs a power-of-two world (RefusedWhere... covers it)";
  const int n = static_cast<int>(kCounts.size());
  std::vector<std::vector<double>> fused(n), grouped(n), alone(n);
  std::vector<kolo_handle_t> handles(n);
  for (int t = 0; t < n; ++t) {
    fused[t] = input(t, rank_);
    const std::string name = "adasum.fused." + std::to_string(t);
    ASSERT_EQ(kolo_allreduce_async(name.c_str(), fused[t].data(), fused[t].data(), kCounts[t],
                                   KOLO_FLOAT64, KOLO_OP_ADASUM, 2.0, 0.5, cpu(), &handles[t]),
              KOLO_OK) << kolo_last_error();
  }
  for (kolo_handle_t h : handles) {
    ASSERT_EQ(wait_or_abort(h), KOLO_OK) << kolo_handle_message(h);
    kolo_handle_release(h);
  }
  std::vector<std::string> names;
  std::vector<const char*> c_names;
  std::vector<const void*> ins;
  std::vector<void*> outs;
  std::vector<std::vector<double>> group_in(n);
  for (int t = 0; t < n; ++t) {
    names.push_back("adasum.group." + std::to_string(t));
    group_in[t] = input(t, rank_);
    grouped[t].assign(kCounts[t], -1);
  }
  for (int t = 0; t < n; ++t) {
    c_names.push_back(names[t].c_str());
    ins.push_back(group_in[t].data());
    outs.push_back(grouped[t].data());
  }
  kolo_handle_t g = nullptr;
  ASSERT_EQ(kolo_grouped_allreduce_async(n, c_names.data(), ins.data(), outs.data(), kCounts.data(),
                                         KOLO_FLOAT64, KOLO_OP_ADASUM, 2.0, 0.5, cpu(), &g),
            KOLO_OK) << kolo_last_error();
  ASSERT_EQ(wait_or_abort(g), KOLO_OK) << kolo_handle_message(g);
  kolo_handle_release(g);
  for (int t = 0; t < n; ++t) {
    const std::vector<double> in = input(t, rank_);
    alone[t].assign(kCounts[t], -1);
    std::string message;
    ASSERT_EQ(allreduce("adasum.alone." + std::to_string(t), in.data(), alone[t].data(), kCounts[t],
                        KOLO_FLOAT64, KOLO_OP_ADASUM, &message, 2.0, 0.5),
              KOLO_OK) << message;
  }
  for (int t = 0; t < n; ++t) {
    Vec want = reference(t, kCounts[t], size_, 2.0);
    for (double& v : want) v *= 0.5;
    const std::string what = "rank " + std::to_string(rank_) + " tensor " + std::to_string(t);
    expect_matches(fused[t], want, size_, what + " fused");
    expect_matches(grouped[t], want, size_, what + " grouped");
    expect_matches(alone[t], want, size_, what + " alone");
  }
}

// float32 and float16 take the same path: exact at 2 ranks.
TEST_F(Adasum, Float32AtTwoRanksIsExact) {
  if (size_ != 2) GTEST_SKIP() << "exact comparison at 2 ranks";
  std::vector<float> x;
  for (int64_t i = 0; i < 33; ++i) x.push_back(static_cast<float>(value(0, rank_, i)));
  std::string message;
  ASSERT_EQ(allreduce("adasum.f32", x.data(), x.data(), 33, KOLO_FLOAT32, KOLO_OP_ADASUM, &message), KOLO_OK)
      << message;
  const Vec want = reference(0, 33, 2, 1.0);
  for (int64_t i = 0; i < 33; ++i) ASSERT_EQ(x[i], static_cast<float>(want[i])) << i;
}

// A joined rank contributes zeros, and adasum(a, 0) == a: the others' result is
// the reference without the joined rank's vector.
TEST_F(Adasum, JoinedRankContributesNothing) {
  if (!power_of_two(size_) || size_ < 2) GTEST_SKIP() << "needs a power-of-two world";
  const int joiner = size_ - 1;
  if (rank_ != joiner) {
    std::vector<double> x = input(4, rank_);
    std::string message;
    ASSERT_EQ(allreduce("adasum.joined", x.data(), x.data(), kCounts[4], KOLO_FLOAT64, KOLO_OP_ADASUM,
                        &message),
              KOLO_OK) << message;
    expect_matches(x, reference(4, kCounts[4], size_, 1.0, joiner), size_, "with a joined rank");
  }
  int last = -1;
  ASSERT_EQ(kolo_join(&last), KOLO_OK) << kolo_last_error();
}

// Every rank refuses what Adasum cannot do, at the call, with KOLO_ERR_UNSUPPORTED
// and a message naming why; nothing is enqueued, so nothing hangs.
TEST_F(Adasum, RefusedWhereItCannotRunOnEveryRank) {
  float x[4] = {1, 2, 3, 4};
  kolo_handle_t h = nullptr;
  kolo_status_t s = kolo_allreduce_async("adasum.refused", x, x, 4, KOLO_FLOAT32, KOLO_OP_ADASUM, 1.0,
                                         1.0, cpu(), &h);
  if (power_of_two(size_)) {
    ASSERT_EQ(s, KOLO_OK) << kolo_last_error();
    EXPECT_EQ(wait_or_abort(h), KOLO_OK);
    kolo_handle_release(h);
  } else {
    EXPECT_EQ(s, KOLO_ERR_UNSUPPORTED);
    EXPECT_EQ(h, nullptr);
    const std::string m = kolo_last_error();
    EXPECT_NE(m.find("power-of-two"), std::string::npos) << m;
    EXPECT_NE(m.find("has " + std::to_string(size_)), std::string::npos) << m;
  }
  int32_t n[4] = {1, 2, 3, 4};
  EXPECT_EQ(kolo_allreduce_async("adasum.int", n, n, 4, KOLO_INT32, KOLO_OP_ADASUM, 1.0, 1.0, cpu(), &h),
            KOLO_ERR_UNSUPPORTED);
  EXPECT_NE(std::string(kolo_last_error()).find("int32"), std::string::npos) << kolo_last_error();
  kolo_device_t gpu = cpu();
  gpu.kind = KOLO_DEVICE_CUDA;
  EXPECT_EQ(kolo_allreduce_async("adasum.gpu", x, x, 4, KOLO_FLOAT32, KOLO_OP_ADASUM, 1.0, 1.0, gpu, &h),
            KOLO_ERR_UNSUPPORTED);
  // Adasum is an allreduce op: reducescatter refuses it as a bad argument.
  float out[4] = {0, 0, 0, 0};
  EXPECT_EQ(kolo_reducescatter_async("adasum.rs", x, out, 4, 1, KOLO_FLOAT32, KOLO_OP_ADASUM, 1.0, 1.0,
                                     cpu(), &h),
            KOLO_ERR_INVALID_ARGUMENT);
  // No rank shuts down (TearDown) before every rank's checks: a peer's shutdown
  // stops kolo here too, and the CUDA submission above would then be refused
  // as KOLO_ERR_SHUTDOWN instead.
  world_barrier();
}

}  // namespace
}  // namespace kolo_test
