// kolo_options_t and the *_ex calls under mpiexec: a shape given must agree with
// the counts given (checked on the caller's rank, before anything is enqueued),
// the options struct refuses what it does not know, and shaped calls compute what
// the plain calls compute.
#include <string>
#include <vector>

#include "api_fixture.h"

namespace kolo_test {
namespace {

const ::testing::Environment* const kMpi = ::testing::AddGlobalTestEnvironment(new MpiEnvironment);

class Shapes : public KoloTest {};

// Not an allocation: a handle value no failed call may leave behind.
const kolo_handle_t kStale = reinterpret_cast<kolo_handle_t>(uintptr_t{0x10});

bool last_error_has(const std::string& what) {
  return std::string(kolo_last_error()).find(what) != std::string::npos;
}

kolo_options_t with_shape(const kolo_shape_t* shape) {
  kolo_options_t o = KOLO_OPTIONS_INIT;
  o.shapes = shape;
  return o;
}

TEST_F(Shapes, AShapeMustAgreeWithTheCountsNamingBoth) {
  std::vector<float> buf(12, 1.0f);
  const int64_t d23[] = {2, 3};
  const kolo_shape_t s23 = {2, d23};
  const kolo_options_t o = with_shape(&s23);
  kolo_handle_t h = kStale;
  EXPECT_EQ(kolo_allreduce_async_ex("ar", buf.data(), buf.data(), 5, KOLO_FLOAT32, KOLO_OP_SUM,
                                    1.0, 1.0, cpu(), &o, &h),
            KOLO_ERR_INVALID_ARGUMENT);
  EXPECT_EQ(h, nullptr);
  EXPECT_TRUE(last_error_has("shape [2, 3] has 6 elements, but count is 5")) << kolo_last_error();
  EXPECT_TRUE(last_error_has("'ar'")) << kolo_last_error();

  h = kStale;
  EXPECT_EQ(kolo_broadcast_async_ex("bc", buf.data(), buf.data(), 7, KOLO_FLOAT32, 0, cpu(), &o, &h),
            KOLO_ERR_INVALID_ARGUMENT);
  EXPECT_EQ(h, nullptr);
  EXPECT_TRUE(last_error_has("6 elements, but count is 7")) << kolo_last_error();

  EXPECT_EQ(kolo_allgather_async_ex("ag", buf.data(), 3, 3, KOLO_FLOAT32, cpu(), &o, &h),
            KOLO_ERR_INVALID_ARGUMENT);
  EXPECT_TRUE(last_error_has("shape [2, 3] has 2 rows (its first dimension), but rows is 3"))
      << kolo_last_error();
  EXPECT_EQ(kolo_alltoall_async_ex("a2a", buf.data(), 2, 2, nullptr, KOLO_FLOAT32, cpu(), &o, &h),
            KOLO_ERR_INVALID_ARGUMENT);
  EXPECT_TRUE(last_error_has("has rows of 3 elements (the product of its other dimensions), but "
                             "row_count is 2"))
      << kolo_last_error();
  EXPECT_EQ(kolo_reducescatter_async_ex("rs", buf.data(), buf.data(), 6, 1, KOLO_FLOAT32,
                                        KOLO_OP_SUM, 1.0, 1.0, cpu(), &o, &h),
            KOLO_ERR_INVALID_ARGUMENT);
  EXPECT_TRUE(last_error_has("but rows is 6")) << kolo_last_error();
  EXPECT_EQ(h, nullptr);
}

TEST_F(Shapes, ReducescatterRefusesAZeroDimensionalTensor) {
  float x = 1.0f, y = 0.0f;
  const kolo_shape_t scalar = {0, nullptr};
  const kolo_options_t o = with_shape(&scalar);
  kolo_handle_t h = kStale;
  EXPECT_EQ(kolo_reducescatter_async_ex("rs0", &x, &y, 1, 1, KOLO_FLOAT32, KOLO_OP_SUM, 1.0, 1.0,
                                        cpu(), &o, &h),
            KOLO_ERR_INVALID_ARGUMENT);
  EXPECT_EQ(h, nullptr);
  EXPECT_TRUE(last_error_has("reducescatter needs a tensor of at least one dimension"))
      << kolo_last_error();
  // A scalar allreduce is fine: one element.
  ASSERT_EQ(kolo_allreduce_async_ex("ar0", &x, &y, 1, KOLO_FLOAT32, KOLO_OP_SUM, 1.0, 1.0, cpu(),
                                    &o, &h),
            KOLO_OK)
      << kolo_last_error();
  ASSERT_EQ(kolo_wait(h, 120.0), KOLO_OK) << kolo_handle_message(h);
  EXPECT_EQ(y, static_cast<float>(size_));
  kolo_handle_release(h);
}

TEST_F(Shapes, BadShapesAndOptionsAreRefusedByName) {
  float x[4] = {0, 0, 0, 0};
  kolo_handle_t h = kStale;
  const int64_t negative[] = {2, -2};
  const kolo_shape_t bad_dim = {2, negative};
  kolo_options_t o = with_shape(&bad_dim);
  EXPECT_EQ(kolo_allreduce_async_ex("neg", x, x, 4, KOLO_FLOAT32, KOLO_OP_SUM, 1.0, 1.0, cpu(), &o, &h),
            KOLO_ERR_INVALID_ARGUMENT);
  EXPECT_TRUE(last_error_has("dims[1] is negative (-2)")) << kolo_last_error();
  const kolo_shape_t too_many = {KOLO_MAX_DIMS + 1, negative};
  o = with_shape(&too_many);
  EXPECT_EQ(kolo_allreduce_async_ex("many", x, x, 4, KOLO_FLOAT32, KOLO_OP_SUM, 1.0, 1.0, cpu(), &o, &h),
            KOLO_ERR_INVALID_ARGUMENT);
  EXPECT_TRUE(last_error_has("ndim 17 is out of range 0..16")) << kolo_last_error();
  const kolo_shape_t no_dims = {2, nullptr};
  o = with_shape(&no_dims);
  EXPECT_EQ(kolo_allreduce_async_ex("nodims", x, x, 4, KOLO_FLOAT32, KOLO_OP_SUM, 1.0, 1.0, cpu(), &o, &h),
            KOLO_ERR_INVALID_ARGUMENT);
  EXPECT_TRUE(last_error_has("dims is NULL")) << kolo_last_error();
  o = KOLO_OPTIONS_INIT;
  o.reserved_ = 1;
  EXPECT_EQ(kolo_allreduce_async_ex("res", x, x, 4, KOLO_FLOAT32, KOLO_OP_SUM, 1.0, 1.0, cpu(), &o, &h),
            KOLO_ERR_INVALID_ARGUMENT);
  EXPECT_TRUE(last_error_has("reserved_ must be 0")) << kolo_last_error();
  EXPECT_EQ(kolo_barrier_ex(&o), KOLO_ERR_INVALID_ARGUMENT);
  o = KOLO_OPTIONS_INIT;
  o.process_set = 3;
  EXPECT_EQ(kolo_allreduce_async_ex("ps", x, x, 4, KOLO_FLOAT32, KOLO_OP_SUM, 1.0, 1.0, cpu(), &o, &h),
            KOLO_ERR_INVALID_ARGUMENT);
  EXPECT_TRUE(last_error_has("unknown process set id 3")) << kolo_last_error();
  EXPECT_EQ(h, nullptr);
  const int64_t d4[] = {4};
  const kolo_shape_t s4 = {1, d4};
  o = with_shape(&s4);
  EXPECT_EQ(kolo_barrier_ex(&o), KOLO_ERR_INVALID_ARGUMENT);
  EXPECT_TRUE(last_error_has("barrier takes no shapes")) << kolo_last_error();
  EXPECT_EQ(kolo_join_ex(&o, nullptr), KOLO_ERR_INVALID_ARGUMENT);
  EXPECT_TRUE(last_error_has("join takes no shapes")) << kolo_last_error();
  // The defaults, spelled both ways, are the plain calls.
  const kolo_options_t defaults = KOLO_OPTIONS_INIT;
  EXPECT_EQ(kolo_barrier_ex(&defaults), KOLO_OK) << kolo_last_error();
  EXPECT_EQ(kolo_barrier_ex(nullptr), KOLO_OK) << kolo_last_error();
}

TEST_F(Shapes, ShapedCallsComputeWhatThePlainCallsCompute) {
  // allreduce [2, 3] of int32, a grouped allreduce of a [4] and a scalar, and an
  // allgather of [1 + rank, 2].
  std::vector<int32_t> a(6);
  for (int i = 0; i < 6; ++i) a[i] = rank_ * 10 + i;
  const int64_t d23[] = {2, 3};
  const kolo_shape_t s23 = {2, d23};
  const kolo_options_t o = with_shape(&s23);
  kolo_handle_t h = nullptr;
  ASSERT_EQ(kolo_allreduce_async_ex("a", a.data(), a.data(), 6, KOLO_INT32, KOLO_OP_SUM, 1.0, 1.0,
                                    cpu(), &o, &h),
            KOLO_OK)
      << kolo_last_error();
  ASSERT_EQ(kolo_wait(h, 120.0), KOLO_OK) << kolo_handle_message(h);
  kolo_handle_release(h);
  for (int i = 0; i < 6; ++i) EXPECT_EQ(a[i], 10 * size_ * (size_ - 1) / 2 + size_ * i);

  std::vector<int64_t> g0(4, rank_ + 1);
  int64_t g1 = 2;
  const char* names[] = {"g0", "g1"};
  const void* ins[] = {g0.data(), &g1};
  void* outs[] = {g0.data(), &g1};
  const int64_t counts[] = {4, 1};
  const int64_t d4[] = {4};
  const kolo_shape_t shapes[] = {{1, d4}, {0, nullptr}};
  kolo_options_t og = KOLO_OPTIONS_INIT;
  og.shapes = shapes;
  ASSERT_EQ(kolo_grouped_allreduce_async_ex(2, names, ins, outs, counts, KOLO_INT64, KOLO_OP_SUM,
                                            1.0, 1.0, cpu(), &og, &h),
            KOLO_OK)
      << kolo_last_error();
  ASSERT_EQ(kolo_wait(h, 120.0), KOLO_OK) << kolo_handle_message(h);
  kolo_handle_release(h);
  for (int64_t v : g0) EXPECT_EQ(v, int64_t(size_) * (size_ + 1) / 2);
  EXPECT_EQ(g1, 2 * size_);

  std::vector<int16_t> rows(2 * (rank_ + 1), int16_t(rank_));
  const int64_t dg[] = {rank_ + 1, 2};
  const kolo_shape_t sg = {2, dg};
  const kolo_options_t oa = with_shape(&sg);
  ASSERT_EQ(kolo_allgather_async_ex("gather", rows.data(), rank_ + 1, 2, KOLO_INT16, cpu(), &oa, &h),
            KOLO_OK)
      << kolo_last_error();
  ASSERT_EQ(kolo_wait(h, 120.0), KOLO_OK) << kolo_handle_message(h);
  const void* data = nullptr;
  int64_t bytes = 0;
  ASSERT_EQ(kolo_handle_output(h, &data, &bytes), KOLO_OK);
  EXPECT_EQ(bytes, int64_t(sizeof(int16_t)) * size_ * (size_ + 1));
  kolo_handle_release(h);
}

TEST_F(Shapes, AGroupedShapeIsCheckedPerMember) {
  std::vector<float> x(4), y(3);
  const char* names[] = {"m0", "m1"};
  const void* ins[] = {x.data(), y.data()};
  void* outs[] = {x.data(), y.data()};
  const int64_t counts[] = {4, 3};
  const int64_t d4[] = {4}, d2[] = {2};
  const kolo_shape_t shapes[] = {{1, d4}, {1, d2}};
  kolo_options_t og = KOLO_OPTIONS_INIT;
  og.shapes = shapes;
  kolo_handle_t h = kStale;
  EXPECT_EQ(kolo_grouped_allreduce_async_ex(2, names, ins, outs, counts, KOLO_FLOAT32, KOLO_OP_SUM,
                                            1.0, 1.0, cpu(), &og, &h),
            KOLO_ERR_INVALID_ARGUMENT);
  EXPECT_EQ(h, nullptr);
  EXPECT_TRUE(last_error_has("tensor 'm1' (grouped): shape [2] has 2 elements, but count is 3"))
      << kolo_last_error();
}

}  // namespace
}  // namespace kolo_test
