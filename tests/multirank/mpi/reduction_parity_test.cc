// Issue "One seam, said once": the same inputs give bit-identical results through
// every host transport for every dtype x op x factor, because the arithmetic is
// decided once (transport::decide_reduction) and every transport applies what it
// receives — shm in cache per shard, mpi and ring through reduce_contiguous().
// Inputs are small integers, so sums and products are exact and only the factors
// round: the same single rounding everywhere, or the bytes differ. Integer dtypes
// take factors too (float64, truncated toward zero).
#include <gtest/gtest.h>

#include <cstring>
#include <string>
#include <vector>

#include "tests/multirank/mpi/allreduce_values.h"
#include "tests/multirank/mpi/mpi_test_world.h"
#include "transport/reduction.h"

namespace kolo::mpi {
namespace {

using namespace testing;  // NOLINT: the test helpers

int rank() { return test_world().control->topology().rank; }
int size() { return test_world().control->topology().size; }

template <typename T>
T parity_input(int r, int64_t i) {
  if constexpr (std::is_same_v<T, Bool>) return Dtype<T>::from((r + i) % 2);
  const int64_t span = is_signed_dtype<T>() ? 9 : 5;
  const int64_t shift = is_signed_dtype<T>() ? 4 : 0;
  return Dtype<T>::from(static_cast<double>((r * 7 + i * 3) % span - shift));
}

// Runs one bucket of tensors of `counts` elements through `t` and returns the
// outputs, concatenated as bytes.
template <typename T>
std::string run_bucket(transport::Transport& t, const std::vector<int64_t>& counts,
                       const transport::Reduction& reduction) {
  std::vector<std::vector<T>> in(counts.size()), out(counts.size());
  std::vector<char> staging(4096);
  transport::Bucket b;
  b.dtype = Dtype<T>::kValue;
  b.reduction = reduction;
  b.staging = staging.data();
  b.staging_bytes = staging.size();
  for (size_t k = 0; k < counts.size(); ++k) {
    for (int64_t i = 0; i < counts[k]; ++i) in[k].push_back(parity_input<T>(rank(), i + 31 * k));
    out[k].assign(static_cast<size_t>(counts[k]), Dtype<T>::from(1));
    b.tensors.push_back({in[k].data(), out[k].data(), counts[k], nullptr});
    b.count += counts[k];
  }
  Status s = t.allreduce(b)->wait();
  EXPECT_TRUE(s.ok()) << t.name() << ": " << s.to_string();
  std::string bytes;
  for (const auto& o : out) bytes.append(reinterpret_cast<const char*>(o.data()), o.size() * sizeof(T));
  return bytes;
}

template <typename T>
class ReductionParityTest : public ::testing::Test {};
TYPED_TEST_SUITE(ReductionParityTest, AllDtypes);

TYPED_TEST(ReductionParityTest, EveryTransportGivesTheSameBytes) {
  const DataType dtype = Dtype<TypeParam>::kValue;
  std::vector<transport::Transport*> transports;
  for (const char* name : {"mpi", "ring", "shm", "hierarchical"})
    if (transport::Transport* t = find_transport(name)) transports.push_back(t);
  ASSERT_GE(transports.size(), 2u);
  struct Factors {
    double pre, post;
  };
  std::vector<Factors> factors = {{1.0, 1.0}};
  if (dtype != DataType::kBool) {  // integers too: scaled in float64, truncated
    factors.push_back({0.5, 3.0});
    factors.push_back({-1.5, 0.7});
  }
  std::vector<ReduceOp> ops = {ReduceOp::kSum, ReduceOp::kMin, ReduceOp::kMax, ReduceOp::kProduct};
  if (dtype != DataType::kBool) ops.push_back(ReduceOp::kAverage);
  // One tensor alone; a fused bucket (several fit the staging buffer, one does not).
  const std::vector<std::vector<int64_t>> shapes = {{1001}, {3, 0, 700, 65, 5000, 1}};
  for (ReduceOp op : ops) {
    for (const Factors& f : factors) {
      const transport::Reduction r = transport::decide_reduction(op, dtype, f.pre, f.post, size());
      for (const auto& counts : shapes) {
        SCOPED_TRACE(std::string(op_name(op)) + " pre " + std::to_string(f.pre) + " post " +
                     std::to_string(f.post) + ", " + std::to_string(counts.size()) + " tensors");
        const std::string reference = run_bucket<TypeParam>(*transports[0], counts, r);
        for (size_t k = 1; k < transports.size(); ++k)
          EXPECT_EQ(run_bucket<TypeParam>(*transports[k], counts, r), reference)
              << transports[k]->name() << " differs from " << transports[0]->name();
      }
    }
  }
}

// decide_reduction is the one rule: AVERAGE is SUM with 1/size folded into the
// output factor (floating) or a truncating division (integers).
TEST(DecideReduction, AverageBecomesSumAndAFactorOrADivision) {
  const transport::Reduction f = transport::decide_reduction(ReduceOp::kAverage, DataType::kFloat32,
                                                             2.0, 0.5, 4);
  EXPECT_EQ(f.op, ReduceOp::kSum);
  EXPECT_EQ(f.prescale, 2.0);
  EXPECT_EQ(f.postscale, 0.125);
  EXPECT_EQ(f.divide, 1);
  const transport::Reduction i = transport::decide_reduction(ReduceOp::kAverage, DataType::kInt32,
                                                             1.0, 1.0, 3);
  EXPECT_EQ(i.op, ReduceOp::kSum);
  EXPECT_EQ(i.postscale, 1.0);
  EXPECT_EQ(i.divide, 3);
  // Integer factors stay factors (applied in float64); AVERAGE still divides after.
  const transport::Reduction s = transport::decide_reduction(ReduceOp::kAverage, DataType::kInt32,
                                                             0.5, 3.0, 3);
  EXPECT_EQ(s.prescale, 0.5);
  EXPECT_EQ(s.postscale, 3.0);
  EXPECT_EQ(s.divide, 3);
  const transport::Reduction m = transport::decide_reduction(ReduceOp::kMax, DataType::kInt32,
                                                             1.0, 1.0, 3);
  EXPECT_EQ(m.op, ReduceOp::kMax);
  EXPECT_FALSE(m.scales_input() || m.scales_output());
}

}  // namespace
}  // namespace kolo::mpi
